// OCMS+RR kernels, compiled once per ISA (see dispatch.hpp).
//
// Server decode over a contiguous candidate range (count_range, prime field) is the hot
// path. It never multiplies or divides per (report, candidate) pair: along x the field
// value moves by a constant, v(x + s) = v(x) + s*a1 (mod p), and r = v mod m is carried
// along with it. With step A = s*a1 mod p and c = p - A, the field sum wraps iff v >= c:
//   v' = v >= c ? v - c : v + A
//   r' = r + (v >= c ? (A - p) mod m : A mod m), minus m once if it reached m.
// For m > 2^63 no r is carried: v mod m = min(v, v - m) as unsigned integers (v < 2^64).
// Lanes hold consecutive candidates of one report (s = lane count); several reports are
// walked together to hide the compare->select latency, and matches go to a tile of
// per-candidate counters that stays in L1. Lane start values per (report, tile) come
// from one Montgomery product and one Barrett reduction.
//
// Other paths: count_list (and count_range over fewer than kWalkMinCandidates
// candidates) evaluates each pair with a Montgomery product and a Barrett reduction,
// vectorized over candidates with emulated 64x64-bit products on AVX-512/AVX2.
// GF(2^l) count_range walks aligned candidate blocks in Gray-code order (see
// count_range_gf). Client kernels draw from ChaCha20 blocks computed 16 (AVX-512) or 8
// (AVX2) at a time, bit-identical to the scalar generator.
#include "ldpfast/kernels/ocms.hpp"

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace ldpfast {
namespace LDPFAST_ISA_NS {
namespace {

using u64 = std::uint64_t;
using u32 = std::uint32_t;

#if defined(__AVX512F__)
constexpr std::size_t kLanes = 8;
using TileCounter = u32;  // a tile never sees more than kReportBlock increments
#elif defined(__AVX2__)
constexpr std::size_t kLanes = 4;
using TileCounter = u64;
#else
constexpr std::size_t kLanes = 1;
using TileCounter = u64;
#endif

constexpr std::size_t kGroup = 4;           // reports walked together
constexpr std::size_t kTile = 4096;         // candidates per counter tile
constexpr std::size_t kReportBlock = 256;   // reports prepared together (multiple of kGroup)
constexpr u64 kNever = ~u64{0};             // a report symbol no residue can equal (r < m <= 2^64 - 1)

// ---------------------------------------------------------------------------------------
// Shared scalar helpers

// Moving x by `stride` candidates: the constants of one report.
struct Walk {
  u64 step;     // stride * a1 mod p
  u64 wrap_at;  // p - step; v + step wraps around p iff v >= wrap_at
  u64 dstep;    // step mod m
  u64 dwrap;    // (step - p) mod m
};

// a1_mont is a1 in Montgomery form; dwrap is unused (and may wrap) when m > 2^63.
Walk make_walk(u64 a1_mont, u64 stride, const PrimeField& f, const FastMod& fm, u64 p_mod_m) {
  Walk w;
  w.step = mont_redc(static_cast<u128>(a1_mont) * stride, f);
  w.wrap_at = f.p - w.step;
  w.dstep = fast_mod(w.step, fm);
  w.dwrap = w.dstep >= p_mod_m ? w.dstep - p_mod_m : w.dstep + (fm.m - p_mod_m);
  return w;
}

// One step of the walk for m <= 2^63 (so r + d < 2m fits in 64 bits).
inline void advance(u64& v, u64& r, const Walk& w, u64 m) {
  const bool wrap = v >= w.wrap_at;
  const u64 s = r + (wrap ? w.dwrap : w.dstep);
  v = wrap ? v - w.wrap_at : v + w.step;
  r = s >= m ? s - m : s;
}

// v mod m for m > 2^63 (v < 2^64 < 2m).
inline u64 reduce_large(u64 v, u64 m) { return v >= m ? v - m : v; }

inline u64 prime_value(const PrimeField& f, u64 a0, u64 a1_mont, u64 x) {
  return add_mod(mont_redc(static_cast<u128>(a1_mont) * x, f), a0, f.p);
}

// Per-report constants of one block, padded to a multiple of kGroup with reports that
// never match.
struct RangeBlock {
  u64 z[kReportBlock];
  u64 a0[kReportBlock];
  u64 a1_mont[kReportBlock];
  Walk unit[kReportBlock];   // stride 1 (lane start values)
  Walk lanes[kReportBlock];  // stride kLanes (the vector walk)
  std::size_t count;         // padded size
};

void prepare_block(RangeBlock& b, const PrimeField& f, const FastMod& fm, u64 p_mod_m, const u64* z,
                   const u64* a0, const u64* a1, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    b.z[i] = z[i];
    b.a0[i] = a0[i];
    b.a1_mont[i] = to_montgomery(a1[i], f);
    b.unit[i] = make_walk(b.a1_mont[i], 1, f, fm, p_mod_m);
    b.lanes[i] = make_walk(b.a1_mont[i], kLanes, f, fm, p_mod_m);
  }
  b.count = (n + kGroup - 1) / kGroup * kGroup;
  for (std::size_t i = n; i < b.count; ++i) {
    b.z[i] = kNever;
    b.a0[i] = b.a0[0];
    b.a1_mont[i] = b.a1_mont[0];
    b.unit[i] = b.unit[0];
    b.lanes[i] = b.lanes[0];
  }
}

// Field values and residues of candidates x0 .. x0 + kLanes - 1 for report i.
template <bool kLargeM>
void lane_start(const RangeBlock& b, std::size_t i, const PrimeField& f, const FastMod& fm, u64 x0,
                u64* v, u64* r) {
  u64 vv = prime_value(f, b.a0[i], b.a1_mont[i], x0);
  u64 rr = kLargeM ? 0 : fast_mod(vv, fm);
  for (std::size_t j = 0; j < kLanes; ++j) {
    v[j] = vv;
    r[j] = rr;
    if (kLargeM) {
      vv = vv >= b.unit[i].wrap_at ? vv - b.unit[i].wrap_at : vv + b.unit[i].step;
    } else {
      advance(vv, rr, b.unit[i], fm.m);
    }
  }
}

#if defined(__AVX512F__)
// High 64 bits of the 64x64-bit products, from four 32x32-bit products.
inline __m512i mulhi_epu64(__m512i a, __m512i b) {
  const __m512i low32 = _mm512_set1_epi64(0xFFFFFFFFLL);
  const __m512i a_hi = _mm512_srli_epi64(a, 32), b_hi = _mm512_srli_epi64(b, 32);
  const __m512i ll = _mm512_mul_epu32(a, b), lh = _mm512_mul_epu32(a, b_hi);
  const __m512i hl = _mm512_mul_epu32(a_hi, b), hh = _mm512_mul_epu32(a_hi, b_hi);
  const __m512i mid = _mm512_add_epi64(_mm512_add_epi64(_mm512_srli_epi64(ll, 32), _mm512_and_si512(lh, low32)),
                                       _mm512_and_si512(hl, low32));
  return _mm512_add_epi64(_mm512_add_epi64(hh, _mm512_srli_epi64(lh, 32)),
                          _mm512_add_epi64(_mm512_srli_epi64(hl, 32), _mm512_srli_epi64(mid, 32)));
}

// v mod m for 8 lanes (Barrett with mu = floor(2^64 / m); see FastMod).
inline __m512i fast_mod_epu64(__m512i v, __m512i m, __m512i mu) {
  const __m512i r = _mm512_sub_epi64(v, _mm512_mullo_epi64(mulhi_epu64(v, mu), m));
  return _mm512_min_epu64(r, _mm512_sub_epi64(r, m));  // r < 2m; a wrapped r - m is larger
}
#endif

// ---------------------------------------------------------------------------------------
// GF(2^l) count_range. Inside an aligned block of kTile candidates, x = base ^ j, so
// v(x) = (a1 base ^ a0) ^ a1 j is linear in j over GF(2): walking j in Gray-code order
// changes a1 j by one precomputed a1 2^b per step, and no carry-less product is needed
// per pair. Partial blocks at the ends, and fields smaller than a block, are evaluated
// directly.
constexpr int kTileBits = 12;
static_assert(std::size_t{1} << kTileBits == kTile, "kTile must be 2^kTileBits");

void count_direct_gf(const BinaryField& f, const FastMod& fm, const u64* z, const u64* a0, const u64* a1,
                     std::size_t n, u64 x_begin, std::size_t x_count, u64* counts) {
  for (std::size_t i = 0; i < n; ++i) {
    const u64 zi = z[i], a0i = a0[i], a1i = a1[i];
    for (std::size_t j = 0; j < x_count; ++j) counts[j] += fast_mod(gf_mul(a1i, x_begin + j, f) ^ a0i, fm) == zi;
  }
}

// tile[j] += #{i : h_i(base ^ j) == z[i]} for all j < kTile.
void count_block_gf(const BinaryField& f, const FastMod& fm, const u64* z, const u64* a0, const u64* a1,
                    std::size_t n, u64 base, u64* tile) {
#if defined(__AVX512F__)
  constexpr int kStepBits = kTileBits - 3;  // lanes cover the low 3 bits of j
  const __m512i M = _mm512_set1_epi64(static_cast<long long>(fm.m));
  const __m512i MU = _mm512_set1_epi64(static_cast<long long>(fm.mu));
  for (std::size_t i = 0; i < n; ++i) {
    alignas(64) u64 lane[8];
    const u64 start = gf_mul(a1[i], base, f) ^ a0[i];
    for (u64 j = 0; j < 8; ++j) lane[j] = start ^ gf_mul(a1[i], j, f);
    u64 step[kStepBits];
    for (int b = 0; b < kStepBits; ++b) step[b] = gf_mul(a1[i], u64{8} << b, f);
    const __m512i L = _mm512_load_si512(lane);
    const __m512i Z = _mm512_set1_epi64(static_cast<long long>(z[i]));
    const __m512i one = _mm512_set1_epi64(1);
    u64 w = 0;  // a1 * 8 gray(k)
    for (std::size_t k = 0; k < (kTile >> 3); ++k) {
      const std::size_t slot = (k ^ (k >> 1)) << 3;
      const __m512i r = fast_mod_epu64(_mm512_xor_si512(L, _mm512_set1_epi64(static_cast<long long>(w))), M, MU);
      __m512i* t = reinterpret_cast<__m512i*>(tile + slot);
      _mm512_store_si512(t, _mm512_mask_add_epi64(_mm512_load_si512(t), _mm512_cmpeq_epu64_mask(r, Z),
                                                  _mm512_load_si512(t), one));
      w ^= step[__builtin_ctzll(k + 1) < kStepBits ? __builtin_ctzll(k + 1) : 0];
    }
  }
#else
  for (std::size_t i = 0; i < n; ++i) {
    u64 step[kTileBits];
    for (int b = 0; b < kTileBits; ++b) step[b] = gf_mul(a1[i], u64{1} << b, f);
    const u64 zi = z[i];
    u64 v = gf_mul(a1[i], base, f) ^ a0[i];  // value at j = gray(k)
    for (std::size_t k = 0; k < kTile; ++k) {
      tile[k ^ (k >> 1)] += fast_mod(v, fm) == zi;
      v ^= step[__builtin_ctzll(k + 1) < kTileBits ? __builtin_ctzll(k + 1) : 0];
    }
  }
#endif
}

void count_range_gf(const BinaryField& f, const u64* z, const u64* a0, const u64* a1, std::size_t n, u64 m,
                    u64 x_begin, std::size_t x_count, u64* counts) {
  const FastMod fm = make_fast_mod(m);
  if (f.l < 16) {
    count_direct_gf(f, fm, z, a0, a1, n, x_begin, x_count, counts);
    return;
  }
  alignas(64) u64 tile[kTile];
  std::size_t done = 0;
  while (done < x_count) {
    const u64 x = x_begin + done;
    const u64 base = x & ~static_cast<u64>(kTile - 1);
    const std::size_t lo = static_cast<std::size_t>(x - base);
    const std::size_t hi = x_count - done < kTile - lo ? lo + (x_count - done) : kTile;
    if (hi - lo < kTile / 4) {  // a short piece: direct evaluation is cheaper
      count_direct_gf(f, fm, z, a0, a1, n, x, hi - lo, counts + done);
    } else {
      for (std::size_t j = 0; j < kTile; ++j) tile[j] = 0;
      count_block_gf(f, fm, z, a0, a1, n, base, tile);
      for (std::size_t j = lo; j < hi; ++j) counts[done + j - lo] += tile[j];
    }
    done += hi - lo;
  }
}

// ---------------------------------------------------------------------------------------
// The walk of kGroup reports over `steps` vectors of candidates, per ISA.

#if defined(__AVX512F__)

template <bool kLargeM>
void walk_group(const RangeBlock& b, std::size_t g, const u64 (*v0)[kLanes], const u64 (*r0)[kLanes],
                u64 m, std::size_t steps, TileCounter* tile) {
  __m512i V[kGroup], R[kGroup], A[kGroup], C[kGroup], DA[kGroup], DW[kGroup], Z[kGroup];
  for (std::size_t k = 0; k < kGroup; ++k) {
    const Walk& w = b.lanes[g + k];
    V[k] = _mm512_loadu_si512(v0[k]);
    R[k] = _mm512_loadu_si512(r0[k]);
    A[k] = _mm512_set1_epi64(static_cast<long long>(w.step));
    C[k] = _mm512_set1_epi64(static_cast<long long>(w.wrap_at));
    DA[k] = _mm512_set1_epi64(static_cast<long long>(w.dstep));
    DW[k] = _mm512_set1_epi64(static_cast<long long>(w.dwrap));
    Z[k] = _mm512_set1_epi64(static_cast<long long>(b.z[g + k]));
  }
  const __m512i M = _mm512_set1_epi64(static_cast<long long>(m));
  const __m256i ones = _mm256_set1_epi32(-1);
  for (std::size_t s = 0; s < steps; ++s) {
    __m256i* slot = reinterpret_cast<__m256i*>(tile + s * kLanes);
    __m256i cnt = _mm256_load_si256(slot);
    for (std::size_t k = 0; k < kGroup; ++k) {
      const __m512i r = kLargeM ? _mm512_min_epu64(V[k], _mm512_sub_epi64(V[k], M)) : R[k];
      cnt = _mm256_mask_sub_epi32(cnt, _mm512_cmpeq_epu64_mask(r, Z[k]), cnt, ones);
      const __mmask8 wrap = _mm512_cmpge_epu64_mask(V[k], C[k]);
      if (!kLargeM) {
        const __m512i t = _mm512_mask_add_epi64(_mm512_add_epi64(R[k], DA[k]), wrap, R[k], DW[k]);
        R[k] = _mm512_min_epu64(t, _mm512_sub_epi64(t, M));
      }
      V[k] = _mm512_mask_sub_epi64(_mm512_add_epi64(V[k], A[k]), wrap, V[k], C[k]);
    }
    _mm256_store_si256(slot, cnt);
  }
}

#elif defined(__AVX2__)

// No unsigned 64-bit compares in AVX2: values are kept biased by 2^63 (x ^ 2^63) so that
// signed compares order them as unsigned numbers; additions are unaffected by the bias.
template <bool kLargeM>
void walk_group(const RangeBlock& b, std::size_t g, const u64 (*v0)[kLanes], const u64 (*r0)[kLanes],
                u64 m, std::size_t steps, TileCounter* tile) {
  const __m256i bias = _mm256_set1_epi64x(static_cast<long long>(u64{1} << 63));
  __m256i V[kGroup], R[kGroup], A[kGroup], C[kGroup], DW[kGroup], DAW[kGroup], Z[kGroup];
  for (std::size_t k = 0; k < kGroup; ++k) {
    const Walk& w = b.lanes[g + k];
    V[k] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v0[k])), bias);
    R[k] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0[k])), bias);
    A[k] = _mm256_set1_epi64x(static_cast<long long>(w.step));
    C[k] = _mm256_set1_epi64x(static_cast<long long>(w.wrap_at ^ (u64{1} << 63)));
    DW[k] = _mm256_set1_epi64x(static_cast<long long>(w.dwrap));
    DAW[k] = _mm256_set1_epi64x(static_cast<long long>(w.dstep - w.dwrap));
    Z[k] = _mm256_set1_epi64x(static_cast<long long>(b.z[g + k] ^ (u64{1} << 63)));
  }
  const __m256i M = _mm256_set1_epi64x(static_cast<long long>(m));
  const __m256i MB = _mm256_set1_epi64x(static_cast<long long>(m ^ (u64{1} << 63)));
  __m256i P = _mm256_setzero_si256();
  {
    // p = step + wrap_at for any report.
    const Walk& w = b.lanes[g];
    P = _mm256_set1_epi64x(static_cast<long long>(w.step + w.wrap_at));
  }
  for (std::size_t s = 0; s < steps; ++s) {
    __m256i* slot = reinterpret_cast<__m256i*>(tile + s * kLanes);
    __m256i cnt = _mm256_load_si256(slot);
    for (std::size_t k = 0; k < kGroup; ++k) {
      const __m256i r = kLargeM ? _mm256_sub_epi64(V[k], _mm256_andnot_si256(_mm256_cmpgt_epi64(MB, V[k]), M))
                                : R[k];
      cnt = _mm256_sub_epi64(cnt, _mm256_cmpeq_epi64(r, Z[k]));
      const __m256i nowrap = _mm256_cmpgt_epi64(C[k], V[k]);
      if (!kLargeM) {
        const __m256i t = _mm256_add_epi64(R[k], _mm256_add_epi64(DW[k], _mm256_and_si256(nowrap, DAW[k])));
        R[k] = _mm256_sub_epi64(t, _mm256_andnot_si256(_mm256_cmpgt_epi64(MB, t), M));
      }
      V[k] = _mm256_sub_epi64(_mm256_add_epi64(V[k], A[k]), _mm256_andnot_si256(nowrap, P));
    }
    _mm256_store_si256(slot, cnt);
  }
}

