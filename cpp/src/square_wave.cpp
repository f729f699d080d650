#include "ldpfast/square_wave.hpp"

#include <cmath>
#include <vector>

#include "ldpfast/parallel.hpp"

namespace ldpfast {

namespace {

// The ChaCha20 stream of the Square Wave client (distinct from the RngStream values).
constexpr std::uint64_t kStreamSquareWave = 0x5357;
constexpr std::size_t kElementChunk = 1 << 14;

// y[j] = far * total + (near - far) * sum of theta[i] over max(0, j - 2 band) <= i <= min(j, d - 1).
void apply_channel(const std::vector<double>& prefix, std::uint64_t d, std::uint64_t band, double near,
                   double far, double* y) {
  const std::uint64_t outputs = d + 2 * band;
  const double total = prefix[d];
  for (std::uint64_t j = 0; j < outputs; ++j) {
    const std::uint64_t low = j > 2 * band ? j - 2 * band : 0;
    const std::uint64_t high = j < d ? j + 1 : d;
    y[j] = far * total + (near - far) * (prefix[high] - prefix[low]);
  }
}

void prefix_sums(const double* v, std::size_t size, std::vector<double>* out) {
  (*out)[0] = 0.0;
  for (std::size_t i = 0; i < size; ++i) (*out)[i + 1] = (*out)[i] + v[i];
}

double log_likelihood(const std::uint64_t* counts, const std::vector<double>& y) {
  double sum = 0.0;
  for (std::size_t j = 0; j < y.size(); ++j)
    if (counts[j]) sum += static_cast<double>(counts[j]) * std::log(y[j]);
  return sum;
}

// sum_j counts[j] log(after[j]/before[j]): near convergence each ratio is 1 + u with |u| < 2^-10,
// where log(1 + u) = u - u^2/2 + u^3/3 - u^4/4 misses at most |u|^5/5 < 2^-52 (a double's
// relative precision) and costs a few multiplications instead of a logarithm.
double log_likelihood_change(const std::uint64_t* counts, const std::vector<double>& before,
                             const std::vector<double>& after) {
  constexpr double kSeries = 1.0 / 1024;
  double sum = 0.0;
  for (std::size_t j = 0; j < after.size(); ++j) {
    if (!counts[j]) continue;
    const double u = (after[j] - before[j]) / before[j];
    const double term =
        std::fabs(u) < kSeries ? u * (1 - u * (0.5 - u * (1.0 / 3 - u * 0.25))) : std::log(after[j] / before[j]);
    sum += static_cast<double>(counts[j]) * term;
  }
  return sum;
}

// [1, 2, 1]/4 inside, [2, 1]/3 and [1, 2]/3 at the edges.
void smooth_binomial(const std::vector<double>& in, double* out) {
  const std::size_t d = in.size();
  if (d == 1) {
    out[0] = in[0];
    return;
  }
  out[0] = (2 * in[0] + in[1]) / 3;
  for (std::size_t i = 1; i + 1 < d; ++i) out[i] = (in[i - 1] + 2 * in[i] + in[i + 1]) / 4;
  out[d - 1] = (in[d - 2] + 2 * in[d - 1]) / 3;
}

}  // namespace

std::size_t square_wave_perturb(const RngKey& key, const std::uint64_t* x, std::size_t n, std::uint64_t d,
                                std::uint64_t band, std::uint64_t flip_threshold, std::uint64_t* out,
                                int threads) {
  for (std::size_t i = 0; i < n; ++i)
    if (x[i] >= d) return i;
  parallel_for_chunks(n, kElementChunk, threads, [&](std::size_t begin, std::size_t end) {
    for_each_element_rng(key, kStreamSquareWave, begin, end, [&](std::size_t i, ElementRng& rng) {
      const std::uint64_t value = x[i];
      const std::uint64_t symbol = randomized_response(rng, value, d, flip_threshold);
      if (symbol == value)
        out[i] = value + rng.below(2 * band + 1);  // inside the band, uniformly
      else
        out[i] = symbol < value ? symbol : symbol + 2 * band;  // one of the d - 1 outputs outside it
    });
  });
  return n;
}

SquareWaveEmResult square_wave_em(const std::uint64_t* counts, std::uint64_t d, std::uint64_t band, double near,
                                  double far, bool smooth, std::size_t max_iterations, double likelihood_tol,
                                  double l1_tol, double* theta) {
  const std::uint64_t outputs = d + 2 * band;
  std::vector<double> current(d, 1.0 / static_cast<double>(d)), next(d), y(outputs), y_next(outputs),
      ratio(outputs);
  std::vector<double> prefix(outputs + 1);
  prefix_sums(current.data(), d, &prefix);
  apply_channel(prefix, d, band, near, far, y.data());
  std::size_t step = 0;
  while (step < max_iterations) {
    interruption_point();
    // M step: theta_i <- theta_i sum_j M[j, i] counts_j / (M theta)_j / n
    for (std::uint64_t j = 0; j < outputs; ++j)
      ratio[j] = counts[j] ? static_cast<double>(counts[j]) / y[j] : 0.0;
    prefix_sums(ratio.data(), outputs, &prefix);
    const double ratio_total = prefix[outputs];
    double mass = 0.0;
    for (std::uint64_t i = 0; i < d; ++i) {
      const double back = far * ratio_total + (near - far) * (prefix[i + 2 * band + 1] - prefix[i]);
      next[i] = current[i] * back;
      mass += next[i];
    }
    for (std::uint64_t i = 0; i < d; ++i) next[i] /= mass;
    if (smooth) {
      smooth_binomial(next, theta);
      double smoothed = 0.0;
      for (std::uint64_t i = 0; i < d; ++i) smoothed += theta[i];
      for (std::uint64_t i = 0; i < d; ++i) next[i] = theta[i] / smoothed;
    }
    double moved = 0.0;
    for (std::uint64_t i = 0; i < d; ++i) moved += std::fabs(next[i] - current[i]);
    current.swap(next);
    ++step;
    prefix_sums(current.data(), d, &prefix);
    apply_channel(prefix, d, band, near, far, y_next.data());
    const double change = std::fabs(log_likelihood_change(counts, y, y_next));
    y.swap(y_next);
    if (moved <= l1_tol || (step > 2 && change < likelihood_tol)) break;
  }
  for (std::uint64_t i = 0; i < d; ++i) theta[i] = current[i];
  return {step, log_likelihood(counts, y)};
}

}  // namespace ldpfast
