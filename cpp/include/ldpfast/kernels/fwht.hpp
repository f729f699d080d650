// Kernel table for the in-place, unnormalized fast Walsh-Hadamard transform of one row
// whose length is a power of two.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ldpfast/dispatch.hpp"

namespace ldpfast {

struct FwhtKernels {
  void (*f32)(float* data, std::size_t n);
  void (*f64)(double* data, std::size_t n);
  void (*i64)(std::int64_t* data, std::size_t n);
};

}  // namespace ldpfast

LDPFAST_DECLARE_ISA_TABLE(FwhtKernels, fwht_kernels)