#else

template <bool kLargeM>
void walk_group(const RangeBlock& b, std::size_t g, const u64 (*v0)[kLanes], const u64 (*r0)[kLanes],
                u64 m, std::size_t steps, TileCounter* tile) {
  // Constants copied to locals: tile stores could otherwise alias them.
  u64 v[kGroup], r[kGroup], step[kGroup], wrap_at[kGroup], dstep[kGroup], dwrap[kGroup], z[kGroup];
  for (std::size_t k = 0; k < kGroup; ++k) {
    const Walk& w = b.lanes[g + k];
    v[k] = v0[k][0];
    r[k] = r0[k][0];
    step[k] = w.step;
    wrap_at[k] = w.wrap_at;
    dstep[k] = w.dstep;
    dwrap[k] = w.dwrap;
    z[k] = b.z[g + k];
  }
  for (std::size_t s = 0; s < steps; ++s) {
    TileCounter hits = 0;
    for (std::size_t k = 0; k < kGroup; ++k) {
      const bool wrap = v[k] >= wrap_at[k];
      if (kLargeM) {
        hits += reduce_large(v[k], m) == z[k];
      } else {
        hits += r[k] == z[k];
        const u64 t = r[k] + (wrap ? dwrap[k] : dstep[k]);
        r[k] = t >= m ? t - m : t;
      }
      v[k] = wrap ? v[k] - wrap_at[k] : v[k] + step[k];
    }
    tile[s] += hits;
  }
}

