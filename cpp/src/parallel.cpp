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
  const unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(hw) : 1;
}
}  // namespace

int default_threads() {
  const int configured = configured_threads.load(std::memory_order_relaxed);
  return configured > 0 ? configured : automatic_threads();
}

void set_default_threads(int threads) { configured_threads.store(threads > 0 ? threads : 0); }

}  // namespace ldpfast
