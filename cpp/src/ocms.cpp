#include "ldpfast/ocms.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "ldpfast/kernels/ocms.hpp"
#include "ldpfast/kernels/ocms_affine.hpp"
#include "ldpfast/parallel.hpp"

namespace ldpfast {

namespace {
constexpr std::size_t kElementChunk = 1 << 14;   // client-side elements per task

}  // namespace

void ocms_hash(const FieldSpec& field, const std::uint64_t* a0, const std::uint64_t* a1, const std::uint64_t* x,
               std::size_t n, std::uint64_t m, std::uint64_t* out, int threads) {
  const auto& k = ocms_kernels_active();
  parallel_for_chunks(n, kElementChunk, threads, [&](std::size_t b, std::size_t e) {
    k.hash(field, a0 + b, a1 + b, x + b, e - b, m, out + b);
  });
}

void ocms_perturb(const FieldSpec& field, const RngKey& key, const std::uint64_t* x, std::size_t n,
                  std::uint64_t m, std::uint64_t flip_threshold, std::uint64_t* z, std::uint64_t* a0,
                  std::uint64_t* a1, int threads) {
  const auto& k = ocms_kernels_active();
  parallel_for_chunks(n, kElementChunk, threads, [&](std::size_t b, std::size_t e) {
    k.perturb(field, key, x, b, e, m, flip_threshold, z, a0, a1);
  });
}

namespace {

// Server decode work is split into (candidate chunk) x (report block) tasks. Candidate
// chunks write disjoint slices of `counts`; when reports are split too (few candidates,
// many reports), each report block fills its own partial counts, summed afterwards.
// Integer sums do not depend on the split, so every thread count gives the same result.
struct DecodePlan {
  std::size_t candidate_chunk;  // candidates per task (a multiple of the kernel's tile)
  std::size_t report_block;     // reports per task
};

constexpr double kMinPairsPerTask = 1 << 21;      // below this a task is not worth a thread
constexpr std::size_t kMinCandidateChunk = 4096;  // one counter tile of the scan kernel
constexpr std::size_t kMinReportBlock = 256;
constexpr std::size_t kMaxPartialEntries = std::size_t{1} << 22;  // 32 MiB of partial counts

// `pairs`: the work in units of one scanned (report, candidate) pair.
DecodePlan plan_decode(std::size_t n, std::size_t x_count, double pairs, std::size_t tile, int threads) {
  const std::size_t workers = static_cast<std::size_t>(resolve_threads(threads));
  std::size_t tasks = workers <= 1 ? 1 : 4 * workers;
  tasks = std::min<std::size_t>(tasks, std::max<double>(1.0, pairs / kMinPairsPerTask));
  if (tasks <= 1) return DecodePlan{ceil_div(x_count, tile) * tile, n};
  const std::size_t chunks = std::min(tasks, ceil_div(x_count, tile));
  // Split reports (which costs partial count arrays) only when candidate chunks alone
  // cannot keep every worker busy.
  std::size_t blocks = chunks >= workers ? 1 : std::min(ceil_div(tasks, chunks), ceil_div(n, kMinReportBlock));
  blocks = std::max<std::size_t>(1, std::min(blocks, kMaxPartialEntries / std::max<std::size_t>(1, x_count)));
  // Whole kernel tiles per chunk (aligned tiles also keep the GF(2^l) walk on its fast path).
  const std::size_t chunk = ceil_div(ceil_div(x_count, chunks), tile) * tile;
  return DecodePlan{chunk, ceil_div(n, blocks)};
}

// Pieces of about this many (report, candidate) pairs (a few ms to tens of ms) between
// interruption points.
constexpr std::size_t kPairsPerPiece = std::size_t{1} << 22;

// How a task's work is cut into pieces, in units of one scanned pair: the scan splits
// candidates too (costs are per pair); the affine decode keeps its candidate range whole
// (a report pays its solve once per range) and splits reports only.
struct PieceCost {
  bool split_candidates;
  double per_report;
  double per_pair;
};
constexpr PieceCost kScanCost{true, 0.0, 1.0};

// count(rb, re, cb, ce, out) in pieces with an interruption point before each. Pieces are
// whole report blocks and candidate tiles of the kernels, and counts are integer sums, so
// the kernels do the same work and the result is the same.
template <class Count>
void count_in_pieces(std::size_t rb, std::size_t re, std::size_t cb, std::size_t ce, std::uint64_t* out,
                     const PieceCost& cost, Count& count) {
  const std::size_t candidates =
      cost.split_candidates ? std::min(ce - cb, kPairsPerPiece / kMinReportBlock) : ce - cb;
  const double per_report = cost.per_report + cost.per_pair * static_cast<double>(candidates);
  const std::size_t reports =
      std::max(kMinReportBlock, static_cast<std::size_t>(static_cast<double>(kPairsPerPiece) / per_report) /
                                    kMinReportBlock * kMinReportBlock);
  for (std::size_t c = cb; c < ce; c += candidates) {
    const std::size_t c_end = std::min(ce, c + candidates);
    for_blocks(rb, re, reports, [&](std::size_t b, std::size_t e) { count(b, e, c, c_end, out + (c - cb)); });
  }
}

// Runs count(report_begin, report_end, cand_begin, cand_end, out) over the plan, where
// out points at the counts slot of cand_begin. Chunk boundaries fall on multiples of the
// chunk size counted from `lead_in` candidates before the first one (an aligned origin).
template <class Count>
void run_decode(std::size_t n, std::size_t x_count, std::size_t lead_in, const DecodePlan& plan,
                const PieceCost& cost, std::uint64_t* counts, int threads, Count&& count) {
  const std::size_t chunks = ceil_div(lead_in + x_count, plan.candidate_chunk);
  const std::size_t blocks = ceil_div(n, plan.report_block);
  if (chunks * blocks == 1) {
    count_in_pieces(0, n, 0, x_count, counts, cost, count);
    return;
  }
  std::vector<std::uint64_t> partial(blocks > 1 ? blocks * x_count : 0);
  parallel_for(chunks * blocks, threads, [&](std::size_t task) {
    const std::size_t block = task / chunks, chunk = task % chunks;
    const std::size_t cb = std::max(chunk * plan.candidate_chunk, lead_in) - lead_in;
    const std::size_t ce = std::min(lead_in + x_count, (chunk + 1) * plan.candidate_chunk) - lead_in;
    const std::size_t rb = block * plan.report_block, re = std::min(n, rb + plan.report_block);
    std::uint64_t* out = blocks > 1 ? partial.data() + block * x_count + cb : counts + cb;
    count_in_pieces(rb, re, cb, ce, out, cost, count);
  });
  if (blocks > 1) {
    parallel_for_chunks(x_count, kElementChunk, threads, [&](std::size_t b, std::size_t e) {
      for (std::size_t block = 0; block < blocks; ++block) {
        const std::uint64_t* src = partial.data() + block * x_count;
        for (std::size_t j = b; j < e; ++j) counts[j] += src[j];
      }
    });
  }
}

template <class Count>
void run_scan(std::size_t n, std::size_t x_count, std::uint64_t* counts, int threads, Count&& count) {
  if (n == 0 || x_count == 0) return;
  const double pairs = static_cast<double>(n) * static_cast<double>(x_count);
  run_decode(n, x_count, 0, plan_decode(n, x_count, pairs, kMinCandidateChunk, threads), kScanCost, counts,
             threads, count);
}

// Affine decode: candidate tiles of 2^14 counters (128 KiB, L2-resident), larger for
// large m so a report still has >= 64 matches per tile (its fixed cost per tile is
// amortized; up to 2^16 = 512 KiB), never larger than the range (a report visits its
// whole coset in every tile it touches); report records are prepared once per
// super-block of reports (<= 32 MiB).
constexpr int kAffineMinTileBits = 14;
constexpr int kAffineMaxTileBits = 16;
constexpr int kAffineMatchesPerTileBits = 6;
constexpr std::size_t kAffineRecordBudgetWords = std::size_t{1} << 22;
constexpr std::size_t kPrepareChunk = 2048;
// Costs in units of one scanned (report, candidate) pair of the GF(2^l) walk, measured by
// bench/ocms_affine_decode.py (AMD EPYC, AVX-512; both paths are compute-bound, so the
// ratios carry over): scan pieces shorter than 1024 candidates evaluate every pair with
// a carry-less product (~8 pairs); one affine match (counter increment) ~1.2 pairs; one
// report's solve and cursor setup ~600-1700 ns ~ 1024 pairs.
constexpr double kScanShortPairCost = 8.0;
constexpr std::size_t kScanShortRange = 1024;
constexpr double kAffineMatchCost = 1.25;
constexpr double kAffineReportCost = 1024.0;

int log2_exact(std::uint64_t m) { return __builtin_ctzll(m); }

void count_range_affine(const BinaryField& field, const std::uint64_t* z, const std::uint64_t* a0,
                        const std::uint64_t* a1, std::size_t n, std::uint64_t m, std::uint64_t x_begin,
                        std::size_t x_count, std::uint64_t* counts, int threads) {
  if (n == 0 || x_count == 0) return;
  const auto& k = ocms_affine_kernels_active();
  const int b = log2_exact(m);
  const std::size_t stride = affine_record_words(field.l, b);
  const std::size_t super = std::min(n, std::max<std::size_t>(kPrepareChunk, kAffineRecordBudgetWords / stride));
  std::vector<std::uint64_t> records(super * stride);
  const int tile_bits = std::min({std::max(kAffineMinTileBits, b + kAffineMatchesPerTileBits), kAffineMaxTileBits,
                                  63 - __builtin_clzll(x_count)});
  const std::size_t tile = std::size_t{1} << tile_bits;
  const std::size_t lead_in = static_cast<std::size_t>(x_begin & (tile - 1));
  for (std::size_t s0 = 0; s0 < n; s0 += super) {
    const std::size_t sn = std::min(super, n - s0);
    parallel_for_chunks(sn, kPrepareChunk, threads, [&](std::size_t rb, std::size_t re) {
      k.prepare(field, b, tile_bits, z + s0 + rb, a0 + s0 + rb, a1 + s0 + rb, re - rb,
                records.data() + rb * stride);
    });
    const double matches = static_cast<double>(sn) * static_cast<double>(x_count) / static_cast<double>(m);
    const double work = kAffineMatchCost * matches + kAffineReportCost * static_cast<double>(sn);
    const DecodePlan plan = plan_decode(sn, lead_in + x_count, work, tile, threads);
    const PieceCost cost{false, kAffineReportCost, kAffineMatchCost / static_cast<double>(m)};
    run_decode(sn, x_count, lead_in, plan, cost, counts, threads,
               [&](std::size_t rb, std::size_t re, std::size_t cb, std::size_t ce, std::uint64_t* out) {
                 std::vector<std::uint64_t> cursors(2 * kAffineCursorBlock);
                 k.count(records.data() + rb * stride, re - rb, field.l, b, tile_bits, x_begin + cb, ce - cb, out,
                         cursors.data());
               });
  }
}
}  // namespace

bool ocms_affine_applicable(const FieldSpec& field, std::uint64_t m) {
  return field.binary && m >= 2 && (m & (m - 1)) == 0;
}

bool ocms_affine_preferred(const FieldSpec& field, std::uint64_t m, std::size_t x_count) {
  if (!ocms_affine_applicable(field, m)) return false;
  const double range = static_cast<double>(x_count);
  const double scan = range * (x_count < kScanShortRange ? kScanShortPairCost : 1.0);
  const double affine = kAffineReportCost + kAffineMatchCost * range / static_cast<double>(m);
  return affine < scan;
}

void ocms_count_range(const FieldSpec& field, const std::uint64_t* z, const std::uint64_t* a0,
                      const std::uint64_t* a1, std::size_t n, std::uint64_t m, std::uint64_t x_begin,
                      std::size_t x_count, std::uint64_t* counts, int threads, OcmsDecode method) {
  if (method == OcmsDecode::affine && !ocms_affine_applicable(field, m))
    throw std::invalid_argument("the affine decode needs a GF(2^l) field and m a power of two, got m = " +
                                std::to_string(m) + (field.binary ? "" : " over a prime field"));
  if (method == OcmsDecode::affine ||
      (method == OcmsDecode::automatic && ocms_affine_preferred(field, m, x_count))) {
    count_range_affine(field.gf, z, a0, a1, n, m, x_begin, x_count, counts, threads);
    return;
  }
  const auto& k = ocms_kernels_active();
  run_scan(n, x_count, counts, threads,
           [&](std::size_t rb, std::size_t re, std::size_t cb, std::size_t ce, std::uint64_t* out) {
             k.count_range(field, z + rb, a0 + rb, a1 + rb, re - rb, m, x_begin + cb, ce - cb, out);
           });
}

void ocms_count_list(const FieldSpec& field, const std::uint64_t* z, const std::uint64_t* a0,
                     const std::uint64_t* a1, std::size_t n, std::uint64_t m, const std::uint64_t* xs,
                     std::size_t x_count, std::uint64_t* counts, int threads) {
  const auto& k = ocms_kernels_active();
  run_scan(n, x_count, counts, threads,
           [&](std::size_t rb, std::size_t re, std::size_t cb, std::size_t ce, std::uint64_t* out) {
             k.count_list(field, z + rb, a0 + rb, a1 + rb, re - rb, m, xs + cb, ce - cb, out);
           });
}

void ocms_lookup_list(const FieldSpec& field, const std::uint8_t* bits, const std::uint64_t* a0,
                      const std::uint64_t* a1, std::size_t n, std::uint64_t m, const std::uint64_t* xs,
                      std::size_t x_count, std::uint64_t* counts, int threads) {
  const auto& k = ocms_kernels_active();
  run_scan(n, x_count, counts, threads,
           [&](std::size_t rb, std::size_t re, std::size_t cb, std::size_t ce, std::uint64_t* out) {
             k.lookup_list(field, bits + rb * m, a0 + rb, a1 + rb, re - rb, m, xs + cb, ce - cb, out);
           });
}

void ocms_lookup_range(const FieldSpec& field, const std::uint8_t* bits, const std::uint64_t* a0,
                       const std::uint64_t* a1, std::size_t n, std::uint64_t m, std::uint64_t x_begin,
                       std::size_t x_count, std::uint64_t* counts, int threads) {
  const auto& k = ocms_kernels_active();
  run_scan(n, x_count, counts, threads,
           [&](std::size_t rb, std::size_t re, std::size_t cb, std::size_t ce, std::uint64_t* out) {
             k.lookup_range(field, bits + rb * m, a0 + rb, a1 + rb, re - rb, m, x_begin + cb, ce - cb, out);
           });
}

void randomized_response(const RngKey& key, const std::uint64_t* y, std::size_t n, std::uint64_t m,
                         std::uint64_t flip_threshold, std::uint64_t* out, int threads) {
  const auto& k = ocms_kernels_active();
  parallel_for_chunks(n, kElementChunk, threads, [&](std::size_t b, std::size_t e) {
    k.randomized_response(key, y, b, e, m, flip_threshold, out);
  });
}

}  // namespace ldpfast
