#include "ldpfast/hadamard.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "ldpfast/parallel.hpp"

namespace ldpfast {

namespace {
constexpr std::size_t kElementChunk = 1 << 14;  // client-side elements per task
constexpr std::size_t kScanChunk = 1 << 18;     // validation: reports per task
constexpr std::size_t kReduceChunk = 1 << 15;   // cells per reduction task
constexpr std::size_t kMaxCachedScratch = std::size_t{1} << 26;  // 64 MiB
constexpr std::size_t kPrefetchTableBytes = std::size_t{1} << 20;
constexpr std::size_t kL1TableBytes = std::size_t{1} << 15;
constexpr std::size_t kInt32TableReports = std::size_t{1} << 30;
constexpr std::size_t kMaxInt32PartialCells = std::size_t{1} << 20;  // 4 MiB int32 table per worker
constexpr std::size_t kMaxPartialCells = std::size_t{1} << 23;       // 16 MiB int16 table per worker
constexpr std::size_t kAccumulateBlock = std::size_t{1} << 20;  // reports between interruption points
constexpr std::size_t kMinOwnerReports = std::size_t{1} << 14;  // fewer: one thread adds them
constexpr std::size_t kMaxPacked32Cells = std::size_t{1} << 31;  // staged as 2 * cell + sign in 32 bits

}  // namespace

void hadamard_perturb(const HadamardPlan& plan, const RngKey& key, const std::uint64_t* x, std::size_t n,
                      std::uint32_t* group, bool draw_groups, std::uint32_t* row, bool draw_rows,
                      std::int8_t* bits, int threads) {
  const auto& k = hadamard_kernels_active();
  parallel_for_chunks(n, kElementChunk, threads, [&](std::size_t b, std::size_t e) {
    k.perturb(plan, key, x, b, e, group, draw_groups, row, draw_rows, bits);
  });
}

std::size_t hadamard_first_invalid(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                                   std::size_t n, const std::uint64_t* group_rows, std::size_t n_groups,
                                   int threads) {
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

// Number of private tables for a batch (0: stage the cells, then add them to z). Private
// tables are narrower than z (cache-friendlier) but cost O(n_cells) to clear and reduce:
// use them once the batch has at least n_cells reports (n_cells / 2 was 15-20% slower at
// 10^4 reports and d = 2^14 on AVX2 and AVX-512 machines, and no faster elsewhere), and
// only while the tables fit the last-level cache; more than one (threads started) only for
// 2^15 reports each.
std::size_t partial_workers(std::size_t n, std::size_t n_cells, int threads) {
  if (n_cells > kMaxPartialCells || n < n_cells) return 0;
  const std::size_t per_worker = std::max<std::size_t>(n_cells / 2, 1 << 15);
  return std::max<std::size_t>(
      1, std::min<std::size_t>(static_cast<std::size_t>(resolve_threads(threads)), n / per_worker));
}

// Uninitialised storage for partial tables: each worker first-touches (clears) its own
// table. Large blocks are 2 MiB aligned and advised to use transparent huge pages, which
// cuts TLB misses of the random increments. The last large block freed (up to
// kMaxCachedScratch bytes) is kept for the next batch, which then skips the page faults
// and the kernel's zeroing of fresh pages.
class ScratchCache {
 public:
  // A cached block of at least `bytes` (and at most twice that), or null; *size: its size.
  void* take(std::size_t bytes, std::size_t* size) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!block_ || bytes_ < bytes || bytes_ > 2 * bytes) return nullptr;
    void* out = block_;
    *size = bytes_;
    block_ = nullptr;
    return out;
  }
  // Keeps `block` (returns true) when the cache is free and the block is not too large.
  bool give(void* block, std::size_t bytes) {
    if (bytes > kMaxCachedScratch) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    if (block_) return false;
    block_ = block;
    bytes_ = bytes;
    return true;
  }
  ~ScratchCache() { std::free(block_); }

 private:
  std::mutex mutex_;
  void* block_ = nullptr;
  std::size_t bytes_ = 0;
};

ScratchCache& scratch_cache() {
  static ScratchCache cache;
  return cache;
}