#endif

template <bool kLargeM>
void count_range_prime(const PrimeField& f, const u64* z, const u64* a0, const u64* a1, std::size_t n,
                       u64 m, u64 x_begin, std::size_t x_count, u64* counts) {
  const FastMod fm = make_fast_mod(m);
  const u64 p_mod_m = fast_mod(f.p, fm);
  RangeBlock block;
  alignas(64) TileCounter tile[kTile];
  alignas(64) u64 v0[kGroup][kLanes];
  alignas(64) u64 r0[kGroup][kLanes];
  for (std::size_t rb = 0; rb < n; rb += kReportBlock) {
    const std::size_t nb = n - rb < kReportBlock ? n - rb : kReportBlock;
    prepare_block(block, f, fm, p_mod_m, z + rb, a0 + rb, a1 + rb, nb);
    for (std::size_t t0 = 0; t0 < x_count; t0 += kTile) {
      const std::size_t tn = x_count - t0 < kTile ? x_count - t0 : kTile;
      const std::size_t steps = (tn + kLanes - 1) / kLanes;
      for (std::size_t j = 0; j < steps * kLanes; ++j) tile[j] = 0;
      for (std::size_t g = 0; g < block.count; g += kGroup) {
        for (std::size_t k = 0; k < kGroup; ++k)
          lane_start<kLargeM>(block, g + k, f, fm, x_begin + t0, v0[k], r0[k]);
        walk_group<kLargeM>(block, g, v0, r0, m, steps, tile);
      }
      for (std::size_t j = 0; j < tn; ++j) counts[t0 + j] += tile[j];
    }
  }
}

