// Projective Geometry Response entry points over whole batches (GIL-free, plain pointers):
// the client, the server's histogram of reports and the decoder. Results are identical for
// every thread count (per-user ChaCha20 streams, integer sums).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ldpfast/kernels/pgr.hpp"
#include "ldpfast/rng.hpp"

namespace ldpfast {

// Fills *out for PG(t-1, q) (inverse: the table it points to, kept by the caller) and returns
// an empty string, or the reason the parameters are refused: q must be a prime < 2^32,
// 2 <= t <= kPgrMaxT and the number of points P[t] below 2^32.
std::string pgr_geometry(std::uint64_t q, int t, std::vector<std::uint32_t>* inverse, PgrGeometry* out);

// y[i] for each value x[i] (points, < P[t]). Returns the first i with x[i] >= P[t] (y is then
// incomplete), or n.
std::size_t pgr_perturb(const PgrGeometry& G, const RngKey& key, const std::uint64_t* x, std::size_t n,
                        std::uint64_t in_threshold, std::uint32_t* y, int threads);

// counts[y[i]] += 1 for every report, reading each y[i] once. Returns n when all are < K, else
// the first i with y[i] >= K (counts then hold part of the batch: pass a scratch copy).
std::size_t pgr_update(const std::uint32_t* y, std::size_t n, std::uint64_t K, std::uint64_t* counts,
                       int threads);

// out[x] = sum of counts[y] over the points y with <x, y> = 0, for every point x < P[t]: the
// hyperplane sums, by a dynamic program over the coordinates in O(q^t t) = O(K q t) additions
// and O(K) memory.
void pgr_decode(const PgrGeometry& G, const std::uint64_t* counts, std::uint64_t* out, int threads);

}  // namespace ldpfast
