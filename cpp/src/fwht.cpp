// Threaded driver of the FWHT kernels.
//
// Many rows: rows are split among threads. Fewer rows than threads but long rows: each
// row is viewed as kSplit x (n / kSplit); the kSplit contiguous blocks are transformed in
// parallel, then the stages across blocks run in parallel over disjoint column ranges.
// Every schedule applies the same butterflies in the same order to each element, so the
// output is bit-identical for every thread count.
#include "ldpfast/fwht.hpp"

#include "ldpfast/kernels/fwht.hpp"
#include "ldpfast/parallel.hpp"

namespace ldpfast {

namespace {

constexpr std::size_t kSplit = 16;                             // blocks per long row
constexpr std::size_t kMinParallelRow = std::size_t{1} << 18;  // elements
constexpr std::size_t kRowTaskElements = std::size_t{1} << 17; // work per task, many rows
constexpr std::size_t kColumnAlign = 64;                       // see FwhtTypeKernels

template <class T>
void transform_long_row(const FwhtTypeKernels<T>& k, T* data, std::size_t n, int threads) {
  const std::size_t blocks = kSplit;
  const std::size_t width = n / blocks;
  parallel_for(blocks, threads, [&](std::size_t b) { k.row(data + b * width, width); });
  // Column ranges: a few per thread for balance, never narrower than 1024 elements.
  std::size_t chunk = width / (4 * static_cast<std::size_t>(threads));
  if (chunk < 1024) chunk = 1024;
  chunk -= chunk % kColumnAlign;
  const std::size_t tasks = (width + chunk - 1) / chunk;
  parallel_for(tasks, threads, [&](std::size_t t) {
    const std::size_t c0 = t * chunk;
    const std::size_t c1 = c0 + chunk < width ? c0 + chunk : width;
    k.columns(data, blocks, width, c0, c1);
  });
}

template <class T>
void run(const FwhtTypeKernels<T>& k, T* data, std::size_t rows, std::size_t n, int threads) {
  if (rows == 0 || n < 2) return;
  const int workers = resolve_threads(threads);
  if (workers > 1 && n >= kMinParallelRow && rows < static_cast<std::size_t>(workers)) {
    for (std::size_t r = 0; r < rows; ++r) transform_long_row(k, data + r * n, n, workers);
    return;
  }
  std::size_t per_task = kRowTaskElements / n;
  if (per_task < 1) per_task = 1;
  const std::size_t tasks = (rows + per_task - 1) / per_task;
  parallel_for(tasks, workers, [&](std::size_t t) {
    const std::size_t end = (t + 1) * per_task < rows ? (t + 1) * per_task : rows;
    for (std::size_t r = t * per_task; r < end; ++r) k.row(data + r * n, n);
  });
}

}  // namespace

void fwht_rows(float* data, std::size_t rows, std::size_t n, int threads) {
  run(fwht_kernels_active().f32, data, rows, n, threads);
}
void fwht_rows(double* data, std::size_t rows, std::size_t n, int threads) {
  run(fwht_kernels_active().f64, data, rows, n, threads);
}
void fwht_rows(std::int64_t* data, std::size_t rows, std::size_t n, int threads) {
  run(fwht_kernels_active().i64, data, rows, n, threads);
}

}  // namespace ldpfast
