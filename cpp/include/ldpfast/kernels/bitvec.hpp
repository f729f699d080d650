// Kernel table of the bit-vector protocols (OUE/SUE, RAPPOR, L-OUE/L-OSUE/L-SUE, dBitFlip)
// and of the memoized (longitudinal) clients. A report is a row of k bits, least
// significant bit first, in row_bytes = ceil(k/8) bytes: bit j is bit j % 8 of byte j / 8.
// The server's one hot loop is `column_counts`, the per-group (per-cohort) count of every
// bit position. Each entry processes one task's share; threading lives in cpp/src/bitvec.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ldpfast/dispatch.hpp"
#include "ldpfast/rng.hpp"

namespace ldpfast {

// ChaCha20 streams of these clients (beside rng.hpp's), so draws of different purposes
// under one key never overlap.
constexpr std::uint64_t kStreamUnary = 0x21;          // one-shot unary encoding (batch key)
constexpr std::uint64_t kStreamMemoPermanent = 0x22;  // permanent response (user secret, counter = value)
constexpr std::uint64_t kStreamInstantaneous = 0x23;  // instantaneous response (batch key)
constexpr std::uint64_t kStreamMemoDerive = 0x24;     // per-user choices made once (user secret)

// Bytes of per-group scratch column_counts needs per group: one byte counter per bit,
// rounded up to whole 64-bit words of the row (with one group: 8 bit-sliced counter
// planes of the row's words, the same size).
static inline std::size_t bitvec_acc_stride(std::size_t row_bytes) { return (row_bytes + 7) / 8 * 64; }

// (Both helpers have internal linkage: kernel files are compiled once per ISA.)
// A user's 32-byte secret as a ChaCha20 key (little-endian words, as the batch keys).
static inline RngKey secret_key(const std::uint8_t* secret) {
  RngKey key;
  for (int i = 0; i < 8; ++i)
    key.words[i] = std::uint32_t{secret[4 * i]} | (std::uint32_t{secret[4 * i + 1]} << 8) |
                   (std::uint32_t{secret[4 * i + 2]} << 16) | (std::uint32_t{secret[4 * i + 3]} << 24);
  return key;
}

struct BitvecKernels {
  // Rows [begin, end): counts[g * k + j] += bit j of row i and group_n[g] += 1, with
  // g = group[i] (0 when group is null). Each row and group index is read once. Returns
  // the first row whose group is >= n_groups or whose bits beyond k are set, or end (the
  // counts of the rows before it are added). acc (n_groups * bitvec_acc_stride(row_bytes)
  // bytes) and fill (n_groups words) are zeroed scratch, left zeroed.
  std::size_t (*column_counts)(const std::uint8_t* rows, std::size_t row_bytes, std::size_t k,
                               const std::uint32_t* group, std::size_t n_groups, std::size_t begin,
                               std::size_t end, std::uint8_t* acc, std::uint32_t* fill, std::uint64_t* counts,
                               std::uint64_t* group_n);
  // One-shot unary encoding of rows [begin, end): bit hot[i] is 1 with probability
  // t_hot / 2^64, every other bit with t_cold / 2^64 (hot[i] >= k: no hot bit). Element i
  // draws from (key, kStreamUnary, i).
  void (*unary_perturb)(const RngKey& key, const std::uint64_t* hot, std::size_t begin, std::size_t end,
                        std::size_t k, std::uint64_t t_hot, std::uint64_t t_cold, std::uint8_t* out);
  // Memoized unary encoding: user i's permanent row is the unary encoding of hot[i] with
  // (t1_hot, t1_cold) drawn from ChaCha20 keyed by its 32-byte secret (secrets + 32 i) at
  // counter hot[i] (kStreamMemoPermanent): a deterministic function of (secret, value).
  // With `instantaneous`, each bit is then redrawn fresh, 1 with probability t2_one / 2^64
  // where the permanent bit is 1 and t2_zero / 2^64 where it is 0, from (key,
  // kStreamInstantaneous, i); without, the permanent row is written.
  void (*memo_unary_perturb)(const RngKey& key, const std::uint8_t* secrets, const std::uint64_t* hot,
                             std::size_t begin, std::size_t end, std::size_t k, std::uint64_t t1_hot,
                             std::uint64_t t1_cold, bool instantaneous, std::uint64_t t2_one,
                             std::uint64_t t2_zero, std::uint8_t* out);
  // Instantaneous response to given rows: out bit j of row i is 1 with probability
  // t_one / 2^64 where bit j of rows[i] is 1, t_zero / 2^64 where it is 0 (key,
  // kStreamInstantaneous, i). Bits beyond k stay 0.
  void (*bit_response)(const RngKey& key, const std::uint8_t* rows, std::size_t row_bytes, std::size_t k,
                       std::size_t begin, std::size_t end, std::uint64_t t_one, std::uint64_t t_zero,
                       std::uint8_t* out);
  // Memoized k-ary randomized response on [0, m): the permanent symbol of user i is
  // RR(x[i]) with flip threshold t1 drawn from (secret i, kStreamMemoPermanent, x[i]); with
  // `instantaneous` the report is RR(permanent) with flip threshold t2 from (key,
  // kStreamInstantaneous, i).
  void (*memo_grr)(const RngKey& key, const std::uint8_t* secrets, const std::uint64_t* x, std::size_t begin,
                   std::size_t end, std::uint64_t m, std::uint64_t t1, bool instantaneous, std::uint64_t t2,
                   std::uint64_t* out);
  // dBitFlip with memoization: user i draws `sampled` distinct buckets of [0, b) once from
  // its secret (kStreamMemoDerive, counter 0), sorted into buckets[i * sampled ...]; its
  // response for bucket x[i] depends only on which sampled bucket equals x[i] (or none),
  // and is drawn once per such state from (secret, kStreamMemoPermanent, state): bit p is 1
  // with probability t_hot / 2^64 if buckets[p] == x[i], t_cold / 2^64 otherwise.
  void (*dbitflip_perturb)(const std::uint8_t* secrets, const std::uint64_t* x, std::size_t begin,
                           std::size_t end, std::uint64_t b, std::size_t sampled, std::uint64_t t_hot,
                           std::uint64_t t_cold, std::uint32_t* buckets, std::uint8_t* bits);
  // Uniform draws below `bound` made once per user: out[i * count + c] from (secret i,
  // kStreamMemoDerive, counter 1 + `purpose`), c < count (e.g. a user's hash function).
  void (*memo_draws)(const std::uint8_t* secrets, std::size_t begin, std::size_t end, std::uint64_t purpose,
                     std::uint64_t bound, std::size_t count, std::uint64_t* out);
};

}  // namespace ldpfast

LDPFAST_DECLARE_ISA_TABLE(BitvecKernels, bitvec_kernels)
