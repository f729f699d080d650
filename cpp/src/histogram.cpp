// Symbol histograms (GRR's server state), all or nothing without a copy of the batch.
//
// Each value is read from the caller's memory once (read_once.hpp: one load the
// compiler may not repeat), checked against the histogram size, then counted. Two ways
// to keep the histogram unchanged until the whole batch is known valid:
//  * private tables: for batches of several times the histogram's size, each worker counts
//    its range into a cleared table of 32-bit counters (L1/L2-sized for small histograms);
//    only when every worker is done are the tables added to counts, without interruption
//    points. A bad value or an interruption discards the tables.
//  * staging: smaller batches count straight into counts and keep each counted value in
//    a buffer the library owns (4 bytes per value for histograms of up to 2^32 counters;
//    a server passes one it keeps for its next batch, since fresh pages cost faults);
//    a bad value, a wrap-around or an interruption takes the staged values back out.
//    Into counts the caller knows to be all zero, such batches are counted straight into
//    counts, unstaged: taking the batch back is clearing counts, and no counter can wrap.
//    (Larger batches still go through the tables: counting into 32-bit counters is faster
//    than into the 64-bit ones, 0.63 against 0.91 ms for 10^6 values into 10^4 counters.)
// Both cost one scatter increment per value, like a plain histogram loop, plus O(size)
// (tables) or O(n) sequential stores (staging).
#include "ldpfast/histogram.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "ldpfast/parallel.hpp"
#include "ldpfast/read_once.hpp"

