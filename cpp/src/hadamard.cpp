#include "ldpfast/hadamard.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "ldpfast/parallel.hpp"

namespace ldpfast {

namespace {
constexpr std::size_t kElementChunk = 1 << 14;  // client-side elements per task
constexpr std::size_t kScanChunk = 1 << 18;     // validation: reports per task
constexpr std::size_t kReduceChunk = 1 << 15;   // cells per reduction task
// A partial table holds at most this many reports' increments, so int32 cannot overflow.
constexpr std::size_t kPartialLimit = std::size_t{1} << 30;
constexpr std::size_t kMaxPartialCells = std::size_t{1} << 22;  // 16 MiB int32 table per worker

}  // namespace

void hadamard_perturb(const HadamardPlan& plan, const RngKey& key, const std::uint64_t* x, std::size_t n,
                      std::uint32_t* group, bool draw_groups, std::uint32_t* row, bool draw_rows,
                      std::int8_t* bits, int threads) {
  const auto& k = hadamard_kernels_active();
  parallel_for_chunks(n, kElementChunk, threads, [&](std::size_t b, std::size_t e) {
    k.perturb(plan, key, x, b, e, group, draw_groups, row, draw_rows, bits);
  });
}

std::size_t hadamard_first_invalid(const std::uint32_t* group, const std::uint32_t* row,
                                   const std::int8_t* bits, std::size_t n, const std::uint64_t* group_rows,
                                   std::size_t n_groups, int threads) {
  const auto& k = hadamard_kernels_active();
  const std::size_t tasks = ceil_div(n, kScanChunk);
  std::vector<std::size_t> first(tasks, n);
  parallel_for(tasks, threads, [&](std::size_t t) {
    const std::size_t b = t * kScanChunk, e = std::min(n, b + kScanChunk);
    const std::size_t bad = k.first_invalid(group, row, bits, b, e, group_rows, n_groups);
    if (bad < e) first[t] = bad;
  });
  for (std::size_t f : first)
    if (f < n) return f;
  return n;
}

namespace {

// Number of private tables for a batch (0: update z directly). Private int32 tables are
// half the size of z (cache-friendlier) but cost O(n_cells) to clear and reduce: use them
// once each worker gets at least n_cells / 2 reports. Beyond ~16 MiB per table (past the
// last-level cache) the extra table traffic costs more than it saves (measured: 2^24
// cells, one direct pass 1.35e8 reports/s vs 0.7e8 with a partial table).
std::size_t partial_workers(std::size_t n, std::size_t n_cells, int threads) {
  if (n_cells > kMaxPartialCells) return 0;
  const std::size_t per_worker = std::max<std::size_t>(n_cells / 2, 1 << 15);
  return std::min<std::size_t>(static_cast<std::size_t>(resolve_threads(threads)), n / per_worker);
}

// Runs `fill(worker, begin, end, table)` for each worker over rounds of at most kPartialLimit
// reports per table, then adds the tables to z in cell order. `fill` returns false to
// abandon the update before z is touched (only possible in the first round).
template <class Fill>
bool accumulate_with_partials(std::size_t n, std::size_t n_cells, std::size_t workers, int threads,
                              std::int64_t* z, Fill&& fill) {
  std::vector<std::int32_t> partial(workers * n_cells);
  for (std::size_t round_begin = 0; round_begin < n; round_begin += workers * kPartialLimit) {
    const std::size_t round_n = std::min(n - round_begin, workers * kPartialLimit);
    if (round_begin) std::fill(partial.begin(), partial.end(), 0);
    std::vector<char> ok(workers, 1);
    parallel_for(workers, static_cast<int>(workers), [&](std::size_t w) {
      const std::size_t b = round_begin + round_n * w / workers;
      const std::size_t e = round_begin + round_n * (w + 1) / workers;
      ok[w] = fill(w, b, e, partial.data() + w * n_cells) ? 1 : 0;
    });
    for (char flag : ok)
      if (!flag) return false;
    parallel_for_chunks(n_cells, kReduceChunk, threads, [&](std::size_t b, std::size_t e) {
      for (std::size_t w = 0; w < workers; ++w) {
        const std::int32_t* p = partial.data() + w * n_cells;
        for (std::size_t c = b; c < e; ++c) z[c] += p[c];
      }
    });
  }
  return true;
}

}  // namespace

void hadamard_accumulate(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                         std::size_t n, const std::uint64_t* cell_base, std::size_t n_cells,
                         std::int64_t* z, int threads) {
  const auto& k = hadamard_kernels_active();
  const std::size_t workers = partial_workers(n, n_cells, threads);
  if (workers == 0) {
    k.accumulate64(group, row, bits, 0, n, cell_base, z);
    return;
  }
  accumulate_with_partials(n, n_cells, workers, threads, z,
                           [&](std::size_t, std::size_t b, std::size_t e, std::int32_t* t) {
                             k.accumulate32(group, row, bits, b, e, cell_base, t);
                             return true;
                           });
}

std::size_t hadamard_update(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                            std::size_t n, const std::uint64_t* group_rows, std::size_t n_groups,
                            const std::uint64_t* cell_base, std::size_t n_cells, std::int64_t* z, int threads) {
  const auto& k = hadamard_kernels_active();
  const std::size_t workers = partial_workers(n, n_cells, threads);
  // Tables hold at most kPartialLimit reports per round: a batch that needs several rounds
  // is validated up front so that no round is added before a later one is checked.
  if (workers == 0 || n > workers * kPartialLimit) {
    const std::size_t bad = hadamard_first_invalid(group, row, bits, n, group_rows, n_groups, threads);
    if (bad < n) return bad;
    hadamard_accumulate(group, row, bits, n, cell_base, n_cells, z, threads);
    return n;
  }
  std::vector<std::size_t> first_bad(workers, n);
  const bool all_valid = accumulate_with_partials(
      n, n_cells, workers, threads, z, [&](std::size_t w, std::size_t b, std::size_t e, std::int32_t* t) {
        first_bad[w] = k.accumulate32_checked(group, row, bits, b, e, cell_base, group_rows, n_groups, t);
        if (first_bad[w] < e) return false;
        first_bad[w] = n;
        return true;
      });
  if (all_valid) return n;
  // A worker stops at its first invalid report; earlier workers may have stopped too, so
  // the batch's first invalid report is in the earliest worker range that failed.
  for (std::size_t w = 0; w < workers; ++w)
    if (first_bad[w] < n) return first_bad[w];
  return n;
}

void rhr_perturb(const RngKey& key, const std::uint64_t* x, std::size_t n, std::uint32_t base_bits,
                 std::uint64_t hsize, std::uint64_t flip_threshold, std::uint32_t* row, bool draw_rows,
                 std::uint32_t* z, int threads) {
  const auto& k = hadamard_kernels_active();
  parallel_for_chunks(n, kElementChunk, threads, [&](std::size_t b, std::size_t e) {
    k.rhr_perturb(key, x, b, e, base_bits, hsize, flip_threshold, row, draw_rows, z);
  });
}

}  // namespace ldpfast
