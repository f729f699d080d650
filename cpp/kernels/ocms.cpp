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
// vectorized over candidates (64x64-bit products emulated where the ISA lacks them);
// lookup_list hashes the same way and reads each pair's report bit with a scalar load.
// GF(2^l) count_range walks aligned candidate blocks in Gray-code order (see
// count_range_gf). The vector kernels are written once over the 64-bit lanes of
// kernels/lanes64.hpp (1, 4 or 8 lanes). Client kernels draw from ChaCha20 blocks
// computed 16 (AVX-512) or 8 (AVX2) at a time, bit-identical to the scalar generator.
#include "ldpfast/kernels/ocms.hpp"

#include "ldpfast/kernels/lanes64.hpp"

namespace ldpfast {
namespace LDPFAST_ISA_NS {
namespace {

using u64 = std::uint64_t;

using L = U64Lanes;
using Vec = L::Vec;
using TileCounter = L::TallyCounter;  // a tile never sees more than kReportBlock increments
constexpr std::size_t kLanes = L::W;

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

inline u64 prime_value(const PrimeField& f, u64 a0, u64 a1_mont, u64 x) {
  return add_mod(mont_redc(static_cast<u128>(a1_mont) * x, f), a0, f.p);
}

// Per-report constants of one block, padded to a multiple of kGroup with reports that
// never match (z = nullptr: no symbols, for lookup_range).
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
    b.z[i] = z != nullptr ? z[i] : kNever;
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
void lane_start(const RangeBlock& b, std::size_t i, const PrimeField& f, const FastMod& fm, u64 x0, u64* v,
                u64* r) {
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

// v mod m per lane (Barrett with mu = floor(2^64 / m), see FastMod), as an ordered value.
inline Vec fast_mod_ordered(Vec v, Vec m, Vec m_ordered, Vec mu) {
  return L::reduce_once(L::ordered(L::sub(v, L::mullo(L::mulhi(v, mu), m))), m, m_ordered);
}

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

// tile[j] += #{i : h_i(base ^ j) == z[i]} for all j < kTile. Lanes cover the low bits of
// j, the Gray-code walk the others.
void count_block_gf(const BinaryField& f, const FastMod& fm, const u64* z, const u64* a0, const u64* a1,
                    std::size_t n, u64 base, u64* tile) {
  constexpr int kStepBits = kTileBits - __builtin_ctzll(kLanes);
  const Vec m = L::broadcast(fm.m), m_ordered = L::broadcast(L::order(fm.m)), mu = L::broadcast(fm.mu);
  for (std::size_t i = 0; i < n; ++i) {
    u64 lane[kLanes];
    const u64 start = gf_mul(a1[i], base, f) ^ a0[i];
    for (u64 j = 0; j < kLanes; ++j) lane[j] = start ^ gf_mul(a1[i], j, f);
    u64 step[kStepBits];
    for (int b = 0; b < kStepBits; ++b) step[b] = gf_mul(a1[i], u64{kLanes} << b, f);
    const Vec target = L::broadcast(L::order(z[i]));
    Vec v = L::load(lane);  // values at j = kLanes gray(k) + lane
    for (std::size_t k = 0; k < kTile / kLanes; ++k) {
      const auto hit = L::eq(fast_mod_ordered(v, m, m_ordered, mu), target);
      u64* slot = tile + ((k ^ (k >> 1)) * kLanes);
      L::store(slot, L::count_if(hit, L::load(slot)));
      v = L::bit_xor(v, L::broadcast(step[__builtin_ctzll(k + 1) < kStepBits ? __builtin_ctzll(k + 1) : 0]));
    }
  }
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
// The walk of kGroup reports over `steps` vectors of candidates.

// Values and residues are kept ordered (lanes64.hpp): both are compared. Both updates
// follow the no-wrap mask (v < wrap_at); p is the same for every report.
template <bool kLargeM>
void walk_group(const RangeBlock& b, std::size_t g, const u64 (*v0)[kLanes], const u64 (*r0)[kLanes], u64 m,
                u64 p, std::size_t steps, TileCounter* tile) {
  Vec v[kGroup], r[kGroup], wrap_at[kGroup], unwrap[kGroup], dstep[kGroup], dwrap[kGroup], z[kGroup];
  for (std::size_t k = 0; k < kGroup; ++k) {
    const Walk& w = b.lanes[g + k];
    v[k] = L::ordered(L::load(v0[k]));
    r[k] = L::ordered(L::load(r0[k]));
    wrap_at[k] = L::broadcast(L::order(w.wrap_at));
    unwrap[k] = L::broadcast(0 - w.wrap_at);
    dstep[k] = L::broadcast(w.dstep);
    dwrap[k] = L::broadcast(w.dwrap);
    z[k] = L::broadcast(L::order(b.z[g + k]));
  }
  const Vec vm = L::broadcast(m), vm_ordered = L::broadcast(L::order(m)), vp = L::broadcast(p);
  for (std::size_t s = 0; s < steps; ++s) {
    TileCounter* slot = tile + s * kLanes;
    auto hits = L::load_tally(slot);
    for (std::size_t k = 0; k < kGroup; ++k) {
      hits = L::tally_if(L::eq(kLargeM ? L::reduce_once(v[k], vm, vm_ordered) : r[k], z[k]), hits);
      const auto no_wrap = L::lt(v[k], wrap_at[k]);
      if (!kLargeM) r[k] = L::reduce_once(L::add_select(no_wrap, r[k], dstep[k], dwrap[k]), vm, vm_ordered);
      v[k] = L::add_if(no_wrap, L::add(v[k], unwrap[k]), vp);  // v - wrap_at, + p: v + step
    }
    L::store_tally(slot, hits);
  }
}

template <bool kLargeM>
void count_range_prime(const PrimeField& f, const u64* z, const u64* a0, const u64* a1, std::size_t n, u64 m,
                       u64 x_begin, std::size_t x_count, u64* counts) {
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
        walk_group<kLargeM>(block, g, v0, r0, m, f.p, steps, tile);
      }
      for (std::size_t j = 0; j < tn; ++j) counts[t0 + j] += tile[j];
    }
  }
}

// lookup_range, prime field: the walk of walk_group (m <= 2^63), each lane's residue
// indexing its report's row of bits (a scalar load per pair, as in lookup_list_prime).
// live[k] masks out the padding reports of a block (all ones for a report, else 0).
void walk_group_lookup(const RangeBlock& b, std::size_t g, const u64 (*v0)[kLanes], const u64 (*r0)[kLanes],
                       u64 m, u64 p, std::size_t steps, const std::uint8_t* const* rows, const u64* live,
                       u64* tile) {
  Vec v[kGroup], r[kGroup], wrap_at[kGroup], unwrap[kGroup], dstep[kGroup], dwrap[kGroup];
  for (std::size_t k = 0; k < kGroup; ++k) {
    const Walk& w = b.lanes[g + k];
    v[k] = L::ordered(L::load(v0[k]));
    r[k] = L::ordered(L::load(r0[k]));
    wrap_at[k] = L::broadcast(L::order(w.wrap_at));
    unwrap[k] = L::broadcast(0 - w.wrap_at);
    dstep[k] = L::broadcast(w.dstep);
    dwrap[k] = L::broadcast(w.dwrap);
  }
  const Vec vm = L::broadcast(m), vm_ordered = L::broadcast(L::order(m)), vp = L::broadcast(p);
  alignas(64) u64 residue[kGroup][kLanes];
  for (std::size_t s = 0; s < steps; ++s) {
    for (std::size_t k = 0; k < kGroup; ++k) {
      L::store(residue[k], r[k]);
      const auto no_wrap = L::lt(v[k], wrap_at[k]);
      r[k] = L::reduce_once(L::add_select(no_wrap, r[k], dstep[k], dwrap[k]), vm, vm_ordered);
      v[k] = L::add_if(no_wrap, L::add(v[k], unwrap[k]), vp);
    }
    u64* slot = tile + s * kLanes;
    for (std::size_t j = 0; j < kLanes; ++j) {
      u64 sum = slot[j];
      for (std::size_t k = 0; k < kGroup; ++k) sum += rows[k][L::order(residue[k][j])] & live[k];
      slot[j] = sum;
    }
  }
}

void lookup_range_prime(const PrimeField& f, const std::uint8_t* bits, const u64* a0, const u64* a1,
                        std::size_t n, u64 m, u64 x_begin, std::size_t x_count, u64* counts) {
  const FastMod fm = make_fast_mod(m);
  const u64 p_mod_m = fast_mod(f.p, fm);
  RangeBlock block;
  alignas(64) u64 tile[kTile];
  alignas(64) u64 v0[kGroup][kLanes];
  alignas(64) u64 r0[kGroup][kLanes];
  const std::uint8_t* rows[kGroup];
  u64 live[kGroup];
  for (std::size_t rb = 0; rb < n; rb += kReportBlock) {
    const std::size_t nb = n - rb < kReportBlock ? n - rb : kReportBlock;
    prepare_block(block, f, fm, p_mod_m, nullptr, a0 + rb, a1 + rb, nb);
    for (std::size_t t0 = 0; t0 < x_count; t0 += kTile) {
      const std::size_t tn = x_count - t0 < kTile ? x_count - t0 : kTile;
      const std::size_t steps = (tn + kLanes - 1) / kLanes;
      for (std::size_t j = 0; j < steps * kLanes; ++j) tile[j] = 0;
      for (std::size_t g = 0; g < block.count; g += kGroup) {
        for (std::size_t k = 0; k < kGroup; ++k) {
          lane_start<false>(block, g + k, f, fm, x_begin + t0, v0[k], r0[k]);
          const bool report = g + k < nb;  // padding walks report 0's hash, masked out
          rows[k] = bits + (rb + (report ? g + k : 0)) * static_cast<std::size_t>(m);
          live[k] = report ? ~u64{0} : 0;
        }
        walk_group_lookup(block, g, v0, r0, m, f.p, steps, rows, live, tile);
      }
      for (std::size_t j = 0; j < tn; ++j) counts[t0 + j] += tile[j];
    }
  }
}

// ---------------------------------------------------------------------------------------
// Entry points

void hash(const FieldSpec& field, const u64* a0, const u64* a1, const u64* x, std::size_t n, u64 m, u64* out) {
  const FastMod fm = make_fast_mod(m);
  for (std::size_t i = 0; i < n; ++i) out[i] = fast_mod(FieldHasher(field, a0[i], a1[i]).value(x[i]), fm);
}

// Uniform field element: rejection for primes, masking for GF(2^l).
u64 draw_field_element(ElementRng& rng, const FieldSpec& field) {
  if (field.binary) return rng.next_u64() & field.gf.mask;
  return rng.below(field.prime.p);
}

void perturb(const FieldSpec& field, const RngKey& key, const u64* x, std::size_t begin, std::size_t end, u64 m,
             u64 flip_threshold, u64* z, u64* a0, u64* a1) {
  const FastMod fm = make_fast_mod(m);
  for_each_element_rng(key, kStreamOcms, begin, end, [&](std::size_t i, ElementRng& rng) {
    a0[i] = draw_field_element(rng, field);
    a1[i] = draw_field_element(rng, field);
    const u64 y = fast_mod(FieldHasher(field, a0[i], a1[i]).value(x[i]), fm);
    z[i] = randomized_response(rng, y, m, flip_threshold);
  });
}

// The hash of candidate vectors over a prime field, for one report at a time: per pair one
// Montgomery product and one Barrett reduction.
struct PrimeListHash {
  Vec p, pinv, m, m_ordered, mu;

