#include "ldpfast/fwht.hpp"

#include "ldpfast/kernels/fwht.hpp"
#include "ldpfast/parallel.hpp"

namespace ldpfast {

namespace {
template <class T, class Kernel>
void run_rows(T* data, std::size_t rows, std::size_t n, int threads, Kernel kernel) {
  parallel_for(rows, threads, [&](std::size_t r) { kernel(data + r * n, n); });
}
}  // namespace

void fwht_rows(float* data, std::size_t rows, std::size_t n, int threads) {
  run_rows(data, rows, n, threads, fwht_kernels_active().f32);
}
void fwht_rows(double* data, std::size_t rows, std::size_t n, int threads) {
  run_rows(data, rows, n, threads, fwht_kernels_active().f64);
}
void fwht_rows(std::int64_t* data, std::size_t rows, std::size_t n, int threads) {
  run_rows(data, rows, n, threads, fwht_kernels_active().i64);
}

}  // namespace ldpfast
