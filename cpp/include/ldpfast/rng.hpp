// Counter-based randomness for client-side perturbation: ChaCha20 (Bernstein's original
// layout, 64-bit block counter and 64-bit nonce) keyed by 256 bits. Element i of a batch
// draws from the blocks (counter = i, nonce = stream | block_no << 48), so results do not
// depend on how a batch is split across threads. With a key from OS entropy this is a
// cryptographic generator; with a key derived from a seed it is a reproducible simulator.
// Header-only with internal linkage so each ISA's kernel copy carries its own.
#pragma once
#include <cstdint>
#include <cstring>

namespace ldpfast {

struct RngKey {
  std::uint32_t words[8];
};

namespace rng_detail {
static inline std::uint32_t rotl32(std::uint32_t v, int c) { return (v << c) | (v >> (32 - c)); }
static inline void quarter_round(std::uint32_t* s, int a, int b, int c, int d) {
  s[a] += s[b]; s[d] = rotl32(s[d] ^ s[a], 16);
  s[c] += s[d]; s[b] = rotl32(s[b] ^ s[c], 12);
  s[a] += s[b]; s[d] = rotl32(s[d] ^ s[a], 8);
  s[c] += s[d]; s[b] = rotl32(s[b] ^ s[c], 7);
}
}  // namespace rng_detail

static inline void chacha20_block(const RngKey& key, std::uint64_t counter, std::uint64_t nonce,
                                  std::uint32_t out[16]) {
  std::uint32_t input[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u,
                             key.words[0], key.words[1], key.words[2], key.words[3],
                             key.words[4], key.words[5], key.words[6], key.words[7],
                             static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32),
                             static_cast<std::uint32_t>(nonce), static_cast<std::uint32_t>(nonce >> 32)};
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

// Stream identifiers keep the draws of different purposes apart under one key.
enum RngStream : std::uint64_t {
  kStreamRandomizedResponse = 1,
  kStreamOcms = 2,
  kStreamHadamard = 3,
  kStreamSketch = 4,
  kStreamPartition = 5,
  kStreamOlh = 6,
};

// The random words of one batch element.
class ElementRng {
 public:
  ElementRng(const RngKey& key, std::uint64_t stream, std::uint64_t element)
      : key_(key), stream_(stream), element_(element) {}

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
    chacha20_block(key_, element_, stream_ | (block_no_ << 48), block);
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

// k-ary randomized response on [0, m): keep y unless a flip (probability
// flip_threshold / 2^64) happens, then output a uniform symbol among the other m - 1.
static inline std::uint64_t randomized_response(ElementRng& rng, std::uint64_t y, std::uint64_t m,
                                                std::uint64_t flip_threshold) {
  if (!rng.bernoulli(flip_threshold)) return y;
  const std::uint64_t other = rng.below(m - 1);
  return other < y ? other : other + 1;
}

}  // namespace ldpfast