// ---------------------------------------------------------------------------------------
// Entry points

void hash(const FieldSpec& field, const u64* a0, const u64* a1, const u64* x, std::size_t n, u64 m,
          u64* out) {
  const FastMod fm = make_fast_mod(m);
  for (std::size_t i = 0; i < n; ++i) out[i] = fast_mod(FieldHasher(field, a0[i], a1[i]).value(x[i]), fm);
}

// Uniform field element: rejection for primes, masking for GF(2^l).
u64 draw_field_element(ElementRng& rng, const FieldSpec& field) {
  if (field.binary) return rng.next_u64() & field.gf.mask;
  return rng.below(field.prime.p);
}

void perturb(const FieldSpec& field, const RngKey& key, const u64* x, std::size_t begin, std::size_t end,
             u64 m, u64 flip_threshold, u64* z, u64* a0, u64* a1) {
  const FastMod fm = make_fast_mod(m);
  for_each_element_rng(key, kStreamOcms, begin, end, [&](std::size_t i, ElementRng& rng) {
    a0[i] = draw_field_element(rng, field);
    a1[i] = draw_field_element(rng, field);
    const u64 y = fast_mod(FieldHasher(field, a0[i], a1[i]).value(x[i]), fm);
    z[i] = randomized_response(rng, y, m, flip_threshold);
  });
}

