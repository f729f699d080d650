// Kernel table for the in-place, unnormalized fast Walsh-Hadamard transform.
//
// Every kernel applies the butterfly stages h = 1, 2, 4, ... in ascending order to each
// element, with exactly the operations (a + b, a - b) of the textbook algorithm, so all
// ISAs, block schedules and thread counts produce bit-identical results (floats included;
// only the sign/payload of NaN outputs may differ).
// Integer kernels wrap modulo 2^64 (exact while |values| * length < 2^63).
#pragma once
#include <cstddef>
#include <cstdint>

#include "ldpfast/dispatch.hpp"

namespace ldpfast {

template <class T>
struct FwhtTypeKernels {
  // Full transform of one contiguous row of power-of-two length n >= 2.
  void (*row)(T* data, std::size_t n);
  // The stages of a transform of length rows * stride that act across rows: for every
  // column c in [col_begin, col_end), the length-`rows` transform of the elements
  // data[r * stride + c], r = 0..rows-1. rows and stride are powers of two, stride >= 64,
  // and col_begin, col_end are multiples of 64 (64 covers every vector width).
  void (*columns)(T* data, std::size_t rows, std::size_t stride, std::size_t col_begin, std::size_t col_end);
};

struct FwhtKernels {
  FwhtTypeKernels<float> f32;
  FwhtTypeKernels<double> f64;
  FwhtTypeKernels<std::int64_t> i64;
};

}  // namespace ldpfast

LDPFAST_DECLARE_ISA_TABLE(FwhtKernels, fwht_kernels)
