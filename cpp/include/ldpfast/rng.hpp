// Counter-based randomness for client-side perturbation: ChaCha20 (Bernstein's original
// layout, 64-bit block counter and 64-bit nonce) keyed by 256 bits. Element i of a batch
// draws from the blocks (counter = i, nonce = stream | block_no << 48), so results do not
// depend on how a batch is split across threads. With a key from OS entropy this is a
// cryptographic generator; with a key derived from a seed it is a reproducible simulator.
// Header-only with internal linkage so each ISA's kernel copy carries its own.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#if defined(__AVX2__) || defined(__AVX512F__)
#include "ldpfast/simd.hpp"
#endif

namespace ldpfast {

struct RngKey {
  std::uint32_t words[8];
};

namespace rng_detail {
static inline std::uint32_t rotl32(std::uint32_t v, int c) { return (v << c) | (v >> (32 - c)); }
static inline void quarter_round(std::uint32_t* s, int a, int b, int c, int d) {
  s[a] += s[b];
  s[d] = rotl32(s[d] ^ s[a], 16);
  s[c] += s[d];
  s[b] = rotl32(s[b] ^ s[c], 12);
  s[a] += s[b];
  s[d] = rotl32(s[d] ^ s[a], 8);
  s[c] += s[d];
  s[b] = rotl32(s[b] ^ s[c], 7);
}
}  // namespace rng_detail

static inline void chacha20_block(const RngKey& key, std::uint64_t counter, std::uint64_t nonce,
                                  std::uint32_t out[16]) {
  std::uint32_t input[16] = {0x61707865u,
                             0x3320646eu,
                             0x79622d32u,
                             0x6b206574u,
                             key.words[0],
                             key.words[1],
                             key.words[2],
                             key.words[3],
                             key.words[4],
                             key.words[5],
                             key.words[6],
                             key.words[7],
                             static_cast<std::uint32_t>(counter),
                             static_cast<std::uint32_t>(counter >> 32),
                             static_cast<std::uint32_t>(nonce),
                             static_cast<std::uint32_t>(nonce >> 32)};
  std::uint32_t s[16];
  std::memcpy(s, input, sizeof(s));
  for (int round = 0; round < 10; ++round) {
    rng_detail::quarter_round(s, 0, 4, 8, 12);
    rng_detail::quarter_round(s, 1, 5, 9, 13);
    rng_detail::quarter_round(s, 2, 6, 10, 14);
    rng_detail::quarter_round(s, 3, 7, 11, 15);
    rng_detail::quarter_round(s, 0, 5, 10, 15);
    rng_detail::quarter_round(s, 1, 6, 11, 12);
    rng_detail::quarter_round(s, 2, 7, 8, 13);
    rng_detail::quarter_round(s, 3, 4, 9, 14);
  }
  for (int i = 0; i < 16; ++i) out[i] = s[i] + input[i];
}

// How many consecutive blocks chacha20_blocks computes at once in this compilation.
#if defined(__AVX512F__)
constexpr std::size_t kChachaLanes = 16;
#elif defined(__AVX2__)
constexpr std::size_t kChachaLanes = 8;
#else
constexpr std::size_t kChachaLanes = 1;
#endif

// kChachaLanes blocks with one nonce, lane j with its own key and counter: lanes[w][j] is
// key word w (w < 8) and the counter's low (w = 8) and high (w = 9) half. Word-major output:
// word w of block j is out[w * kChachaLanes + j]. Bit-identical to chacha20_block.
static inline void chacha20_lanes(const std::uint32_t (*lanes)[kChachaLanes], std::uint64_t nonce,
                                  std::uint32_t* out) {
#if defined(__AVX512F__) || defined(__AVX2__)
#if defined(__AVX512F__)
  using V = __m512i;
  auto set1 = [](std::uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); };
  auto add = [](V a, V b) { return _mm512_add_epi32(a, b); };
  auto xor_ = [](V a, V b) { return _mm512_xor_si512(a, b); };
#define LDPFAST_CHACHA_ROTL(v, c) _mm512_rol_epi32(v, c)
#else
  using V = __m256i;
  auto set1 = [](std::uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); };
  auto add = [](V a, V b) { return _mm256_add_epi32(a, b); };
  auto xor_ = [](V a, V b) { return _mm256_xor_si256(a, b); };
