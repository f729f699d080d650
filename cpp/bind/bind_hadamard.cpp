// Bindings for the hadamard family (filled in by its issue).
#include "common.hpp"

namespace ldpfast::bind {

void register_hadamard(py::module_&) {}

}  // namespace ldpfast::bind