// count_list over one candidate tile, prime field: per pair one Montgomery product and
// one Barrett reduction.
#if defined(__AVX512F__)

void count_list_prime(const PrimeField& f, const FastMod& fm, const u64* z, const u64* a0, const u64* a1,
                      std::size_t n, const u64* xs, std::size_t x_count, u64* counts) {
  constexpr std::size_t kBlock = 256;
  u64 a1_mont[kBlock], add_back[kBlock];
  const __m512i P = _mm512_set1_epi64(static_cast<long long>(f.p));
  const __m512i PINV = _mm512_set1_epi64(static_cast<long long>(f.pinv));
  const __m512i M = _mm512_set1_epi64(static_cast<long long>(fm.m));
  const __m512i MU = _mm512_set1_epi64(static_cast<long long>(fm.mu));
  for (std::size_t rb = 0; rb < n; rb += kBlock) {
    const std::size_t nb = n - rb < kBlock ? n - rb : kBlock;
    for (std::size_t i = 0; i < nb; ++i) {
      a1_mont[i] = to_montgomery(a1[rb + i], f);
      add_back[i] = f.p - a0[rb + i];
    }
    for (std::size_t j = 0; j < x_count; j += 8) {
      const __mmask8 live = x_count - j >= 8 ? 0xFF : static_cast<__mmask8>((1u << (x_count - j)) - 1);
      const __m512i x = _mm512_maskz_loadu_epi64(live, xs + j);  // dead lanes compute x = 0, never stored
      __m512i cnt = _mm512_maskz_loadu_epi64(live, counts + j);
      for (std::size_t i = 0; i < nb; ++i) {
        const __m512i a = _mm512_set1_epi64(static_cast<long long>(a1_mont[i]));
        // Montgomery: t = a x, q = t_lo p^-1, v = t_hi - (q p)_hi (+ p on borrow).
        const __m512i t_hi = mulhi_epu64(a, x);
        const __m512i q = _mm512_mullo_epi64(_mm512_mullo_epi64(a, x), PINV);
        const __m512i qp_hi = mulhi_epu64(q, P);
        __m512i v = _mm512_sub_epi64(t_hi, qp_hi);
        v = _mm512_mask_add_epi64(v, _mm512_cmplt_epu64_mask(t_hi, qp_hi), v, P);
        // + a0 mod p: the sum wraps around p iff v >= p - a0.
        const __mmask8 wrap = _mm512_cmpge_epu64_mask(v, _mm512_set1_epi64(static_cast<long long>(add_back[i])));
        v = _mm512_add_epi64(v, _mm512_set1_epi64(static_cast<long long>(a0[rb + i])));
        v = _mm512_mask_sub_epi64(v, wrap, v, P);
        const __m512i r = fast_mod_epu64(v, M, MU);
        const __mmask8 hit = _mm512_cmpeq_epu64_mask(r, _mm512_set1_epi64(static_cast<long long>(z[rb + i])));
        cnt = _mm512_mask_sub_epi64(cnt, hit, cnt, _mm512_set1_epi64(-1));
      }
      _mm512_mask_storeu_epi64(counts + j, live, cnt);
    }
  }
}

