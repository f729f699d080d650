// Kernel table for the Hadamard family (HRR, HE, CMS+HE, RHR, HadaOracle, HadaHeavy):
// batched client perturbation and server-side accumulation of +-1 reports into integer
// z vectors. Each entry processes one task's share; threading lives in
// cpp/src/hadamard.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ldpfast/dispatch.hpp"
#include "ldpfast/field.hpp"
#include "ldpfast/rng.hpp"

namespace ldpfast {

// One HRR instance ("group"): a user of the group holding x reports
// b = H[r, col] * s with col = y + col_offset, y = hash(x >> shift) mod hash_modulus
// (or y = x >> shift when hash_modulus == 0), r uniform on [0, rows).
struct HadamardGroup {
  std::uint64_t a0;
  std::uint64_t a1;
  std::uint64_t hash_modulus;  // 0: no hashing
  std::uint64_t col_offset;    // 0 (HRR) or 1 (HE skips the all-ones column)
  std::uint64_t rows;          // Hadamard size D, a power of two
  std::uint64_t cell_base;     // offset of this group's z vector in the aggregator state
  std::uint64_t shift;         // prefix shift (HadaHeavy levels), 0 otherwise
};

// How a client batch is perturbed. Group draws (when the client draws them): a level
// uniform on [0, n_levels), then a group uniform on
// [level_first[level], level_first[level] + level_count[level]).
struct HadamardPlan {
  const FieldSpec* field;  // hashing field; may be null when no group hashes
  const HadamardGroup* groups;
  std::size_t n_groups;
  const std::uint32_t* level_first;
  const std::uint32_t* level_count;
  std::size_t n_levels;
  std::uint64_t flip_threshold;  // P(flip) = flip_threshold / 2^64
};

// Sums moved out of an int16 partial table: cell[k] had reached value[k] (outside the
// int16 range) when it was reset to 0.
struct SpillLog {
  std::uint32_t* cell;
  std::int64_t* value;
  std::size_t count;
};

struct HadamardKernels {
  // Elements [begin, end). group may be null (single group 0); when draw_groups the
  // group is drawn and written, else read. Same for rows with draw_rows.
  void (*perturb)(const HadamardPlan& plan, const RngKey& key, const std::uint64_t* x, std::size_t begin,
                  std::size_t end, std::uint32_t* group, bool draw_groups, std::uint32_t* row, bool draw_rows,
                  std::int8_t* bits);
  // First index in [begin, end) with group >= n_groups, row >= group_rows[group] or
  // bit not in {-1, +1}; end if all are valid. group may be null (group 0).
  std::size_t (*first_invalid)(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                               std::size_t begin, std::size_t end, const std::uint64_t* group_rows,
                               std::size_t n_groups);
  // z[cell_base[group[i]] + row[i]] += bits[i] for i in [begin, end). prefetch: prefetch
  // cells ahead (worth it once the table outgrows the L2 cache).
  void (*accumulate64)(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                       std::size_t begin, std::size_t end, const std::uint64_t* cell_base, std::int64_t* z,
                       bool prefetch);
  // The same into a private int32 table (the caller bounds the reports so it cannot
  // overflow).
  void (*accumulate32)(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                       std::size_t begin, std::size_t end, const std::uint64_t* cell_base, std::int32_t* t,
                       bool prefetch);
  // The same into a private int16 table that never overflows: a cell whose sum would leave
  // the int16 range is appended to *spill (its exact sum) and reset to 0. Spill capacity
  // needed: (end - begin) / 256 + 1 entries.
  void (*accumulate16)(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                       std::size_t begin, std::size_t end, const std::uint64_t* cell_base, std::int16_t* t,
                       bool prefetch, SpillLog* spill);
  // Validate (see first_invalid) and accumulate: return the first invalid index in
  // [begin, end), or end when all were valid and added (t may be partly updated when an
  // invalid report is found). Single group: checked 16 reports at a time (SIMD) in the
  // accumulation loop; several groups: blocks checked while hot in cache, then added.
  std::size_t (*accumulate32_checked)(const std::uint32_t* group, const std::uint32_t* row,
                                      const std::int8_t* bits, std::size_t begin, std::size_t end,
                                      const std::uint64_t* cell_base, const std::uint64_t* group_rows,
                                      std::size_t n_groups, std::int32_t* t, bool prefetch);
  std::size_t (*accumulate16_checked)(const std::uint32_t* group, const std::uint32_t* row,
                                      const std::int8_t* bits, std::size_t begin, std::size_t end,
                                      const std::uint64_t* cell_base, const std::uint64_t* group_rows,
                                      std::size_t n_groups, std::int16_t* t, bool prefetch, SpillLog* spill);
  // accumulate64 restricted to the cells in [cell_lo, cell_hi) (the others are skipped):
  // workers owning disjoint cell ranges of a table too large for private copies.
  void (*accumulate64_range)(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                             std::size_t begin, std::size_t end, const std::uint64_t* cell_base, std::int64_t* z,
                             std::uint64_t cell_lo, std::uint64_t cell_hi);
  // Recursive Hadamard Response (R1 layout): y = 2 (x mod 2^base_bits) +
  // H01[r, (x >> base_bits) + 1], z = RR_{2^(base_bits+1)}(y); rows drawn from [0, hsize)
  // when draw_rows, else read.
  void (*rhr_perturb)(const RngKey& key, const std::uint64_t* x, std::size_t begin, std::size_t end,
                      std::uint32_t base_bits, std::uint64_t hsize, std::uint64_t flip_threshold,
                      std::uint32_t* row, bool draw_rows, std::uint32_t* z);
};

}  // namespace ldpfast

LDPFAST_DECLARE_ISA_TABLE(HadamardKernels, hadamard_kernels)