#define LDPFAST_CHACHA_ROTL(v, c) _mm256_or_si256(_mm256_slli_epi32(v, c), _mm256_srli_epi32(v, 32 - (c)))
#endif
  V input[16];
  const std::uint32_t constants[4] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};
  for (int w = 0; w < 4; ++w) input[w] = set1(constants[w]);
  for (int w = 0; w < 10; ++w) std::memcpy(&input[4 + w], lanes[w], sizeof(V));
  input[14] = set1(static_cast<std::uint32_t>(nonce));
  input[15] = set1(static_cast<std::uint32_t>(nonce >> 32));
  V s[16];
  for (int w = 0; w < 16; ++w) s[w] = input[w];
#define LDPFAST_CHACHA_QR(a, b, c, d)               \
  s[a] = add(s[a], s[b]);                           \
  s[d] = LDPFAST_CHACHA_ROTL(xor_(s[d], s[a]), 16); \
  s[c] = add(s[c], s[d]);                           \
  s[b] = LDPFAST_CHACHA_ROTL(xor_(s[b], s[c]), 12); \
  s[a] = add(s[a], s[b]);                           \
  s[d] = LDPFAST_CHACHA_ROTL(xor_(s[d], s[a]), 8);  \
  s[c] = add(s[c], s[d]);                           \
  s[b] = LDPFAST_CHACHA_ROTL(xor_(s[b], s[c]), 7);
  for (int round = 0; round < 10; ++round) {
    LDPFAST_CHACHA_QR(0, 4, 8, 12)
    LDPFAST_CHACHA_QR(1, 5, 9, 13)
    LDPFAST_CHACHA_QR(2, 6, 10, 14)
    LDPFAST_CHACHA_QR(3, 7, 11, 15)
    LDPFAST_CHACHA_QR(0, 5, 10, 15)
    LDPFAST_CHACHA_QR(1, 6, 11, 12)
    LDPFAST_CHACHA_QR(2, 7, 8, 13)
    LDPFAST_CHACHA_QR(3, 4, 9, 14)
  }
#undef LDPFAST_CHACHA_QR
#undef LDPFAST_CHACHA_ROTL
  for (int w = 0; w < 16; ++w) {
    const V word = add(s[w], input[w]);
    std::memcpy(out + w * kChachaLanes, &word, sizeof(V));
  }
#else
  RngKey key;
  for (int w = 0; w < 8; ++w) key.words[w] = lanes[w][0];
  std::uint32_t block[16];
  chacha20_block(key, lanes[8][0] | (static_cast<std::uint64_t>(lanes[9][0]) << 32), nonce, block);
  for (int w = 0; w < 16; ++w) out[w] = block[w];
#endif
}

// Blocks (counter = first_counter + j, nonce) for j < kChachaLanes under one key, in the
// layout of chacha20_lanes.
static inline void chacha20_blocks(const RngKey& key, std::uint64_t first_counter, std::uint64_t nonce,
                                   std::uint32_t* out) {
  alignas(64) std::uint32_t lanes[10][kChachaLanes];
  for (std::size_t j = 0; j < kChachaLanes; ++j) {
    for (int w = 0; w < 8; ++w) lanes[w][j] = key.words[w];
    const std::uint64_t counter = first_counter + j;
    lanes[8][j] = static_cast<std::uint32_t>(counter);
    lanes[9][j] = static_cast<std::uint32_t>(counter >> 32);
  }
  chacha20_lanes(lanes, nonce, out);
}

// Stream identifiers keep the draws of different purposes apart under one key.
enum RngStream : std::uint64_t {
  kStreamRandomizedResponse = 1,
  kStreamOcms = 2,
  kStreamHadamard = 3,
  kStreamSketch = 4,
  kStreamPartition = 5,
  kStreamOlh = 6,
  kStreamPgr = 7,
};

