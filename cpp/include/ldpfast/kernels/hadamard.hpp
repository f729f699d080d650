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

// A batch of reports as the caller's columns: group may be null (every report in group 0).
struct ReportColumns {
  const std::uint32_t* group;
  const std::uint32_t* row;
  const std::int8_t* bits;
};

// Where each group's cells are: a valid report has group < n_groups, row <
// group_rows[group] and a bit of -1 or +1; its cell is cell_base[group] + row.
struct GroupMap {
  const std::uint64_t* cell_base;
  const std::uint64_t* group_rows;
  std::size_t n_groups;
};

// How a fill kernel reads the reports it adds to its table: from blocks copied into L1
// (tables that fit L1: 2^10 int32 cells took 0.8-0.95 ns per report so, 0.95-1.1 direct),
// straight from the caller's columns (tables that fit L2: one pass, 2^14-2^16 cells 10-25%
// faster than from copies), or from copied blocks with the cells prefetched ahead (larger
// tables). AVX2, one thread, bench/hrr_throughput.py --versus-scatter.
enum class TableAccess { kBlocks, kDirect, kPrefetch };

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
  // The reading kernels below take each report's values from the caller's columns once:
  // into registers (TableAccess::kDirect) or a block at a time copied into the
  // kernel's own memory, checked there and used from there, so a column changed by another
  // thread meanwhile yields its old or its new value for each report, checked either way.
  // They return the first invalid index in [begin, end), or end when every report was
  // valid and added; group_counts (n_groups entries, may be null) gains the reports of each
  // group.
  //
  // Reports [begin, end) into a private int32 table t (the caller bounds the reports so
  // it cannot overflow), read as `access` says. t may be partly updated when an invalid
  // report is found.
  std::size_t (*fill32)(const ReportColumns& in, std::size_t begin, std::size_t end, const GroupMap& map,
                        std::int32_t* t, TableAccess access, std::int64_t* group_counts);
  // The same into a private int16 table that never overflows: a cell whose sum would leave
  // the int16 range is appended to *spill (its exact sum) and reset to 0. Spill capacity
  // needed: (end - begin) / 256 + 1 entries.
  std::size_t (*fill16)(const ReportColumns& in, std::size_t begin, std::size_t end, const GroupMap& map,
                        std::int16_t* t, TableAccess access, SpillLog* spill, std::int64_t* group_counts);
  // The staged path, for packed words P of 32 bits (cells below 2^31) or 64 bits.
  template <class P>
  struct Staged {
    // Reports [begin, end) checked and written to staged[begin, end) as 2 * cell + (bit < 0).
    std::size_t (*stage)(const ReportColumns& in, std::size_t begin, std::size_t end, const GroupMap& map,
                         P* staged, std::int64_t* group_counts);
    // z[cell] += sign * bit for the staged reports [begin, end) (sign -1 takes them back out).
    void (*apply)(const P* staged, std::size_t begin, std::size_t end, std::int64_t* z, int sign, bool prefetch);
    // apply restricted to the cells in [cell_lo, cell_hi) (the others are skipped): workers
    // owning disjoint cell ranges of a table too large for private copies.
    void (*apply_range)(const P* staged, std::size_t begin, std::size_t end, std::int64_t* z,
                        std::uint64_t cell_lo, std::uint64_t cell_hi, int sign);
  };
  Staged<std::uint32_t> staged32;
  Staged<std::uint64_t> staged64;
  // Recursive Hadamard Response (R1 layout): y = 2 (x mod 2^base_bits) +
  // H01[r, (x >> base_bits) + 1], z = RR_{2^(base_bits+1)}(y); rows drawn from [0, hsize)
  // when draw_rows, else read.
  void (*rhr_perturb)(const RngKey& key, const std::uint64_t* x, std::size_t begin, std::size_t end,
                      std::uint32_t base_bits, std::uint64_t hsize, std::uint64_t flip_threshold,
                      std::uint32_t* row, bool draw_rows, std::uint32_t* z);
};

}  // namespace ldpfast

LDPFAST_DECLARE_ISA_TABLE(HadamardKernels, hadamard_kernels)
