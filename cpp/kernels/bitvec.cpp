// Bit-vector kernels, compiled once per ISA (see dispatch.hpp): the column counts of bit
// rows (every bit-vector protocol's server) and the unary-encoding, memoized and dBitFlip
// clients.
#include <algorithm>
#include <cstring>

#include "ldpfast/bernoulli.hpp"
#include "ldpfast/kernels/bitvec.hpp"

#if defined(__AVX2__) || defined(__AVX512F__)
#include "ldpfast/simd.hpp"
#endif

namespace ldpfast {
namespace LDPFAST_ISA_NS {
namespace {

// -- column counts ---------------------------------------------------------------------------
// Each group keeps one byte counter per bit (acc), incremented by the vector layer below;
// a group's counters are moved into its 64-bit counts after 255 rows (before a byte could
// wrap) and at the end of the range.
constexpr std::uint32_t kFlushAfter = 255;

// Byte v -> 8 byte lanes, lane i holding bit i of v.
struct SpreadTable {
  std::uint64_t entry[256];
  constexpr SpreadTable() : entry() {
    for (int v = 0; v < 256; ++v) {
      std::uint64_t out = 0;
      for (int b = 0; b < 8; ++b) out |= static_cast<std::uint64_t>((v >> b) & 1) << (8 * b);
      entry[v] = out;
    }
  }
};
constexpr SpreadTable kSpread{};

#if defined(__AVX512F__) && defined(__AVX512BW__)
// 64 bits -> 64 byte counters: one masked byte add.
inline void add_word(std::uint8_t* acc, std::uint64_t word) {
  __m512i a = _mm512_loadu_si512(acc);
  a = _mm512_mask_sub_epi8(a, static_cast<__mmask64>(word), a, _mm512_set1_epi8(-1));
  _mm512_storeu_si512(acc, a);
}
#elif defined(__AVX2__)
// 32 bits -> 32 byte counters: broadcast, each byte lane picks its source byte and bit, and
// the all-ones compare result (-1) is subtracted.
inline void add_half(std::uint8_t* acc, std::uint32_t half) {
  const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                        3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(half)), pick);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  __m256i* slot = reinterpret_cast<__m256i*>(acc);
  _mm256_storeu_si256(slot, _mm256_sub_epi8(_mm256_loadu_si256(slot), set));
}
inline void add_word(std::uint8_t* acc, std::uint64_t word) {
  add_half(acc, static_cast<std::uint32_t>(word));
  add_half(acc + 32, static_cast<std::uint32_t>(word >> 32));
}
#else
// 8 bits -> 8 byte counters in one 64-bit add (byte lane i gets bit i; no lane exceeds 255
// before a flush, so no carry crosses lanes).
inline void add_word(std::uint8_t* acc, std::uint64_t word) {
  for (int b = 0; b < 8; ++b) {
    std::uint64_t lanes;
    std::memcpy(&lanes, acc + 8 * b, 8);
    lanes += kSpread.entry[(word >> (8 * b)) & 0xff];
    std::memcpy(acc + 8 * b, &lanes, 8);
  }
}
#endif

inline void flush_group(std::uint8_t* acc, std::size_t stride, std::size_t k, std::uint64_t* counts) {
  for (std::size_t j = 0; j < k; ++j) counts[j] += acc[j];
  std::memset(acc, 0, stride);
}

// One group (OUE/SUE, the L-UE family): the rows are added 8 at a time to bit-sliced
// counters, plane p (row_bytes rounded up to words) holding bit p of every column's count
// (8 planes: counts up to 255, moved into the 64-bit counts before they could wrap). The 8
// rows' bits of each column are first summed bitwise by a carry-save adder tree into a 4-bit
// number, then added to the planes: about 50 bitwise operations per word of 8 rows, on
// 64-bit words or whole vectors (T), where one byte counter per bit costs one vector add
// per 8 bits of each row.
constexpr std::size_t kSliceRows = 8;
constexpr std::size_t kPlanes = 8;

template <class T>
inline T load_bits(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
inline void store_bits(std::uint8_t* p, const T& v) {
  std::memcpy(p, &v, sizeof v);
}
template <class T>
inline void full_add(const T& a, const T& b, const T& c, T& sum, T& carry) {
  const T u = a ^ b;
  sum = u ^ c;
  carry = (a & b) | (u & c);
}

// Adds the 4-bit numbers `digits` (bit vectors of weights 1, 2, 4, 8) to the counters at
// byte offset `at` of the planes (plane p at planes + p * plane_bytes).
template <class T>
inline void add_to_planes(const T (&digits)[4], std::uint8_t* planes, std::size_t plane_bytes, std::size_t at) {
  T p = load_bits<T>(planes + at);
  T carry = p & digits[0];
  store_bits(planes + at, T(p ^ digits[0]));
  for (std::size_t q = 1; q < kPlanes; ++q) {
    std::uint8_t* slot = planes + q * plane_bytes + at;
    p = load_bits<T>(slot);
    T sum;
    if (q < 4) {
      full_add(p, digits[q], carry, sum, carry);
    } else {
      sum = p ^ carry;
      carry = p & carry;
    }
    store_bits(slot, sum);
  }
}

// Eight rows' bits (x[0..7]) at byte offset `at` added to the planes.
template <class T>
inline void add_eight(const T (&x)[kSliceRows], std::uint8_t* planes, std::size_t plane_bytes, std::size_t at) {
  T s0, c0, s1, c1, s2, c2, s3, c3;
  full_add(x[0], x[1], x[2], s0, c0);
  full_add(x[3], x[4], x[5], s1, c1);
  full_add(s0, s1, x[6], s2, c2);  // weight 1: s2 + x[7]; weight 2: c0, c1, c2
  const T one = s2 ^ x[7], c_one = s2 & x[7];
  full_add(c0, c1, c2, s3, c3);  // weight 2: s3 + c_one; weight 4: c3
  const T two = s3 ^ c_one, c_two = s3 & c_one;
  const T digits[4] = {one, two, T(c3 ^ c_two), T(c3 & c_two)};
  add_to_planes(digits, planes, plane_bytes, at);
}

#if defined(__AVX512F__)
using SliceVector = __m512i;
#elif defined(__AVX2__)
using SliceVector = __m256i;
#else
using SliceVector = std::uint64_t;
#endif

// Eight rows' bytes [0, body) (whole words: row pointers r) and their last words (last).
// With `ahead` (the next 8 rows, bytes apart, exist), each cache line of theirs is
// prefetched as the same column of these rows is read: 8 short rows are 8 streams too
// short for the hardware prefetcher to pick up.
void add_eight_rows(const std::uint8_t* const (&r)[kSliceRows], std::size_t body, const std::uint64_t* last,
                    std::uint8_t* planes, std::size_t plane_bytes, std::size_t ahead) {
  std::size_t at = 0;
  for (; at + sizeof(SliceVector) <= body; at += sizeof(SliceVector)) {
    if (ahead && at % 64 == 0)
      for (std::size_t j = 0; j < kSliceRows; ++j) __builtin_prefetch(r[j] + ahead + at);
    SliceVector x[kSliceRows];
    for (std::size_t j = 0; j < kSliceRows; ++j) x[j] = load_bits<SliceVector>(r[j] + at);
    add_eight(x, planes, plane_bytes, at);
  }
  for (; at < body; at += 8) {
    std::uint64_t x[kSliceRows];
    for (std::size_t j = 0; j < kSliceRows; ++j) x[j] = load_bits<std::uint64_t>(r[j] + at);
    add_eight(x, planes, plane_bytes, at);
  }
  std::uint64_t x[kSliceRows];
  std::copy(last, last + kSliceRows, x);
  add_eight(x, planes, plane_bytes, body);
}

// Planes -> counts[0, k), planes cleared: 8 columns at a time, their 8 counts as the byte
// lanes of one word (lane i gathers bit i of each plane's byte, shifted to its weight).
void flush_planes(std::uint8_t* planes, std::size_t plane_bytes, std::size_t k, std::uint64_t* counts) {
  for (std::size_t byte = 0; 8 * byte < k; ++byte) {
    std::uint64_t lanes = 0;
    for (std::size_t p = 0; p < kPlanes; ++p) lanes |= kSpread.entry[planes[p * plane_bytes + byte]] << p;
    const std::size_t columns = std::min<std::size_t>(8, k - 8 * byte);
    for (std::size_t b = 0; b < columns; ++b) counts[8 * byte + b] += (lanes >> (8 * b)) & 0xff;
  }
  std::memset(planes, 0, kPlanes * plane_bytes);
}

std::size_t sliced_counts(const std::uint8_t* rows, std::size_t row_bytes, std::size_t k,
                          const std::uint32_t* group, std::size_t begin, std::size_t end, std::uint8_t* planes,
                          std::uint64_t* counts, std::uint64_t* group_n) {
  const std::size_t tail_bytes = row_bytes % 8;
  const std::size_t words = row_bytes / 8 + (tail_bytes ? 1 : 0);
  const std::size_t body = 8 * (words - 1), plane_bytes = 8 * words;
  const std::size_t last_bits = k - 64 * (words - 1);
  const std::uint64_t beyond = last_bits >= 64 ? 0 : ~std::uint64_t{0} << last_bits;
  std::size_t stop = end, held = 0;  // rows in the planes
  for (std::size_t t0 = begin; t0 < stop; t0 += kSliceRows) {
    // A row's group and last word are read once, here: checked, then used from the copies.
    std::uint64_t last[kSliceRows] = {};
    const std::uint8_t* r[kSliceRows] = {};
    std::size_t count = 0;
    for (; count < kSliceRows && t0 + count < stop; ++count) {
      const std::size_t i = t0 + count;
      r[count] = rows + i * row_bytes;
      std::memcpy(&last[count], r[count] + body, tail_bytes ? tail_bytes : 8);
      if ((group && group[i] != 0) || (last[count] & beyond)) {
        stop = i;
        break;
      }
    }
    if (count == kSliceRows) {
      add_eight_rows(r, body, last, planes, plane_bytes,
                     t0 + 2 * kSliceRows <= stop ? kSliceRows * row_bytes : 0);
    } else {  // the range's last rows, fewer than 8: one at a time, the others zero
      for (std::size_t j = 0; j < count; ++j) {
        for (std::size_t at = 0; at < body; at += 8) {
          std::uint64_t x[kSliceRows] = {load_bits<std::uint64_t>(r[j] + at)};
          add_eight(x, planes, plane_bytes, at);
        }
        std::uint64_t x[kSliceRows] = {last[j]};
        add_eight(x, planes, plane_bytes, body);
      }
    }
    group_n[0] += count;
    held += count;
    if (held > 255 - kSliceRows) {
      flush_planes(planes, plane_bytes, k, counts);
      held = 0;
    }
  }
  if (held) flush_planes(planes, plane_bytes, k, counts);
  return stop;
}

std::size_t column_counts(const std::uint8_t* rows, std::size_t row_bytes, std::size_t k,
                          const std::uint32_t* group, std::size_t n_groups, std::size_t begin, std::size_t end,
                          std::uint8_t* acc, std::uint32_t* fill, std::uint64_t* counts, std::uint64_t* group_n) {
  if (n_groups == 1) return sliced_counts(rows, row_bytes, k, group, begin, end, acc, counts, group_n);
  const std::size_t stride = bitvec_acc_stride(row_bytes);
  const std::size_t full_words = row_bytes / 8, tail_bytes = row_bytes % 8;
  const std::size_t words = full_words + (tail_bytes ? 1 : 0);
  // Bits of the last word at or beyond k must be clear.
  const std::size_t last_bits = k - 64 * (words - 1);
  const std::uint64_t beyond = last_bits >= 64 ? 0 : ~std::uint64_t{0} << last_bits;
  std::size_t stop = end;
  for (std::size_t i = begin; i < end; ++i) {
    const std::uint32_t g = group ? group[i] : 0;  // read once: checked, then used
    if (g >= n_groups) {
      stop = i;
      break;
    }
    const std::uint8_t* row = rows + i * row_bytes;
    std::uint64_t last = 0;
    std::memcpy(&last, row + 8 * (words - 1), tail_bytes ? tail_bytes : 8);
    if (last & beyond) {
      stop = i;
      break;
    }
    std::uint8_t* a = acc + g * stride;
    for (std::size_t w = 0; w + 1 < words; ++w) {
      std::uint64_t word;
      std::memcpy(&word, row + 8 * w, 8);
      add_word(a + 64 * w, word);
    }
    add_word(a + 64 * (words - 1), last);
    group_n[g] += 1;
    if (++fill[g] == kFlushAfter) {
      flush_group(a, stride, k, counts + g * k);
      fill[g] = 0;
    }
  }
  for (std::size_t g = 0; g < n_groups; ++g)
    if (fill[g]) {
      flush_group(acc + g * stride, stride, k, counts + g * k);
      fill[g] = 0;
    }
  return stop;
}

// -- clients -----------------------------------------------------------------------------------
// First ChaCha20 blocks (block_no 0 of `stream`) of up to kChachaLanes lanes, each with
// its own key and counter, in the layout of chacha20_lanes: memoized clients draw from
// every user's own secret, so the batch key's blocks do not apply.
void first_blocks_per_key(const RngKey* keys, const std::uint64_t* counters, std::size_t lanes,
                          std::uint64_t stream, std::uint32_t* out) {
  alignas(64) std::uint32_t words[10][kChachaLanes] = {};
  for (std::size_t j = 0; j < lanes; ++j) {
    for (int w = 0; w < 8; ++w) words[w][j] = keys[j].words[w];
    words[8][j] = static_cast<std::uint32_t>(counters[j]);
    words[9][j] = static_cast<std::uint32_t>(counters[j] >> 32);
  }
  chacha20_lanes(words, ElementRng::nonce(stream, 0), out);
}

// Elements [begin, end) in groups of kChachaLanes: body(i, permanent, fresh) draws from
// user i's secret at counter counter_of(i) (kStreamMemoPermanent, or `permanent_stream`)
// and from the batch key at element i (kStreamInstantaneous), exactly as fresh ElementRngs
// would, with the first blocks of each group computed together.
template <class Counter, class Body>
void for_each_memo_element(const RngKey& key, const std::uint8_t* secrets, std::size_t begin, std::size_t end,
                           std::uint64_t permanent_stream, Counter&& counter_of, Body&& body) {
  alignas(64) std::uint32_t own[16 * kChachaLanes];
  alignas(64) std::uint32_t batch[16 * kChachaLanes];
  RngKey keys[kChachaLanes];
  std::uint64_t counters[kChachaLanes];
  for (std::size_t i = begin; i < end; i += kChachaLanes) {
    const std::size_t count = end - i < kChachaLanes ? end - i : kChachaLanes;
    for (std::size_t j = 0; j < count; ++j) {
      keys[j] = secret_key(secrets + 32 * (i + j));
      counters[j] = counter_of(i + j);
    }
    first_blocks_per_key(keys, counters, count, permanent_stream, own);
    chacha20_blocks(key, i, ElementRng::nonce(kStreamInstantaneous, 0), batch);
    for (std::size_t j = 0; j < count; ++j) {
      ElementRng permanent(keys[j], permanent_stream, counters[j], own + j, kChachaLanes);
      ElementRng fresh(key, kStreamInstantaneous, i + j, batch + j, kChachaLanes);
      body(i + j, permanent, fresh);
    }
  }
}

inline void store_row_word(std::uint8_t* row, std::size_t row_bytes, std::size_t w, std::uint64_t word) {
  const std::size_t left = row_bytes - 8 * w;
  std::memcpy(row + 8 * w, &word, left < 8 ? left : 8);
}

inline std::uint64_t load_row_word(const std::uint8_t* row, std::size_t row_bytes, std::size_t w) {
  std::uint64_t word = 0;
  const std::size_t left = row_bytes - 8 * w;
  std::memcpy(&word, row + 8 * w, left < 8 ? left : 8);
  return word;
}

// The lanes of word w that hold bits below k.
inline std::uint64_t lane_mask(std::size_t k, std::size_t w) {
  const std::size_t bits = k - 64 * w;
  return bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
}

inline std::uint64_t hot_lane(std::uint64_t hot, std::size_t w) {
  return hot / 64 == w ? std::uint64_t{1} << (hot % 64) : 0;
}

void unary_perturb(const RngKey& key, const std::uint64_t* hot, std::size_t begin, std::size_t end, std::size_t k,
                   std::uint64_t t_hot, std::uint64_t t_cold, std::uint8_t* out) {
  const std::size_t row_bytes = (k + 7) / 8, words = (k + 63) / 64;
  for_each_element_rng(key, kStreamUnary, begin, end, [&](std::size_t i, ElementRng& rng) {
    const std::uint64_t h = hot[i];
    for (std::size_t w = 0; w < words; ++w)
      store_row_word(out + i * row_bytes, row_bytes, w,
                     bernoulli_lanes(rng, hot_lane(h, w), t_hot, t_cold) & lane_mask(k, w));
  });
}

void memo_unary_perturb(const RngKey& key, const std::uint8_t* secrets, const std::uint64_t* hot,
                        std::size_t begin, std::size_t end, std::size_t k, std::uint64_t t1_hot,
                        std::uint64_t t1_cold, bool instantaneous, std::uint64_t t2_one, std::uint64_t t2_zero,
                        std::uint8_t* out) {
  const std::size_t row_bytes = (k + 7) / 8, words = (k + 63) / 64;
  std::uint64_t values[kChachaLanes];
  for_each_memo_element(
      key, secrets, begin, end, kStreamMemoPermanent,
      [&](std::size_t i) { return values[(i - begin) % kChachaLanes] = hot[i]; },
      [&](std::size_t i, ElementRng& permanent, ElementRng& fresh) {
        const std::uint64_t h = values[(i - begin) % kChachaLanes];
        for (std::size_t w = 0; w < words; ++w) {
          std::uint64_t word = bernoulli_lanes(permanent, hot_lane(h, w), t1_hot, t1_cold) & lane_mask(k, w);
          if (instantaneous) word = bernoulli_lanes(fresh, word, t2_one, t2_zero) & lane_mask(k, w);
          store_row_word(out + i * row_bytes, row_bytes, w, word);
        }
      });
}

void bit_response(const RngKey& key, const std::uint8_t* rows, std::size_t row_bytes, std::size_t k,
                  std::size_t begin, std::size_t end, std::uint64_t t_one, std::uint64_t t_zero,
                  std::uint8_t* out) {
  const std::size_t words = (k + 63) / 64;
  for_each_element_rng(key, kStreamInstantaneous, begin, end, [&](std::size_t i, ElementRng& rng) {
    for (std::size_t w = 0; w < words; ++w) {
      const std::uint64_t given = load_row_word(rows + i * row_bytes, row_bytes, w) & lane_mask(k, w);
      store_row_word(out + i * row_bytes, row_bytes, w,
                     bernoulli_lanes(rng, given, t_one, t_zero) & lane_mask(k, w));
    }
  });
}

void memo_grr(const RngKey& key, const std::uint8_t* secrets, const std::uint64_t* x, std::size_t begin,
              std::size_t end, std::uint64_t m, std::uint64_t t1, bool instantaneous, std::uint64_t t2,
              std::uint64_t* out) {
  std::uint64_t values[kChachaLanes];
  for_each_memo_element(
      key, secrets, begin, end, kStreamMemoPermanent,
      [&](std::size_t i) { return values[(i - begin) % kChachaLanes] = x[i]; },
      [&](std::size_t i, ElementRng& permanent, ElementRng& fresh) {
        std::uint64_t y = randomized_response(permanent, values[(i - begin) % kChachaLanes], m, t1);
        if (instantaneous) y = randomized_response(fresh, y, m, t2);
        out[i] = y;
      });
}

// `count` distinct values of [0, b) (Floyd's algorithm), ascending.
void distinct_sorted(ElementRng& rng, std::uint64_t b, std::size_t count, std::uint32_t* out) {
  std::size_t have = 0;
  for (std::uint64_t j = b - count; j < b; ++j) {
    const std::uint64_t t = rng.below(j + 1);
    std::uint64_t pick = t;
    for (std::size_t c = 0; c < have; ++c)
      if (out[c] == t) {
        pick = j;
        break;
      }
    std::size_t at = have++;  // insertion keeps out[0, have) sorted
    while (at > 0 && out[at - 1] > pick) {
      out[at] = out[at - 1];
      --at;
    }
    out[at] = static_cast<std::uint32_t>(pick);
  }
}

void dbitflip_perturb(const std::uint8_t* secrets, const std::uint64_t* x, std::size_t begin, std::size_t end,
                      std::uint64_t b, std::size_t sampled, std::uint64_t t_hot, std::uint64_t t_cold,
                      std::uint32_t* buckets, std::uint8_t* bits) {
  for (std::size_t i = begin; i < end; ++i) {
    const std::uint64_t v = x[i];
    const RngKey user = secret_key(secrets + 32 * i);
    ElementRng choice(user, kStreamMemoDerive, 0);
    std::uint32_t* mine = buckets + i * sampled;
    distinct_sorted(choice, b, sampled, mine);
    std::uint64_t state = sampled;  // which sampled bucket holds v (sampled: none)
    for (std::size_t p = 0; p < sampled; ++p)
      if (mine[p] == v) state = p;
    ElementRng permanent(user, kStreamMemoPermanent, state);
    for (std::size_t w = 0; 64 * w < sampled; ++w) {
      const std::uint64_t word = bernoulli_lanes(permanent, hot_lane(state, w), t_hot, t_cold);
      for (std::size_t p = 64 * w; p < sampled && p < 64 * (w + 1); ++p)
        bits[i * sampled + p] = static_cast<std::uint8_t>((word >> (p % 64)) & 1);
    }
  }
}

void memo_draws(const std::uint8_t* secrets, std::size_t begin, std::size_t end, std::uint64_t purpose,
                std::uint64_t bound, std::size_t count, std::uint64_t* out) {
  const RngKey unused{};
  for_each_memo_element(
      unused, secrets, begin, end, kStreamMemoDerive, [&](std::size_t) { return 1 + purpose; },
      [&](std::size_t i, ElementRng& own, ElementRng&) {
        for (std::size_t c = 0; c < count; ++c) out[i * count + c] = own.below(bound);
      });
}

}  // namespace

extern const BitvecKernels bitvec_kernels = {&column_counts, &unary_perturb, &memo_unary_perturb,
                                             &bit_response,  &memo_grr,      &dbitflip_perturb,
                                             &memo_draws};

}  // namespace LDPFAST_ISA_NS
}  // namespace ldpfast
