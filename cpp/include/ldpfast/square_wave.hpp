// The discrete Square Wave mechanism (Li et al., SIGMOD 2020, on a grid): input buckets
// [0, d), output buckets [0, d + 2 band); input i's band is the outputs [i, i + 2 band]. The
// client is k-ary randomized response over [0, d) followed by a uniform position inside the
// band when the value is kept; the server's EM works on the channel's structure (a constant
// plus a band), O(d + band) per step with prefix sums, never a dense matrix.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ldpfast/rng.hpp"

namespace ldpfast {

// out[i] for each x[i] < d. Returns the first i with x[i] >= d (out is then incomplete), or n.
std::size_t square_wave_perturb(const RngKey& key, const std::uint64_t* x, std::size_t n, std::uint64_t d,
                                std::uint64_t band, std::uint64_t flip_threshold, std::uint64_t* out,
                                int threads);

struct SquareWaveEmResult {
  std::size_t iterations;
  double log_likelihood;  // sum_j counts[j] log (M theta)_j at the returned theta
};

// Expectation maximization (smooth: EMS, a [1, 2, 1]/4 binomial smoothing after each M step,
// rows renormalized at the edges) of the input distribution theta[0, d) from the report
// histogram counts[0, d + 2 band) under the channel M[j, i] = near if i <= j <= i + 2 band
// else far. Starts uniform; stops after max_iterations, or when the log-likelihood changes by
// less than likelihood_tol (from the third step on), or when theta moves by at most l1_tol.
SquareWaveEmResult square_wave_em(const std::uint64_t* counts, std::uint64_t d, std::uint64_t band, double near,
                                  double far, bool smooth, std::size_t max_iterations, double likelihood_tol,
                                  double l1_tol, double* theta);

}  // namespace ldpfast
