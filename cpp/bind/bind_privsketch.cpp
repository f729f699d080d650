// Bindings for the privsketch family (filled in by its issue).
#include "common.hpp"

namespace ldpfast::bind {

void register_privsketch(py::module_&) {}

}  // namespace ldpfast::bind