namespace ldpfast {

namespace {
constexpr std::size_t kBlock = std::size_t{1} << 20;               // values between interruption points
constexpr std::size_t kMaxTableCounters = std::size_t{1} << 22;    // 16 MiB of 32-bit counters per table
constexpr std::size_t kTableValuesPerCounter = 4;
constexpr std::size_t kMinWorkerValues = std::size_t{1} << 16;     // fewer per thread: one thread counts
constexpr std::size_t kReduceChunk = std::size_t{1} << 14;         // counters per reduction task
constexpr std::size_t kMaxNarrowRange = std::size_t{0xFFFFFFFF};  // values a 32-bit table may count

// Private tables for a batch (0: stage). Clearing and adding a table costs, per counter,
// about what staging 2 to 3 values does (measured at d = 10^5, bench/grr_server.py):
// tables once each worker gets kTableValuesPerCounter values per counter.
std::size_t table_workers(std::size_t n, std::size_t size, int threads) {
  if (size > kMaxTableCounters || n / kTableValuesPerCounter < size) return 0;
  const std::size_t per_worker = std::max(size * kTableValuesPerCounter, kMinWorkerValues);
  const std::size_t threads_n = static_cast<std::size_t>(resolve_threads(threads));
  return std::max<std::size_t>(1, std::min(threads_n, n / per_worker));
}

// Staged values fit 32 bits when every counter index does.
bool narrow_staging(std::size_t size) { return size - 1 <= std::numeric_limits<std::uint32_t>::max(); }

// Wider tables when one worker's range could reach 2^32 values.
bool wide_tables(std::size_t n, std::size_t workers) { return ceil_div(n, workers) > kMaxNarrowRange; }

// counts += the workers' tables, cell by cell in table order (the result does not depend
// on the thread count), not interruptible. Returns false when a counter wrapped, after
// taking every table back out (modular arithmetic: exact).
template <class T>
bool add_tables(const std::vector<std::vector<T>>& tables, std::uint64_t* counts, std::size_t size, int threads) {
  InterruptScope commit(false);
  const std::size_t chunks = ceil_div(size, kReduceChunk);
  std::vector<char> wrapped(chunks, 0);
  parallel_for(chunks, threads, [&](std::size_t c) {
    const std::size_t begin = c * kReduceChunk, end = std::min(size, begin + kReduceChunk);
    bool wrap = false;
    for (const std::vector<T>& table : tables)
      for (std::size_t v = begin; v < end; ++v) {
        const std::uint64_t now = counts[v] + table[v];
        wrap |= now < counts[v];
        counts[v] = now;
      }
    wrapped[c] = wrap;
  });
  if (std::find(wrapped.begin(), wrapped.end(), 1) == wrapped.end()) return true;
  parallel_for(chunks, threads, [&](std::size_t c) {
    const std::size_t begin = c * kReduceChunk, end = std::min(size, begin + kReduceChunk);
    for (const std::vector<T>& table : tables)
      for (std::size_t v = begin; v < end; ++v) counts[v] -= table[v];
  });
  return false;
}

// The counting loops take everything by value: a store through `table` or `counts` could
// otherwise alias a captured bound or counter, which the compiler would then reload.

// Counts y[begin, end) into table; returns end, or the index of the first bad value
// (*bad: it and its value).
template <class T>
std::size_t count_table(const std::uint64_t* y, std::size_t begin, std::size_t end, T* table, std::uint64_t size,
                        HistogramUpdate* bad) {
  for (std::size_t i = begin; i < end; ++i) {
    const std::uint64_t v = read_once(y + i);
    if (v >= size) {
      *bad = HistogramUpdate{i, v, false};
      return i;
    }
    ++table[v];
  }
  return end;
}

// Counts y[begin, end) into counts, staging each counted value; returns end, the index
// of the first bad value (*stop: it and its value), or just past the value whose counter
// wrapped (stop->overflow). staged[begin, returned index) are in counts.
template <class P>
std::size_t count_staged(const std::uint64_t* y, std::size_t begin, std::size_t end, std::uint64_t* counts,
                         std::uint64_t size, P* staged, HistogramUpdate* stop) {
  for (std::size_t i = begin; i < end; ++i) {
    const std::uint64_t v = read_once(y + i);
    if (v >= size) {
      *stop = HistogramUpdate{i, v, false};
      return i;
    }
    staged[i] = static_cast<P>(v);
    if (++counts[v] == 0) {
      stop->overflow = true;
      return i + 1;
    }
  }
  return end;
}

// Counts into all-zero counts; cleared again on a bad value or an interruption.
HistogramUpdate update_zero(const std::uint64_t* y, std::size_t n, std::uint64_t* counts, std::size_t size) {
  HistogramUpdate out{n, 0, false};
  try {
    for_blocks(0, n, kBlock, [&](std::size_t begin, std::size_t end) {
      if (out.first_bad == n) count_table(y, begin, end, counts, size, &out);
    });
  } catch (...) {
    std::fill(counts, counts + size, 0);
    throw;
  }
  if (out.first_bad < n) std::fill(counts, counts + size, 0);
  return out;
}

template <class T>
HistogramUpdate update_tables(const std::uint64_t* y, std::size_t n, std::uint64_t* counts, std::size_t size,
                              std::size_t workers) {
  std::vector<std::vector<T>> tables(workers);
  std::vector<HistogramUpdate> bad(workers, HistogramUpdate{n, 0, false});
  parallel_for(workers, static_cast<int>(workers), [&](std::size_t w) {
    tables[w].assign(size, 0);  // cleared by the thread that counts into it
    T* table = tables[w].data();
    HistogramUpdate* worker_bad = &bad[w];
    for_blocks(n * w / workers, n * (w + 1) / workers, kBlock, [&](std::size_t begin, std::size_t end) {
      if (worker_bad->first_bad == n) count_table(y, begin, end, table, size, worker_bad);
    });
  });
  // Each worker stops at its first bad value: the batch's first is in the earliest range.
  for (const HistogramUpdate& b : bad)
    if (b.first_bad < n) return b;
  if (!add_tables(tables, counts, size, static_cast<int>(workers))) return HistogramUpdate{n, 0, true};
  return HistogramUpdate{n, 0, false};
}

template <class P>
HistogramUpdate update_staged(const std::uint64_t* y, std::size_t n, std::uint64_t* counts, std::size_t size,
                              P* buffer) {
  std::unique_ptr<P[]> owned(buffer == nullptr ? new P[n] : nullptr);
  P* staged = buffer == nullptr ? owned.get() : buffer;
  std::size_t counted = 0;  // staged[0, counted) are in counts
  auto take_back = [&] {
    for (std::size_t i = 0; i < counted; ++i) --counts[staged[i]];
  };
  HistogramUpdate out{n, 0, false};
  try {
    for_blocks(0, n, kBlock, [&](std::size_t begin, std::size_t end) {
      if (counted == begin && !out.overflow) counted = count_staged(y, begin, end, counts, size, staged, &out);
    });
  } catch (...) {
    take_back();
    throw;
  }
  if (counted < n || out.overflow) take_back();
  return out;
}

inline double from_bits(std::uint64_t bits) {
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// The nearest double to c, branch-free and vectorizable (x86-64 has no packed uint64 ->
// double conversion before AVX-512): 2^84 + 2^32 hi and 2^52 + lo are exact doubles by
// their bits; subtracting 2^84 + 2^52 from the first is exact, and the one rounding is
// the final sum's.
inline double nearest_double(std::uint64_t c) {
  const double high = from_bits((c >> 32) | 0x4530000000000000ULL) - from_bits(0x4530000000100000ULL);
  const double low = from_bits((c & 0xFFFFFFFFULL) | 0x4330000000000000ULL);
  return high + low;
}
}  // namespace

HistogramUpdate histogram_update(const std::uint64_t* y, std::size_t n, std::uint64_t* counts, std::size_t size,
                                 int threads, bool counts_zero, std::uint32_t* staging) {
  if (n == 0) return HistogramUpdate{0, 0, false};
  const std::size_t workers = table_workers(n, size, threads);
  if (workers == 0 && counts_zero) return update_zero(y, n, counts, size);
  if (workers == 0)
    return narrow_staging(size) ? update_staged<std::uint32_t>(y, n, counts, size, staging)
                                : update_staged<std::uint64_t>(y, n, counts, size, nullptr);
  if (wide_tables(n, workers)) return update_tables<std::uint64_t>(y, n, counts, size, workers);
  return update_tables<std::uint32_t>(y, n, counts, size, workers);
}

void histogram_affine(const std::uint64_t* counts, std::size_t n, double scale, double offset, double* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = scale * nearest_double(counts[i]) + offset;
}

bool histogram_update_stages(std::size_t n, std::size_t size, int threads, bool counts_zero) {
  return !counts_zero && table_workers(n, size, threads) == 0 && narrow_staging(size);
}

std::size_t histogram_update_scratch_bytes(std::size_t n, std::size_t size, int threads, bool counts_zero) {
  const std::size_t workers = table_workers(n, size, threads);
  if (workers == 0 && counts_zero) return 0;
  if (workers == 0) return n * (narrow_staging(size) ? 4 : 8);
  return workers * size * (wide_tables(n, workers) ? 8 : 4);
}

}  // namespace ldpfast