#elif defined(__AVX2__)

// 64-bit lane arithmetic that AVX2 lacks, from 32x32-bit products and biased compares.
inline __m256i mulhi_epu64(__m256i a, __m256i b) {
  const __m256i low32 = _mm256_set1_epi64x(0xFFFFFFFFLL);
  const __m256i a_hi = _mm256_srli_epi64(a, 32), b_hi = _mm256_srli_epi64(b, 32);
  const __m256i ll = _mm256_mul_epu32(a, b), lh = _mm256_mul_epu32(a, b_hi);
  const __m256i hl = _mm256_mul_epu32(a_hi, b), hh = _mm256_mul_epu32(a_hi, b_hi);
  const __m256i mid = _mm256_add_epi64(_mm256_add_epi64(_mm256_srli_epi64(ll, 32), _mm256_and_si256(lh, low32)),
                                       _mm256_and_si256(hl, low32));
  return _mm256_add_epi64(_mm256_add_epi64(hh, _mm256_srli_epi64(lh, 32)),
                          _mm256_add_epi64(_mm256_srli_epi64(hl, 32), _mm256_srli_epi64(mid, 32)));
}

inline __m256i mullo_epu64(__m256i a, __m256i b) {
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                         _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
  return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
}

// All-ones where a < b as unsigned 64-bit integers.
inline __m256i lt_epu64(__m256i a, __m256i b) {
  const __m256i bias = _mm256_set1_epi64x(static_cast<long long>(u64{1} << 63));
  return _mm256_cmpgt_epi64(_mm256_xor_si256(b, bias), _mm256_xor_si256(a, bias));
}

