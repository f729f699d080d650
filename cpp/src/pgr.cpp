#include "ldpfast/pgr.hpp"

#include <algorithm>
#include <vector>

#include "ldpfast/kernels/pgr.hpp"
#include "ldpfast/parallel.hpp"

namespace ldpfast {

namespace {

constexpr std::size_t kClientChunk = 1 << 12;           // users per client task
constexpr std::size_t kWorkPerTask = std::size_t{1} << 20;  // additions per decoder task

bool is_prime(std::uint64_t q) {
  if (q < 2) return false;
  for (std::uint64_t f = 2; f * f <= q; ++f)
    if (q % f == 0) return false;
  return true;
}

std::uint64_t inverse_of(const PgrGeometry& G, std::uint64_t g) {
  return G.inverse ? G.inverse[g] : pgr_inverse_mod(g, G.q);
}

// The dynamic program. f_l[alpha][beta][z] (level l = 0..t) is the number of reports u whose
// first l coordinates are the prefix alpha (0: the zero prefix, 1 + i: the canonical prefix
// of index i) and whose remaining t - l coordinates s have <s, b> = z, where b is the
// canonical suffix of index beta (length m = t - l) of a point x. Then out[x] = f_0[x][0],
// f_t holds the report histogram, and f_l follows from f_{l+1} by splitting b = (b0, b'):
//   b = (0, c):      f_l[alpha][c][z]           = sum_d f_{l+1}[alpha d][c][z]
//   b = (1, 0):      f_l[alpha][P[m-1]][z]      = mass_{l+1}[alpha z]
//   b = (1, g c):    f_l[alpha][P[m-1] + num(g c)][z] = sum_d f_{l+1}[alpha d][c][(z - d)/g]
// (alpha d: the prefix alpha extended by the digit d; mass: the reports with that prefix).
// Both prefixes and suffixes are projective, so each level holds about K q/(q - 1) entries
// and costs about q^t additions (the kernel's level32/level64).
template <class C>
class Decoder {
 public:
  Decoder(const PgrGeometry& G, int threads)
      : G_(G), threads_(threads), mass_(static_cast<std::size_t>(G.t) + 1) {}

  void run(const std::uint64_t* counts, std::uint64_t* out) {
    const int t = G_.t;
    const std::uint64_t q = G_.q;
    // masses of every prefix, from the histogram up
    mass_[t].assign(G_.P[t] + 1, 0);
    std::copy(counts, counts + G_.P[t], mass_[t].begin() + 1);
    for (int l = t - 1; l >= 1; --l) {
      mass_[l].assign(G_.P[l] + 1, 0);
      const std::vector<C>& below = mass_[l + 1];
      mass_[l][0] = below[0] + below[1];
      for (std::uint64_t alpha = 1; alpha <= G_.P[l]; ++alpha) {
        C sum = 0;
        for (std::uint64_t d = 0; d < q; ++d) sum += below[q * (alpha - 1) + 2 + d];
        mass_[l][alpha] = sum;
      }
    }
    std::size_t size = 0;
    for (int l = 1; l < t; ++l) size = std::max<std::size_t>(size, (G_.P[l] + 1) * G_.P[t - l] * q);
    std::vector<C> prev(size), next(size);
    fill_plain_suffix(t - 1, next.data());
    for (int l = t - 2; l >= 1; --l) {
      prev.swap(next);
      const int m = t - l;
      const std::size_t pairs = (G_.P[l] + 1) * G_.P[m - 1];
      const std::size_t per_task = std::max<std::size_t>(1, kWorkPerTask / (q * q * q));
      const C* src = prev.data();
      C* dst = next.data();
      parallel_for(ceil_div(pairs, per_task), threads_, [&](std::size_t task) {
        std::vector<C> scratch(q);
        const std::size_t begin = task * per_task, end = std::min(pairs, begin + per_task);
        run_level(l, src, dst, begin, end, scratch.data());
      });
      fill_plain_suffix(l, dst);
    }
    final_level(next.data(), out);
  }

