// Projective Geometry Response kernels, compiled once per ISA (see dispatch.hpp): the client
// and the inner level of the decoder (integer sums: every ISA gives the same bits).
#include "ldpfast/kernels/pgr.hpp"

namespace ldpfast {
namespace LDPFAST_ISA_NS {
namespace {

// q < 2^16: the free coordinates come from draws below q^b < 2^32 (b digits each) and every
// product of two coordinates stays below 2^32.
std::uint64_t perturb_small_field(const PgrGeometry& G, ElementRng& rng, std::uint64_t value, bool on,
                                  int block) {
  const std::uint64_t q = G.q;
  const int t = G.t;
  std::uint64_t v[kPgrMaxT], u[kPgrMaxT];
  const int lead = pgr_point(G, value, t, v);
  // A uniform vector u with <u, v> = c: the coordinates other than v's leading 1 uniform,
  // then u[lead] = c - <rest of u, rest of v>. c = 0 with u != 0 is a uniform point on the
  // hyperplane of x (each point has q - 1 such representatives), c uniform in [1, q) a
  // uniform point off it.
  const std::uint64_t c = on ? 0 : 1 + rng.below(q - 1);
  std::uint64_t nonzero;
  do {
    nonzero = 0;
    int k = t - 1;
    while (k >= 0) {
      std::uint64_t r = rng.below(G.qpow[block]);
      for (int j = 0; j < block && k >= 0; --k) {
        if (k == lead) continue;
        r = pgr_divide(G, r, &u[k]);
        nonzero |= u[k];
        ++j;
      }
    }
  } while (on && nonzero == 0);
  std::uint64_t dot = 0;
  for (int k = lead + 1; k < t; ++k) dot += u[k] * v[k];
  dot %= q;
  u[lead] = c >= dot ? c - dot : c + q - dot;
  return pgr_index(G, u, t);
}

// q >= 2^16: then t = 2 (the points fit in 32 bits), a point is (0, 1) or (1, a).
std::uint64_t perturb_line(const PgrGeometry& G, ElementRng& rng, std::uint64_t value, bool on) {
  const std::uint64_t q = G.q;
  const std::uint64_t c = on ? 0 : 1 + rng.below(q - 1);
  const std::uint64_t r = on ? 1 + rng.below(q - 1) : rng.below(q);  // the free coordinate
  std::uint64_t u0, u1;
  if (value == 0) {  // x = (0, 1): u = (r, c)
    u0 = r;
    u1 = c;
  } else {  // x = (1, a): u = (c - r a, r)
    const std::uint64_t ra = static_cast<std::uint64_t>(static_cast<unsigned __int128>(r) * (value - 1) % q);
    u0 = c >= ra ? c - ra : c + q - ra;
    u1 = r;
  }
  if (u0 == 0) return 0;
  return 1 + static_cast<std::uint64_t>(static_cast<unsigned __int128>(u1) * pgr_inverse_mod(u0, q) % q);
}

std::size_t perturb(const PgrGeometry& G, const RngKey& key, const std::uint64_t* x, std::size_t begin,
                    std::size_t end, std::uint64_t in_threshold, std::uint32_t* y) {
  const std::uint64_t K = G.P[G.t];
  int block = 1;  // digits per draw: q^block < 2^32
  while (block < G.t - 1 && G.qpow[block + 1] < (std::uint64_t{1} << 32)) ++block;
  std::size_t bad = end;
  for_each_element_rng(key, kStreamPgr, begin, end, [&](std::size_t i, ElementRng& rng) {
    const std::uint64_t value = x[i];  // read once
    if (value >= K) {
      if (bad == end) bad = i;
      return;
    }
    const bool on = rng.bernoulli(in_threshold);
    const std::uint64_t point =
        G.inverse ? perturb_small_field(G, rng, value, on, block) : perturb_line(G, rng, value, on);
    y[i] = static_cast<std::uint32_t>(point);
  });
  return bad;
}

// acc[z] += row[(z - shift) mod q] for z < q.
template <class C>
inline void rotate_add(C* acc, const C* row, std::uint64_t shift, std::uint64_t q) {
  const std::uint64_t head = q - shift;
  for (std::uint64_t z = 0; z < head; ++z) acc[shift + z] += row[z];
  for (std::uint64_t z = 0; z < shift; ++z) acc[z] += row[head + z];
}

// Level l of the dynamic program (cpp/src/pgr.cpp): for a prefix alpha of the reports (length
// l) and a canonical c of length m - 1, the q rows prev[child d of alpha][c][.] give
//   next[alpha][c][z]                 = sum_d row_d[z]                  (suffix (0, c))
//   next[alpha][P[m-1] + num(g c)][z] = sum_d row_d[(z - d) / g]        (suffix (1, g c))
// for g in [1, q). With z = g z' and d = g e the second is sum_e row_{g e}[z' - e]: each
// child's row is added rotated by e = d / g, then the sums are written out at z = g z'.
template <class C>
void level(const PgrGeometry& G, int l, const C* prev, C* next, std::size_t begin, std::size_t end, C* acc) {
  const std::uint64_t q = G.q;
  const int m = G.t - l;
  const std::uint64_t rows_per_prefix = G.P[m - 1], points = G.P[m];
  const std::size_t stride = rows_per_prefix * q;
  std::uint64_t c_digits[kPgrMaxT], gc_digits[kPgrMaxT];
  for (std::size_t pair = begin; pair < end; ++pair) {
    const std::uint64_t alpha = pair / rows_per_prefix, c = pair % rows_per_prefix;
    // the zero prefix extends only by 0 and 1; a canonical one by any digit
    const std::uint64_t children = alpha == 0 ? 2 : q;
    const C* rows = prev + ((alpha == 0 ? 0 : q * (alpha - 1) + 2) * rows_per_prefix + c) * q;
    C* out = next + alpha * points * q;
    C* plain = out + c * q;
    for (std::uint64_t z = 0; z < q; ++z) plain[z] = rows[z];
    for (std::uint64_t d = 1; d < children; ++d)
      for (std::uint64_t z = 0; z < q; ++z) plain[z] += rows[d * stride + z];
    pgr_point(G, c, m - 1, c_digits);
    for (int k = 0; k < m - 1; ++k) gc_digits[k] = 0;
    for (std::uint64_t g = 1; g < q; ++g) {
      const std::uint64_t num = pgr_next_multiple(G, c_digits, gc_digits, m - 1);
      const std::uint64_t ginv = G.inverse[g];
      for (std::uint64_t z = 0; z < q; ++z) acc[z] = 0;
      std::uint64_t shift = 0;
      for (std::uint64_t d = 0; d < children; ++d) {
        rotate_add(acc, rows + d * stride, shift, q);
        shift += ginv;
        if (shift >= q) shift -= q;
      }
      C* o = out + (rows_per_prefix + num) * q;
      std::uint64_t at = 0;
      for (std::uint64_t z = 0; z < q; ++z) {
        o[at] = acc[z];
        at += g;
        if (at >= q) at -= q;
      }
    }
  }
}

void level32(const PgrGeometry& G, int l, const std::uint32_t* prev, std::uint32_t* next, std::size_t begin,
             std::size_t end, std::uint32_t* scratch) {
  level(G, l, prev, next, begin, end, scratch);
}

void level64(const PgrGeometry& G, int l, const std::uint64_t* prev, std::uint64_t* next, std::size_t begin,
             std::size_t end, std::uint64_t* scratch) {
  level(G, l, prev, next, begin, end, scratch);
}

}  // namespace

extern const PgrKernels pgr_kernels = {&perturb, &level32, &level64};

}  // namespace LDPFAST_ISA_NS
}  // namespace ldpfast