void count_list_prime(const PrimeField& f, const FastMod& fm, const u64* z, const u64* a0, const u64* a1,
                      std::size_t n, const u64* xs, std::size_t x_count, u64* counts) {
  constexpr std::size_t kBlock = 256;
  u64 a1_mont[kBlock], add_back[kBlock];
  const __m256i P = _mm256_set1_epi64x(static_cast<long long>(f.p));
  const __m256i PINV = _mm256_set1_epi64x(static_cast<long long>(f.pinv));
  const __m256i M = _mm256_set1_epi64x(static_cast<long long>(fm.m));
  const __m256i MU = _mm256_set1_epi64x(static_cast<long long>(fm.mu));
  const __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3);
  for (std::size_t rb = 0; rb < n; rb += kBlock) {
    const std::size_t nb = n - rb < kBlock ? n - rb : kBlock;
    for (std::size_t i = 0; i < nb; ++i) {
      a1_mont[i] = to_montgomery(a1[rb + i], f);
      add_back[i] = f.p - a0[rb + i];  // v + a0 wraps around p iff v >= p - a0
    }
    for (std::size_t j = 0; j < x_count; j += 4) {
      const long long left = static_cast<long long>(x_count - j);
      const __m256i live = _mm256_cmpgt_epi64(_mm256_set1_epi64x(left), lane);
      const __m256i x = _mm256_maskload_epi64(reinterpret_cast<const long long*>(xs + j), live);
      __m256i cnt = _mm256_maskload_epi64(reinterpret_cast<const long long*>(counts + j), live);
      for (std::size_t i = 0; i < nb; ++i) {
        const __m256i a = _mm256_set1_epi64x(static_cast<long long>(a1_mont[i]));
        const __m256i t_hi = mulhi_epu64(a, x);
        const __m256i q = mullo_epu64(mullo_epu64(a, x), PINV);
        const __m256i qp_hi = mulhi_epu64(q, P);
        __m256i v = _mm256_add_epi64(_mm256_sub_epi64(t_hi, qp_hi), _mm256_and_si256(lt_epu64(t_hi, qp_hi), P));
        const __m256i c = _mm256_set1_epi64x(static_cast<long long>(add_back[i]));
        v = _mm256_sub_epi64(_mm256_add_epi64(v, _mm256_set1_epi64x(static_cast<long long>(a0[rb + i]))),
                             _mm256_andnot_si256(lt_epu64(v, c), P));
        __m256i r = _mm256_sub_epi64(v, mullo_epu64(mulhi_epu64(v, MU), M));
        r = _mm256_sub_epi64(r, _mm256_andnot_si256(lt_epu64(r, M), M));
        cnt = _mm256_sub_epi64(cnt, _mm256_cmpeq_epi64(r, _mm256_set1_epi64x(static_cast<long long>(z[rb + i]))));
      }
      _mm256_maskstore_epi64(reinterpret_cast<long long*>(counts + j), live, cnt);
    }
  }
}

