// Server-side symbol histograms (GRR): each report value is read once from the caller's
// memory, checked against the histogram size, then counted; the histogram changes all or
// nothing.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ldpfast {

struct HistogramUpdate {
  std::size_t first_bad;    // index of the first value >= size (n: none)
  std::uint64_t bad_value;  // that value, as it was read
  bool overflow;            // a counter would have wrapped around
};

// counts[y[i]] += 1 for i in [0, n), all or nothing: on a value >= size, a counter that
// would wrap, or an interruption (Interrupted, see parallel.hpp), counts is left unchanged.
// counts_zero: the caller knows every counter is 0 (a server's first batch), so a failed
// batch is taken back by clearing counts, and a batch that would be staged is not.
HistogramUpdate histogram_update(const std::uint64_t* y, std::size_t n, std::uint64_t* counts, std::size_t size,
                                 int threads, bool counts_zero = false, std::uint32_t* staging = nullptr);

// True when histogram_update stages the batch's values as uint32 (then `staging`, room
// for n values, is used instead of an allocation of its own).
bool histogram_update_stages(std::size_t n, std::size_t size, int threads, bool counts_zero);

// out[i] = scale * counts[i] + offset, each count converted to the nearest double (an
// affine decode of a histogram, e.g. GRR's debias, in one pass).
void histogram_affine(const std::uint64_t* counts, std::size_t n, double scale, double offset, double* out);

// Bytes histogram_update allocates for n values into `size` counters.
std::size_t histogram_update_scratch_bytes(std::size_t n, std::size_t size, int threads,
                                           bool counts_zero = false);

}  // namespace ldpfast
