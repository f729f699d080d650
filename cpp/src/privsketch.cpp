#include "ldpfast/privsketch.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "ldpfast/kernels/privsketch.hpp"
#include "ldpfast/parallel.hpp"

namespace ldpfast {

namespace {
constexpr std::size_t kClientChunk = 1 << 11;  // users per client task
constexpr std::size_t kWorkPerPiece = std::size_t{1} << 22;  // cell reads between interruption points

// Users per piece of work (between interruption points) when a user costs about `cost`.
std::size_t users_per_piece(std::size_t cost) {
  return std::max<std::size_t>(1, kWorkPerPiece / std::max<std::size_t>(1, cost));
}

constexpr std::size_t kDecodeChunk = 1 << 12;  // users per decode task

// Users are decoded in chunks pulled dynamically by the workers (more chunks than
// threads, so a slow or descheduled thread does not hold the batch up). At most
// `workers` chunks run at once, and each borrows one of `workers` integer partial-count
// slots (slot 0 is pos/neg themselves), added up at the end: the sums do not depend on
// which slot or thread took which chunk. Returns the first invalid user, or n. Chunks
// are decoded in pieces of about kWorkPerPiece cell reads (user_cost per user) with an
// interruption point between them.
template <class Decode>
std::size_t decode_users(std::size_t n, std::size_t n_cand, std::size_t KM, std::size_t user_cost,
                         std::int64_t* pos, std::int64_t* neg, int threads, Decode&& decode) {
  const std::size_t piece = users_per_piece(user_cost);
  const std::size_t chunks = std::max<std::size_t>(1, ceil_div(n, kDecodeChunk));
  const std::size_t slots = std::min<std::size_t>(static_cast<std::size_t>(resolve_threads(threads)), chunks);
  std::vector<std::vector<std::int64_t>> partial(slots);
  std::vector<std::vector<std::uint32_t>> stamps(slots);
  std::unique_ptr<std::atomic<bool>[]> busy(new std::atomic<bool>[slots]);
  for (std::size_t s = 0; s < slots; ++s) busy[s].store(false);
  std::vector<std::size_t> first_bad(chunks, n);
  parallel_for(chunks, static_cast<int>(slots), [&](std::size_t c) {
    std::size_t slot = 0;
    for (bool expected = false;; slot = (slot + 1) % slots, expected = false)
      if (busy[slot].compare_exchange_weak(expected, true, std::memory_order_acquire)) break;
    if (stamps[slot].empty()) stamps[slot].assign(KM, 0);
    std::int64_t* p = pos;
    std::int64_t* q = neg;
    if (slot > 0) {
      if (partial[slot].empty()) partial[slot].assign(2 * n_cand, 0);
      p = partial[slot].data();
      q = p + n_cand;
    }
    struct Release {
      std::atomic<bool>& flag;
      ~Release() { flag.store(false, std::memory_order_release); }
    } release{busy[slot]};
    const std::size_t begin = c * kDecodeChunk, end = std::min(n, begin + kDecodeChunk);
    for (std::size_t b = begin; b < end; b += piece) {
      if (b > begin) interruption_point();
      const std::size_t e = std::min(end, b + piece);
      // Each call numbers its users' generations from 1: a stamp left by an earlier call
      // (one that stopped at an invalid user leaves some unrenewed) would read as a repeat.
      std::fill(stamps[slot].begin(), stamps[slot].end(), 0u);
      const std::size_t bad = decode(b, e, p, q, stamps[slot].data());
      if (bad < e) {
        first_bad[c] = bad;
        return;
      }
    }
  });
  const std::size_t bad = *std::min_element(first_bad.begin(), first_bad.end());
  if (bad < n) return bad;
  for (std::size_t s = 1; s < slots; ++s) {
    if (partial[s].empty()) continue;
    const std::int64_t* p = partial[s].data();
    for (std::size_t x = 0; x < n_cand; ++x) {
      pos[x] += p[x];
      neg[x] += p[n_cand + x];
    }
  }
  return n;
}
}  // namespace

void privsketch_perturb(const FieldSpec& field, const std::uint64_t* a0, const std::uint64_t* a1, std::uint32_t K,
                        std::uint32_t M, const std::int64_t* offsets, const std::uint64_t* items, std::size_t n,
                        const RngKey& key, int sampling, std::uint64_t flip_threshold, std::uint32_t* sampled,
                        std::int8_t* bits, std::uint16_t* order, int threads) {
  const auto& k = privsketch_kernels_active();
  const std::size_t KM = static_cast<std::size_t>(K) * M;
  parallel_for(ceil_div(n, kClientChunk), threads, [&](std::size_t task) {
    const std::size_t begin = task * kClientChunk, end = std::min(n, begin + kClientChunk);
    std::vector<std::uint8_t> scratch_bits(KM);
    std::vector<std::uint16_t> scratch_cells(KM);
    for_blocks(begin, end, users_per_piece(KM), [&](std::size_t b, std::size_t e) {
      k.perturb(field, a0, a1, K, M, offsets, items, b, e, key, sampling, flip_threshold, scratch_bits.data(),
                scratch_cells.data(), sampled, bits, order);
    });
  });
}

std::size_t privsketch_decode_cell(std::uint32_t K, std::uint32_t M, const std::uint16_t* order,
                                   const std::uint32_t* cell, const std::int8_t* bits, std::size_t n,
                                   const std::int64_t* bucket_offsets, const std::uint32_t* bucket_cand,
                                   const std::uint16_t* bucket_cells, std::size_t n_cand, std::int64_t* pos,
                                   std::int64_t* neg, int threads) {
  const auto& k = privsketch_kernels_active();
  // A user reads its K*M ranks and, for each candidate in its cell's bucket (n_cand / M
  // on average), K ranks.
  const std::size_t KM = static_cast<std::size_t>(K) * M;
  return decode_users(n, n_cand, KM, KM + n_cand * K / M, pos, neg, threads,
                      [&](std::size_t b, std::size_t e, std::int64_t* p, std::int64_t* q, std::uint32_t* stamps) {
                        return k.decode_cell(K, M, order, cell, bits, b, e, bucket_offsets, bucket_cand,
                                             bucket_cells, p, q, stamps);
                      });
}

std::size_t privsketch_decode_full(std::uint32_t K, std::uint32_t M, const std::uint16_t* order,
                                   const std::int8_t* bits, std::size_t n, const std::uint16_t* cand_cells,
                                   std::size_t n_cand, std::int64_t* pos, std::int64_t* neg, int threads) {
  const auto& k = privsketch_kernels_active();
  const std::size_t KM = static_cast<std::size_t>(K) * M;  // ranks, then K per candidate
  return decode_users(n, n_cand, KM, KM + n_cand * K, pos, neg, threads,
                      [&](std::size_t b, std::size_t e, std::int64_t* p, std::int64_t* q, std::uint32_t* stamps) {
                        return k.decode_full(K, M, order, bits, b, e, cand_cells, n_cand, p, q, stamps);
                      });
}

void privsketch_padding_sample(const RngKey& key, const std::int64_t* offsets, const std::uint64_t* items,
                               std::size_t n, std::uint64_t pad_len, std::uint64_t dummy, std::uint64_t* out,
                               int threads) {
  const auto& k = privsketch_kernels_active();
  constexpr std::size_t chunk = 1 << 14;
  parallel_for(ceil_div(n, chunk), threads, [&](std::size_t task) {
    const std::size_t begin = task * chunk;
    k.padding_sample(key, offsets, items, begin, std::min(n, begin + chunk), pad_len, dummy, out);
  });
}

}  // namespace ldpfast
