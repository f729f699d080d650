// A minimal fork-join parallel loop for server-side aggregation. Work is split into
// tasks whose results never depend on which thread runs them, so outputs are identical
// for every thread count.
//
// Interruption: a caller (the Python bindings) arms an InterruptScope on its thread. Inside
// it, interruption_point() -- called by parallel_for before every task and by long tasks
// between their blocks -- polls a hook on the calling thread at most every
// kInterruptPollInterval (the bindings' hook briefly takes the GIL and runs Python's signal
// handlers) and reads a shared stop flag on the workers. Once the hook reports a pending
// exception, every thread throws Interrupted at its next point and the loops drain; the
// caller then raises its own exception (KeyboardInterrupt). Whatever output the call was
// writing is left in an unspecified state, so callers pass scratch buffers they may
// discard. Outside a scope interruption_point() does nothing.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ldpfast {

int default_threads();          // LDPFAST_NUM_THREADS, else hardware concurrency
void set_default_threads(int);  // 0 restores the automatic choice

inline int resolve_threads(int requested) { return requested > 0 ? requested : default_threads(); }

// Thrown by interruption_point() once the caller's hook asked to stop.
class Interrupted : public std::exception {
 public:
  const char* what() const noexcept override { return "interrupted"; }
};

// true: stop the running call. Runs on the thread that armed the InterruptScope.
using InterruptHook = bool (*)();
void set_interrupt_hook(InterruptHook hook);

constexpr std::chrono::milliseconds kInterruptPollInterval{20};

namespace detail {
struct InterruptState {
  std::atomic<bool> stop{false};
  std::chrono::steady_clock::time_point next_poll;
};
// The state of the call this thread works for (null: not interruptible) and whether this
// thread is the one that polls the hook.
extern thread_local InterruptState* current_interrupt;
extern thread_local bool polls_interrupt;
void poll_interrupt(InterruptState& state);  // throws Interrupted

// Makes a worker thread share (but never poll) the interrupt state of its caller.
class InterruptWorker {
 public:
  explicit InterruptWorker(InterruptState* state) : saved_(current_interrupt), saved_polls_(polls_interrupt) {
    current_interrupt = state;
    polls_interrupt = false;
  }
  ~InterruptWorker() {
    current_interrupt = saved_;
    polls_interrupt = saved_polls_;
  }
  InterruptWorker(const InterruptWorker&) = delete;
  InterruptWorker& operator=(const InterruptWorker&) = delete;

 private:
  InterruptState* saved_;
  bool saved_polls_;
};
}  // namespace detail

inline void interruption_point() {
  detail::InterruptState* state = detail::current_interrupt;
  if (!state) return;
  if (state->stop.load(std::memory_order_relaxed)) throw Interrupted();
  if (detail::polls_interrupt) detail::poll_interrupt(*state);
}

// Makes the calls on this thread interruptible while it lives; `poll`: this thread runs the
// hook (false: the scope only isolates the call from an enclosing one).
class InterruptScope {
 public:
  explicit InterruptScope(bool poll);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  detail::InterruptState state_;
  detail::InterruptState* saved_;
  bool saved_polls_;
};

// Runs body(task) for task in [0, n_tasks) on up to `threads` threads.
template <class Body>
void parallel_for(std::size_t n_tasks, int threads, Body&& body) {
  std::size_t workers = static_cast<std::size_t>(resolve_threads(threads));
  if (workers > n_tasks) workers = n_tasks;
  if (workers <= 1) {
    for (std::size_t t = 0; t < n_tasks; ++t) {
      interruption_point();
      body(t);
    }
    return;
  }
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex mutex;  // guards error and running
  std::condition_variable finished;
  std::size_t running = workers - 1;
  auto fail = [&](std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!error) error = e;
    next.store(n_tasks);
  };
  auto run = [&]() {
    try {
      for (std::size_t t = next.fetch_add(1); t < n_tasks; t = next.fetch_add(1)) {
        interruption_point();
        body(t);
      }
    } catch (...) {
      fail(std::current_exception());
    }
  };
  detail::InterruptState* interrupt = detail::current_interrupt;
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (std::size_t w = 1; w < workers; ++w)
    pool.emplace_back([&] {
      {
        detail::InterruptWorker share(interrupt);
        run();
      }
      std::lock_guard<std::mutex> lock(mutex);
      if (--running == 0) finished.notify_one();
    });
  run();
  if (interrupt && detail::polls_interrupt) {
    // Only this thread can see a signal: keep polling while the workers finish.
    std::unique_lock<std::mutex> lock(mutex);
    while (!finished.wait_for(lock, kInterruptPollInterval, [&] { return running == 0; })) {
      lock.unlock();
      try {
        interruption_point();
      } catch (...) {
        fail(std::current_exception());
      }
      lock.lock();
    }
  }
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

// Runs body(begin, end) over consecutive blocks of [begin, end) of at most `block`
// elements on this thread, with an interruption point before each: bounds the time between
// interruption points inside one long task.
template <class Body>
void for_blocks(std::size_t begin, std::size_t end, std::size_t block, Body&& body) {
  for (std::size_t b = begin; b < end; b += block) {
    interruption_point();
    body(b, end - b > block ? b + block : end);
  }
}

}  // namespace ldpfast