#else

void count_list_prime(const PrimeField& f, const FastMod& fm, const u64* z, const u64* a0, const u64* a1,
                      std::size_t n, const u64* xs, std::size_t x_count, u64* counts) {
  std::size_t i = 0;
  for (; i + 2 <= n; i += 2) {  // two reports per pass over the tile: independent chains
    const u64 z0 = z[i], z1 = z[i + 1], b0 = a0[i], b1 = a0[i + 1];
    const u64 m0 = to_montgomery(a1[i], f), m1 = to_montgomery(a1[i + 1], f);
    for (std::size_t j = 0; j < x_count; ++j) {
      const u64 x = xs[j];
      counts[j] += static_cast<u64>(fast_mod(prime_value(f, b0, m0, x), fm) == z0) +
                   static_cast<u64>(fast_mod(prime_value(f, b1, m1, x), fm) == z1);
    }
  }
  for (; i < n; ++i) {
    const u64 zi = z[i], b0 = a0[i], m0 = to_montgomery(a1[i], f);
    for (std::size_t j = 0; j < x_count; ++j) counts[j] += fast_mod(prime_value(f, b0, m0, xs[j]), fm) == zi;
  }
}

#endif

// Below this many candidates count_range evaluates each pair directly.
#if defined(__AVX512F__)
constexpr std::size_t kWalkMinCandidates = 32;
#elif defined(__AVX2__)
constexpr std::size_t kWalkMinCandidates = 16;
#else
constexpr std::size_t kWalkMinCandidates = 8;
#endif

void count_range(const FieldSpec& field, const u64* z, const u64* a0, const u64* a1, std::size_t n, u64 m,
                 u64 x_begin, std::size_t x_count, u64* counts) {
  if (n == 0 || x_count == 0) return;
  if (!field.binary) {
    if (x_count < kWalkMinCandidates) {  // too short to pay for the walk's per-report setup
      u64 xs[kWalkMinCandidates];
      for (std::size_t j = 0; j < x_count; ++j) xs[j] = x_begin + j;
      count_list_prime(field.prime, make_fast_mod(m), z, a0, a1, n, xs, x_count, counts);
      return;
    }
    if (m > (u64{1} << 63)) {
      count_range_prime<true>(field.prime, z, a0, a1, n, m, x_begin, x_count, counts);
    } else {
      count_range_prime<false>(field.prime, z, a0, a1, n, m, x_begin, x_count, counts);
    }
    return;
  }
  count_range_gf(field.gf, z, a0, a1, n, m, x_begin, x_count, counts);
}

void count_list(const FieldSpec& field, const u64* z, const u64* a0, const u64* a1, std::size_t n, u64 m,
                const u64* xs, std::size_t x_count, u64* counts) {
  const FastMod fm = make_fast_mod(m);
  for (std::size_t t0 = 0; t0 < x_count; t0 += kTile) {
    const std::size_t tn = x_count - t0 < kTile ? x_count - t0 : kTile;
    const u64* tx = xs + t0;
    u64* tc = counts + t0;
    if (field.binary) {
      for (std::size_t i = 0; i < n; ++i) {
        const u64 zi = z[i], a0i = a0[i], a1i = a1[i];
        for (std::size_t j = 0; j < tn; ++j) tc[j] += fast_mod(gf_mul(a1i, tx[j], field.gf) ^ a0i, fm) == zi;
      }
      continue;
    }
    count_list_prime(field.prime, fm, z, a0, a1, n, tx, tn, tc);
  }
}

void randomized_response_batch(const RngKey& key, const u64* y, std::size_t begin, std::size_t end, u64 m,
                               u64 flip_threshold, u64* out) {
  for_each_element_rng(key, kStreamRandomizedResponse, begin, end, [&](std::size_t i, ElementRng& rng) {
    out[i] = randomized_response(rng, y[i], m, flip_threshold);
  });
}

}  // namespace

extern const OcmsKernels ocms_kernels = {&hash, &perturb, &count_range, &count_list,
                                         &randomized_response_batch};

}  // namespace LDPFAST_ISA_NS
}  // namespace ldpfast
