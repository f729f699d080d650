// Fast Walsh-Hadamard transform, compiled once per ISA (see dispatch.hpp).
#include "ldpfast/kernels/fwht.hpp"

namespace ldpfast {
namespace LDPFAST_ISA_NS {
namespace {

template <class T>
void fwht_row(T* data, std::size_t n) {
  for (std::size_t h = 1; h < n; h <<= 1)
    for (std::size_t block = 0; block < n; block += 2 * h)
      for (std::size_t j = block; j < block + h; ++j) {
        const T a = data[j], b = data[j + h];
        data[j] = a + b;
        data[j + h] = a - b;
      }
}

void fwht_f32(float* data, std::size_t n) { fwht_row(data, n); }
void fwht_f64(double* data, std::size_t n) { fwht_row(data, n); }
void fwht_i64(std::int64_t* data, std::size_t n) { fwht_row(data, n); }

}  // namespace

extern const FwhtKernels fwht_kernels = {&fwht_f32, &fwht_f64, &fwht_i64};

}  // namespace LDPFAST_ISA_NS
}  // namespace ldpfast