 private:
  void run_level(int l, const C* src, C* dst, std::size_t begin, std::size_t end, C* scratch) const;

  // f_l[alpha][P[m-1]][z] = mass_{l+1}[alpha z] (b = (1, 0, ..., 0)).
  void fill_plain_suffix(int l, C* f) const {
    const std::uint64_t q = G_.q;
    const int m = G_.t - l;
    const std::vector<C>& below = mass_[l + 1];
    const std::uint64_t prefixes = G_.P[l] + 1;
    parallel_for_chunks(prefixes, std::max<std::size_t>(1, kWorkPerTask / q), threads_,
                        [&](std::size_t begin, std::size_t end) {
                          for (std::uint64_t alpha = begin; alpha < end; ++alpha) {
                            C* row = f + (alpha * G_.P[m] + G_.P[m - 1]) * q;
                            for (std::uint64_t z = 0; z < q; ++z)
                              row[z] = alpha == 0 ? (z < 2 ? below[z] : 0) : below[q * (alpha - 1) + 2 + z];
                          }
                        });
  }

  // Level 0: only z = 0 and the zero prefix (children: 0 and the first canonical prefix).
  void final_level(const C* f1, std::uint64_t* out) const {
    const std::uint64_t q = G_.q, rows = G_.P[G_.t - 1];
    const int m = G_.t;
    out[rows] = mass_[1][0];
    parallel_for_chunks(rows, std::max<std::size_t>(1, kWorkPerTask / (q * static_cast<std::uint64_t>(m))),
                        threads_, [&](std::size_t begin, std::size_t end) {
                          std::uint64_t c_digits[kPgrMaxT], gc_digits[kPgrMaxT];
                          for (std::uint64_t c = begin; c < end; ++c) {
                            const C* zero_row = f1 + c * q;
                            const C* one_row = f1 + (rows + c) * q;
                            out[c] = static_cast<std::uint64_t>(zero_row[0]) + one_row[0];
                            pgr_point(G_, c, m - 1, c_digits);
                            std::fill(gc_digits, gc_digits + m - 1, 0);
                            for (std::uint64_t g = 1; g < q; ++g) {
                              const std::uint64_t num = pgr_next_multiple(G_, c_digits, gc_digits, m - 1);
                              // z = 0: d = 0 reads row 0 at 0, d = 1 reads row 1 at -1/g
                              out[rows + num] =
                                  static_cast<std::uint64_t>(zero_row[0]) + one_row[q - inverse_of(G_, g)];
                            }
                          }
                        });
  }

