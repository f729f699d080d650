// Kernel table for PrivSketch ([PS]) and its sketch baselines: batched clients (Bloom-style
// K x M bit sketch, ordering matrix, sampling, randomized response) and the decode-first
// collector. Each entry processes one task's share; threading lives in cpp/src/privsketch.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ldpfast/dispatch.hpp"
#include "ldpfast/field.hpp"
#include "ldpfast/rng.hpp"

namespace ldpfast {

// What a sketch client sends besides the optional ordering matrix.
enum PrivSketchSampling : int {
  kSketchFull = 0,  // every cell of the K x M sketch, each flipped (noSmp, Multi-PCMS-Min)
  kSketchCell = 1,  // one uniformly sampled cell k*M+m (PrivSketch, its no-O variant)
  kSketchRow = 2,   // one uniformly sampled row (Multi-PCMS-Mean)
};

struct PrivSketchKernels {
  // Client reports for users [begin, end). User i holds items[offsets[i]:offsets[i+1]]
  // (each < the field size). Row k hashes with ((a0[k] + a1[k] x) in field) mod M.
  // sampled[i]: the cell (kSketchCell) or row (kSketchRow); unused for kSketchFull.
  // bits: +-1 per sent cell (1, M or K*M per user). order: K*M distinct ranks per user
  // (nullptr = not sent). scratch: K*M bytes + K*M uint16 owned by the calling task.
  void (*perturb)(const FieldSpec& field, const std::uint64_t* a0, const std::uint64_t* a1, std::uint32_t K,
                  std::uint32_t M, const std::int64_t* offsets, const std::uint64_t* items, std::size_t begin,
                  std::size_t end, const RngKey& key, int sampling, std::uint64_t flip_threshold,
                  std::uint8_t* scratch_bits, std::uint16_t* scratch_cells, std::uint32_t* sampled,
                  std::int8_t* bits, std::uint16_t* order);
  // Decode-first collector with sampling: for each user, the candidates in the bucket of
  // its sampled cell (bucket_offsets[c]..bucket_offsets[c+1] of bucket_cand / bucket_cells,
  // where bucket_cells holds the K cells k*M + H_k(x) of that entry's candidate) count
  // towards pos (bit +1) or neg (bit -1) when the sampled cell has the smallest rank.
  // Returns the first user in [begin, end) whose order is not a permutation of [0, K*M)
  // (counts stop there), or end. stamps: K*M zeroed words of scratch for the check.
  std::size_t (*decode_cell)(std::uint32_t K, std::uint32_t M, const std::uint16_t* order,
                             const std::uint32_t* cell, const std::int8_t* bits, std::size_t begin,
                             std::size_t end, const std::int64_t* bucket_offsets,
                             const std::uint32_t* bucket_cand, const std::uint16_t* bucket_cells,
                             std::int64_t* pos, std::int64_t* neg, std::uint32_t* stamps);
  // Decode-first collector without sampling (noSmp): every candidate x takes the user's
  // bit at argmin_k order[k*M + H_k(x)]; cand_cells holds the K cells of each candidate.
  std::size_t (*decode_full)(std::uint32_t K, std::uint32_t M, const std::uint16_t* order,
                             const std::int8_t* bits, std::size_t begin, std::size_t end,
                             const std::uint16_t* cand_cells, std::size_t n_cand, std::int64_t* pos,
                             std::int64_t* neg, std::uint32_t* stamps);
  // Padding and sampling (PSFO): users with more than pad_len items take one uniformly;
  // the others draw r < pad_len and take their r-th item, or `dummy` when r >= size.
  void (*padding_sample)(const RngKey& key, const std::int64_t* offsets, const std::uint64_t* items,
                         std::size_t begin, std::size_t end, std::uint64_t pad_len, std::uint64_t dummy,
                         std::uint64_t* out);
};

}  // namespace ldpfast

LDPFAST_DECLARE_ISA_TABLE(PrivSketchKernels, privsketch_kernels)
