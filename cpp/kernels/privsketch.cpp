// PrivSketch kernels, compiled once per ISA (see dispatch.hpp).
#include <cstring>

#include "ldpfast/kernels/privsketch.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#endif

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
             std::size_t end, const RngKey& key, int sampling, std::uint64_t flip_threshold, std::uint8_t* x,
             std::uint16_t* cells, std::uint32_t* sampled, std::int8_t* bits, std::uint16_t* order) {
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

#if defined(__AVX512F__) && defined(__AVX512BW__)
// AVX-512 decode of one user for K = 4 and KM <= 512, KM a multiple of 64 (the paper's
// K = 4, M = 128 among them), with the same counts as the scalar loop below.
constexpr std::uint32_t kVectorMaxCells = 512;

// o is a permutation of [0, KM) iff every rank is < KM and the set of ranks covers all
// KM values (pigeonhole). The set is built as a KM-bit mask without touching memory: 8
// ranks at a time, each rank's bit (1 << (v mod 64)) is OR-ed into the lane accumulator
// of its 64-bit word v / 64; the lanes are OR-ed together at the end. About 2 vector
// instructions per rank, against a load, compare and store per rank for the stamps.
inline bool is_permutation_512(const std::uint16_t* o, std::uint32_t KM) {
  const std::uint32_t words = KM / 64;
  __m512i acc[kVectorMaxCells / 64];
  for (std::uint32_t j = 0; j < words; ++j) acc[j] = _mm512_setzero_si512();
  const __m512i limit = _mm512_set1_epi64(KM), low6 = _mm512_set1_epi64(63), one = _mm512_set1_epi64(1);
  __mmask8 out_of_range = 0;
  for (std::uint32_t c = 0; c < KM; c += 8) {
    const __m512i v = _mm512_cvtepu16_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(o + c)));
    out_of_range |= _mm512_cmpge_epu64_mask(v, limit);
    const __m512i bit = _mm512_sllv_epi64(one, _mm512_and_si512(v, low6));
    const __m512i word = _mm512_srli_epi64(v, 6);
    for (std::uint32_t j = 0; j < words; ++j)
      acc[j] = _mm512_mask_or_epi64(acc[j], _mm512_cmpeq_epi64_mask(word, _mm512_set1_epi64(j)), acc[j], bit);
  }
  bool full = out_of_range == 0;
  for (std::uint32_t j = 0; j < words; ++j) full &= _mm512_reduce_or_epi64(acc[j]) == -1;
  return full;
}

// Candidates of the bucket [e0, e1) whose K = 4 cells all rank >= r0 (the sampled cell's
// rank) get +1 in target. The user's ranks become a KM-bit mask "rank < r0" held as 32
// 16-bit words in one register; 8 candidates (32 cells) are then looked up at once with
// a word permute and a variable shift, and only the minimal ones are added.
inline void add_bucket_512(const std::uint16_t* o, std::uint32_t KM, std::uint16_t r0, std::int64_t e0,
                           std::int64_t e1, const std::uint32_t* bucket_cand, const std::uint16_t* bucket_cells,
                           std::int64_t* target) {
  alignas(64) std::uint32_t below[kVectorMaxCells / 32] = {};
  const __m512i r0v = _mm512_set1_epi16(static_cast<short>(r0));
  for (std::uint32_t w = 0; w < KM / 32; ++w)
    below[w] = _mm512_cmplt_epu16_mask(_mm512_loadu_si512(o + 32 * w), r0v);
  const __m512i table = _mm512_load_si512(below);
  const __m512i low4 = _mm512_set1_epi16(15), one = _mm512_set1_epi16(1);
  for (std::int64_t e = e0; e < e1; e += 8) {
    const std::int64_t count = e1 - e < 8 ? e1 - e : 8;  // candidates in this step
    const __mmask32 lanes = static_cast<__mmask32>((std::uint64_t{1} << (4 * count)) - 1);
    const __m512i cells = _mm512_maskz_loadu_epi16(lanes, bucket_cells + 4 * e);
    const __m512i words = _mm512_permutexvar_epi16(_mm512_srli_epi16(cells, 4), table);
    const __mmask32 lt = _mm512_test_epi16_mask(_mm512_srlv_epi16(words, _mm512_and_si512(cells, low4)), one);
    const std::uint32_t any = lt | (lt >> 1) | (lt >> 2) | (lt >> 3);
    std::uint32_t minimal = ~any & 0x11111111u & static_cast<std::uint32_t>(lanes);
    while (minimal) {
      target[bucket_cand[e + __builtin_ctz(minimal) / 4]] += 1;
      minimal &= minimal - 1;
    }
  }
}
#endif

template <std::uint32_t FixedK>
std::size_t decode_cell_impl(std::uint32_t K, std::uint32_t M, const std::uint16_t* order,
                             const std::uint32_t* cell, const std::int8_t* bits, std::size_t begin,
                             std::size_t end, const std::int64_t* bucket_offsets,
                             const std::uint32_t* bucket_cand, const std::uint16_t* bucket_cells,
                             std::int64_t* pos, std::int64_t* neg, std::uint32_t* stamps) {
  if (FixedK) K = FixedK;
  const std::uint32_t KM = K * M;
  PermutationCheck is_permutation{stamps, KM, 0};
#if defined(__AVX512F__) && defined(__AVX512BW__)
  if (FixedK == 4 && KM <= kVectorMaxCells && KM % 64 == 0) {
    for (std::size_t i = begin; i < end; ++i) {
      const std::uint16_t* o = order + i * KM;
      const std::uint32_t c = cell[i];  // read once: checked, then used
      if (c >= KM || !is_permutation_512(o, KM)) return i;
      add_bucket_512(o, KM, o[c], bucket_offsets[c], bucket_offsets[c + 1], bucket_cand, bucket_cells,
                     bits[i] > 0 ? pos : neg);
    }
    return end;
  }
#endif
  for (std::size_t i = begin; i < end; ++i) {
    const std::uint16_t* o = order + i * KM;
    const std::uint32_t c = cell[i];  // read once: checked, then used
    if (c >= KM || !is_permutation(o)) return i;
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
    return decode_cell_impl<4>(K, M, order, cell, bits, begin, end, bucket_offsets, bucket_cand, bucket_cells,
                               pos, neg, stamps);
  return decode_cell_impl<0>(K, M, order, cell, bits, begin, end, bucket_offsets, bucket_cand, bucket_cells, pos,
                             neg, stamps);
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
#if defined(__AVX512F__) && defined(__AVX512BW__)
    const bool valid = KM <= kVectorMaxCells && KM % 64 == 0 ? is_permutation_512(o, KM) : is_permutation(o);
#else
    const bool valid = is_permutation(o);
#endif
    if (!valid) return i;
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

void padding_sample(const RngKey& key, const std::int64_t* offsets, const std::uint64_t* items, std::size_t begin,
                    std::size_t end, std::uint64_t pad_len, std::uint64_t dummy, std::uint64_t* out) {
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
