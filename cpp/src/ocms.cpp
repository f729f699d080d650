#include "ldpfast/ocms.hpp"

#include <algorithm>

#include "ldpfast/kernels/ocms.hpp"
#include "ldpfast/parallel.hpp"

namespace ldpfast {

namespace {
constexpr std::size_t kElementChunk = 1 << 14;   // client-side elements per task
constexpr std::size_t kCandidateTile = 1 << 12;  // server-side candidates per task

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

template <class Body>
void for_chunks(std::size_t n, std::size_t chunk, int threads, Body&& body) {
  parallel_for(ceil_div(n, chunk), threads, [&](std::size_t task) {
    const std::size_t begin = task * chunk;
    body(begin, std::min(n, begin + chunk));
  });
}
}  // namespace

void ocms_hash(const FieldSpec& field, const std::uint64_t* a0, const std::uint64_t* a1,
               const std::uint64_t* x, std::size_t n, std::uint64_t m, std::uint64_t* out, int threads) {
  const auto& k = ocms_kernels_active();
  for_chunks(n, kElementChunk, threads, [&](std::size_t b, std::size_t e) {
    k.hash(field, a0 + b, a1 + b, x + b, e - b, m, out + b);
  });
}

void ocms_perturb(const FieldSpec& field, const RngKey& key, const std::uint64_t* x, std::size_t n,
                  std::uint64_t m, std::uint64_t flip_threshold, std::uint64_t* z, std::uint64_t* a0,
                  std::uint64_t* a1, int threads) {
  const auto& k = ocms_kernels_active();
  for_chunks(n, kElementChunk, threads, [&](std::size_t b, std::size_t e) {
    k.perturb(field, key, x, b, e, m, flip_threshold, z, a0, a1);
  });
}

void ocms_count_range(const FieldSpec& field, const std::uint64_t* z, const std::uint64_t* a0,
                      const std::uint64_t* a1, std::size_t n, std::uint64_t m, std::uint64_t x_begin,
                      std::size_t x_count, std::uint64_t* counts, int threads) {
  const auto& k = ocms_kernels_active();
  for_chunks(x_count, kCandidateTile, threads, [&](std::size_t b, std::size_t e) {
    k.count_range(field, z, a0, a1, n, m, x_begin + b, e - b, counts + b);
  });
}

void ocms_count_list(const FieldSpec& field, const std::uint64_t* z, const std::uint64_t* a0,
                     const std::uint64_t* a1, std::size_t n, std::uint64_t m, const std::uint64_t* xs,
                     std::size_t x_count, std::uint64_t* counts, int threads) {
  const auto& k = ocms_kernels_active();
  for_chunks(x_count, kCandidateTile, threads, [&](std::size_t b, std::size_t e) {
    k.count_list(field, z, a0, a1, n, m, xs + b, e - b, counts + b);
  });
}

void randomized_response(const RngKey& key, const std::uint64_t* y, std::size_t n, std::uint64_t m,
                         std::uint64_t flip_threshold, std::uint64_t* out, int threads) {
  const auto& k = ocms_kernels_active();
  for_chunks(n, kElementChunk, threads, [&](std::size_t b, std::size_t e) {
    k.randomized_response(key, y, b, e, m, flip_threshold, out);
  });
}

}  // namespace ldpfast
