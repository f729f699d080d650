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
constexpr std::size_t kInt32TableReports = std::size_t{1} << 30;
constexpr std::size_t kMaxInt32PartialCells = std::size_t{1} << 20;  // 4 MiB int32 table per worker
constexpr std::size_t kMaxPartialCells = std::size_t{1} << 23;       // 16 MiB int16 table per worker
constexpr std::size_t kAccumulateBlock = std::size_t{1} << 20;  // reports between interruption points

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

// Number of private tables for a batch (0: update z directly). Private tables are narrower
// than z (cache-friendlier) but cost O(n_cells) to clear and reduce: use them once each
// worker gets at least n_cells / 2 reports, and only while the tables fit the last-level
// cache.
std::size_t partial_workers(std::size_t n, std::size_t n_cells, int threads) {
  if (n_cells > kMaxPartialCells) return 0;
  const std::size_t per_worker = std::max<std::size_t>(n_cells / 2, 1 << 15);
  return std::min<std::size_t>(static_cast<std::size_t>(resolve_threads(threads)), n / per_worker);
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
// Splits [0, n) over `workers` private tables of T: `fill(worker, begin, end, table, spill)`
// adds its reports to a cleared table (returning false abandons the update before z is
// touched); then the tables are added to z in cell order and the spilled sums after them,
// so the result is identical for every thread count.
template <class T, class Fill>
bool accumulate_with_partials(std::size_t n, std::size_t n_cells, std::size_t workers, int threads,
                              std::int64_t* z, Fill&& fill) {
  Scratch<T> tables(workers * n_cells);
  // Only int16 tables spill; a range holds <= n / workers + 1 reports.
  const std::size_t spill_capacity = sizeof(T) == 2 ? n / workers / 256 + 2 : 0;
  Scratch<std::uint32_t> spill_cells(workers * spill_capacity);
  Scratch<std::int64_t> spill_values(workers * spill_capacity);
  std::vector<SpillLog> spills(workers);
  std::vector<char> ok(workers, 1);
  parallel_for(workers, static_cast<int>(workers), [&](std::size_t w) {
    T* table = tables.get() + w * n_cells;
    std::memset(table, 0, n_cells * sizeof(T));
    spills[w] = SpillLog{spill_cells.get() + w * spill_capacity, spill_values.get() + w * spill_capacity, 0};
    ok[w] = fill(w, n * w / workers, n * (w + 1) / workers, table, &spills[w]) ? 1 : 0;
  });
  for (char flag : ok)
    if (!flag) return false;
  parallel_for_chunks(n_cells, kReduceChunk, threads, [&](std::size_t b, std::size_t e) {
    for (std::size_t w = 0; w < workers; ++w) {
      const T* t = tables.get() + w * n_cells;
      for (std::size_t c = b; c < e; ++c) z[c] += t[c];
    }
  });
  for (const SpillLog& log : spills)
    for (std::size_t k = 0; k < log.count; ++k) z[log.cell[k]] += log.value[k];
  return true;
}

// Prefetching cells ahead pays once the table outgrows the (1 MiB) L2 cache and slows
// L2-resident tables by ~10-15% (measured, bench/hrr_throughput.py --log2d 16 / 20).
bool prefetch_cells(std::size_t table_bytes) { return table_bytes > kPrefetchTableBytes; }

// int32 tables (no overflow check: at most kInt32TableReports increments of +-1 each)
// while they are small enough for L2/L3; int16 tables (spilling on overflow, any number of
// reports) beyond, where halving the footprint wins.
bool narrow_tables(std::size_t n, std::size_t n_cells, std::size_t workers) {
  return n_cells > kMaxInt32PartialCells || ceil_div(n, workers) > kInt32TableReports;
}

template <class T>
void accumulate_partials(const HadamardKernels& k, const std::uint32_t* group, const std::uint32_t* row,
                         const std::int8_t* bits, std::size_t n, const std::uint64_t* cell_base,
                         std::size_t n_cells, std::size_t workers, std::int64_t* z, int threads) {
  const bool prefetch = prefetch_cells(n_cells * sizeof(T));
  accumulate_with_partials<T>(n, n_cells, workers, threads, z,
                              [&](std::size_t, std::size_t b, std::size_t e, T* t, SpillLog* spill) {
                                for_blocks(b, e, kAccumulateBlock, [&](std::size_t bb, std::size_t ee) {
                                  if constexpr (sizeof(T) == 2)
                                    k.accumulate16(group, row, bits, bb, ee, cell_base, t, prefetch, spill);
                                  else
                                    k.accumulate32(group, row, bits, bb, ee, cell_base, t, prefetch);
                                });
                                return true;
                              });
}

template <class T>
std::size_t update_partials(const HadamardKernels& k, const std::uint32_t* group, const std::uint32_t* row,
                            const std::int8_t* bits, std::size_t n, const std::uint64_t* group_rows,
                            std::size_t n_groups, const std::uint64_t* cell_base, std::size_t n_cells,
                            std::size_t workers, std::int64_t* z, int threads) {
  const bool prefetch = prefetch_cells(n_cells * sizeof(T));
  std::vector<std::size_t> first_bad(workers, n);
  const bool all_valid = accumulate_with_partials<T>(
      n, n_cells, workers, threads, z, [&](std::size_t w, std::size_t b, std::size_t e, T* t, SpillLog* spill) {
        for (std::size_t bb = b; bb < e; bb += kAccumulateBlock) {
          interruption_point();
          const std::size_t ee = std::min(e, bb + kAccumulateBlock);
          std::size_t bad;
          if constexpr (sizeof(T) == 2)
            bad = k.accumulate16_checked(group, row, bits, bb, ee, cell_base, group_rows, n_groups, t, prefetch,
                                         spill);
          else
            bad = k.accumulate32_checked(group, row, bits, bb, ee, cell_base, group_rows, n_groups, t, prefetch);
          if (bad < ee) {
            first_bad[w] = bad;
            return false;
          }
        }
        return true;
      });
  if (all_valid) return n;
  // A worker stops at its first invalid report; earlier workers may have stopped too, so
  // the batch's first invalid report is in the earliest worker range that failed.
  for (std::size_t w = 0; w < workers; ++w)
    if (first_bad[w] < n) return first_bad[w];
  return n;
}

// Adds straight into z, in blocks with interruption points between them.
void accumulate_direct(const HadamardKernels& k, const std::uint32_t* group, const std::uint32_t* row,
                       const std::int8_t* bits, std::size_t n, const std::uint64_t* cell_base,
                       std::size_t n_cells, std::int64_t* z) {
  const bool prefetch = prefetch_cells(n_cells * sizeof(std::int64_t));
  for_blocks(0, n, kAccumulateBlock, [&](std::size_t b, std::size_t e) {
    k.accumulate64(group, row, bits, b, e, cell_base, z, prefetch);
  });
}

// Tables too large for private copies (> kMaxPartialCells) used to be filled by one
// thread. Instead each worker owns a contiguous range of cells and scans all reports,
// adding those in its range: the random, cache-missing increments (the cost) are split
// T ways, the extra cost is T streaming reads of the reports (shared through the caches
// while the workers run side by side). Each cell is summed by one worker in report
// order, so the result is the same for every thread count.
bool owner_ranges(std::size_t n_cells, int threads) {
  return n_cells > kMaxPartialCells && resolve_threads(threads) > 1;
}

void accumulate_owner_ranges(const HadamardKernels& k, const std::uint32_t* group, const std::uint32_t* row,
                             const std::int8_t* bits, std::size_t n, const std::uint64_t* cell_base,
                             std::size_t n_cells, std::int64_t* z, int threads) {
  const std::size_t workers = static_cast<std::size_t>(resolve_threads(threads));
  parallel_for(workers, threads, [&](std::size_t w) {
    const std::size_t lo = n_cells * w / workers, hi = n_cells * (w + 1) / workers;
    for_blocks(0, n, kAccumulateBlock, [&](std::size_t b, std::size_t e) {
      k.accumulate64_range(group, row, bits, b, e, cell_base, z, lo, hi);
    });
  });
}

}  // namespace

