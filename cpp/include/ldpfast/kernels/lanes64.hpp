// Vectors of unsigned 64-bit lanes, one struct per instruction set, so that integer
// kernels (kernels/ocms.cpp) are written once; U64Lanes is the widest one this file is
// compiled for (see dispatch.hpp). Each struct has W lanes and the same static ops:
//   Vec broadcast/load/store; Mask first_lanes(n), load_masked/store_masked (other lanes
//   read as 0, left untouched);
//   add, sub, bit_xor (mod 2^64); mulhi, mullo (high / low 64 bits of the 128-bit product);
//   eq, lt, ge -> a mask (ge's is another type on AVX2, taken by add_if / sub_if only);
//   add_if / sub_if (v + d / v - d in the lanes a mask sets, v elsewhere);
//   add_select(mask, v, d_set, d_clear) = v + (d_set where the mask is set, else d_clear);
//   reduce_once(t, m, m_ordered) = t >= m ? t - m : t; count_if(mask, c) = c + 1 where set;
//   Tally: a vector of W tile counters (TallyCounter each) with load/store/tally_if.
// Ordered values: AVX2 has only signed 64-bit compares, so lt, ge and reduce_once take
// values x stored as x ^ kOrderBias (ordered(v) for a vector, order(x) for a constant),
// with kOrderBias = 2^63 there and 0 elsewhere: signed order of biased values is the
// unsigned order of the values. Adding or subtracting plain offsets to an ordered value
// gives the ordered sum, and equality does not see the bias, so a kernel keeps the values
// it compares ordered and everything else plain.
// Header with internal linkage: kernel files compile it once per ISA.
#pragma once
#include <cstddef>
#include <cstdint>

#if defined(__AVX2__) || defined(__AVX512F__)
#include "ldpfast/simd.hpp"
#endif

#if defined(__GNUC__)
#define LDPFAST_LANE_OP static inline __attribute__((always_inline))
#else
#define LDPFAST_LANE_OP static inline
#endif

namespace ldpfast {
namespace {

// One lane in plain C++: the scalar build, and the reference the others match.
struct U64x1 {
  using u64 = std::uint64_t;
  using Vec = u64;
  using Mask = bool;
  using TallyCounter = u64;
  using Tally = u64;
  static constexpr std::size_t W = 1;
  static constexpr u64 kOrderBias = 0;

