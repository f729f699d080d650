#include "ldpfast/parallel.hpp"

#include <cstdlib>

namespace ldpfast {

namespace {
std::atomic<int> configured_threads{0};

int automatic_threads() {
  if (const char* env = std::getenv("LDPFAST_NUM_THREADS")) {
    const int value = std::atoi(env);
    if (value > 0) return value;
  }
  // Asked once: hardware_concurrency() is a system call, and every kernel call resolves
  // its thread count.
  static const int hw = [] {
    const unsigned count = std::thread::hardware_concurrency();
    return count ? static_cast<int>(count) : 1;
  }();
  return hw;
}
}  // namespace

int default_threads() {
  const int configured = configured_threads.load(std::memory_order_relaxed);
  return configured > 0 ? configured : automatic_threads();
}

void set_default_threads(int threads) { configured_threads.store(threads > 0 ? threads : 0); }

namespace { std::atomic<InterruptHook> interrupt_hook{nullptr}; }  // namespace

void set_interrupt_hook(InterruptHook hook) { interrupt_hook.store(hook); }

namespace detail {
thread_local InterruptState* current_interrupt = nullptr;
thread_local bool polls_interrupt = false;

void poll_interrupt(InterruptState& state) {
  const auto now = std::chrono::steady_clock::now();
  if (now < state.next_poll) return;
  state.next_poll = now + kInterruptPollInterval;
  const InterruptHook hook = interrupt_hook.load();
  if (hook && hook()) {
    state.stop.store(true);
    throw Interrupted();
  }
}
}  // namespace detail

InterruptScope::InterruptScope(bool poll)
    : saved_(detail::current_interrupt), saved_polls_(detail::polls_interrupt) {
  state_.next_poll = std::chrono::steady_clock::now() + kInterruptPollInterval;
  detail::current_interrupt = &state_;
  detail::polls_interrupt = poll;
}

InterruptScope::~InterruptScope() {
  detail::current_interrupt = saved_;
  detail::polls_interrupt = saved_polls_;
}

}  // namespace ldpfast
