// MD5, SHA-256 and HMAC-SHA256 for RAPPOR's reference encodings (Bloom bits from MD5, the
// permanent response's masks from HMAC-SHA256 keyed by the client's secret) and the
// HMAC-DRBG variant of the published C++ RAPPOR client (filters of more than 32 bits).
// Written from RFC 1321, FIPS 180-4, RFC 2104 and the C++ client's description; checked
// against Python's hashlib/hmac in tests/test_rappor_encoding.py. Header-only with internal
// linkage (kernel files compile it once per ISA). MD5 is used as the reference clients use
// it, as a hash to Bloom positions, not for security.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

// The AVX2 and AVX-512 kernel copies also carry a SHA-NI compression (x86 SHA extensions,
// selected at run time by CPUID); the scalar copy is portable code only, so the ISA tests
// compare the two.
#if (defined(__AVX2__) || defined(__AVX512F__)) && (defined(__GNUC__) || defined(__clang__)) && \
    (defined(__x86_64__) || defined(_M_X64))
#define LDPFAST_SHA_NI 1
#include <cpuid.h>

#include "ldpfast/simd.hpp"
#endif

namespace ldpfast {
namespace digest {

static inline std::uint32_t rotl(std::uint32_t v, int c) { return (v << c) | (v >> (32 - c)); }
static inline std::uint32_t rotr(std::uint32_t v, int c) { return (v >> c) | (v << (32 - c)); }

// Merkle-Damgard framing shared by MD5 and SHA-256: bytes go into a 64-byte block, each full
// block is compressed; the end appends 0x80, zeros and the bit length (64 bits, little-
// endian for MD5, big-endian for SHA-256).
template <class Compress>
static inline void absorb(std::uint8_t block[64], std::size_t& fill, const std::uint8_t* data, std::size_t len,
                          Compress&& compress) {
  while (len > 0) {
    const std::size_t take = len < 64 - fill ? len : 64 - fill;
    std::memcpy(block + fill, data, take);
    fill += take;
    data += take;
    len -= take;
    if (fill == 64) {
      compress(block);
      fill = 0;
    }
  }
}

template <class Compress>
static inline void pad_and_finish(std::uint8_t block[64], std::size_t fill, std::uint64_t bytes, bool big_endian,
                                  Compress&& compress) {
  const std::uint64_t bits = bytes * 8;
  block[fill++] = 0x80;
  if (fill > 56) {
    std::memset(block + fill, 0, 64 - fill);
    compress(block);
    fill = 0;
  }
  std::memset(block + fill, 0, 56 - fill);
  for (int i = 0; i < 8; ++i)
    block[56 + i] = static_cast<std::uint8_t>(bits >> (big_endian ? 56 - 8 * i : 8 * i));
  compress(block);
}

// -- MD5 (RFC 1321) ------------------------------------------------------------------------
static inline void md5_block(std::uint32_t state[4], const std::uint8_t block[64]) {
  static const std::uint32_t kSine[64] = {
      0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
      0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
      0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
      0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
      0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
      0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
      0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
      0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
  static const int kShift[16] = {7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21};
  std::uint32_t m[16];
  for (int i = 0; i < 16; ++i)
    m[i] = std::uint32_t{block[4 * i]} | (std::uint32_t{block[4 * i + 1]} << 8) |
           (std::uint32_t{block[4 * i + 2]} << 16) | (std::uint32_t{block[4 * i + 3]} << 24);
  std::uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  for (int i = 0; i < 64; ++i) {
    std::uint32_t f;
    int g;
    const int round = i >> 4;
    if (round == 0) {
      f = (b & c) | (~b & d);
      g = i;
    } else if (round == 1) {
      f = (d & b) | (~d & c);
      g = (5 * i + 1) & 15;
    } else if (round == 2) {
      f = b ^ c ^ d;
      g = (3 * i + 5) & 15;
    } else {
      f = c ^ (b | ~d);
      g = (7 * i) & 15;
    }
    const std::uint32_t rotated = rotl(a + f + kSine[i] + m[g], kShift[round * 4 + (i & 3)]);
    a = d;
    d = c;
    c = b;
    b = b + rotated;
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
}

// MD5 of head (head_len bytes) followed by tail (tail_len bytes) into out[16].
static inline void md5(const std::uint8_t* head, std::size_t head_len, const std::uint8_t* tail,
                       std::size_t tail_len, std::uint8_t out[16]) {
  std::uint32_t state[4] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u};
  std::uint8_t block[64];
  std::size_t fill = 0;
  auto compress = [&](const std::uint8_t* b) { md5_block(state, b); };
  absorb(block, fill, head, head_len, compress);
  absorb(block, fill, tail, tail_len, compress);
  pad_and_finish(block, fill, head_len + tail_len, false, compress);
  for (int i = 0; i < 16; ++i) out[i] = static_cast<std::uint8_t>(state[i / 4] >> (8 * (i % 4)));
}

// -- SHA-256 (FIPS 180-4) ------------------------------------------------------------------
static const std::uint32_t kSha256Round[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#if defined(LDPFAST_SHA_NI)
static inline bool cpu_has_sha_ni() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19)) || !(c & (1u << 9))) return false;  // SSE4.1, SSSE3
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (b >> 29) & 1;  // SHA
}