  LDPFAST_LANE_OP u64 order(u64 x) { return x; }
  LDPFAST_LANE_OP Vec ordered(Vec v) { return v; }
  LDPFAST_LANE_OP Vec broadcast(u64 x) { return x; }
  LDPFAST_LANE_OP Vec load(const u64* p) { return *p; }
  LDPFAST_LANE_OP void store(u64* p, Vec v) { *p = v; }
  LDPFAST_LANE_OP Mask first_lanes(std::size_t n) { return n != 0; }
  LDPFAST_LANE_OP Vec load_masked(const u64* p, Mask live) { return live ? *p : 0; }
  LDPFAST_LANE_OP void store_masked(u64* p, Mask live, Vec v) {
    if (live) *p = v;
  }
  LDPFAST_LANE_OP Vec add(Vec a, Vec b) { return a + b; }
  LDPFAST_LANE_OP Vec sub(Vec a, Vec b) { return a - b; }
  LDPFAST_LANE_OP Vec bit_xor(Vec a, Vec b) { return a ^ b; }
  LDPFAST_LANE_OP Vec mulhi(Vec a, Vec b) {
    return static_cast<u64>((static_cast<unsigned __int128>(a) * b) >> 64);
  }
  LDPFAST_LANE_OP Vec mullo(Vec a, Vec b) { return a * b; }
  LDPFAST_LANE_OP Mask eq(Vec a, Vec b) { return a == b; }
  LDPFAST_LANE_OP Mask lt(Vec a, Vec b) { return a < b; }
  LDPFAST_LANE_OP Mask ge(Vec a, Vec b) { return a >= b; }
  // Mask arithmetic, not a select: a data-dependent branch here would mispredict.
  LDPFAST_LANE_OP Vec add_if(Mask m, Vec v, Vec d) { return v + (d & (0 - static_cast<u64>(m))); }
  LDPFAST_LANE_OP Vec sub_if(Mask m, Vec v, Vec d) { return v - (d & (0 - static_cast<u64>(m))); }
  LDPFAST_LANE_OP Vec add_select(Mask m, Vec v, Vec d_set, Vec d_clear) {
    return v + d_clear + ((d_set - d_clear) & (0 - static_cast<u64>(m)));
  }
  LDPFAST_LANE_OP Vec reduce_once(Vec t, Vec m, Vec) { return t >= m ? t - m : t; }
  LDPFAST_LANE_OP Vec count_if(Mask m, Vec c) { return c + m; }
  LDPFAST_LANE_OP Tally load_tally(const TallyCounter* p) { return *p; }
  LDPFAST_LANE_OP void store_tally(TallyCounter* p, Tally t) { *p = t; }
  LDPFAST_LANE_OP Tally tally_if(Mask m, Tally t) { return t + m; }
};

#if defined(__AVX2__)
// 64x64-bit products from 32x32-bit ones (_mul_epu32), for ISAs without them: AVX2, and
// the high half on AVX-512F/DQ. L provides broadcast, add, bit_and, shr32, shl32, mul32.
template <class L>
struct Products64From32 {
  template <class V>
  LDPFAST_LANE_OP V mulhi(V a, V b) {
    const V low32 = L::broadcast(0xFFFFFFFF);
    const V a_hi = L::shr32(a), b_hi = L::shr32(b);
    const V ll = L::mul32(a, b), lh = L::mul32(a, b_hi), hl = L::mul32(a_hi, b), hh = L::mul32(a_hi, b_hi);
    const V mid = L::add(L::add(L::shr32(ll), L::bit_and(lh, low32)), L::bit_and(hl, low32));
    return L::add(L::add(hh, L::shr32(lh)), L::add(L::shr32(hl), L::shr32(mid)));
  }
  template <class V>
  LDPFAST_LANE_OP V mullo(V a, V b) {
    const V cross = L::add(L::mul32(L::shr32(a), b), L::mul32(a, L::shr32(b)));
    return L::add(L::mul32(a, b), L::shl32(cross));
  }
};
#endif

#if defined(__AVX2__)
// Four lanes. Masks are all-ones lanes; values are compared biased (kOrderBias = 2^63).
struct U64x4 : Products64From32<U64x4> {
  using u64 = std::uint64_t;
  using Vec = __m256i;
  using Mask = __m256i;
  using TallyCounter = u64;
  using Tally = __m256i;
  static constexpr std::size_t W = 4;
  static constexpr u64 kOrderBias = u64{1} << 63;

