// Multithreaded PrivSketch entry points over whole batches (GIL-free, plain pointers).
// Results are identical for every thread count: clients draw per-user ChaCha20 streams,
// collectors add integer partials.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ldpfast/field.hpp"
#include "ldpfast/rng.hpp"

namespace ldpfast {

void privsketch_perturb(const FieldSpec& field, const std::uint64_t* a0, const std::uint64_t* a1, std::uint32_t K,
                        std::uint32_t M, const std::int64_t* offsets, const std::uint64_t* items, std::size_t n,
                        const RngKey& key, int sampling, std::uint64_t flip_threshold, std::uint32_t* sampled,
                        std::int8_t* bits, std::uint16_t* order, int threads);

// pos/neg (length n_cand, zero-initialised by the caller) receive the counts. Returns the
// first user whose ordering matrix is invalid, or n (then pos/neg are complete).
std::size_t privsketch_decode_cell(std::uint32_t K, std::uint32_t M, const std::uint16_t* order,
                                   const std::uint32_t* cell, const std::int8_t* bits, std::size_t n,
                                   const std::int64_t* bucket_offsets, const std::uint32_t* bucket_cand,
                                   const std::uint16_t* bucket_cells, std::size_t n_cand, std::int64_t* pos,
                                   std::int64_t* neg, int threads);

std::size_t privsketch_decode_full(std::uint32_t K, std::uint32_t M, const std::uint16_t* order,
                                   const std::int8_t* bits, std::size_t n, const std::uint16_t* cand_cells,
                                   std::size_t n_cand, std::int64_t* pos, std::int64_t* neg, int threads);

void privsketch_padding_sample(const RngKey& key, const std::int64_t* offsets, const std::uint64_t* items,
                               std::size_t n, std::uint64_t pad_len, std::uint64_t dummy, std::uint64_t* out,
                               int threads);

}  // namespace ldpfast
