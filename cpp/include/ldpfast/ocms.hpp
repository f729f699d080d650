// Multithreaded OCMS+RR entry points over whole batches (GIL-free, plain pointers).
#pragma once
#include <cstddef>
#include <cstdint>

#include "ldpfast/field.hpp"
#include "ldpfast/rng.hpp"

namespace ldpfast {

void ocms_hash(const FieldSpec& field, const std::uint64_t* a0, const std::uint64_t* a1,
               const std::uint64_t* x, std::size_t n, std::uint64_t m, std::uint64_t* out, int threads);

void ocms_perturb(const FieldSpec& field, const RngKey& key, const std::uint64_t* x, std::size_t n,
                  std::uint64_t m, std::uint64_t flip_threshold, std::uint64_t* z, std::uint64_t* a0,
                  std::uint64_t* a1, int threads);

// counts[j] += matches of candidate x_begin + j, j < x_count.
void ocms_count_range(const FieldSpec& field, const std::uint64_t* z, const std::uint64_t* a0,
                      const std::uint64_t* a1, std::size_t n, std::uint64_t m, std::uint64_t x_begin,
                      std::size_t x_count, std::uint64_t* counts, int threads);

// counts[j] += matches of candidate xs[j].
void ocms_count_list(const FieldSpec& field, const std::uint64_t* z, const std::uint64_t* a0,
                     const std::uint64_t* a1, std::size_t n, std::uint64_t m, const std::uint64_t* xs,
                     std::size_t x_count, std::uint64_t* counts, int threads);

void randomized_response(const RngKey& key, const std::uint64_t* y, std::size_t n, std::uint64_t m,
                         std::uint64_t flip_threshold, std::uint64_t* out, int threads);

}  // namespace ldpfast
