// Batched, multithreaded FWHT over the rows of a C-contiguous (rows x n) array.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ldpfast {

void fwht_rows(float* data, std::size_t rows, std::size_t n, int threads);
void fwht_rows(double* data, std::size_t rows, std::size_t n, int threads);
void fwht_rows(std::int64_t* data, std::size_t rows, std::size_t n, int threads);

}  // namespace ldpfast
