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

// z[cell_base[group[i]] + row[i]] += bits[i] for all i (reports must be valid). Large
// batches use per-thread partial tables (int32 up to 2^20 cells, int16 with exact
// spilling of overflowing cells up to 2^23) reduced in cell order, so the result is
// identical for every thread count.
void hadamard_accumulate(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                         std::size_t n, const std::uint64_t* cell_base, std::size_t n_cells, std::int64_t* z,
                         int threads);

// Validated update: if every report is valid (see hadamard_first_invalid), adds them to z
// like hadamard_accumulate and returns n; otherwise returns the first invalid index and
// leaves z unchanged. Large batches validate inside the private-table pass (16 reports at
// a time, before they are added), so the reports are read from memory once.
std::size_t hadamard_update(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                            std::size_t n, const std::uint64_t* group_rows, std::size_t n_groups,
                            const std::uint64_t* cell_base, std::size_t n_cells, std::int64_t* z, int threads);

void rhr_perturb(const RngKey& key, const std::uint64_t* x, std::size_t n, std::uint32_t base_bits,
                 std::uint64_t hsize, std::uint64_t flip_threshold, std::uint32_t* row, bool draw_rows,
                 std::uint32_t* z, int threads);

}  // namespace ldpfast
