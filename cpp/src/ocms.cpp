#include "ldpfast/ocms.hpp"

#include <algorithm>
#include <vector>

#include "ldpfast/kernels/ocms.hpp"
#include "ldpfast/parallel.hpp"

namespace ldpfast {

namespace {
constexpr std::size_t kElementChunk = 1 << 14;   // client-side elements per task

}  // namespace

void ocms_hash(const FieldSpec& field, const std::uint64_t* a0, const std::uint64_t* a1,
               const std::uint64_t* x, std::size_t n, std::uint64_t m, std::uint64_t* out, int threads) {
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
  std::size_t candidate_chunk;  // candidates per task
  std::size_t report_block;     // reports per task
};

constexpr double kMinPairsPerTask = 1 << 21;      // below this a task is not worth a thread
constexpr std::size_t kMinCandidateChunk = 4096;  // one counter tile of the kernel
constexpr std::size_t kMinReportBlock = 256;
constexpr std::size_t kMaxPartialEntries = std::size_t{1} << 22;  // 32 MiB of partial counts

DecodePlan plan_decode(std::size_t n, std::size_t x_count, int threads) {
  const std::size_t workers = static_cast<std::size_t>(resolve_threads(threads));
  std::size_t tasks = workers <= 1 ? 1 : 4 * workers;
  const double pairs = static_cast<double>(n) * static_cast<double>(x_count);
  tasks = std::min<std::size_t>(tasks, std::max<double>(1.0, pairs / kMinPairsPerTask));
  if (tasks <= 1) return DecodePlan{x_count, n};
  const std::size_t chunks = std::min(tasks, ceil_div(x_count, kMinCandidateChunk));
  // Split reports (which costs partial count arrays) only when candidate chunks alone
  // cannot keep every worker busy.
  std::size_t blocks = chunks >= workers ? 1 : std::min(ceil_div(tasks, chunks), ceil_div(n, kMinReportBlock));
  blocks = std::max<std::size_t>(1, std::min(blocks, kMaxPartialEntries / std::max<std::size_t>(1, x_count)));
  // Whole kernel tiles per chunk (aligned tiles also keep the GF(2^l) walk on its fast path).
  const std::size_t chunk = ceil_div(ceil_div(x_count, chunks), kMinCandidateChunk) * kMinCandidateChunk;
  return DecodePlan{chunk, ceil_div(n, blocks)};
}

// Pieces of about this many (report, candidate) pairs (a few ms to tens of ms) between
// interruption points.
constexpr std::size_t kPairsPerPiece = std::size_t{1} << 22;

// count(rb, re, cb, ce, out) in pieces with an interruption point before each. Pieces are
// whole report blocks and candidate tiles of the kernels, and counts are integer sums, so
// the kernels do the same work and the result is the same.
template <class Count>
void count_in_pieces(std::size_t rb, std::size_t re, std::size_t cb, std::size_t ce, std::uint64_t* out,
                     Count& count) {
  const std::size_t candidates = std::min(ce - cb, kPairsPerPiece / kMinReportBlock);
  const std::size_t reports =
      std::max(kMinReportBlock, kPairsPerPiece / candidates / kMinReportBlock * kMinReportBlock);
  for (std::size_t c = cb; c < ce; c += candidates) {
    const std::size_t c_end = std::min(ce, c + candidates);
    for_blocks(rb, re, reports, [&](std::size_t b, std::size_t e) { count(b, e, c, c_end, out + (c - cb)); });
  }
}

// Runs count(report_begin, report_end, cand_begin, cand_end, out) over the plan, where
// out points at the counts slot of cand_begin.
template <class Count>
void run_decode(std::size_t n, std::size_t x_count, std::uint64_t* counts, int threads, Count&& count) {
  if (n == 0 || x_count == 0) return;
  const DecodePlan plan = plan_decode(n, x_count, threads);
  const std::size_t chunks = ceil_div(x_count, plan.candidate_chunk);
  const std::size_t blocks = ceil_div(n, plan.report_block);
  if (chunks * blocks == 1) {
    count_in_pieces(0, n, 0, x_count, counts, count);
    return;
  }
  std::vector<std::uint64_t> partial(blocks > 1 ? blocks * x_count : 0);
  parallel_for(chunks * blocks, threads, [&](std::size_t task) {
    const std::size_t block = task / chunks, chunk = task % chunks;
    const std::size_t cb = chunk * plan.candidate_chunk, ce = std::min(x_count, cb + plan.candidate_chunk);
    const std::size_t rb = block * plan.report_block, re = std::min(n, rb + plan.report_block);
    std::uint64_t* out = blocks > 1 ? partial.data() + block * x_count + cb : counts + cb;
    count_in_pieces(rb, re, cb, ce, out, count);
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
}  // namespace

void ocms_count_range(const FieldSpec& field, const std::uint64_t* z, const std::uint64_t* a0,
                      const std::uint64_t* a1, std::size_t n, std::uint64_t m, std::uint64_t x_begin,
                      std::size_t x_count, std::uint64_t* counts, int threads) {
  const auto& k = ocms_kernels_active();
  run_decode(n, x_count, counts, threads,
             [&](std::size_t rb, std::size_t re, std::size_t cb, std::size_t ce, std::uint64_t* out) {
               k.count_range(field, z + rb, a0 + rb, a1 + rb, re - rb, m, x_begin + cb, ce - cb, out);
             });
}

void ocms_count_list(const FieldSpec& field, const std::uint64_t* z, const std::uint64_t* a0,
                     const std::uint64_t* a1, std::size_t n, std::uint64_t m, const std::uint64_t* xs,
                     std::size_t x_count, std::uint64_t* counts, int threads) {
  const auto& k = ocms_kernels_active();
  run_decode(n, x_count, counts, threads,
             [&](std::size_t rb, std::size_t re, std::size_t cb, std::size_t ce, std::uint64_t* out) {
               k.count_list(field, z + rb, a0 + rb, a1 + rb, re - rb, m, xs + cb, ce - cb, out);
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
