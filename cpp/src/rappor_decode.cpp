// Decoding a candidate dictionary from bit counts (see bitvec.hpp): sequential numerical
// loops over a sparse 0/1 design, with interruption points between passes.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ldpfast/bitvec.hpp"
#include "ldpfast/parallel.hpp"

namespace ldpfast {

std::size_t sparse_nn_lasso(const std::int64_t* col_ptr, const std::int32_t* rows, std::size_t C, std::size_t R,
                            const double* target, const double* weight, const double* penalty, double tol,
                            std::size_t max_passes, double* beta) {
  std::vector<double> residual(target, target + R);
  std::vector<double> scale(C, 0.0);  // sum of the column's weights
  for (std::size_t i = 0; i < C; ++i) {
    for (std::int64_t e = col_ptr[i]; e < col_ptr[i + 1]; ++e) {
      scale[i] += weight[rows[e]];
      residual[rows[e]] -= beta[i];
    }
  }
  // One coordinate step; returns how far beta_i moved, in units of the column's scale.
  auto step = [&](std::size_t i) {
    if (scale[i] <= 0.0) return 0.0;
    double gradient = 0.0;
    for (std::int64_t e = col_ptr[i]; e < col_ptr[i + 1]; ++e) gradient += weight[rows[e]] * residual[rows[e]];
    const double updated = std::max(0.0, beta[i] + (gradient - penalty[i]) / scale[i]);
    const double delta = updated - beta[i];
    if (delta == 0.0) return 0.0;
    for (std::int64_t e = col_ptr[i]; e < col_ptr[i + 1]; ++e) residual[rows[e]] -= delta;
    beta[i] = updated;
    return std::fabs(delta) * std::sqrt(scale[i]);
  };
  std::vector<std::size_t> active;
  std::size_t passes = 0;
  while (passes < max_passes) {
    interruption_point();
    double moved = 0.0;
    for (std::size_t i = 0; i < C; ++i) moved = std::max(moved, step(i));
    ++passes;
    if (moved <= tol) break;
    active.clear();
    for (std::size_t i = 0; i < C; ++i)
      if (beta[i] > 0.0) active.push_back(i);
    for (std::size_t inner = 0; inner < 100 * max_passes; ++inner) {
      double inner_moved = 0.0;
      for (std::size_t i : active) inner_moved = std::max(inner_moved, step(i));
      if (inner_moved <= tol) break;
      if (inner % 64 == 63) interruption_point();
    }
  }
  return passes;
}

std::size_t sparse_bit_em(const std::int64_t* col_ptr, const std::int32_t* rows, std::size_t C, std::size_t R,
                          const double* y, const double* trials, double p_one, double p_zero, double other_rate,
                          double tol, std::size_t max_iter, double* f, double* f_other) {
  const bool with_other = other_rate >= 0.0;
  const double gap = p_one - p_zero;
  const double a_other = p_zero + gap * other_rate;
  double total = 0.0;  // bit observations
  for (std::size_t r = 0; r < R; ++r) total += trials[r];
  std::vector<double> mass(R), diff(R);
  // One EM step on theta = (f_0 .. f_{C-1}, f_other): a one at row r is owed to component i
  // in proportion to f_i a_ri, a zero to f_i (1 - a_ri), with a_ri = p_zero + gap X_ri.
  auto step = [&](const std::vector<double>& in, std::vector<double>& out) {
    std::fill(mass.begin(), mass.end(), with_other ? in[C] * other_rate : 0.0);
    for (std::size_t i = 0; i < C; ++i)
      for (std::int64_t e = col_ptr[i]; e < col_ptr[i + 1]; ++e) mass[rows[e]] += in[i];
    double ones = 0.0, zeros = 0.0, other_share = 0.0;
    for (std::size_t r = 0; r < R; ++r) {
      const double pi = std::min(1.0, std::max(0.0, p_zero + gap * mass[r]));
      const double u = y[r] > 0.0 ? y[r] / pi : 0.0;
      const double v = trials[r] - y[r] > 0.0 ? (trials[r] - y[r]) / (1.0 - pi) : 0.0;
      ones += u;
      zeros += v;
      diff[r] = u - v;
      other_share += u * a_other + v * (1.0 - a_other);
    }
    for (std::size_t i = 0; i < C; ++i) {
      double owed = p_zero * ones + (1.0 - p_zero) * zeros;
      for (std::int64_t e = col_ptr[i]; e < col_ptr[i + 1]; ++e) owed += gap * diff[rows[e]];
      out[i] = in[i] * owed / total;
    }
    out[C] = with_other ? in[C] * other_share / total : 0.0;
  };
  auto log_likelihood = [&](const std::vector<double>& in) {
    std::fill(mass.begin(), mass.end(), with_other ? in[C] * other_rate : 0.0);
    for (std::size_t i = 0; i < C; ++i)
      for (std::int64_t e = col_ptr[i]; e < col_ptr[i + 1]; ++e) mass[rows[e]] += in[i];
    double out = 0.0;
    for (std::size_t r = 0; r < R; ++r) {
      const double pi = std::min(1.0, std::max(0.0, p_zero + gap * mass[r]));
      if (y[r] > 0.0) out += y[r] * std::log(pi);
      if (trials[r] - y[r] > 0.0) out += (trials[r] - y[r]) * std::log1p(-pi);
    }
    return out;
  };
  // SQUAREM (Varadhan and Roland 2008, scheme S3): two EM steps give r and v, the
  // extrapolated point theta0 - 2 a r + a^2 v (a = -|r|/|v|, at most -1) is projected back
  // onto the simplex and stabilized by one EM step; when that lowers the likelihood below
  // the plain second EM step's, the EM step is kept (so the likelihood never decreases).
  // Converged when one accepted update moves no coordinate by more than tol.
  std::vector<double> theta(C + 1), t1(C + 1), t2(C + 1), jump(C + 1), next(C + 1);
  for (std::size_t i = 0; i < C; ++i) theta[i] = f[i];
  theta[C] = with_other ? *f_other : 0.0;
  std::size_t steps = 0;
  while (steps < max_iter) {
    if (steps % 16 < 3) interruption_point();
    step(theta, t1);
    step(t1, t2);
    steps += 2;
    double rr = 0.0, vv = 0.0;
    for (std::size_t i = 0; i <= C; ++i) {
      const double r = t1[i] - theta[i], v = t2[i] - 2.0 * t1[i] + theta[i];
      rr += r * r;
      vv += v * v;
    }
    double alpha = vv > 0.0 ? -std::sqrt(rr / vv) : -1.0;
    if (alpha > -1.0) alpha = -1.0;
    // Step back toward alpha = -1 (the plain second EM step, always feasible) until the
    // extrapolated point keeps every positive coordinate positive: a coordinate projected
    // to 0 could never come back under the multiplicative EM update.
    double sum = 0.0;
    for (int attempt = 0;; ++attempt) {
      bool feasible = true;
      sum = 0.0;
      for (std::size_t i = 0; i <= C; ++i) {
        const double r = t1[i] - theta[i], v = t2[i] - 2.0 * t1[i] + theta[i];
        jump[i] = theta[i] - 2.0 * alpha * r + alpha * alpha * v;
        if (theta[i] > 0.0 && !(jump[i] > 0.0)) feasible = false;
        jump[i] = std::max(0.0, jump[i]);
        sum += jump[i];
      }
      if (feasible || alpha == -1.0) break;
      alpha = attempt < 20 ? (alpha - 1.0) / 2.0 : -1.0;
    }
    bool extrapolated = false;
    if (sum > 0.0 && std::isfinite(sum)) {
      for (double& value : jump) value /= sum;
      step(jump, next);
      ++steps;
      extrapolated = log_likelihood(next) >= log_likelihood(t2);
    }
    if (!extrapolated) next = t2;
    double moved = 0.0;
    for (std::size_t i = 0; i <= C; ++i) moved = std::max(moved, std::fabs(next[i] - theta[i]));
    theta.swap(next);
    if (moved <= tol) break;
  }
  for (std::size_t i = 0; i < C; ++i) f[i] = theta[i];
  if (with_other) *f_other = theta[C];
  return steps;
}

void sparse_gram(const std::int64_t* col_ptr, const std::int32_t* rows, std::size_t C, std::size_t R,
                 const double* weight, double* gram) {
  // Row-major view: the columns that hold each row.
  std::vector<std::int64_t> row_ptr(R + 1, 0);
  for (std::size_t i = 0; i < C; ++i)
    for (std::int64_t e = col_ptr[i]; e < col_ptr[i + 1]; ++e) ++row_ptr[rows[e] + 1];
  for (std::size_t r = 0; r < R; ++r) row_ptr[r + 1] += row_ptr[r];
  std::vector<std::int64_t> fill(row_ptr.begin(), row_ptr.end() - 1);
  std::vector<std::int32_t> cols(static_cast<std::size_t>(row_ptr[R]));
  for (std::size_t i = 0; i < C; ++i)
    for (std::int64_t e = col_ptr[i]; e < col_ptr[i + 1]; ++e)
      cols[fill[rows[e]]++] = static_cast<std::int32_t>(i);
  std::fill(gram, gram + C * C, 0.0);
  for (std::size_t r = 0; r < R; ++r) {
    if (r % 4096 == 0) interruption_point();
    for (std::int64_t a = row_ptr[r]; a < row_ptr[r + 1]; ++a)
      for (std::int64_t b = row_ptr[r]; b < row_ptr[r + 1]; ++b)
        gram[static_cast<std::size_t>(cols[a]) * C + cols[b]] += weight[r];
  }
}

}  // namespace ldpfast
