// OCMS+RR decode by solving h(x) = z over GF(2) (see kernels/ocms_affine.hpp), compiled
// once per ISA (see dispatch.hpp). Integer bit manipulation only: every ISA gives the
// same records and counts.
#include "ldpfast/kernels/ocms_affine.hpp"

#if defined(__BMI2__)
#include "ldpfast/simd.hpp"
#endif

namespace ldpfast {
namespace LDPFAST_ISA_NS {
namespace {

using u64 = std::uint64_t;

constexpr u64 kDone = ~u64{0};  // counter value of a cursor past its last match (u < 2^63)

inline u64 low_mask(int bits) { return bits >= 64 ? ~u64{0} : (u64{1} << bits) - 1; }
inline int top_bit(u64 v) { return 63 - __builtin_clzll(v); }
inline u64 bit(int i) { return u64{1} << i; }

// The bits of v at the positions set in mask, packed (lowest position first).
inline u64 extract_bits(u64 v, u64 mask) {
#if defined(__BMI2__)
  return _pext_u64(v, mask);
#else
  u64 out = 0;
  for (int i = 0; mask; mask &= mask - 1, ++i) out |= ((v >> __builtin_ctzll(mask)) & 1) << i;
  return out;
#endif
}

// a * z in GF(2^l): shift, and reduce the z^l term by the polynomial.
inline u64 times_z(u64 a, const BinaryField& f) {
  const u64 carry = 0 - ((a >> (f.l - 1)) & 1);
  return ((a << 1) & f.mask) ^ (f.poly_low & carry);
}

void prepare_one(const BinaryField& f, int b, int tile_bits, u64 z, u64 a0, u64 a1, u64* rec) {
  const int l = f.l, bb = b < l ? b : l, dim = l - bb;
  for (int w = 0; w < 3 + dim; ++w) rec[w] = 0;
  // (a1 x ^ a0) has no bit at or above l: with b > l a symbol z >= 2^l never matches.
  if (z > low_mask(b) || (bb < b && (z >> l) != 0)) return;  // kAffineEmpty
  const u64 target = (z ^ a0) & low_mask(bb);  // solve low_bb(a1 x) = target
  if (a1 == 0) {
    rec[0] = target == 0 ? kAffineAll : kAffineEmpty;
    return;
  }
  // Row p of the bb x l matrix of x -> low_bb(a1 x): bit j is bit p of a1 z^j.
  u64 image[64], row[64];
  u64 t = a1;
  for (int j = 0; j < l; ++j, t = times_z(t, f)) image[j] = t;
  for (int p = 0; p < bb; ++p) row[p] = 0;
  for (int j = 0; j < l; ++j)  // j outer: the bb row accumulators are independent
    for (int p = 0; p < bb; ++p) row[p] |= ((image[j] >> p) & 1) << j;
  // Reduced row echelon form, pivots taken at the lowest columns first; rhs bit r is the
  // right-hand side of row r. The rank is bb (multiplication by a1 != 0 is invertible).
  u64 rhs = target, pivots = 0;
  int pivot_col[64];
  for (int c = 0, rank = 0; rank < bb; ++c) {
    u64 candidates = 0;  // rows >= rank with bit c
    for (int i = rank; i < bb; ++i) candidates |= ((row[i] >> c) & 1) << i;
    if (!candidates) continue;  // a free column
    const int r = __builtin_ctzll(candidates);
    const u64 swapped = row[r];
    row[r] = row[rank];
    row[rank] = swapped;
    const u64 differ = ((rhs >> r) ^ (rhs >> rank)) & 1;
    rhs ^= (differ << r) | (differ << rank);
    const u64 pivot_rhs = (rhs >> rank) & 1;
    u64 rhs_flips = 0;
    for (int i = 0; i < bb; ++i) {
      const u64 take = (0 - (row[i] >> c & 1)) & (i == rank ? 0 : ~u64{0});
      row[i] ^= swapped & take;
      rhs_flips |= (pivot_rhs & take) << i;
    }
    rhs ^= rhs_flips;
    pivot_col[rank++] = c;
    pivots |= bit(c);
  }
  // A row's bits at free columns lie above its pivot (a free column c had no candidate
  // row left at step c, and later steps only combine such rows), so the kernel vector of
  // free column f, e_f plus the pivots of the rows using f, leads with bit f; no other
  // kernel vector and no particular solution x0 (pivot bits only) sets bit f.
  const u64 free_cols = low_mask(l) & ~pivots;
  u64 kernel[64];
  for (u64 rest = free_cols; rest; rest &= rest - 1) kernel[__builtin_ctzll(rest)] = bit(__builtin_ctzll(rest));
  u64 x0 = 0;
  for (int r = 0; r < bb; ++r) {
    for (u64 uses = row[r] & free_cols; uses; uses &= uses - 1)
      kernel[__builtin_ctzll(uses)] |= bit(pivot_col[r]);
    x0 |= ((rhs >> r) & 1) << pivot_col[r];
  }
  const u64 high_leads = free_cols & ~low_mask(tile_bits);
  int written = 0;
  const u64 groups[2] = {free_cols & low_mask(tile_bits), high_leads};
  for (u64 group : groups) {
    u64 prefix = 0;
    for (; group; group &= group - 1) {
      prefix ^= kernel[__builtin_ctzll(group)];
      rec[3 + written++] = prefix;
    }
  }
  const int n_low = __builtin_popcountll(free_cols & low_mask(tile_bits));
  rec[0] = kAffineSubspace | static_cast<u64>(n_low) << 8;
  rec[1] = x0;
  rec[2] = high_leads;
}

void prepare(const BinaryField& field, int b, int tile_bits, const u64* z, const u64* a0, const u64* a1,
             std::size_t n, u64* records) {
  const std::size_t stride = affine_record_words(field.l, b);
  for (std::size_t i = 0; i < n; ++i) prepare_one(field, b, tile_bits, z[i], a0[i], a1[i], records + i * stride);
}

// The element of counter value u over the high vectors (low coefficients 0): flipping
// bit i of u's Gray code flips prefix P_i.
inline u64 element_at(u64 x0, const u64* prefix, u64 u) {
  u64 x = x0;
  for (u64 g = u ^ (u >> 1); g; g &= g - 1) x ^= prefix[__builtin_ctzll(g)];
  return x;
}

// The smallest counter u whose element lies in tile `tile` or later (tile index = x >> k).
// Leading bits of the high vectors are copied verbatim into the element, so u* (the
// tile's bits at those positions) agrees with the tile there; at the highest differing
// bit p (not a leading bit) every u sharing u*'s coefficients above p is on the same side
// of the tile, so u is u* with the lower coefficients cleared, or the next such prefix.
bool seek(const u64* rec, int tile_bits, int n_high, u64 tile, u64* x_out, u64* u_out) {
  const u64* prefix = rec + 3 + (rec[0] >> 8);
  const u64 leads = rec[2] >> tile_bits;
  const u64 u_star = extract_bits(tile, leads);
  const u64 at = element_at(rec[1], prefix, u_star) >> tile_bits;
  u64 u = u_star;
  if (at != tile) {
    const int p = top_bit(at ^ tile);
    const int below = __builtin_popcountll(leads & low_mask(p));
    u64 upper = u_star >> below;
    if (!(at >> p & 1)) {
      ++upper;
      if (upper >> (n_high - below)) return false;
    }
    u = upper << below;
  }
  *u_out = u;
  *x_out = element_at(rec[1], prefix, u);
  return true;
}

// Adds 1 at every element of x ^ span(low) (relative to `origin`), in increasing order:
// a binary counter over the low vectors, `low` holding their prefix XORs. The first three
// coefficients are unrolled (their span is a few nearby offsets). `checked` drops
// elements outside [0, x_count).
template <bool checked>
inline void add_coset(u64 x, const u64* low, int n_low, u64* counts, u64 origin, std::size_t x_count) {
  const auto add = [&](u64 y) {
    const u64 off = y - origin;
    if (!checked || off < x_count) ++counts[off];
  };
  if (n_low < 3) {
    add(x);
    for (u64 j = 1; j < (u64{1} << n_low); ++j) add(x ^= low[__builtin_ctzll(j)]);
    return;
  }
  u64 span[8];
  for (u64 j = 0; j < 8; ++j) span[j] = element_at(0, low, j);
  const u64 outer = u64{1} << (n_low - 3);
  for (u64 j = 1;; ++j) {
    for (int s = 0; s < 8; ++s) add(x ^ span[s]);
    if (j == outer) break;
    x ^= low[3 + __builtin_ctzll(j)];
  }
}

void count(const u64* records, std::size_t n, int l, int b, int tile_bits, u64 x_begin, std::size_t x_count,
           u64* counts, u64* cursors) {
  if (n == 0 || x_count == 0) return;
  const std::size_t stride = affine_record_words(l, b);
  const std::size_t block = kAffineCursorBlock;
  const u64 x_last = x_begin + (x_count - 1);
  const u64 first_tile = x_begin >> tile_bits, last_tile = x_last >> tile_bits;
  u64* const cursor_x = cursors;
  u64* const cursor_u = cursors + block;
  for (std::size_t rb = 0; rb < n; rb += block) {
    const std::size_t nb = n - rb < block ? n - rb : block;
    const u64* recs = records + rb * stride;
    for (std::size_t i = 0; i < nb; ++i) {
      const u64* rec = recs + i * stride;
      cursor_x[i] = 0;
      cursor_u[i] = kDone;
      if ((rec[0] & 0xFF) == kAffineAll) {
        for (std::size_t j = 0; j < x_count; ++j) ++counts[j];
      } else if ((rec[0] & 0xFF) == kAffineSubspace) {
        const int n_high = __builtin_popcountll(rec[2]);
        u64 x, u;
        if (seek(rec, tile_bits, n_high, first_tile, &x, &u)) {
          cursor_x[i] = x;
          cursor_u[i] = u;
        }
      }
    }
    for (u64 tile = first_tile; tile <= last_tile; ++tile) {
      const u64 tile_lo = tile << tile_bits;
      const bool whole = tile_lo >= x_begin && x_last - tile_lo >= low_mask(tile_bits);
      for (std::size_t i = 0; i < nb; ++i) {
        const u64 x = cursor_x[i];
        if (cursor_u[i] == kDone || (x >> tile_bits) != tile) continue;
        const u64* rec = recs + i * stride;
        const int n_low = static_cast<int>(rec[0] >> 8);
        if (whole) {
          add_coset<false>(x, rec + 3, n_low, counts, x_begin, x_count);
        } else {
          add_coset<true>(x, rec + 3, n_low, counts, x_begin, x_count);
        }
        const u64 u = cursor_u[i] + 1;
        const int n_high = __builtin_popcountll(rec[2]);
        if (u >> n_high) {
          cursor_u[i] = kDone;
        } else {
          cursor_u[i] = u;
          cursor_x[i] = x ^ rec[3 + n_low + __builtin_ctzll(u)];
        }
      }
      if (tile == last_tile) break;  // last_tile may be the largest u64 value
    }
  }
}

}  // namespace

extern const OcmsAffineKernels ocms_affine_kernels = {&prepare, &count};

}  // namespace LDPFAST_ISA_NS
}  // namespace ldpfast
