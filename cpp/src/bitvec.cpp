#include "ldpfast/bitvec.hpp"

#include <algorithm>
#include <vector>

#include "ldpfast/parallel.hpp"

namespace ldpfast {

namespace {
constexpr std::size_t kClientChunk = 1 << 12;              // users per client task
constexpr std::size_t kBytesPerPiece = std::size_t{1} << 24;  // row bytes counted between interruption points
constexpr std::size_t kMinRowsPerWorker = std::size_t{1} << 15;

// Rows per piece of work, and how many workers a batch is worth: each worker owns a
// private count table (n_groups * k words, reduced at the end), so a worker needs enough
// rows to pay for it.
std::size_t rows_per_piece(std::size_t row_bytes) { return std::max<std::size_t>(1, kBytesPerPiece / row_bytes); }

std::size_t count_workers(std::size_t n, std::size_t cells, int threads) {
  const std::size_t per_worker = std::max(kMinRowsPerWorker, cells / 4);
  return std::max<std::size_t>(
      1, std::min<std::size_t>(static_cast<std::size_t>(resolve_threads(threads)), n / per_worker));
}
}  // namespace

std::size_t bitvec_column_counts(const std::uint8_t* rows, std::size_t row_bytes, std::size_t k,
                                 const std::uint32_t* group, std::size_t n_groups, std::size_t n,
                                 std::uint64_t* counts, std::uint64_t* group_n, int threads) {
  const auto& kern = bitvec_kernels_active();
  const std::size_t cells = n_groups * k;
  const std::size_t workers = count_workers(n, cells, threads);
  const std::size_t stride = bitvec_acc_stride(row_bytes);
  const std::size_t piece = rows_per_piece(row_bytes);
  // Worker 0 counts into the outputs; the others into private tables added afterwards.
  std::vector<std::vector<std::uint64_t>> tables(workers);
  std::vector<std::size_t> first_bad(workers, n);
  parallel_for(workers, static_cast<int>(workers), [&](std::size_t w) {
    std::vector<std::uint8_t> acc(n_groups * stride, 0);
    std::vector<std::uint32_t> fill(n_groups, 0);
    std::uint64_t* c = counts;
    std::uint64_t* g = group_n;
    if (w > 0) {
      tables[w].assign(cells + n_groups, 0);
      c = tables[w].data();
      g = c + cells;
    }
    const std::size_t begin = n * w / workers, end = n * (w + 1) / workers;
    for (std::size_t b = begin; b < end; b += piece) {
      if (b > begin) interruption_point();
      const std::size_t e = std::min(end, b + piece);
      const std::size_t bad =
          kern.column_counts(rows, row_bytes, k, group, n_groups, b, e, acc.data(), fill.data(), c, g);
      if (bad < e) {
        first_bad[w] = bad;
        return;
      }
    }
  });
  for (std::size_t w = 0; w < workers; ++w)
    if (first_bad[w] < n) return first_bad[w];
  for (std::size_t w = 1; w < workers; ++w) {
    const std::uint64_t* t = tables[w].data();
    for (std::size_t j = 0; j < cells; ++j) counts[j] += t[j];
    for (std::size_t j = 0; j < n_groups; ++j) group_n[j] += t[cells + j];
  }
  return n;
}

void unary_perturb(const RngKey& key, const std::uint64_t* hot, std::size_t n, std::size_t k, std::uint64_t t_hot,
                   std::uint64_t t_cold, std::uint8_t* out, int threads) {
  const auto& kern = bitvec_kernels_active();
  parallel_for_chunks(n, kClientChunk, threads, [&](std::size_t b, std::size_t e) {
    kern.unary_perturb(key, hot, b, e, k, t_hot, t_cold, out);
  });
}

void memo_unary_perturb(const RngKey& key, const std::uint8_t* secrets, const std::uint64_t* hot, std::size_t n,
                        std::size_t k, std::uint64_t t1_hot, std::uint64_t t1_cold, bool instantaneous,
                        std::uint64_t t2_one, std::uint64_t t2_zero, std::uint8_t* out, int threads) {
  const auto& kern = bitvec_kernels_active();
  parallel_for_chunks(n, kClientChunk, threads, [&](std::size_t b, std::size_t e) {
    kern.memo_unary_perturb(key, secrets, hot, b, e, k, t1_hot, t1_cold, instantaneous, t2_one, t2_zero, out);
  });
}

void bit_response(const RngKey& key, const std::uint8_t* rows, std::size_t k, std::size_t n, std::uint64_t t_one,
                  std::uint64_t t_zero, std::uint8_t* out, int threads) {
  const auto& kern = bitvec_kernels_active();
  const std::size_t row_bytes = (k + 7) / 8;
  parallel_for_chunks(n, kClientChunk, threads, [&](std::size_t b, std::size_t e) {
    kern.bit_response(key, rows, row_bytes, k, b, e, t_one, t_zero, out);
  });
}

void memo_grr(const RngKey& key, const std::uint8_t* secrets, const std::uint64_t* x, std::size_t n,
              std::uint64_t m, std::uint64_t t1, bool instantaneous, std::uint64_t t2, std::uint64_t* out,
              int threads) {
  const auto& kern = bitvec_kernels_active();
  parallel_for_chunks(n, kClientChunk, threads, [&](std::size_t b, std::size_t e) {
    kern.memo_grr(key, secrets, x, b, e, m, t1, instantaneous, t2, out);
  });
}

void dbitflip_perturb(const std::uint8_t* secrets, const std::uint64_t* x, std::size_t n, std::uint64_t b,
                      std::size_t sampled, std::uint64_t t_hot, std::uint64_t t_cold, std::uint32_t* buckets,
                      std::uint8_t* bits, int threads) {
  const auto& kern = bitvec_kernels_active();
  parallel_for_chunks(n, kClientChunk, threads, [&](std::size_t s, std::size_t e) {
    kern.dbitflip_perturb(secrets, x, s, e, b, sampled, t_hot, t_cold, buckets, bits);
  });
}

void memo_draws(const std::uint8_t* secrets, std::size_t n, std::uint64_t purpose, std::uint64_t bound,
                std::size_t count, std::uint64_t* out, int threads) {
  const auto& kern = bitvec_kernels_active();
  parallel_for_chunks(n, kClientChunk, threads, [&](std::size_t b, std::size_t e) {
    kern.memo_draws(secrets, b, e, purpose, bound, count, out);
  });
}

void rappor_bloom_positions(int encoding, std::size_t k, std::size_t h, const std::uint8_t* data,
                            const std::int64_t* offsets, const std::uint32_t* cohort, std::size_t n,
                            std::uint32_t* out, int threads) {
  const auto& kern = rappor_kernels_active();
  parallel_for_chunks(n, kClientChunk, threads, [&](std::size_t b, std::size_t e) {
    kern.bloom_positions(encoding, k, h, data, offsets, cohort, b, e, out);
  });
}

void rappor_cohorts(int encoding, const std::uint8_t* secrets, std::size_t secret_len, std::size_t n,
                    std::uint32_t m, std::uint32_t* out, int threads) {
  const auto& kern = rappor_kernels_active();
  parallel_for_chunks(n, kClientChunk, threads, [&](std::size_t b, std::size_t e) {
    kern.cohorts(encoding, secrets, secret_len, b, e, m, out);
  });
}

void rappor_permanent(int encoding, std::size_t k, std::uint32_t f128, const std::uint8_t* secrets,
                      std::size_t secret_len, const std::uint8_t* encoder_id, std::size_t id_len,
                      const std::uint8_t* bloom, std::size_t n, std::uint8_t* out, int threads) {
  const auto& kern = rappor_kernels_active();
  parallel_for_chunks(n, kClientChunk, threads, [&](std::size_t b, std::size_t e) {
    kern.permanent(encoding, k, f128, secrets, secret_len, encoder_id, id_len, bloom, b, e, out);
  });
}

}  // namespace ldpfast
