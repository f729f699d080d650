// Multithreaded Hadamard-family entry points over whole batches (GIL-free, plain pointers).
#pragma once
#include <cstddef>
#include <cstdint>

#include "ldpfast/kernels/hadamard.hpp"

namespace ldpfast {

void hadamard_perturb(const HadamardPlan& plan, const RngKey& key, const std::uint64_t* x, std::size_t n,
                      std::uint32_t* group, bool draw_groups, std::uint32_t* row, bool draw_rows,
                      std::int8_t* bits, int threads);

// Index of the first invalid report (see HadamardKernels::first_invalid), n if none.
std::size_t hadamard_first_invalid(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                                   std::size_t n, const std::uint64_t* group_rows, std::size_t n_groups,
                                   int threads);

// Where a committed batch's counts go (either may be null): group_counts[g] (n_groups
// entries) += reports of group g, *count += reports.
struct UpdateTotals {
  std::int64_t* group_counts;
  std::int64_t* count;
};

// In-place validated update of z (n_cells entries; every valid report's cell is below
// it): when every report is valid (see hadamard_first_invalid) adds bits[i] to
// z[cell_base[group[i]] + row[i]] for all i, then the totals, and returns n; otherwise
// returns the first invalid index and leaves z and the totals unchanged. Each report value
// is read from the columns once (copied a block at a time and checked in the copy), so
// columns changed meanwhile by another thread give each report its old or its new value,
// checked. Interrupted (Interrupted thrown): z and the totals are unchanged (what was added
// is taken back out). Large batches add into per-thread private tables (int32 up to 2^20
// cells, int16 with exact spilling of overflowing cells up to 2^23) reduced in cell order;
// others stage the checked cells in a buffer first; the result is identical for every
// thread count.
std::size_t hadamard_update(const ReportColumns& in, std::size_t n, const GroupMap& map, std::size_t n_cells,
                            std::int64_t* z, const UpdateTotals& totals, int threads);

// Bytes hadamard_update allocates for a batch of n reports (private tables or the staging
// buffer, the per-thread group counts): the caller checks them against its memory budget.
std::size_t hadamard_update_scratch_bytes(std::size_t n, std::size_t n_cells, std::size_t n_groups, int threads);

void rhr_perturb(const RngKey& key, const std::uint64_t* x, std::size_t n, std::uint32_t base_bits,
                 std::uint64_t hsize, std::uint64_t flip_threshold, std::uint32_t* row, bool draw_rows,
                 std::uint32_t* z, int threads);

}  // namespace ldpfast