  PrimeListHash(const PrimeField& f, const FastMod& fm)
      : p(L::broadcast(f.p)),
        pinv(L::broadcast(f.pinv)),
        m(L::broadcast(fm.m)),
        m_ordered(L::broadcast(L::order(fm.m))),
        mu(L::broadcast(fm.mu)) {}

  // h(x) per lane, ordered, for the report with a1 in Montgomery form and add_back =
  // order(p - a0) (v + a0 wraps around p iff v >= p - a0).
  Vec residues(Vec x, u64 a1_mont, u64 a0, u64 add_back) const {
    // Montgomery: t = a x, q = t_lo p^-1, v = t_hi - (q p)_hi (+ p on borrow).
    const Vec a = L::broadcast(a1_mont);
    const Vec t_hi = L::mulhi(a, x);
    const Vec qp_hi = L::mulhi(L::mullo(L::mullo(a, x), pinv), p);
    Vec v = L::add_if(L::lt(L::ordered(t_hi), L::ordered(qp_hi)), L::sub(t_hi, qp_hi), p);
    v = L::sub_if(L::ge(L::ordered(v), L::broadcast(add_back)), L::add(v, L::broadcast(a0)), p);
    return fast_mod_ordered(v, m, m_ordered, mu);
  }
};

// Per-report constants of PrimeListHash::residues for reports [0, n).
void prepare_list_reports(const PrimeField& f, const u64* a0, const u64* a1, std::size_t n, u64* a1_mont,
                          u64* add_back) {
  for (std::size_t i = 0; i < n; ++i) {
    a1_mont[i] = to_montgomery(a1[i], f);
    add_back[i] = L::order(f.p - a0[i]);
  }
}

// count_list over one candidate tile, prime field.
void count_list_prime(const PrimeField& f, const FastMod& fm, const u64* z, const u64* a0, const u64* a1,
                      std::size_t n, const u64* xs, std::size_t x_count, u64* counts) {
  constexpr std::size_t kBlock = 256;
  u64 a1_mont[kBlock], add_back[kBlock], target[kBlock];
  const PrimeListHash hasher(f, fm);
  for (std::size_t rb = 0; rb < n; rb += kBlock) {
    const std::size_t nb = n - rb < kBlock ? n - rb : kBlock;
    prepare_list_reports(f, a0 + rb, a1 + rb, nb, a1_mont, add_back);
    for (std::size_t i = 0; i < nb; ++i) target[i] = L::order(z[rb + i]);
    for (std::size_t j = 0; j < x_count; j += kLanes) {
      const auto live = L::first_lanes(x_count - j);
      const Vec x = L::load_masked(xs + j, live);  // dead lanes compute x = 0, never stored
      Vec cnt = L::load_masked(counts + j, live);
      for (std::size_t i = 0; i < nb; ++i) {
        const Vec r = hasher.residues(x, a1_mont[i], a0[rb + i], add_back[i]);
        cnt = L::count_if(L::eq(r, L::broadcast(target[i])), cnt);
      }
      L::store_masked(counts + j, live, cnt);
    }
  }
}

// Rows of report bits a lookup block keeps in cache while every candidate vector visits
// them (at least one row, at most kListBlock reports).
constexpr std::size_t kLookupRowBytes = std::size_t{1} << 17;
constexpr std::size_t kListBlock = 256;

// lookup_list over one candidate tile, prime field: PrimeListHash as in count_list_prime,
// then one scalar byte load per pair (AVX2 has no byte gather, and a wider one could read past the
// last row). Dead lanes hash x = 0: their residue is < m, a valid index, never summed.
void lookup_list_prime(const PrimeField& f, const FastMod& fm, const std::uint8_t* bits, const u64* a0,
                       const u64* a1, std::size_t n, const u64* xs, std::size_t x_count, u64* counts) {
  const std::size_t m = static_cast<std::size_t>(fm.m);
  const std::size_t rows_in_budget = m >= kLookupRowBytes ? 1 : kLookupRowBytes / m;
  const std::size_t block = rows_in_budget < kListBlock ? rows_in_budget : kListBlock;
  u64 a1_mont[kListBlock], add_back[kListBlock];
  alignas(64) u64 residue[kLanes];
  const PrimeListHash hasher(f, fm);
  for (std::size_t rb = 0; rb < n; rb += block) {
    const std::size_t nb = n - rb < block ? n - rb : block;
    prepare_list_reports(f, a0 + rb, a1 + rb, nb, a1_mont, add_back);
    const std::uint8_t* rows = bits + rb * m;
    for (std::size_t j = 0; j < x_count; j += kLanes) {
      const auto live = L::first_lanes(x_count - j);
      const Vec x = L::load_masked(xs + j, live);
      u64 sum[kLanes] = {};
      for (std::size_t i = 0; i < nb; ++i) {
        L::store(residue, hasher.residues(x, a1_mont[i], a0[rb + i], add_back[i]));
        const std::uint8_t* row = rows + i * m;
        for (std::size_t k = 0; k < kLanes; ++k) sum[k] += row[L::order(residue[k])];
      }
      const std::size_t live_count = x_count - j < kLanes ? x_count - j : kLanes;
      for (std::size_t k = 0; k < live_count; ++k) counts[j + k] += sum[k];
    }
  }
}

// Below this many candidates count_range evaluates each pair directly.
constexpr std::size_t kWalkMinCandidates = kLanes > 1 ? 4 * kLanes : 8;

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

void lookup_list(const FieldSpec& field, const std::uint8_t* bits, const u64* a0, const u64* a1, std::size_t n,
                 u64 m, const u64* xs, std::size_t x_count, u64* counts) {
  const FastMod fm = make_fast_mod(m);
  for (std::size_t t0 = 0; t0 < x_count; t0 += kTile) {
    const std::size_t tn = x_count - t0 < kTile ? x_count - t0 : kTile;
    const u64* tx = xs + t0;
    u64* tc = counts + t0;
    if (!field.binary) {
      lookup_list_prime(field.prime, fm, bits, a0, a1, n, tx, tn, tc);
      continue;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint8_t* row = bits + i * static_cast<std::size_t>(m);
      const u64 a0i = a0[i], a1i = a1[i];
      for (std::size_t j = 0; j < tn; ++j) tc[j] += row[fast_mod(gf_mul(a1i, tx[j], field.gf) ^ a0i, fm)];
    }
  }
}

void lookup_range(const FieldSpec& field, const std::uint8_t* bits, const u64* a0, const u64* a1, std::size_t n,
                  u64 m, u64 x_begin, std::size_t x_count, u64* counts) {
  if (n == 0 || x_count == 0) return;
  if (!field.binary && x_count >= kWalkMinCandidates) {
    lookup_range_prime(field.prime, bits, a0, a1, n, m, x_begin, x_count, counts);
    return;
  }
  u64 xs[kTile];  // GF(2^l) and short ranges: the candidates listed, a tile at a time
  for (std::size_t t0 = 0; t0 < x_count; t0 += kTile) {
    const std::size_t tn = x_count - t0 < kTile ? x_count - t0 : kTile;
    for (std::size_t j = 0; j < tn; ++j) xs[j] = x_begin + t0 + j;
    lookup_list(field, bits, a0, a1, n, m, xs, tn, counts + t0);
  }
}

void randomized_response_batch(const RngKey& key, const u64* y, std::size_t begin, std::size_t end, u64 m,
                               u64 flip_threshold, u64* out) {
  for_each_element_rng(key, kStreamRandomizedResponse, begin, end, [&](std::size_t i, ElementRng& rng) {
    out[i] = randomized_response(rng, y[i], m, flip_threshold);
  });
}

}  // namespace

extern const OcmsKernels ocms_kernels = {
    &hash, &perturb, &count_range, &count_list, &lookup_list, &lookup_range, &randomized_response_batch};

}  // namespace LDPFAST_ISA_NS
}  // namespace ldpfast