// The 64 rounds on the SHA extensions: the state as ABEF / CDGH halves, two rounds per
// sha256rnds2, the message schedule four words at a time (sha256msg1/msg2).
__attribute__((target("sha,sse4.1,ssse3"))) static inline void sha256_block_ni(std::uint32_t state[8],
                                                                               const std::uint8_t block[64]) {
  // The sha256* instructions have legacy SSE encodings only: clear the upper halves of the
  // vector registers first, or every one of them pays the SSE/AVX transition penalty.
  _mm256_zeroupper();
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state)), 0xB1);
  __m128i cdgh = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4)), 0x1B);
  __m128i abef = _mm_alignr_epi8(tmp, cdgh, 8);
  cdgh = _mm_blend_epi16(cdgh, tmp, 0xF0);
  const __m128i abef_in = abef, cdgh_in = cdgh;
  __m128i w[4];
  for (int g = 0; g < 16; ++g) {
    if (g < 4) {
      w[g] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 16 * g)), byte_swap);
    } else {
      const __m128i older = _mm_sha256msg1_epu32(w[g % 4], w[(g + 1) % 4]);
      const __m128i middle = _mm_alignr_epi8(w[(g + 3) % 4], w[(g + 2) % 4], 4);
      w[g % 4] = _mm_sha256msg2_epu32(_mm_add_epi32(older, middle), w[(g + 3) % 4]);
    }
    __m128i msg =
        _mm_add_epi32(w[g % 4], _mm_loadu_si128(reinterpret_cast<const __m128i*>(kSha256Round + 4 * g)));
    cdgh = _mm_sha256rnds2_epu32(cdgh, abef, msg);
    msg = _mm_shuffle_epi32(msg, 0x0E);
    abef = _mm_sha256rnds2_epu32(abef, cdgh, msg);
  }
  abef = _mm_add_epi32(abef, abef_in);
  cdgh = _mm_add_epi32(cdgh, cdgh_in);
  tmp = _mm_shuffle_epi32(abef, 0x1B);
  cdgh = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), _mm_blend_epi16(tmp, cdgh, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), _mm_alignr_epi8(cdgh, tmp, 8));
}
#endif

