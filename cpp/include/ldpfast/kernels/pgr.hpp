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
};

// The canonical vector (length m) of point `index` < P[m] into v[0..m); returns the position
// of its leading 1.
static inline int pgr_point(const PgrGeometry& G, std::uint64_t index, int m, std::uint64_t* v) {
  int len = 1;
  while (index >= G.P[len]) ++len;  // P[len-1] <= index < P[len]
  const int lead = m - len;
  for (int k = 0; k < lead; ++k) v[k] = 0;
  v[lead] = 1;
  std::uint64_t rest = index - G.P[len - 1];
  for (int k = m - 1; k > lead; --k) {
    v[k] = rest % G.q;
    rest /= G.q;
  }
  return lead;
}

// The index of the point spanned by the nonzero vector u[0..m) (any representative).
static inline std::uint64_t pgr_index(const PgrGeometry& G, const std::uint64_t* u, int m) {
  int lead = 0;
  while (u[lead] == 0) ++lead;
  const std::uint64_t scale = G.inverse[u[lead]];
  std::uint64_t num = 0;
  for (int k = lead + 1; k < m; ++k) num = num * G.q + u[k] * scale % G.q;
  return G.P[m - 1 - lead] + num;
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