  LDPFAST_LANE_OP u64 order(u64 x) { return x ^ kOrderBias; }
  LDPFAST_LANE_OP Vec ordered(Vec v) { return bit_xor(v, broadcast(kOrderBias)); }
  LDPFAST_LANE_OP Vec broadcast(u64 x) { return _mm256_set1_epi64x(static_cast<long long>(x)); }
  LDPFAST_LANE_OP Vec load(const u64* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  LDPFAST_LANE_OP void store(u64* p, Vec v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  LDPFAST_LANE_OP Mask first_lanes(std::size_t n) {
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(static_cast<long long>(n < W ? n : W)),
                              _mm256_setr_epi64x(0, 1, 2, 3));
  }
  LDPFAST_LANE_OP Vec load_masked(const u64* p, Mask live) {
    return _mm256_maskload_epi64(reinterpret_cast<const long long*>(p), live);
  }
  LDPFAST_LANE_OP void store_masked(u64* p, Mask live, Vec v) {
    _mm256_maskstore_epi64(reinterpret_cast<long long*>(p), live, v);
  }
  LDPFAST_LANE_OP Vec add(Vec a, Vec b) { return _mm256_add_epi64(a, b); }
  LDPFAST_LANE_OP Vec sub(Vec a, Vec b) { return _mm256_sub_epi64(a, b); }
  LDPFAST_LANE_OP Vec bit_xor(Vec a, Vec b) { return _mm256_xor_si256(a, b); }
  LDPFAST_LANE_OP Vec bit_and(Vec a, Vec b) { return _mm256_and_si256(a, b); }
  LDPFAST_LANE_OP Vec shr32(Vec a) { return _mm256_srli_epi64(a, 32); }
  LDPFAST_LANE_OP Vec shl32(Vec a) { return _mm256_slli_epi64(a, 32); }
  LDPFAST_LANE_OP Vec mul32(Vec a, Vec b) { return _mm256_mul_epu32(a, b); }
  LDPFAST_LANE_OP Mask eq(Vec a, Vec b) { return _mm256_cmpeq_epi64(a, b); }
  LDPFAST_LANE_OP Mask lt(Vec a, Vec b) { return _mm256_cmpgt_epi64(b, a); }
  // There is no greater-or-equal compare: ge keeps the lanes of lt and add_if / sub_if
  // apply their complement with and-not (no extra instruction however often it is used).
  struct NotMask {
    __m256i lanes;
  };
  LDPFAST_LANE_OP NotMask ge(Vec a, Vec b) { return {lt(a, b)}; }
  LDPFAST_LANE_OP Vec add_if(Mask m, Vec v, Vec d) { return add(v, _mm256_and_si256(m, d)); }
  LDPFAST_LANE_OP Vec sub_if(Mask m, Vec v, Vec d) { return sub(v, _mm256_and_si256(m, d)); }
  LDPFAST_LANE_OP Vec add_if(NotMask m, Vec v, Vec d) { return add(v, _mm256_andnot_si256(m.lanes, d)); }
  LDPFAST_LANE_OP Vec sub_if(NotMask m, Vec v, Vec d) { return sub(v, _mm256_andnot_si256(m.lanes, d)); }
  // And, not blendv (slower on some cores); kernels pass loop-invariant d, so the
  // difference is computed once.
  LDPFAST_LANE_OP Vec add_select(Mask m, Vec v, Vec d_set, Vec d_clear) {
    return add(add(v, d_clear), _mm256_and_si256(m, sub(d_set, d_clear)));
  }
  LDPFAST_LANE_OP Vec reduce_once(Vec t, Vec m, Vec m_ordered) { return sub_if(ge(t, m_ordered), t, m); }
  LDPFAST_LANE_OP Vec count_if(Mask m, Vec c) { return sub(c, m); }  // a set lane is -1
  LDPFAST_LANE_OP Tally load_tally(const TallyCounter* p) { return load(p); }
  LDPFAST_LANE_OP void store_tally(TallyCounter* p, Tally t) { store(p, t); }
  LDPFAST_LANE_OP Tally tally_if(Mask m, Tally t) { return count_if(m, t); }
};
#endif

#if defined(__AVX512F__)
// Eight lanes with mask registers and unsigned compares. Tile counters are 32-bit (eight
// fit one 256-bit register): kernels bound the increments a tile sees.
struct U64x8 : Products64From32<U64x8> {
  using u64 = std::uint64_t;
  using Vec = __m512i;
  using Mask = __mmask8;
  using TallyCounter = std::uint32_t;
  using Tally = __m256i;
  static constexpr std::size_t W = 8;
  static constexpr u64 kOrderBias = 0;