// Classes with member functions live in an anonymous namespace: kernel files compile
// this header once per ISA, and inline members with external linkage would let the
// linker pick one ISA's copy for all of them.
namespace {

// The random words of one batch element.
class ElementRng {
 public:
  ElementRng(const RngKey& key, std::uint64_t stream, std::uint64_t element)
      : key_(key), stream_(stream), element_(element) {}

  // Starts from an already computed first block (block_no 0 of this element), given as
  // 16 words at `first_block[w * stride]` (the layout of chacha20_blocks).
  ElementRng(const RngKey& key, std::uint64_t stream, std::uint64_t element, const std::uint32_t* first_block,
             std::size_t stride)
      : key_(key), stream_(stream), element_(element), block_no_(1), pos_(0) {
    for (int i = 0; i < 8; ++i)
      words_[i] = static_cast<std::uint64_t>(first_block[(2 * i) * stride]) |
                  (static_cast<std::uint64_t>(first_block[(2 * i + 1) * stride]) << 32);
  }

  // The nonce of block `block_no` of every element of `stream`.
  static std::uint64_t nonce(std::uint64_t stream, std::uint64_t block_no) { return stream | (block_no << 48); }

  std::uint64_t next_u64() {
    if (pos_ == 8) refill();
    return words_[pos_++];
  }

  // Uniform on [0, bound) for bound >= 1, exact (multiply-shift with rejection).
  std::uint64_t below(std::uint64_t bound) {
    unsigned __int128 product = static_cast<unsigned __int128>(next_u64()) * bound;
    std::uint64_t low = static_cast<std::uint64_t>(product);
    if (low < bound) {
      const std::uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        product = static_cast<unsigned __int128>(next_u64()) * bound;
        low = static_cast<std::uint64_t>(product);
      }
    }
    return static_cast<std::uint64_t>(product >> 64);
  }

  // True with probability threshold / 2^64.
  bool bernoulli(std::uint64_t threshold) { return next_u64() < threshold; }

 private:
  void refill() {
    std::uint32_t block[16];
    chacha20_block(key_, element_, nonce(stream_, block_no_), block);
    ++block_no_;
    for (int i = 0; i < 8; ++i)
      words_[i] = static_cast<std::uint64_t>(block[2 * i]) | (static_cast<std::uint64_t>(block[2 * i + 1]) << 32);
    pos_ = 0;
  }

  const RngKey& key_;
  std::uint64_t stream_;
  std::uint64_t element_;
  std::uint64_t block_no_ = 0;
  std::uint64_t words_[8];
  int pos_ = 8;
};

// Elements [begin, end) in groups of kChachaLanes whose first ChaCha20 blocks are computed
// together; body(element, rng) then draws exactly as with a fresh ElementRng.
template <class Body>
void for_each_element_rng(const RngKey& key, std::uint64_t stream, std::size_t begin, std::size_t end,
                          Body&& body) {
  alignas(64) std::uint32_t blocks[16 * kChachaLanes];
  for (std::size_t i = begin; i < end; i += kChachaLanes) {
    chacha20_blocks(key, i, ElementRng::nonce(stream, 0), blocks);
    const std::size_t count = end - i < kChachaLanes ? end - i : kChachaLanes;
    for (std::size_t j = 0; j < count; ++j) {
      ElementRng rng(key, stream, i + j, blocks + j, kChachaLanes);
      body(i + j, rng);
    }
  }
}

}  // namespace

// k-ary randomized response on [0, m): keep y unless a flip (probability
// flip_threshold / 2^64) happens, then output a uniform symbol among the other m - 1.
static inline std::uint64_t randomized_response(ElementRng& rng, std::uint64_t y, std::uint64_t m,
                                                std::uint64_t flip_threshold) {
  if (!rng.bernoulli(flip_threshold)) return y;
  const std::uint64_t other = rng.below(m - 1);
  return other < y ? other : other + 1;
}

}  // namespace ldpfast