void hadamard_accumulate(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                         std::size_t n, const std::uint64_t* cell_base, std::size_t n_cells, std::int64_t* z,
                         int threads) {
  const auto& k = hadamard_kernels_active();
  if (owner_ranges(n_cells, threads)) {
    accumulate_owner_ranges(k, group, row, bits, n, cell_base, n_cells, z, threads);
    return;
  }
  const std::size_t workers = partial_workers(n, n_cells, threads);
  if (workers == 0)
    accumulate_direct(k, group, row, bits, n, cell_base, n_cells, z);
  else if (narrow_tables(n, n_cells, workers))
    accumulate_partials<std::int16_t>(k, group, row, bits, n, cell_base, n_cells, workers, z, threads);
  else
    accumulate_partials<std::int32_t>(k, group, row, bits, n, cell_base, n_cells, workers, z, threads);
}

std::size_t hadamard_update(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                            std::size_t n, const std::uint64_t* group_rows, std::size_t n_groups,
                            const std::uint64_t* cell_base, std::size_t n_cells, std::int64_t* z, int threads) {
  const auto& k = hadamard_kernels_active();
  const std::size_t workers = partial_workers(n, n_cells, threads);
  if (workers == 0) {
    const std::size_t bad = hadamard_first_invalid(group, row, bits, n, group_rows, n_groups, threads);
    if (bad < n) return bad;
    if (owner_ranges(n_cells, threads)) {
      accumulate_owner_ranges(k, group, row, bits, n, cell_base, n_cells, z, threads);
      return n;
    }
    accumulate_direct(k, group, row, bits, n, cell_base, n_cells, z);
    return n;
  }
  if (narrow_tables(n, n_cells, workers))
    return update_partials<std::int16_t>(k, group, row, bits, n, group_rows, n_groups, cell_base, n_cells,
                                         workers, z, threads);
  return update_partials<std::int32_t>(k, group, row, bits, n, group_rows, n_groups, cell_base, n_cells, workers,
                                       z, threads);
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
