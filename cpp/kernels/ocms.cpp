// OCMS+RR kernels, compiled once per ISA (see dispatch.hpp).
#include "ldpfast/kernels/ocms.hpp"

namespace ldpfast {
namespace LDPFAST_ISA_NS {
namespace {

void hash(const FieldSpec& field, const std::uint64_t* a0, const std::uint64_t* a1,
          const std::uint64_t* x, std::size_t n, std::uint64_t m, std::uint64_t* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = FieldHasher(field, a0[i], a1[i]).value(x[i]) % m;
}

// Uniform field element: rejection for primes, masking for GF(2^l).
std::uint64_t draw_field_element(ElementRng& rng, const FieldSpec& field) {
  if (field.binary) return rng.next_u64() & field.gf.mask;
  return rng.below(field.prime.p);
}

void perturb(const FieldSpec& field, const RngKey& key, const std::uint64_t* x, std::size_t begin,
             std::size_t end, std::uint64_t m, std::uint64_t flip_threshold, std::uint64_t* z,
             std::uint64_t* a0, std::uint64_t* a1) {
  for (std::size_t i = begin; i < end; ++i) {
    ElementRng rng(key, kStreamOcms, i);
    a0[i] = draw_field_element(rng, field);
    a1[i] = draw_field_element(rng, field);
    const std::uint64_t y = FieldHasher(field, a0[i], a1[i]).value(x[i]) % m;
    z[i] = randomized_response(rng, y, m, flip_threshold);
  }
}

void count_range(const FieldSpec& field, const std::uint64_t* z, const std::uint64_t* a0,
                 const std::uint64_t* a1, std::size_t n, std::uint64_t m, std::uint64_t x_begin,
                 std::size_t x_count, std::uint64_t* counts) {
  for (std::size_t i = 0; i < n; ++i) {
    const FieldHasher hasher(field, a0[i], a1[i]);
    if (field.binary) {
      for (std::size_t j = 0; j < x_count; ++j) counts[j] += hasher.value(x_begin + j) % m == z[i];
      continue;
    }
    // Prime field: v(x + 1) = v(x) + a1 (mod p), no multiplication per pair.
    const std::uint64_t p = field.prime.p;
    std::uint64_t v = hasher.value(x_begin);
    for (std::size_t j = 0; j < x_count; ++j) {
      counts[j] += v % m == z[i];
      v = add_mod(v, a1[i], p);
    }
  }
}

void count_list(const FieldSpec& field, const std::uint64_t* z, const std::uint64_t* a0,
                const std::uint64_t* a1, std::size_t n, std::uint64_t m, const std::uint64_t* xs,
                std::size_t x_count, std::uint64_t* counts) {
  for (std::size_t i = 0; i < n; ++i) {
    const FieldHasher hasher(field, a0[i], a1[i]);
    for (std::size_t j = 0; j < x_count; ++j) counts[j] += hasher.value(xs[j]) % m == z[i];
  }
}

void randomized_response_batch(const RngKey& key, const std::uint64_t* y, std::size_t begin,
                               std::size_t end, std::uint64_t m, std::uint64_t flip_threshold,
                               std::uint64_t* out) {
  for (std::size_t i = begin; i < end; ++i) {
    ElementRng rng(key, kStreamRandomizedResponse, i);
    out[i] = randomized_response(rng, y[i], m, flip_threshold);
  }
}

}  // namespace

extern const OcmsKernels ocms_kernels = {&hash, &perturb, &count_range, &count_list,
                                         &randomized_response_batch};

}  // namespace LDPFAST_ISA_NS
}  // namespace ldpfast