  LDPFAST_LANE_OP u64 order(u64 x) { return x; }
  LDPFAST_LANE_OP Vec ordered(Vec v) { return v; }
  LDPFAST_LANE_OP Vec broadcast(u64 x) { return _mm512_set1_epi64(static_cast<long long>(x)); }
  LDPFAST_LANE_OP Vec load(const u64* p) { return _mm512_loadu_si512(p); }
  LDPFAST_LANE_OP void store(u64* p, Vec v) { _mm512_storeu_si512(p, v); }
  LDPFAST_LANE_OP Mask first_lanes(std::size_t n) {
    return n >= W ? Mask{0xFF} : static_cast<Mask>((1u << n) - 1);
  }
  LDPFAST_LANE_OP Vec load_masked(const u64* p, Mask live) { return _mm512_maskz_loadu_epi64(live, p); }
  LDPFAST_LANE_OP void store_masked(u64* p, Mask live, Vec v) { _mm512_mask_storeu_epi64(p, live, v); }
  LDPFAST_LANE_OP Vec add(Vec a, Vec b) { return _mm512_add_epi64(a, b); }
  LDPFAST_LANE_OP Vec sub(Vec a, Vec b) { return _mm512_sub_epi64(a, b); }
  LDPFAST_LANE_OP Vec bit_xor(Vec a, Vec b) { return _mm512_xor_si512(a, b); }
  LDPFAST_LANE_OP Vec bit_and(Vec a, Vec b) { return _mm512_and_si512(a, b); }
  LDPFAST_LANE_OP Vec shr32(Vec a) { return _mm512_srli_epi64(a, 32); }
  LDPFAST_LANE_OP Vec shl32(Vec a) { return _mm512_slli_epi64(a, 32); }
  LDPFAST_LANE_OP Vec mul32(Vec a, Vec b) { return _mm512_mul_epu32(a, b); }
  LDPFAST_LANE_OP Vec mullo(Vec a, Vec b) { return _mm512_mullo_epi64(a, b); }  // AVX-512DQ
  LDPFAST_LANE_OP Mask eq(Vec a, Vec b) { return _mm512_cmpeq_epu64_mask(a, b); }
  LDPFAST_LANE_OP Mask lt(Vec a, Vec b) { return _mm512_cmplt_epu64_mask(a, b); }
  LDPFAST_LANE_OP Mask ge(Vec a, Vec b) { return _mm512_cmpge_epu64_mask(a, b); }
  LDPFAST_LANE_OP Vec add_if(Mask m, Vec v, Vec d) { return _mm512_mask_add_epi64(v, m, v, d); }
  LDPFAST_LANE_OP Vec sub_if(Mask m, Vec v, Vec d) { return _mm512_mask_sub_epi64(v, m, v, d); }
  // A merge-masked add, not a blend (slower on some cores).
  LDPFAST_LANE_OP Vec add_select(Mask m, Vec v, Vec d_set, Vec d_clear) {
    return _mm512_mask_add_epi64(add(v, d_clear), m, v, d_set);
  }
  // t - m wraps above t exactly when t < m.
  LDPFAST_LANE_OP Vec reduce_once(Vec t, Vec m, Vec) { return _mm512_min_epu64(t, _mm512_sub_epi64(t, m)); }
  LDPFAST_LANE_OP Vec count_if(Mask m, Vec c) { return _mm512_mask_sub_epi64(c, m, c, _mm512_set1_epi64(-1)); }
  LDPFAST_LANE_OP Tally load_tally(const TallyCounter* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  LDPFAST_LANE_OP void store_tally(TallyCounter* p, Tally t) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), t);
  }
  LDPFAST_LANE_OP Tally tally_if(Mask m, Tally t) {
    return _mm256_mask_sub_epi32(t, m, t, _mm256_set1_epi32(-1));
  }
};
#endif

#if defined(__AVX512F__)
using U64Lanes = U64x8;
#elif defined(__AVX2__)
using U64Lanes = U64x4;
#else
using U64Lanes = U64x1;
#endif

}  // namespace
}  // namespace ldpfast

#undef LDPFAST_LANE_OP