static inline void sha256_block_portable(std::uint32_t state[8], const std::uint8_t block[64]) {
  const std::uint32_t* kRound = kSha256Round;
  std::uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = (std::uint32_t{block[4 * i]} << 24) | (std::uint32_t{block[4 * i + 1]} << 16) |
           (std::uint32_t{block[4 * i + 2]} << 8) | std::uint32_t{block[4 * i + 3]};
  for (int i = 16; i < 64; ++i) {
    const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  std::uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  std::uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (int i = 0; i < 64; ++i) {
    const std::uint32_t t1 =
        h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
    const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
  state[4] += e;
  state[5] += f;
  state[6] += g;
  state[7] += h;
}

static inline void sha256_block(std::uint32_t state[8], const std::uint8_t block[64]) {
#if defined(LDPFAST_SHA_NI)
  static const bool has_ni = cpu_has_sha_ni();
  if (has_ni) return sha256_block_ni(state, block);
#endif
  sha256_block_portable(state, block);
}

// Incremental SHA-256 over pieces of a message; may start from a state that has already
// absorbed `absorbed` bytes (a multiple of 64), as HMAC's precomputed key blocks do.
struct Sha256 {
  std::uint32_t state[8];
  std::uint8_t block[64];
  std::size_t fill;
  std::uint64_t total;

  static Sha256 start() {
    Sha256 s{
        {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au, 0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u},
        {},
        0,
        0};
    return s;
  }
  void feed(const std::uint8_t* data, std::size_t len) {
    total += len;
    absorb(block, fill, data, len, [this](const std::uint8_t* b) { sha256_block(state, b); });
  }
  void finish(std::uint8_t out[32]) {
    pad_and_finish(block, fill, total, true, [this](const std::uint8_t* b) { sha256_block(state, b); });
    fill = 0;
    for (int i = 0; i < 32; ++i) out[i] = static_cast<std::uint8_t>(state[i / 4] >> (24 - 8 * (i % 4)));
  }
};

// HMAC-SHA256 (RFC 2104) with the key's inner and outer blocks absorbed once, so that many
// messages under one key cost two compressions each beyond their own length. Keys longer
// than the 64-byte block are hashed first, as RFC 2104 says; shorter keys are zero-padded
// (so a key and the same key with trailing zero bytes give equal MACs).
struct HmacSha256 {
  Sha256 inner;
  Sha256 outer;

  static HmacSha256 keyed(const std::uint8_t* key, std::size_t key_len) {
    std::uint8_t padded[64] = {0};
    if (key_len > 64) {
      Sha256 h = Sha256::start();
      h.feed(key, key_len);
      h.finish(padded);
    } else {
      std::memcpy(padded, key, key_len);
    }
    HmacSha256 mac{Sha256::start(), Sha256::start()};
    std::uint8_t pad[64];
    for (int i = 0; i < 64; ++i) pad[i] = padded[i] ^ 0x36;
    mac.inner.feed(pad, 64);
    for (int i = 0; i < 64; ++i) pad[i] = padded[i] ^ 0x5c;
    mac.outer.feed(pad, 64);
    return mac;
  }

  // MAC of the concatenation of the pieces.
  void mac(const std::uint8_t* const* pieces, const std::size_t* lengths, int n_pieces,
           std::uint8_t out[32]) const {
    Sha256 h = inner;
    for (int i = 0; i < n_pieces; ++i) h.feed(pieces[i], lengths[i]);
    std::uint8_t digest_in[32];
    h.finish(digest_in);
    Sha256 o = outer;
    o.feed(digest_in, 32);
    o.finish(out);
  }

  void mac(const std::uint8_t* data, std::size_t len, std::uint8_t out[32]) const {
    const std::uint8_t* pieces[1] = {data};
    const std::size_t lengths[1] = {len};
    mac(pieces, lengths, 1, out);
  }
};

// The published C++ RAPPOR client's `HmacDrbg(key, value)` (client/cpp/openssl_hash_impl.cc):
// an HMAC-SHA256 DRBG instantiated from the seed material key || value, then generating
// `out_len` bytes; its instantiate step feeds 0x00 then 0x01 rounds as NIST SP 800-90A's
// HMAC_DRBG update does, with no reseed. Used for filters of more than 32 bits.
static inline void hmac_drbg(const std::uint8_t* key, std::size_t key_len, const std::uint8_t* value,
                             std::size_t value_len, std::uint8_t* out, std::size_t out_len) {
  std::uint8_t k[32] = {0};
  std::uint8_t v[32];
  std::memset(v, 0x01, 32);
  const std::uint8_t separators[2] = {0x00, 0x01};
  for (int round = 0; round < 2; ++round) {
    const HmacSha256 mac = HmacSha256::keyed(k, 32);
    const std::uint8_t* pieces[4] = {v, separators + round, key, value};
    const std::size_t lengths[4] = {32, 1, key_len, value_len};
    mac.mac(pieces, lengths, 4, k);
    HmacSha256::keyed(k, 32).mac(v, 32, v);
  }
  const HmacSha256 mac = HmacSha256::keyed(k, 32);
  for (std::size_t done = 0; done < out_len; done += 32) {
    mac.mac(v, 32, v);
    const std::size_t take = out_len - done < 32 ? out_len - done : 32;
    std::memcpy(out + done, v, take);
  }
}

}  // namespace digest
}  // namespace ldpfast
