#include "ldpfast/dispatch.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ldpfast {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    default: return "scalar";
  }
}

bool isa_from_name(const char* name, Isa* out) {
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (std::strcmp(name, isa_name(isa)) == 0) {
      *out = isa;
      return true;
    }
  }
  return false;
}

bool isa_supported(Isa isa) {
  if (isa == Isa::scalar) return true;
#if defined(LDPFAST_X86_ISAS) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt") &&
                    __builtin_cpu_supports("pclmul");
  if (isa == Isa::avx2) return avx2;
  return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512cd");
#else
  return false;
#endif
}

Isa best_supported_isa() {
  for (Isa isa : {Isa::avx512, Isa::avx2})
    if (isa_supported(isa)) return isa;
  return Isa::scalar;
}

namespace {
Isa initial_isa() {
  const char* forced = std::getenv("LDPFAST_ISA");
  if (forced && *forced) {
    Isa isa;
    if (!isa_from_name(forced, &isa))
      throw std::invalid_argument(std::string("LDPFAST_ISA must be one of scalar, avx2, avx512; got '") + forced +
                                  "'");
    if (!isa_supported(isa))
      throw std::invalid_argument(std::string("LDPFAST_ISA='") + forced + "' is not supported by this CPU");
    return isa;
  }
  return best_supported_isa();
}

std::atomic<int>& active_slot() {
  static std::atomic<int> slot{static_cast<int>(initial_isa())};
  return slot;
}
}  // namespace

Isa active_isa() { return static_cast<Isa>(active_slot().load(std::memory_order_relaxed)); }

void set_active_isa(Isa isa) {
  if (!isa_supported(isa))
    throw std::invalid_argument(std::string("backend '") + isa_name(isa) + "' is not supported by this CPU");
  active_slot().store(static_cast<int>(isa), std::memory_order_relaxed);
}

}  // namespace ldpfast
