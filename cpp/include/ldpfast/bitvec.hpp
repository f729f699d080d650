// Multithreaded entry points of the bit-vector protocols over whole batches (GIL-free,
// plain pointers): column counts, the unary-encoding, memoized, dBitFlip and RAPPOR clients.
// Client outputs depend only on the keys and secrets, never on the thread count.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ldpfast/kernels/bitvec.hpp"
#include "ldpfast/kernels/rappor.hpp"

namespace ldpfast {

// counts[g * k + j] (n_groups * k) and group_n[g] (n_groups) receive the column counts of
// the n rows (they must hold zeros). Returns n when every row was valid, else the first
// invalid row (BitvecKernels::column_counts), and the outputs are then unspecified.
std::size_t bitvec_column_counts(const std::uint8_t* rows, std::size_t row_bytes, std::size_t k,
                                 const std::uint32_t* group, std::size_t n_groups, std::size_t n,
                                 std::uint64_t* counts, std::uint64_t* group_n, int threads);

void unary_perturb(const RngKey& key, const std::uint64_t* hot, std::size_t n, std::size_t k, std::uint64_t t_hot,
                   std::uint64_t t_cold, std::uint8_t* out, int threads);
void memo_unary_perturb(const RngKey& key, const std::uint8_t* secrets, const std::uint64_t* hot, std::size_t n,
                        std::size_t k, std::uint64_t t1_hot, std::uint64_t t1_cold, bool instantaneous,
                        std::uint64_t t2_one, std::uint64_t t2_zero, std::uint8_t* out, int threads);
void bit_response(const RngKey& key, const std::uint8_t* rows, std::size_t k, std::size_t n, std::uint64_t t_one,
                  std::uint64_t t_zero, std::uint8_t* out, int threads);
void memo_grr(const RngKey& key, const std::uint8_t* secrets, const std::uint64_t* x, std::size_t n,
              std::uint64_t m, std::uint64_t t1, bool instantaneous, std::uint64_t t2, std::uint64_t* out,
              int threads);
void dbitflip_perturb(const std::uint8_t* secrets, const std::uint64_t* x, std::size_t n, std::uint64_t b,
                      std::size_t sampled, std::uint64_t t_hot, std::uint64_t t_cold, std::uint32_t* buckets,
                      std::uint8_t* bits, int threads);
void memo_draws(const std::uint8_t* secrets, std::size_t n, std::uint64_t purpose, std::uint64_t bound,
                std::size_t count, std::uint64_t* out, int threads);

void rappor_bloom_positions(int encoding, std::size_t k, std::size_t h, const std::uint8_t* data,
                            const std::int64_t* offsets, const std::uint32_t* cohort, std::size_t n,
                            std::uint32_t* out, int threads);
void rappor_cohorts(int encoding, const std::uint8_t* secrets, std::size_t secret_len, std::size_t n,
                    std::uint32_t m, std::uint32_t* out, int threads);
void rappor_permanent(int encoding, std::size_t k, std::uint32_t f128, const std::uint8_t* secrets,
                      std::size_t secret_len, const std::uint8_t* encoder_id, std::size_t id_len,
                      const std::uint8_t* bloom, std::size_t n, std::uint8_t* out, int threads);

}  // namespace ldpfast

namespace ldpfast {

// Decoding a candidate dictionary from bit counts (RAPPOR's server). The design is a 0/1
// matrix with R rows (cohort x bit) and C columns (candidates) in compressed-column form:
// column i holds rows[col_ptr[i] .. col_ptr[i+1]), distinct and < R.

// Non-negative weighted lasso by cyclic coordinate descent: minimizes
// 1/2 sum_r weight[r] (target[r] - (X beta)_r)^2 + sum_i penalty[i] beta_i over beta >= 0
// (penalty 0: non-negative least squares). Passes over the columns with a nonzero
// coefficient alternate with full passes; it stops after a full pass in which no
// coefficient moves by more than tol / sqrt(sum of its column's weights), or after
// max_passes full passes. beta (C) starts from its given values; returns the full passes.
std::size_t sparse_nn_lasso(const std::int64_t* col_ptr, const std::int32_t* rows, std::size_t C, std::size_t R,
                            const double* target, const double* weight, const double* penalty, double tol,
                            std::size_t max_passes, double* beta);

// Expectation-maximization of the composite likelihood of bit counts: row r counts y[r]
// ones among trials[r] reports, each one with probability
// pi_r = p_zero + (p_one - p_zero) (sum_i f_i X_ri + f_other other_rate), f on the simplex
// over the candidates and an "other" component (other_rate < 0: none). f (C) and
// *f_other start from their given values. EM steps are accelerated by SQUAREM; stops when
// an accepted update changes no f by more than tol, or after max_iter EM steps; returns
// the EM steps run.
std::size_t sparse_bit_em(const std::int64_t* col_ptr, const std::int32_t* rows, std::size_t C, std::size_t R,
                          const double* y, const double* trials, double p_one, double p_zero, double other_rate,
                          double tol, std::size_t max_iter, double* f, double* f_other);

// gram[i * C + i2] = sum_r weight[r] X_ri X_ri2 (dense C x C).
void sparse_gram(const std::int64_t* col_ptr, const std::int32_t* rows, std::size_t C, std::size_t R,
                 const double* weight, double* gram);

}  // namespace ldpfast
