// Exact Bernoulli bits, 64 at a time: lane j of the result is 1 with probability
// t1 / 2^64 where bit j of `select` is set and t0 / 2^64 where it is clear. Each lane
// compares a uniform 64-bit number U_j with its threshold, most significant bit first,
// drawing one random word per bit position for all undecided lanes together (bit-sliced):
// a lane is decided at the first position where U_j's bit differs from the threshold's,
// so about log2(64) + 2 words are drawn per 64 lanes instead of 64 (one per lane). The
// probability is exactly t / 2^64 (U_j < t), which is what the effective epsilons of the
// protocols that use it are computed from. Header-only with internal linkage.
#pragma once
#include <cstdint>

namespace ldpfast {

template <class Rng>
static inline std::uint64_t bernoulli_lanes(Rng& rng, std::uint64_t select, std::uint64_t t1, std::uint64_t t0) {
  std::uint64_t ones = 0, undecided = ~std::uint64_t{0};
  for (int b = 63; b >= 0 && undecided; --b) {
    // Lanes whose threshold has bit b set: U's bit 0 decides "U < t" (a one).
    const std::uint64_t t_bit = (((t1 >> b) & 1) ? select : 0) | (((t0 >> b) & 1) ? ~select : 0);
    const std::uint64_t u = rng.next_u64();
    ones |= undecided & t_bit & ~u;
    undecided &= ~(t_bit ^ u);  // still equal to the threshold so far
  }
  return ones;  // lanes still undecided have U == t: not below it
}

}  // namespace ldpfast
