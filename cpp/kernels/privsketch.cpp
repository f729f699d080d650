// PrivSketch kernels, compiled once per ISA (see dispatch.hpp).
#include <cstring>

#include "ldpfast/kernels/privsketch.hpp"

namespace ldpfast {
namespace LDPFAST_ISA_NS {
namespace {

// Exact uniform draws below a 32-bit bound from the 32-bit halves of the ChaCha20 words
// (Lemire's multiply-shift with rejection): half the stream of ElementRng::below.
struct HalfWordDraws {
  ElementRng& rng;
  std::uint64_t cached = 0;
  bool has_half = false;

  explicit HalfWordDraws(ElementRng& r) : rng(r) {}

  std::uint32_t next32() {
    if (has_half) {
      has_half = false;
      return static_cast<std::uint32_t>(cached >> 32);
    }
    cached = rng.next_u64();
    has_half = true;
    return static_cast<std::uint32_t>(cached);
  }

  std::uint32_t below(std::uint32_t bound) {
    std::uint64_t product = static_cast<std::uint64_t>(next32()) * bound;
    std::uint32_t low = static_cast<std::uint32_t>(product);
    if (low < bound) {
      const std::uint32_t threshold = (0u - bound) % bound;
      while (low < threshold) {
        product = static_cast<std::uint64_t>(next32()) * bound;
        low = static_cast<std::uint32_t>(product);
      }
    }
    return static_cast<std::uint32_t>(product >> 32);
  }
};

// Uniform random order of cells[0..count) (Fisher-Yates).
void shuffle(HalfWordDraws& draws, std::uint16_t* cells, std::uint32_t count) {
  for (std::uint32_t j = count; j > 1; --j) {
    const std::uint32_t r = draws.below(j);
    const std::uint16_t t = cells[j - 1];
    cells[j - 1] = cells[r];
    cells[r] = t;
  }
}

inline std::int8_t flip(ElementRng& rng, std::uint8_t x, std::uint64_t threshold) {
  const std::int8_t v = x ? 1 : -1;
  return rng.bernoulli(threshold) ? static_cast<std::int8_t>(-v) : v;
}

void perturb(const FieldSpec& field, const std::uint64_t* a0, const std::uint64_t* a1, std::uint32_t K,
             std::uint32_t M, const std::int64_t* offsets, const std::uint64_t* items, std::size_t begin,
             std::size_t end, const RngKey& key, int sampling, std::uint64_t flip_threshold,
             std::uint8_t* x, std::uint16_t* cells, std::uint32_t* sampled, std::int8_t* bits,
             std::uint16_t* order) {
  const std::uint32_t KM = K * M;
  for (std::size_t i = begin; i < end; ++i) {
    // Encoder (Alg. 2 lines 1-4): Boolean OR of the K hashed positions of every item.
    std::memset(x, 0, KM);
    for (std::uint32_t k = 0; k < K; ++k) {
      const FieldHasher hasher(field, a0[k], a1[k]);
      std::uint8_t* row = x + static_cast<std::size_t>(k) * M;
      for (std::int64_t j = offsets[i]; j < offsets[i + 1]; ++j) row[hasher.value(items[j]) % M] = 1;
    }
    ElementRng rng(key, kStreamSketch, i);
    if (sampling == kSketchCell) {
      const std::uint32_t c = static_cast<std::uint32_t>(rng.below(KM));
      sampled[i] = c;
      bits[i] = flip(rng, x[c], flip_threshold);
    } else if (sampling == kSketchRow) {
      const std::uint32_t k = static_cast<std::uint32_t>(rng.below(K));
      sampled[i] = k;
      const std::uint8_t* row = x + static_cast<std::size_t>(k) * M;
      std::int8_t* out = bits + i * M;
      for (std::uint32_t m = 0; m < M; ++m) out[m] = flip(rng, row[m], flip_threshold);
    } else {
      std::int8_t* out = bits + i * KM;
      for (std::uint32_t c = 0; c < KM; ++c) out[c] = flip(rng, x[c], flip_threshold);
    }
    if (!order) continue;
    // Ordering matrix (section 3.2, corrected ranges): zero cells take a random
    // permutation of [0, g0), one cells of [g0, KM).
    std::uint32_t g0 = 0;
    for (std::uint32_t c = 0; c < KM; ++c) g0 += x[c] == 0;
    std::uint32_t zeros = 0, ones = g0;
    for (std::uint32_t c = 0; c < KM; ++c) cells[x[c] ? ones++ : zeros++] = static_cast<std::uint16_t>(c);
    HalfWordDraws draws(rng);
    shuffle(draws, cells, g0);
    shuffle(draws, cells + g0, KM - g0);
    std::uint16_t* o = order + i * KM;
    for (std::uint32_t r = 0; r < KM; ++r) o[cells[r]] = static_cast<std::uint16_t>(r);
  }
}

// Permutation check of one user's ranks against stamps[0..KM) (the caller's scratch,
// zeroed before its first use): o is a permutation of [0, KM) iff every rank is < KM and
// none repeats, i.e. none finds its stamp already set to this user's generation. Stamps
// of distinct ranks are distinct words, so the loop carries no dependency through memory
// (a bitset would chain read-modify-writes of shared words) and needs no clearing per
// user; generations wrap after 2^32 - 1 users, when the stamps are cleared.
struct PermutationCheck {
  std::uint32_t* stamps;
  std::uint32_t KM;
  std::uint32_t generation;

