// RAPPOR's reference-compatible client steps, compiled once per ISA (see dispatch.hpp).
#include <cstring>

#include "ldpfast/digest.hpp"
#include "ldpfast/kernels/rappor.hpp"

namespace ldpfast {
namespace LDPFAST_ISA_NS {
namespace {

std::size_t drbg_bytes_per_hash(std::size_t k) {
  std::size_t exponent = 0;
  while ((std::size_t{1} << exponent) < k) ++exponent;
  return exponent == 0 ? 1 : (exponent - 1) / 8 + 1;
}

void bloom_positions(int encoding, std::size_t k, std::size_t h, const std::uint8_t* data,
                     const std::int64_t* offsets, const std::uint32_t* cohort, std::size_t begin, std::size_t end,
                     std::uint32_t* out) {
  const std::size_t per_hash = encoding == kRapporCppDrbg ? drbg_bytes_per_hash(k) : 1;
  for (std::size_t i = begin; i < end; ++i) {
    const std::uint32_t c = cohort[i];
    const std::uint8_t prefix[4] = {static_cast<std::uint8_t>(c >> 24), static_cast<std::uint8_t>(c >> 16),
                                    static_cast<std::uint8_t>(c >> 8), static_cast<std::uint8_t>(c)};
    std::uint8_t md[16];
    digest::md5(prefix, 4, data + offsets[i], static_cast<std::size_t>(offsets[i + 1] - offsets[i]), md);
    for (std::size_t j = 0; j < h; ++j) {
      std::uint64_t position = 0;
      for (std::size_t b = 0; b < per_hash; ++b) position |= std::uint64_t{md[j * per_hash + b]} << (8 * b);
      out[i * h + j] = static_cast<std::uint32_t>(position % k);
    }
  }
}

void cohorts(int encoding, const std::uint8_t* secrets, std::size_t secret_len, std::size_t begin,
             std::size_t end, std::uint32_t m, std::uint32_t* out) {
  for (std::size_t i = begin; i < end; ++i) {
    const std::uint8_t* secret = secrets + i * secret_len;
    std::uint8_t mac[32];
    if (encoding == kRapporCppDrbg)
      digest::hmac_drbg(secret, secret_len, nullptr, 0, mac, 32);
    else
      digest::HmacSha256::keyed(secret, secret_len).mac(nullptr, 0, mac);
    const std::uint32_t word = std::uint32_t{mac[0]} | (std::uint32_t{mac[1]} << 8) |
                               (std::uint32_t{mac[2]} << 16) | (std::uint32_t{mac[3]} << 24);
    out[i] = (m & (m - 1)) == 0 ? word & (m - 1) : word % m;
  }
}

void permanent(int encoding, std::size_t k, std::uint32_t f128, const std::uint8_t* secrets,
               std::size_t secret_len, const std::uint8_t* encoder_id, std::size_t id_len,
               const std::uint8_t* bloom, std::size_t begin, std::size_t end, std::uint8_t* out) {
  const std::size_t row_bytes = (k + 7) / 8;
  const std::uint8_t kPrrPrefix = 0x01;
  std::uint8_t masks[kRapporMaxBits > 32 ? kRapporMaxBits : 32];  // one byte per bit
  std::uint8_t big_endian[kRapporMaxBits / 8];
  for (std::size_t i = begin; i < end; ++i) {
    const std::uint8_t* row = bloom + i * row_bytes;
    const std::uint8_t* secret = secrets + i * secret_len;
    // The filter as the reference clients hash it: a 4-byte big-endian word (k <= 32), or
    // k / 8 bytes, most significant first.
    const std::size_t msg_bytes = encoding == kRapporCppDrbg ? row_bytes : 4;
    std::memset(big_endian, 0, msg_bytes);
    for (std::size_t b = 0; b < row_bytes; ++b) big_endian[msg_bytes - 1 - b] = row[b];
    if (encoding == kRapporPython) {
      digest::HmacSha256::keyed(secret, secret_len).mac(big_endian, 4, masks);
    } else {
      std::uint8_t message[1 + kRapporMaxEncoderId + kRapporMaxBits / 8];
      message[0] = kPrrPrefix;
      std::memcpy(message + 1, encoder_id, id_len);
      std::memcpy(message + 1 + id_len, big_endian, msg_bytes);
      if (encoding == kRapporCpp)
        digest::HmacSha256::keyed(secret, secret_len).mac(message, 1 + id_len + msg_bytes, masks);
      else
        digest::hmac_drbg(secret, secret_len, message, 1 + id_len + msg_bytes, masks, k);
    }
    std::uint8_t* dst = out + i * row_bytes;
    std::memset(dst, 0, row_bytes);
    for (std::size_t j = 0; j < k; ++j) {
      const std::uint8_t byte = masks[j];
      const bool noise = static_cast<std::uint32_t>(byte >> 1) < f128;
      const std::uint8_t bit = noise ? (byte & 1) : static_cast<std::uint8_t>((row[j / 8] >> (j % 8)) & 1);
      dst[j / 8] = static_cast<std::uint8_t>(dst[j / 8] | (bit << (j % 8)));
    }
  }
}

}  // namespace

extern const RapporKernels rappor_kernels = {&bloom_positions, &cohorts, &permanent};

}  // namespace LDPFAST_ISA_NS
}  // namespace ldpfast
