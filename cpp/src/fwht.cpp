// Threaded driver of the FWHT kernels.
//
// Many rows, short rows, or a multiple of the thread count: rows are split among threads.
// Otherwise (a few long rows): each row is viewed as `blocks` x `width`; phase 1 transforms the
// contiguous blocks of every row in parallel, phase 2 applies the stages across blocks in
// parallel over disjoint column ranges. Both phases run in one set of threads that meets
// once, when phase 1 is complete. Every schedule applies the same butterflies in the same
// order to each element, so the output is bit-identical for every thread count.
// Very long rows always take the blocked schedule, even on one thread, so that the
// transform reaches an interruption point (see parallel.hpp) between blocks.
#include "ldpfast/fwht.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "ldpfast/kernels/fwht.hpp"
#include "ldpfast/parallel.hpp"

namespace ldpfast {

namespace {

constexpr std::size_t kMinParallelRow = std::size_t{1} << 18;   // elements
constexpr std::size_t kMinBlock = std::size_t{1} << 13;         // elements per phase-1 block
constexpr std::size_t kMinColumnChunk = 1024;                   // columns per phase-2 task
constexpr std::size_t kRowTaskElements = std::size_t{1} << 17;  // work per task, many rows
// Threads by size: a thread is started per 2^18 elements at most. Starting and joining a
// thread and the phase barrier cost about as much as transforming 2^16-2^17 elements;
// measured on a 16-core Xeon at 2^20 float32, 4 threads (2^18 each) were fastest and 16
// were 15-40% slower than 4.
constexpr std::size_t kWorkerElements = std::size_t{1} << 18;
constexpr std::size_t kColumnAlign = 64;                        // see FwhtTypeKernels
constexpr std::size_t kMinBlockedRow = std::size_t{1} << 26;    // ~0.1 s per row on one core

template <class T>
class LongRows {
 public:
  LongRows(const FwhtTypeKernels<T>& k, T* data, std::size_t rows, std::size_t n, std::size_t workers)
      : k_(k), data_(data), rows_(rows), n_(n) {
    blocks_ = 8;  // at least 4 blocks per worker; 8 rows need a single pass in phase 2
    while (blocks_ < 4 * workers) blocks_ *= 2;
    while (blocks_ > 2 && n / blocks_ < kMinBlock) blocks_ /= 2;
    width_ = n / blocks_;
    const std::size_t per_row = (4 * workers + rows - 1) / rows;
    chunk_ = width_ / per_row;
    if (chunk_ < kMinColumnChunk) chunk_ = kMinColumnChunk;
    chunk_ -= chunk_ % kColumnAlign;
    chunks_per_row_ = (width_ + chunk_ - 1) / chunk_;
  }

  void run(std::size_t workers) {
    detail::InterruptState* interrupt = detail::current_interrupt;
    std::vector<std::thread> pool;
    pool.reserve(workers - 1);
    for (std::size_t w = 1; w < workers; ++w) {
      try {
        pool.emplace_back([this, interrupt] {
          detail::InterruptWorker share(interrupt);
          work();
        });
      } catch (const std::system_error&) {
        break;  // fewer threads: the others take over the remaining tasks
      }
    }
    work();
    for (auto& th : pool) th.join();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void work() {
    try {
      phases();
    } catch (...) {  // Interrupted: stop handing out tasks and release the threads waiting for phase 1
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
      failed_.store(true);
      phase1_done_.notify_all();
    }
  }

  void phases() {
    const std::size_t tasks1 = rows_ * blocks_;
    for (std::size_t t = next1_.fetch_add(1); t < tasks1 && !failed_.load(); t = next1_.fetch_add(1)) {
      interruption_point();
      k_.row(data_ + (t / blocks_) * n_ + (t % blocks_) * width_, width_);
      if (done1_.fetch_add(1) + 1 == tasks1) {
        std::lock_guard<std::mutex> lock(mutex_);
        phase1_done_.notify_all();
      }
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      phase1_done_.wait(lock, [&] { return done1_.load() == tasks1 || failed_.load(); });
    }
    const std::size_t tasks2 = rows_ * chunks_per_row_;
    for (std::size_t t = next2_.fetch_add(1); t < tasks2 && !failed_.load(); t = next2_.fetch_add(1)) {
      interruption_point();
      const std::size_t c0 = (t % chunks_per_row_) * chunk_;
      const std::size_t c1 = c0 + chunk_ < width_ ? c0 + chunk_ : width_;
      k_.columns(data_ + (t / chunks_per_row_) * n_, blocks_, width_, c0, c1);
    }
  }

  const FwhtTypeKernels<T>& k_;
  T* data_;
  std::size_t rows_, n_, blocks_ = 0, width_ = 0, chunk_ = 0, chunks_per_row_ = 0;
  std::atomic<std::size_t> next1_{0}, done1_{0}, next2_{0};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  std::mutex mutex_;
  std::condition_variable phase1_done_;
};

template <class T>
void run(const FwhtTypeKernels<T>& k, T* data, std::size_t rows, std::size_t n, int threads) {
  if (rows == 0 || n < 2) return;
  std::size_t workers = static_cast<std::size_t>(resolve_threads(threads));
  workers = std::min(workers, std::max<std::size_t>(1, rows * n / kWorkerElements));
  // Long rows that do not split evenly among the threads are cut into blocks as well.
  if (n >= kMinBlockedRow || (workers > 1 && n >= kMinParallelRow && rows % workers != 0 && rows < 4 * workers)) {
    LongRows<T>(k, data, rows, n, workers).run(workers);
    return;
  }
  std::size_t per_task = kRowTaskElements / n;
  if (per_task < 1) per_task = 1;
  const std::size_t tasks = (rows + per_task - 1) / per_task;
  parallel_for(tasks, static_cast<int>(workers), [&](std::size_t t) {
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
