// A minimal fork-join parallel loop for server-side aggregation. Work is split into
// tasks whose results never depend on which thread runs them, so outputs are identical
// for every thread count.
#pragma once
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ldpfast {

int default_threads();          // LDPFAST_NUM_THREADS, else hardware concurrency
void set_default_threads(int);  // 0 restores the automatic choice

inline int resolve_threads(int requested) {
  return requested > 0 ? requested : default_threads();
}

// Runs body(task) for task in [0, n_tasks) on up to `threads` threads.
template <class Body>
void parallel_for(std::size_t n_tasks, int threads, Body&& body) {
  std::size_t workers = static_cast<std::size_t>(resolve_threads(threads));
  if (workers > n_tasks) workers = n_tasks;
  if (workers <= 1) {
    for (std::size_t t = 0; t < n_tasks; ++t) body(t);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto run = [&]() {
    try {
      for (std::size_t t = next.fetch_add(1); t < n_tasks; t = next.fetch_add(1)) body(t);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next.store(n_tasks);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(run);
  run();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

inline std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

// Runs body(begin, end) over consecutive chunks of [0, n) of `chunk` elements.
template <class Body>
void parallel_for_chunks(std::size_t n, std::size_t chunk, int threads, Body&& body) {
  parallel_for(ceil_div(n, chunk), threads, [&](std::size_t task) {
    const std::size_t begin = task * chunk;
    body(begin, begin + chunk < n ? begin + chunk : n);
  });
}

}  // namespace ldpfast
