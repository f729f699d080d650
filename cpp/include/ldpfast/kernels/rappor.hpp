// Kernel table of RAPPOR's deterministic client steps in the published reference clients'
// encodings (google/rappor): Bloom positions from MD5, the cohort and the permanent
// randomized response from HMAC-SHA256 keyed by the client's secret (or the C++ client's
// HMAC-DRBG for filters of more than 32 bits). The instantaneous response is
// BitvecKernels::bit_response. Threading lives in cpp/src/bitvec.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ldpfast/dispatch.hpp"

namespace ldpfast {

// The reference clients' encodings.
enum RapporEncoding : int {
  // client/python/rappor.py: Bloom bit i = MD5(BE32(cohort) || value)[i] mod k; PRR masks
  // from HMAC-SHA256(secret, BE32(bloom)), bit i from digest byte i; k <= 32, h <= 16.
  kRapporPython = 0,
  // client/cpp/encoder.cc with HMAC-SHA256: the same Bloom bits; PRR message
  // 0x01 || encoder_id || BE32(bloom); cohort from HMAC-SHA256(secret, "") ; k <= 32.
  kRapporCpp = 1,
  // client/cpp/encoder.cc's byte-vector path with HMAC-DRBG: k a multiple of 8; Bloom
  // positions from ceil(ceil(log2 k) / 8) little-endian MD5 bytes each; PRR bytes from
  // HmacDrbg(secret, 0x01 || encoder_id || bloom as k/8 big-endian bytes), one per bit.
  kRapporCppDrbg = 2,
};

// Limits of this implementation (the bindings check them): filter bits and encoder-id bytes.
constexpr std::size_t kRapporMaxBits = 1024;
constexpr std::size_t kRapporMaxEncoderId = 256;

struct RapporKernels {
  // Bloom positions of items [begin, end): item i is data[offsets[i]:offsets[i+1]] in
  // cohort cohort[i]; out[i * h + j] = its j-th position (< k; positions may repeat).
  void (*bloom_positions)(int encoding, std::size_t k, std::size_t h, const std::uint8_t* data,
                          const std::int64_t* offsets, const std::uint32_t* cohort, std::size_t begin,
                          std::size_t end, std::uint32_t* out);
  // Cohorts derived from the secrets (rows of secret_len bytes): the first 4 bytes of the
  // encoding's HMAC of the empty message as a little-endian word, & (m - 1) when m is a
  // power of two (the C++ client), else mod m.
  void (*cohorts)(int encoding, const std::uint8_t* secrets, std::size_t secret_len, std::size_t begin,
                  std::size_t end, std::uint32_t m, std::uint32_t* out);
  // Permanent randomized response of Bloom rows (LSB-first rows of row_bytes bytes): bit i
  // keeps the Bloom bit unless the mask byte's high 7 bits are < f128 (probability
  // f128 / 128), then takes the byte's low bit.
  void (*permanent)(int encoding, std::size_t k, std::uint32_t f128, const std::uint8_t* secrets,
                    std::size_t secret_len, const std::uint8_t* encoder_id, std::size_t id_len,
                    const std::uint8_t* bloom, std::size_t begin, std::size_t end, std::uint8_t* out);
};

}  // namespace ldpfast

LDPFAST_DECLARE_ISA_TABLE(RapporKernels, rappor_kernels)
