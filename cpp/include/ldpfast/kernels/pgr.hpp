// Kernel table of Projective Geometry Response (Feldman, Nelson, Nguyen, Talwar, ICML 2022).
//
// The domain is the projective space PG(t-1, q): the K = (q^t - 1)/(q - 1) lines through
// the origin of F_q^t (q prime), each named by its canonical vector (first nonzero
// coordinate 1). Index of a canonical vector v of length m: idx(1, r) = P[m-1] + num(r),
// idx(0, c) = idx(c), where P[m] = (q^m - 1)/(q - 1) and num(r) reads r as a big-endian
// base-q number; so the children of a prefix of index i are q i + 1 + d (contiguous).
// A report is a point y; it "supports" x when <x, y> = 0 (y on the hyperplane of x).
#pragma once
#include <cstddef>
#include <cstdint>

#include "ldpfast/dispatch.hpp"
#include "ldpfast/rng.hpp"

namespace ldpfast {

constexpr int kPgrMaxT = 40;

struct PgrGeometry {
  std::uint64_t q;
  int t;
  std::uint64_t P[kPgrMaxT + 1];       // P[m] = (q^m - 1)/(q - 1)
  std::uint64_t qpow[kPgrMaxT + 1];    // q^m
  const std::uint32_t* inverse;        // inverse[g] * g = 1 mod q for g in [1, q)
  std::uint64_t magic;                 // floor((2^64 - 1)/q) + 1: pgr_divide's reciprocal
};

// a / q and a % q for a < 2^32 by a multiplication (Lemire, Kaser and Kurz 2019: exact for
// every 32-bit a and q).
static inline std::uint64_t pgr_divide(const PgrGeometry& G, std::uint64_t a, std::uint64_t* remainder) {
  const std::uint64_t quotient = static_cast<std::uint64_t>((static_cast<unsigned __int128>(G.magic) * a) >> 64);
  *remainder = a - quotient * G.q;
  return quotient;
}

// g^-1 mod q for 0 < g < q (extended Euclid).
static inline std::uint64_t pgr_inverse_mod(std::uint64_t g, std::uint64_t q) {
  std::int64_t r0 = static_cast<std::int64_t>(q), r1 = static_cast<std::int64_t>(g), s0 = 0, s1 = 1;
  while (r1 != 0) {
    const std::int64_t k = r0 / r1;
    std::int64_t tmp = r0 - k * r1;
    r0 = r1;
    r1 = tmp;
    tmp = s0 - k * s1;
    s0 = s1;
    s1 = tmp;
  }
  return static_cast<std::uint64_t>(s0 < 0 ? s0 + static_cast<std::int64_t>(q) : s0);
}

// The canonical vector (length m) of point `index` < P[m] into v[0..m); returns the position
// of its leading 1.
static inline int pgr_point(const PgrGeometry& G, std::uint64_t index, int m, std::uint64_t* v) {
  int len = 1;
  while (index >= G.P[len]) ++len;  // P[len-1] <= index < P[len]
  const int lead = m - len;
  for (int k = 0; k < lead; ++k) v[k] = 0;
  v[lead] = 1;
  std::uint64_t rest = index - G.P[len - 1];  // < 2^32
  for (int k = m - 1; k > lead; --k) rest = pgr_divide(G, rest, &v[k]);
  return lead;
}

// The index of the point spanned by the nonzero vector u[0..m) (any representative; q < 2^16,
// so that the products stay below 2^32).
static inline std::uint64_t pgr_index(const PgrGeometry& G, const std::uint64_t* u, int m) {
  int lead = 0;
  while (u[lead] == 0) ++lead;
  const std::uint64_t scale = G.inverse[u[lead]];
  std::uint64_t num = 0, digit;
  for (int k = lead + 1; k < m; ++k) {
    pgr_divide(G, u[k] * scale, &digit);
    num = num * G.q + digit;
  }
  return G.P[m - 1 - lead] + num;
}

// Advances scaled[0..len) (the digits of g c) to those of (g + 1) c given c's digits, and
// returns num((g + 1) c): enumerating g = 1, 2, ... q - 1 from scaled = 0 yields every
// nonzero multiple of c.
static inline std::uint64_t pgr_next_multiple(const PgrGeometry& G, const std::uint64_t* digits,
                                              std::uint64_t* scaled, int len) {
  std::uint64_t num = 0;
  for (int k = 0; k < len; ++k) {
    scaled[k] += digits[k];
    if (scaled[k] >= G.q) scaled[k] -= G.q;
    num = num * G.q + scaled[k];
  }
  return num;
}

struct PgrKernels {
  // Client reports of users [begin, end): y[i] is a uniform point on the hyperplane of x[i]
  // with probability in_threshold / 2^64, else a uniform point off it. Returns the first
  // user whose value is not a point (>= P[t]), or end.
  std::size_t (*perturb)(const PgrGeometry& G, const RngKey& key, const std::uint64_t* x, std::size_t begin,
                         std::size_t end, std::uint64_t in_threshold, std::uint32_t* y);
  // One level l (1 <= l <= t-2) of the decoder's dynamic program over the pairs [begin, end)
  // of (alpha, c) = (pair / P[m-1], pair % P[m-1]), m = t - l (see cpp/src/pgr.cpp).
  // scratch: q counters owned by the calling task.
  void (*level32)(const PgrGeometry& G, int l, const std::uint32_t* prev, std::uint32_t* next, std::size_t begin,
                  std::size_t end, std::uint32_t* scratch);
  void (*level64)(const PgrGeometry& G, int l, const std::uint64_t* prev, std::uint64_t* next, std::size_t begin,
                  std::size_t end, std::uint64_t* scratch);
};

}  // namespace ldpfast

LDPFAST_DECLARE_ISA_TABLE(PgrKernels, pgr_kernels)
