// Field arithmetic for the pairwise-independent hash h(x) = ((a0 + a1 x) in F) mod m:
// F_p for an odd prime p < 2^64 (Montgomery multiplication, 128-bit products) and
// GF(2^l), l <= 64 (carry-less multiplication modulo an irreducible polynomial).
// Header-only with internal linkage: kernel files compile it once per ISA.
#pragma once
#include <cstdint>
#if defined(__PCLMUL__)
#include "ldpfast/simd.hpp"
#endif

namespace ldpfast {

using u128 = unsigned __int128;

struct PrimeField {
  std::uint64_t p;     // odd prime
  std::uint64_t pinv;  // p^-1 mod 2^64
  std::uint64_t r2;    // 2^128 mod p
};

struct BinaryField {
  int l;                  // degree, 1..64
  std::uint64_t poly_low; // the irreducible polynomial without its z^l term
  std::uint64_t mask;     // 2^l - 1
};

struct FieldSpec {
  bool binary;
  PrimeField prime;
  BinaryField gf;
  std::uint64_t size() const { return binary ? (gf.l == 64 ? 0 : (std::uint64_t{1} << gf.l)) : prime.p; }
};

static inline PrimeField make_prime_field(std::uint64_t p) {
  std::uint64_t inv = p;  // Newton iteration: correct to 3, 6, 12, 24, 48, 96 bits
  for (int i = 0; i < 5; ++i) inv *= 2 - p * inv;
  const std::uint64_t r1 = static_cast<std::uint64_t>((u128{1} << 64) % p);
  const std::uint64_t r2 = static_cast<std::uint64_t>(static_cast<u128>(r1) * r1 % p);
  return PrimeField{p, inv, r2};
}

static inline BinaryField make_binary_field(int l, std::uint64_t poly_low) {
  return BinaryField{l, poly_low, l == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << l) - 1)};
}

// Montgomery reduction: t * 2^-64 mod p for t < p * 2^64.
static inline std::uint64_t mont_redc(u128 t, const PrimeField& f) {
  const std::uint64_t q = static_cast<std::uint64_t>(t) * f.pinv;
  const std::uint64_t hi = static_cast<std::uint64_t>(t >> 64);
  const std::uint64_t qp_hi = static_cast<std::uint64_t>((static_cast<u128>(q) * f.p) >> 64);
  const std::uint64_t r = hi - qp_hi;
  return hi < qp_hi ? r + f.p : r;
}

// a * 2^64 mod p: multiplying it by b with mont_redc gives a * b mod p.
static inline std::uint64_t to_montgomery(std::uint64_t a, const PrimeField& f) {
  return mont_redc(static_cast<u128>(a) * f.r2, f);
}

static inline std::uint64_t add_mod(std::uint64_t a, std::uint64_t b, std::uint64_t p) {
  const std::uint64_t s = a + b;
  return (s < a || s >= p) ? s - p : s;
}

static inline void clmul64(std::uint64_t a, std::uint64_t b, std::uint64_t* lo, std::uint64_t* hi) {
#if defined(__PCLMUL__)
  const __m128i prod = _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(a)),
                                            _mm_cvtsi64_si128(static_cast<long long>(b)), 0x00);
  *lo = static_cast<std::uint64_t>(_mm_cvtsi128_si64(prod));
  *hi = static_cast<std::uint64_t>(_mm_extract_epi64(prod, 1));
#else
  std::uint64_t l = 0, h = 0;
  for (int i = 0; i < 64; ++i) {
    const std::uint64_t take = 0 - ((b >> i) & 1);
    l ^= (a << i) & take;
    if (i) h ^= (a >> (64 - i)) & take;
  }
  *lo = l;
  *hi = h;
#endif
}

// Reduces the carry-less product (hi:lo), of degree < 2l - 1, modulo z^l + poly_low.
static inline std::uint64_t gf_reduce(std::uint64_t lo, std::uint64_t hi, const BinaryField& f) {
  for (;;) {
    const std::uint64_t upper = f.l == 64 ? hi : ((lo >> f.l) | (f.l ? hi << (64 - f.l) : 0));
    if (upper == 0) return lo & f.mask;
    std::uint64_t plo, phi;
    clmul64(upper, f.poly_low, &plo, &phi);
    lo = (lo & f.mask) ^ plo;
    hi = phi;
  }
}

static inline std::uint64_t gf_mul(std::uint64_t a, std::uint64_t b, const BinaryField& f) {
  std::uint64_t lo, hi;
  clmul64(a, b, &lo, &hi);
  return gf_reduce(lo, hi, f);
}

// Exact v mod m without a division (Barrett): mu = floor(2^64 / m) gives a quotient
// estimate q in {floor(v/m) - 1, floor(v/m)}, so one conditional subtraction finishes.
// For m = 1, mu = 2^64 - 1 has the same error bound.
struct FastMod {
  std::uint64_t m;
  std::uint64_t mu;
};

static inline FastMod make_fast_mod(std::uint64_t m) {
  if (m == 1) return FastMod{m, ~std::uint64_t{0}};
  // floor(2^64 / m) = floor((2^64 - 1) / m), plus one when m divides 2^64.
  const std::uint64_t mu = ~std::uint64_t{0} / m + ((m & (m - 1)) == 0 ? 1 : 0);
  return FastMod{m, mu};
}

static inline std::uint64_t fast_mod(std::uint64_t v, const FastMod& f) {
  const std::uint64_t q = static_cast<std::uint64_t>((static_cast<u128>(v) * f.mu) >> 64);
  const std::uint64_t r = v - q * f.m;
  return r >= f.m ? r - f.m : r;
}

// Classes with member functions live in an anonymous namespace: kernel files compile
// this header once per ISA, and inline members with external linkage would let the
// linker pick one ISA's copy for all of them.
namespace {

// Per-report hash state: the field value of a0 + a1 x for any x in the field.
struct FieldHasher {
  const FieldSpec& field;
  std::uint64_t a0;
  std::uint64_t a1_prepared;  // Montgomery form of a1 for prime fields, a1 itself for GF(2^l)

  FieldHasher(const FieldSpec& f, std::uint64_t a0_, std::uint64_t a1)
      : field(f), a0(a0_), a1_prepared(f.binary ? a1 : to_montgomery(a1, f.prime)) {}

  std::uint64_t value(std::uint64_t x) const {
    if (field.binary) return gf_mul(a1_prepared, x, field.gf) ^ a0;
    const std::uint64_t product = mont_redc(static_cast<u128>(a1_prepared) * x, field.prime);
    return add_mod(product, a0, field.prime.p);
  }
};

}  // namespace

}  // namespace ldpfast
