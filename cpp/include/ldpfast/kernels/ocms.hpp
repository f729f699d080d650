// Kernel table for OCMS+RR: batched hashing, client perturbation, server match counting.
// Each entry processes one task's share; threading lives in cpp/src/ocms.cpp. Inputs
// a0, a1, x and candidates must be field elements (the bindings check it); report
// symbols z may be anything (z >= m never matches). Every ISA's copy gives bit-identical
// results; client entries draw element i from ElementRng(key, stream, i) whatever the split.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ldpfast/dispatch.hpp"
#include "ldpfast/field.hpp"
#include "ldpfast/rng.hpp"

namespace ldpfast {

struct OcmsKernels {
  // out[i] = ((a0[i] + a1[i] x[i]) in the field) mod m, for i in [0, n).
  void (*hash)(const FieldSpec& field, const std::uint64_t* a0, const std::uint64_t* a1, const std::uint64_t* x,
               std::size_t n, std::uint64_t m, std::uint64_t* out);
  // Client reports for elements [begin, end): a0, a1 uniform on the field, z = RR_m(h(x)).
  void (*perturb)(const FieldSpec& field, const RngKey& key, const std::uint64_t* x, std::size_t begin,
                  std::size_t end, std::uint64_t m, std::uint64_t flip_threshold, std::uint64_t* z,
                  std::uint64_t* a0, std::uint64_t* a1);
  // counts[j] += #{i < n : h_i(x_begin + j) == z[i]} for j in [0, x_count). Needs
  // x_begin + x_count <= field size. Prime fields: incremental walk, no product per pair.
  void (*count_range)(const FieldSpec& field, const std::uint64_t* z, const std::uint64_t* a0,
                      const std::uint64_t* a1, std::size_t n, std::uint64_t m, std::uint64_t x_begin,
                      std::size_t x_count, std::uint64_t* counts);
  // counts[j] += #{i < n : h_i(xs[j]) == z[i]} for j in [0, x_count).
  void (*count_list)(const FieldSpec& field, const std::uint64_t* z, const std::uint64_t* a0,
                     const std::uint64_t* a1, std::size_t n, std::uint64_t m, const std::uint64_t* xs,
                     std::size_t x_count, std::uint64_t* counts);
  // counts[j] += sum over i < n of bits[i m + h_i(xs[j])] for j in [0, x_count): bits holds
  // n rows of m bytes (each report's bit vector, indexed by its hash).
  void (*lookup_list)(const FieldSpec& field, const std::uint8_t* bits, const std::uint64_t* a0,
                      const std::uint64_t* a1, std::size_t n, std::uint64_t m, const std::uint64_t* xs,
                      std::size_t x_count, std::uint64_t* counts);
  // lookup_list over candidates x_begin + j, j < x_count (x_begin + x_count <= field
  // size, m <= 2^63). Prime fields: the walk of count_range, no product per pair.
  void (*lookup_range)(const FieldSpec& field, const std::uint8_t* bits, const std::uint64_t* a0,
                       const std::uint64_t* a1, std::size_t n, std::uint64_t m, std::uint64_t x_begin,
                       std::size_t x_count, std::uint64_t* counts);
  // out[i] = RR_m(y[i]) for i in [begin, end).
  void (*randomized_response)(const RngKey& key, const std::uint64_t* y, std::size_t begin, std::size_t end,
                              std::uint64_t m, std::uint64_t flip_threshold, std::uint64_t* out);
};

}  // namespace ldpfast

LDPFAST_DECLARE_ISA_TABLE(OcmsKernels, ocms_kernels)
