#include "common.hpp"

PYBIND11_MODULE(_core, m) {
  m.doc() = "ldpfast C++ core: field hashing, randomized response, FWHT, server aggregation";
  ldpfast::bind::register_core(m);
  ldpfast::bind::register_fwht(m);
  ldpfast::bind::register_ocms(m);
  ldpfast::bind::register_hadamard(m);
  ldpfast::bind::register_privsketch(m);
  ldpfast::bind::register_pgr(m);
  ldpfast::bind::register_bitvec(m);
  ldpfast::bind::register_histogram(m);
  ldpfast::bind::register_square_wave(m);
}