template <class T>
class Scratch {
 public:
  explicit Scratch(std::size_t count) {
    constexpr std::size_t kHuge = std::size_t{1} << 21;
    const std::size_t bytes = std::max<std::size_t>(count * sizeof(T), 1);
    const std::size_t align = bytes >= kHuge ? kHuge : 64;
    padded_ = (bytes + align - 1) / align * align;
    if (align == kHuge) data_ = static_cast<T*>(scratch_cache().take(padded_, &padded_));
    if (data_) {
      cacheable_ = true;
      return;
    }
    data_ = static_cast<T*>(std::aligned_alloc(align, padded_));
    if (!data_) throw std::bad_alloc();
    cacheable_ = align == kHuge;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (cacheable_) madvise(data_, padded_, MADV_HUGEPAGE);
#endif
  }
  ~Scratch() {
    if (!cacheable_ || !scratch_cache().give(data_, padded_)) std::free(data_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* get() const { return data_; }

 private:
  T* data_ = nullptr;
  std::size_t padded_ = 0;
  bool cacheable_ = false;
};

// Prefetching cells ahead pays once the table outgrows the (1 MiB) L2 cache and slows
// L2-resident tables by ~10-15% (measured, bench/hrr_throughput.py --log2d 16 / 20).
bool prefetch_cells(std::size_t table_bytes) { return table_bytes > kPrefetchTableBytes; }

// How private tables are filled (see TableAccess).
TableAccess table_access(std::size_t table_bytes) {
  if (prefetch_cells(table_bytes)) return TableAccess::kPrefetch;
  return table_bytes > kL1TableBytes ? TableAccess::kDirect : TableAccess::kBlocks;
}

// int32 tables (no overflow check: at most kInt32TableReports increments of +-1 each)
// while they are small enough for L2/L3; int16 tables (spilling on overflow, any number of
// reports) beyond, where halving the footprint wins.
bool narrow_tables(std::size_t n, std::size_t n_cells, std::size_t workers) {
  return n_cells > kMaxInt32PartialCells || ceil_div(n, workers) > kInt32TableReports;
}

// Tables too large for private copies (> kMaxPartialCells) are split by cell range among
// the threads (see update_staged), for batches large enough to pay for starting them.
bool owner_ranges(std::size_t n, std::size_t n_cells, int threads) {
  return n_cells > kMaxPartialCells && n >= kMinOwnerReports && resolve_threads(threads) > 1;
}

// Adds the per-worker group counts (workers x n_groups; empty when not counted) and the batch
// size to the caller's totals: the last step of a commit, after z.
void commit_counts(const std::vector<std::int64_t>& per_worker, std::size_t n_groups, std::size_t n,
                   const UpdateTotals& totals) {
  if (totals.group_counts && !per_worker.empty())
    for (std::size_t w = 0; w < per_worker.size() / n_groups; ++w)
      for (std::size_t g = 0; g < n_groups; ++g) totals.group_counts[g] += per_worker[w * n_groups + g];
  if (totals.count) *totals.count += static_cast<std::int64_t>(n);
}

// Per-worker group counts (workers x n_groups) when the caller wants them and the batch
// has several groups; empty otherwise (a single group's count is n).
std::vector<std::int64_t> group_count_tables(const ReportColumns& in, const GroupMap& map, std::size_t workers,
                                             const UpdateTotals& totals) {
  if (!totals.group_counts || !in.group) return {};
  return std::vector<std::int64_t>(workers * map.n_groups, 0);
}

// The single-group count of a batch (the per-worker tables cover several groups).
void commit_single_group(const ReportColumns& in, std::size_t n, const UpdateTotals& totals) {
  if (totals.group_counts && !in.group) totals.group_counts[0] += static_cast<std::int64_t>(n);
}

// Private tables: each worker adds its range of reports to a cleared table of T (reading
// each report once, checking it first); z is not touched while they run, so an invalid
// report or an interruption leaves it unchanged. Then, without interruption points, the
// tables are added to z in cell order and the spilled sums after them (the result is
// identical for every thread count), and the counts.
template <class T>
std::size_t update_partials(const HadamardKernels& k, const ReportColumns& in, std::size_t n, const GroupMap& map,
                            std::size_t n_cells, std::size_t workers, std::int64_t* z, const UpdateTotals& totals,
                            int threads) {
  const TableAccess access = table_access(n_cells * sizeof(T));
  Scratch<T> tables(workers * n_cells);
  // Only int16 tables spill; a range holds <= n / workers + 1 reports.
  const std::size_t spill_capacity = sizeof(T) == 2 ? n / workers / 256 + 2 : 0;
  Scratch<std::uint32_t> spill_cells(workers * spill_capacity);
  Scratch<std::int64_t> spill_values(workers * spill_capacity);
  std::vector<SpillLog> spills(workers);
  std::vector<std::size_t> first_bad(workers, n);
  std::vector<std::int64_t> counts = group_count_tables(in, map, workers, totals);
  parallel_for(workers, static_cast<int>(workers), [&](std::size_t w) {
    T* table = tables.get() + w * n_cells;
    std::memset(table, 0, n_cells * sizeof(T));
    spills[w] = SpillLog{spill_cells.get() + w * spill_capacity, spill_values.get() + w * spill_capacity, 0};
    std::vector<std::int64_t> local(counts.empty() ? 0 : map.n_groups);  // not shared: no false sharing
    std::int64_t* worker_counts = local.empty() ? nullptr : local.data();
    const std::size_t b = n * w / workers, e = n * (w + 1) / workers;
    for (std::size_t bb = b; bb < e; bb += kAccumulateBlock) {
      interruption_point();
      const std::size_t ee = std::min(e, bb + kAccumulateBlock);
      std::size_t bad;
      if constexpr (sizeof(T) == 2)
        bad = k.fill16(in, bb, ee, map, table, access, &spills[w], worker_counts);
      else
        bad = k.fill32(in, bb, ee, map, table, access, worker_counts);
      if (bad < ee) {
        first_bad[w] = bad;
        return;
      }
    }
    std::copy(local.begin(), local.end(), counts.begin() + static_cast<std::ptrdiff_t>(w * map.n_groups));
  });
  // A worker stops at its first invalid report, so the batch's first invalid report is in
  // the earliest worker range that has one.
  for (std::size_t w = 0; w < workers; ++w)
    if (first_bad[w] < n) return first_bad[w];
  InterruptScope commit(false);  // from here on nothing interrupts: z changes whole
  parallel_for_chunks(n_cells, kReduceChunk, threads, [&](std::size_t b, std::size_t e) {
    for (std::size_t w = 0; w < workers; ++w) {
      const T* t = tables.get() + w * n_cells;
      for (std::size_t c = b; c < e; ++c) z[c] += t[c];
    }
  });
  for (const SpillLog& log : spills)
    for (std::size_t j = 0; j < log.count; ++j) z[log.cell[j]] += log.value[j];
  commit_single_group(in, n, totals);
  commit_counts(counts, map.n_groups, n, totals);
  return n;
}

// Staged: the reports are first copied, checked and packed as cells into a buffer the
// library owns (4 or 8 bytes per report; threads take ranges), and only a fully valid batch is
// added to z from there: directly, or, for tables too large for private copies, by workers
// that each own a contiguous range of cells and scan the whole buffer, adding the reports
// in their range (the random, cache-missing increments, the cost, are split T ways; each
// cell is summed by one worker in report order, so the result is the same for every
// thread count). An interruption while adding takes the added reports back out of z.
template <class P>
std::size_t update_staged(const HadamardKernels::Staged<P>& k, const ReportColumns& in, std::size_t n,
                          const GroupMap& map, std::size_t n_cells, std::int64_t* z, const UpdateTotals& totals,
                          int threads) {
  Scratch<P> staged(n);
  P* packed = staged.get();
  const std::size_t stagers =
      std::min<std::size_t>(static_cast<std::size_t>(resolve_threads(threads)), ceil_div(n, kScanChunk));
  std::vector<std::size_t> first_bad(stagers, n);
  std::vector<std::int64_t> counts = group_count_tables(in, map, stagers, totals);
  parallel_for(stagers, threads, [&](std::size_t w) {
    std::vector<std::int64_t> local(counts.empty() ? 0 : map.n_groups);  // not shared: no false sharing
    std::int64_t* worker_counts = local.empty() ? nullptr : local.data();
    const std::size_t b = n * w / stagers, e = n * (w + 1) / stagers;
    for (std::size_t bb = b; bb < e; bb += kAccumulateBlock) {
      interruption_point();
      const std::size_t ee = std::min(e, bb + kAccumulateBlock);
      const std::size_t bad = k.stage(in, bb, ee, map, packed, worker_counts);
      if (bad < ee) {
        first_bad[w] = bad;
        return;
      }
    }
    std::copy(local.begin(), local.end(), counts.begin() + static_cast<std::ptrdiff_t>(w * map.n_groups));
  });
  for (std::size_t w = 0; w < stagers; ++w)
    if (first_bad[w] < n) return first_bad[w];
  if (owner_ranges(n, n_cells, threads)) {
    const std::size_t owners = static_cast<std::size_t>(resolve_threads(threads));
    std::vector<std::size_t> done(owners, 0);  // reports each owner has added
    auto cells_of = [&](std::size_t w) {
      return std::make_pair(std::uint64_t{n_cells * w / owners}, std::uint64_t{n_cells * (w + 1) / owners});
    };
    try {
      parallel_for(owners, threads, [&](std::size_t w) {
        const auto [lo, hi] = cells_of(w);
        for (std::size_t b = 0; b < n; b += kAccumulateBlock) {
          interruption_point();
          const std::size_t e = std::min(n, b + kAccumulateBlock);
          k.apply_range(packed, b, e, z, lo, hi, 1);
          done[w] = e;
        }
      });
    } catch (...) {
      InterruptScope rollback(false);
      parallel_for(owners, threads, [&](std::size_t w) {
        const auto [lo, hi] = cells_of(w);
        k.apply_range(packed, 0, done[w], z, lo, hi, -1);
      });
      throw;
    }
  } else {
    const bool prefetch = prefetch_cells(n_cells * sizeof(std::int64_t));
    std::size_t done = 0;
    try {
      for (std::size_t b = 0; b < n; b += kAccumulateBlock) {
        interruption_point();
        const std::size_t e = std::min(n, b + kAccumulateBlock);
        k.apply(packed, b, e, z, 1, prefetch);
        done = e;
      }
    } catch (...) {
      k.apply(packed, 0, done, z, -1, prefetch);
      throw;
    }
  }
  commit_single_group(in, n, totals);
  commit_counts(counts, map.n_groups, n, totals);
  return n;
}

}  // namespace

std::size_t hadamard_update(const ReportColumns& in, std::size_t n, const GroupMap& map, std::size_t n_cells,
                            std::int64_t* z, const UpdateTotals& totals, int threads) {
  const auto& k = hadamard_kernels_active();
  if (n == 0) return 0;
  const std::size_t workers = partial_workers(n, n_cells, threads);
  if (workers == 0)
    return n_cells <= kMaxPacked32Cells ? update_staged(k.staged32, in, n, map, n_cells, z, totals, threads)
                                        : update_staged(k.staged64, in, n, map, n_cells, z, totals, threads);
  if (narrow_tables(n, n_cells, workers))
    return update_partials<std::int16_t>(k, in, n, map, n_cells, workers, z, totals, threads);
  return update_partials<std::int32_t>(k, in, n, map, n_cells, workers, z, totals, threads);
}

std::size_t hadamard_update_scratch_bytes(std::size_t n, std::size_t n_cells, std::size_t n_groups, int threads) {
  const std::size_t workers = partial_workers(n, n_cells, threads);
  const std::size_t counts = static_cast<std::size_t>(resolve_threads(threads)) * n_groups * sizeof(std::int64_t);
  if (workers == 0)
    return n * (n_cells <= kMaxPacked32Cells ? sizeof(std::uint32_t) : sizeof(std::uint64_t)) + counts;
  if (!narrow_tables(n, n_cells, workers)) return workers * n_cells * sizeof(std::int32_t) + counts;
  const std::size_t spill = workers * (n / workers / 256 + 2) * (sizeof(std::uint32_t) + sizeof(std::int64_t));
  return workers * n_cells * sizeof(std::int16_t) + spill + counts;
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