  bool operator()(const std::uint16_t* o) {
    if (++generation == 0) {
      for (std::uint32_t c = 0; c < KM; ++c) stamps[c] = 0;
      generation = 1;
    }
    bool ok = true;
    for (std::uint32_t c = 0; c < KM; ++c) {
      const std::uint32_t v = o[c];
      const bool in_range = v < KM;
      std::uint32_t& stamp = stamps[in_range ? v : 0];
      ok &= in_range & (stamp != generation);
      stamp = generation;
    }
    return ok;
  }
};

template <std::uint32_t FixedK>
std::size_t decode_cell_impl(std::uint32_t K, std::uint32_t M, const std::uint16_t* order,
                             const std::uint32_t* cell, const std::int8_t* bits, std::size_t begin,
                             std::size_t end, const std::int64_t* bucket_offsets,
                             const std::uint32_t* bucket_cand, const std::uint16_t* bucket_cells,
                             std::int64_t* pos, std::int64_t* neg, std::uint32_t* stamps) {
  if (FixedK) K = FixedK;
  const std::uint32_t KM = K * M;
  PermutationCheck is_permutation{stamps, KM, 0};
  for (std::size_t i = begin; i < end; ++i) {
    const std::uint16_t* o = order + i * KM;
    if (!is_permutation(o)) return i;
    const std::uint32_t c = cell[i];
    const std::uint16_t r0 = o[c];
    std::int64_t* target = bits[i] > 0 ? pos : neg;
    // The sampled cell is one of the candidate's K cells, so "no cell ranks below r0"
    // means the argmin is the sampled cell (ranks are distinct).
    const std::int64_t bucket_end = bucket_offsets[c + 1];  // a local: the counts may alias it
    for (std::int64_t e = bucket_offsets[c]; e < bucket_end; ++e) {
      const std::uint16_t* h = bucket_cells + static_cast<std::size_t>(e) * K;
      bool is_min = true;
      for (std::uint32_t k = 0; k < K; ++k) is_min &= o[h[k]] >= r0;
      target[bucket_cand[e]] += is_min;
    }
  }
  return end;
}

std::size_t decode_cell(std::uint32_t K, std::uint32_t M, const std::uint16_t* order, const std::uint32_t* cell,
                        const std::int8_t* bits, std::size_t begin, std::size_t end,
                        const std::int64_t* bucket_offsets, const std::uint32_t* bucket_cand,
                        const std::uint16_t* bucket_cells, std::int64_t* pos, std::int64_t* neg,
                        std::uint32_t* stamps) {
  if (K == 4)
    return decode_cell_impl<4>(K, M, order, cell, bits, begin, end, bucket_offsets, bucket_cand,
                               bucket_cells, pos, neg, stamps);
  return decode_cell_impl<0>(K, M, order, cell, bits, begin, end, bucket_offsets, bucket_cand, bucket_cells,
                             pos, neg, stamps);
}

template <std::uint32_t FixedK>
std::size_t decode_full_impl(std::uint32_t K, std::uint32_t M, const std::uint16_t* order,
                             const std::int8_t* bits, std::size_t begin, std::size_t end,
                             const std::uint16_t* cand_cells, std::size_t n_cand, std::int64_t* pos,
                             std::int64_t* neg, std::uint32_t* stamps) {
  if (FixedK) K = FixedK;
  const std::uint32_t KM = K * M;
  PermutationCheck is_permutation{stamps, KM, 0};
  for (std::size_t i = begin; i < end; ++i) {
    const std::uint16_t* o = order + i * KM;
    if (!is_permutation(o)) return i;
    const std::int8_t* v = bits + i * KM;
    for (std::size_t x = 0; x < n_cand; ++x) {
      const std::uint16_t* h = cand_cells + x * K;
      std::uint16_t best_cell = h[0];
      std::uint16_t best_rank = o[h[0]];
      for (std::uint32_t k = 1; k < K; ++k) {
        const std::uint16_t r = o[h[k]];
        const bool lower = r < best_rank;
        best_rank = lower ? r : best_rank;
        best_cell = lower ? h[k] : best_cell;
      }
      const bool up = v[best_cell] > 0;
      pos[x] += up;
      neg[x] += !up;
    }
  }
  return end;
}

std::size_t decode_full(std::uint32_t K, std::uint32_t M, const std::uint16_t* order, const std::int8_t* bits,
                        std::size_t begin, std::size_t end, const std::uint16_t* cand_cells, std::size_t n_cand,
                        std::int64_t* pos, std::int64_t* neg, std::uint32_t* stamps) {
  if (K == 4) return decode_full_impl<4>(K, M, order, bits, begin, end, cand_cells, n_cand, pos, neg, stamps);
  return decode_full_impl<0>(K, M, order, bits, begin, end, cand_cells, n_cand, pos, neg, stamps);
}

void padding_sample(const RngKey& key, const std::int64_t* offsets, const std::uint64_t* items,
                    std::size_t begin, std::size_t end, std::uint64_t pad_len, std::uint64_t dummy,
                    std::uint64_t* out) {
  for (std::size_t i = begin; i < end; ++i) {
    ElementRng rng(key, kStreamPartition, i);
    const std::uint64_t size = static_cast<std::uint64_t>(offsets[i + 1] - offsets[i]);
    const std::uint64_t r = rng.below(size > pad_len ? size : pad_len);
    out[i] = r < size ? items[offsets[i] + static_cast<std::int64_t>(r)] : dummy;
  }
}

}  // namespace

extern const PrivSketchKernels privsketch_kernels = {&perturb, &decode_cell, &decode_full, &padding_sample};

}  // namespace LDPFAST_ISA_NS
}  // namespace ldpfast