  const PgrGeometry& G_;
  int threads_;
  std::vector<std::vector<C>> mass_;
};

template <>
void Decoder<std::uint32_t>::run_level(int l, const std::uint32_t* src, std::uint32_t* dst, std::size_t begin,
                                       std::size_t end, std::uint32_t* scratch) const {
  pgr_kernels_active().level32(G_, l, src, dst, begin, end, scratch);
}

template <>
void Decoder<std::uint64_t>::run_level(int l, const std::uint64_t* src, std::uint64_t* dst, std::size_t begin,
                                       std::size_t end, std::uint64_t* scratch) const {
  pgr_kernels_active().level64(G_, l, src, dst, begin, end, scratch);
}

}  // namespace

std::string pgr_geometry(std::uint64_t q, int t, std::vector<std::uint32_t>* inverse, PgrGeometry* out) {
  if (q >= (std::uint64_t{1} << 32) || !is_prime(q))
    return "q must be a prime below 2^32, got " + std::to_string(q);
  if (t < 2 || t > kPgrMaxT)
    return "t must be in [2, " + std::to_string(kPgrMaxT) + "], got " + std::to_string(t);
  PgrGeometry G{};
  G.q = q;
  G.t = t;
  G.P[0] = 0;
  G.qpow[0] = 1;
  for (int m = 1; m <= t; ++m) {
    G.P[m] = G.P[m - 1] * q + 1;
    G.qpow[m] = G.qpow[m - 1] * q;
    if (G.P[m] >= (std::uint64_t{1} << 32))
      return "the number of points (q^t - 1)/(q - 1) must be below 2^32 (q = " + std::to_string(q) +
             ", t = " + std::to_string(t) + ")";
  }
  G.magic = ~std::uint64_t{0} / q + 1;
  inverse->clear();
  if (q < (std::uint64_t{1} << 16)) {  // the client's small-field path and the decoder (t >= 3: q < 2^16)
    inverse->assign(q, 0);
    for (std::uint64_t g = 1; g < q; ++g) (*inverse)[g] = static_cast<std::uint32_t>(pgr_inverse_mod(g, q));
    G.inverse = inverse->data();
  } else {
    G.inverse = nullptr;
  }
  *out = G;
  return std::string();
}

std::size_t pgr_perturb(const PgrGeometry& G, const RngKey& key, const std::uint64_t* x, std::size_t n,
                        std::uint64_t in_threshold, std::uint32_t* y, int threads) {
  const std::size_t chunks = ceil_div(n, kClientChunk);
  std::vector<std::size_t> bad(chunks, n);
  const auto& perturb = pgr_kernels_active().perturb;
  parallel_for(chunks, threads, [&](std::size_t c) {
    const std::size_t begin = c * kClientChunk, end = std::min(n, begin + kClientChunk);
    const std::size_t first = perturb(G, key, x, begin, end, in_threshold, y);
    if (first < end) bad[c] = first;
  });
  return chunks ? *std::min_element(bad.begin(), bad.end()) : n;
}

std::size_t pgr_update(const std::uint32_t* y, std::size_t n, std::uint64_t K, std::uint64_t* counts,
                       int threads) {
  // Partial histograms only when the batch is large next to K: memory stays O(batch).
  const std::size_t workers = std::min<std::size_t>(static_cast<std::size_t>(resolve_threads(threads)),
                                                    n / std::max<std::uint64_t>(K, 1 << 16));
  if (workers <= 1) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t v = y[i];  // read once
      if (v >= K) return i;
      ++counts[v];
      if ((i & 0xFFFFF) == 0xFFFFF) interruption_point();
    }
    return n;
  }
  const std::size_t ranges = std::max<std::size_t>(workers, ceil_div(n, std::size_t{1} << 31));
  const std::size_t per_range = ceil_div(n, ranges);
  std::vector<std::vector<std::uint32_t>> partial(ranges);
  std::vector<std::size_t> bad(ranges, n);
  parallel_for(ranges, static_cast<int>(workers), [&](std::size_t r) {
    partial[r].assign(K, 0);
    std::uint32_t* h = partial[r].data();
    const std::size_t end = std::min(n, (r + 1) * per_range);
    for (std::size_t i = r * per_range; i < end; ++i) {
      const std::uint32_t v = y[i];
      if (v >= K) {
        bad[r] = i;
        return;
      }
      ++h[v];
    }
  });
  const std::size_t first = *std::min_element(bad.begin(), bad.end());
  if (first < n) return first;
  parallel_for_chunks(K, 1 << 16, static_cast<int>(workers), [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = 0; r < ranges; ++r)
      for (std::size_t v = begin; v < end; ++v) counts[v] += partial[r][v];
  });
  return n;
}

void pgr_decode(const PgrGeometry& G, const std::uint64_t* counts, std::uint64_t* out, int threads) {
  std::uint64_t total = 0;
  for (std::uint64_t y = 0; y < G.P[G.t]; ++y) total += counts[y];
  if (total < (std::uint64_t{1} << 32)) {
    Decoder<std::uint32_t>(G, threads).run(counts, out);
  } else {
    Decoder<std::uint64_t>(G, threads).run(counts, out);
  }
}

}  // namespace ldpfast
