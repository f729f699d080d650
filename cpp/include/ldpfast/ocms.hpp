// Multithreaded OCMS+RR entry points over whole batches (GIL-free, plain pointers).
#pragma once
#include <cstddef>
#include <cstdint>

#include "ldpfast/field.hpp"
#include "ldpfast/rng.hpp"

namespace ldpfast {

void ocms_hash(const FieldSpec& field, const std::uint64_t* a0, const std::uint64_t* a1, const std::uint64_t* x,
               std::size_t n, std::uint64_t m, std::uint64_t* out, int threads);

void ocms_perturb(const FieldSpec& field, const RngKey& key, const std::uint64_t* x, std::size_t n,
                  std::uint64_t m, std::uint64_t flip_threshold, std::uint64_t* z, std::uint64_t* a0,
                  std::uint64_t* a1, int threads);

// How count_range finds the matches: `scan` checks every (report, candidate) pair;
// `affine` (GF(2^l) fields with m a power of two only) solves h(x) = z per report and
// visits only the matching candidates (kernels/ocms_affine.hpp); `automatic` picks the
// faster one (ocms_affine_preferred). Both give identical counts.
enum class OcmsDecode { automatic, scan, affine };

bool ocms_affine_applicable(const FieldSpec& field, std::uint64_t m);
// The crossover rule of `automatic` (measured by bench/ocms_affine_decode.py).
bool ocms_affine_preferred(const FieldSpec& field, std::uint64_t m, std::size_t x_count);

// counts[j] += matches of candidate x_begin + j, j < x_count. Throws std::invalid_argument
// for `affine` where it does not apply.
void ocms_count_range(const FieldSpec& field, const std::uint64_t* z, const std::uint64_t* a0,
                      const std::uint64_t* a1, std::size_t n, std::uint64_t m, std::uint64_t x_begin,
                      std::size_t x_count, std::uint64_t* counts, int threads,
                      OcmsDecode method = OcmsDecode::automatic);

// counts[j] += matches of candidate xs[j].
void ocms_count_list(const FieldSpec& field, const std::uint64_t* z, const std::uint64_t* a0,
                     const std::uint64_t* a1, std::size_t n, std::uint64_t m, const std::uint64_t* xs,
                     std::size_t x_count, std::uint64_t* counts, int threads);

// counts[j] += sum over reports i of bits[i m + h_i(xs[j])] (bits: n rows of m bytes):
// the reports' bit vectors read at each candidate's hash.
void ocms_lookup_list(const FieldSpec& field, const std::uint8_t* bits, const std::uint64_t* a0,
                      const std::uint64_t* a1, std::size_t n, std::uint64_t m, const std::uint64_t* xs,
                      std::size_t x_count, std::uint64_t* counts, int threads);

// ocms_lookup_list over the candidates x_begin + j, j < x_count.
void ocms_lookup_range(const FieldSpec& field, const std::uint8_t* bits, const std::uint64_t* a0,
                       const std::uint64_t* a1, std::size_t n, std::uint64_t m, std::uint64_t x_begin,
                       std::size_t x_count, std::uint64_t* counts, int threads);

void randomized_response(const RngKey& key, const std::uint64_t* y, std::size_t n, std::uint64_t m,
                         std::uint64_t flip_threshold, std::uint64_t* out, int threads);

}  // namespace ldpfast
