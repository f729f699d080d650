// Fast Walsh-Hadamard transform, compiled once per ISA (see dispatch.hpp).
//
// Schedule for a row of length n (W = lanes per vector, KB = vectors per register block,
// K = rows per pass across rows; AVX-512: W = 16 floats / 8 doubles, KB = 16, K = 8):
//  * n < W: textbook loops.
//  * W <= n <= KB * W: one pass entirely in registers: the log2(W) stages inside each
//    vector are a lane permute plus one exact fmadd with +-1 lane signs, the log2(n / W)
//    stages across vectors whole-vector butterflies.
//  * larger n: view the row as R x C (R <= K rows of length C), transform each row
//    recursively (depth first, so each row is finished while it is still in cache),
//    then apply the log2(R) stages across rows in one pass over the columns, R vectors in
//    registers at a time. Every level multiplies the block by 8, so for float32 the
//    passes run on 1 KB (registers), 8 KB (L1), 64-512 KB (L2), 4 MB (L3) ... and only
//    one pass per factor 8 of length streams through memory.
// K = 8 rather than 16: the R rows of a pass are a power-of-two stride apart, so beyond
// 2 KB strides they fall into the same L1 set, and 16 lines overflow the 8-12 ways of
// current L1 caches (radix-16 passes measured 2x slower than radix-8 on Zen 5). The one
// exception (KS = 16 with AVX-512) is the level right above the 1 KB register blocks,
// whose 1 KB stride spreads 16 rows over 4 sets: when log2(n / block) = 1 (mod 3) it
// replaces a radix-2 and a radix-8 pass by one radix-16 pass (about 10% faster there).
// Every element receives the stages h = 1, 2, 4, ... in ascending order with the same
// a + b / a - b operations, so results do not depend on ISA or schedule.
#include "ldpfast/kernels/fwht.hpp"

#if defined(__AVX2__) || defined(__AVX512F__)
#include "ldpfast/simd.hpp"
#endif

namespace ldpfast {
namespace LDPFAST_ISA_NS {
namespace {

// ---------------------------------------------------------------------------------------
// Vector types: W lanes of T with add, sub, unaligned load/store and the in-vector stages.

// Portable element arithmetic. Integers are added as uint64 (defined wrap-around).
template <class T>
inline T add_elem(T a, T b) {
  return a + b;
}
template <class T>
inline T sub_elem(T a, T b) {
  return a - b;
}
template <>
inline std::int64_t add_elem(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
template <>
inline std::int64_t sub_elem(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
}

// Portable "vector" of L elements in plain C++ (L * sizeof(T) = 16 bytes, which the
// compiler maps onto SSE2/NEON registers where it can); in-vector stages are textbook
// butterflies on the lanes.
template <class T, std::size_t L>
struct Lanes {
  using Elem = T;
  static constexpr std::size_t W = L;
  static constexpr std::size_t K = 8, KB = 8, KS = 8;  // see Fwht
  T v[L];
  static Lanes load(const T* p) {
    Lanes r;
    for (std::size_t i = 0; i < L; ++i) r.v[i] = p[i];
    return r;
  }
  void store(T* p) const {
    for (std::size_t i = 0; i < L; ++i) p[i] = v[i];
  }
  static Lanes add(const Lanes& a, const Lanes& b) {
    Lanes r;
    for (std::size_t i = 0; i < L; ++i) r.v[i] = add_elem(a.v[i], b.v[i]);
    return r;
  }
  static Lanes sub(const Lanes& a, const Lanes& b) {
    Lanes r;
    for (std::size_t i = 0; i < L; ++i) r.v[i] = sub_elem(a.v[i], b.v[i]);
    return r;
  }
  void lane_stages() {
    for (std::size_t h = 1; h < L; h <<= 1)
      for (std::size_t i = 0; i < L; ++i)
        if (!(i & h)) {
          const T a = v[i], b = v[i + h];
          v[i] = add_elem(a, b);
          v[i + h] = sub_elem(a, b);
        }
  }
};

#if defined(__AVX512F__)
// Float butterflies use both kinds of FP pipe: a + b on the adders and a - b as the fused
// fnmadd(b, 1, a), which is exact to the same bits (the product b * 1 is exact and a single
// rounding follows). The 1 is hidden from the optimizer so it is not folded back into a
// subtraction. In-vector stage h: s = v with lanes i and i ^ h swapped, then
// fmadd(v, sign, s) with sign = -1 on lanes with bit h: v + s = a + b on the others,
// s - v = a - b on those (again exact: one rounding of an exact product plus s).
inline __m512 opaque_ones_ps() {
  __m512 one = _mm512_set1_ps(1.0f);
  __asm__("" : "+v"(one));
  return one;
}
inline __m512d opaque_ones_pd() {
  __m512d one = _mm512_set1_pd(1.0);
  __asm__("" : "+v"(one));
  return one;
}
inline __m512 lane_signs_ps(unsigned hi) {
  return _mm512_mask_blend_ps(static_cast<__mmask16>(hi), _mm512_set1_ps(1.0f), _mm512_set1_ps(-1.0f));
}
inline __m512d lane_signs_pd(unsigned hi) {
  return _mm512_mask_blend_pd(static_cast<__mmask8>(hi), _mm512_set1_pd(1.0), _mm512_set1_pd(-1.0));
}

struct F32x16 {
  using Elem = float;
  static constexpr std::size_t W = 16, K = 8, KB = 16, KS = 16;
  __m512 v;
  static F32x16 load(const float* p) { return {_mm512_loadu_ps(p)}; }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  static F32x16 add(F32x16 a, F32x16 b) { return {_mm512_add_ps(a.v, b.v)}; }
  static F32x16 sub(F32x16 a, F32x16 b) { return {_mm512_fnmadd_ps(b.v, opaque_ones_ps(), a.v)}; }
  void lane_stages() {
    v = _mm512_fmadd_ps(v, lane_signs_ps(0xAAAA), _mm512_permute_ps(v, 0xB1));
    v = _mm512_fmadd_ps(v, lane_signs_ps(0xCCCC), _mm512_permute_ps(v, 0x4E));
    v = _mm512_fmadd_ps(v, lane_signs_ps(0xF0F0), _mm512_shuffle_f32x4(v, v, 0xB1));
    v = _mm512_fmadd_ps(v, lane_signs_ps(0xFF00), _mm512_shuffle_f32x4(v, v, 0x4E));
  }
};
struct F64x8 {
  using Elem = double;
  static constexpr std::size_t W = 8, K = 8, KB = 16, KS = 16;
  __m512d v;
  static F64x8 load(const double* p) { return {_mm512_loadu_pd(p)}; }
  void store(double* p) const { _mm512_storeu_pd(p, v); }
  static F64x8 add(F64x8 a, F64x8 b) { return {_mm512_add_pd(a.v, b.v)}; }
  static F64x8 sub(F64x8 a, F64x8 b) { return {_mm512_fnmadd_pd(b.v, opaque_ones_pd(), a.v)}; }
  void lane_stages() {
    v = _mm512_fmadd_pd(v, lane_signs_pd(0xAA), _mm512_permute_pd(v, 0x55));
    v = _mm512_fmadd_pd(v, lane_signs_pd(0xCC), _mm512_permutex_pd(v, 0x4E));
    v = _mm512_fmadd_pd(v, lane_signs_pd(0xF0), _mm512_shuffle_f64x2(v, v, 0x4E));
  }
};
struct I64x8 {
  using Elem = std::int64_t;
  static constexpr std::size_t W = 8, K = 8, KB = 16, KS = 16;
  __m512i v;
  static I64x8 load(const std::int64_t* p) { return {_mm512_loadu_si512(p)}; }
  void store(std::int64_t* p) const { _mm512_storeu_si512(p, v); }
  static I64x8 add(I64x8 a, I64x8 b) { return {_mm512_add_epi64(a.v, b.v)}; }
  static I64x8 sub(I64x8 a, I64x8 b) { return {_mm512_sub_epi64(a.v, b.v)}; }
  static __m512i stage(__m512i v, __m512i s, __mmask8 hi) {
    return _mm512_mask_sub_epi64(_mm512_add_epi64(v, s), hi, s, v);
  }
  void lane_stages() {
    v = stage(v, _mm512_permutex_epi64(v, 0xB1), 0xAA);
    v = stage(v, _mm512_permutex_epi64(v, 0x4E), 0xCC);
    v = stage(v, _mm512_shuffle_i64x2(v, v, 0x4E), 0xF0);
  }
};
using VecF32 = F32x16;
using VecF64 = F64x8;
using VecI64 = I64x8;
#elif defined(__AVX2__)
// Same scheme as AVX-512 above (exact fused a - b, in-vector stages as fmadd with signs).
inline __m256 opaque_ones_ps() {
  __m256 one = _mm256_set1_ps(1.0f);
  __asm__("" : "+x"(one));
  return one;
}
inline __m256d opaque_ones_pd() {
  __m256d one = _mm256_set1_pd(1.0);
  __asm__("" : "+x"(one));
  return one;
}
struct F32x8 {
  using Elem = float;
  static constexpr std::size_t W = 8, K = 8, KB = 8, KS = 8;
  __m256 v;
  static F32x8 load(const float* p) { return {_mm256_loadu_ps(p)}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  static F32x8 add(F32x8 a, F32x8 b) { return {_mm256_add_ps(a.v, b.v)}; }
  static F32x8 sub(F32x8 a, F32x8 b) { return {_mm256_fnmadd_ps(b.v, opaque_ones_ps(), a.v)}; }
  void lane_stages() {
    v = _mm256_fmadd_ps(v, _mm256_setr_ps(1, -1, 1, -1, 1, -1, 1, -1), _mm256_permute_ps(v, 0xB1));
    v = _mm256_fmadd_ps(v, _mm256_setr_ps(1, 1, -1, -1, 1, 1, -1, -1), _mm256_permute_ps(v, 0x4E));
    v = _mm256_fmadd_ps(v, _mm256_setr_ps(1, 1, 1, 1, -1, -1, -1, -1), _mm256_permute2f128_ps(v, v, 0x01));
  }
};
struct F64x4 {
  using Elem = double;
  static constexpr std::size_t W = 4, K = 8, KB = 8, KS = 8;
  __m256d v;
  static F64x4 load(const double* p) { return {_mm256_loadu_pd(p)}; }
  void store(double* p) const { _mm256_storeu_pd(p, v); }
  static F64x4 add(F64x4 a, F64x4 b) { return {_mm256_add_pd(a.v, b.v)}; }
  static F64x4 sub(F64x4 a, F64x4 b) { return {_mm256_fnmadd_pd(b.v, opaque_ones_pd(), a.v)}; }
  void lane_stages() {
    v = _mm256_fmadd_pd(v, _mm256_setr_pd(1, -1, 1, -1), _mm256_permute_pd(v, 0x5));
    v = _mm256_fmadd_pd(v, _mm256_setr_pd(1, 1, -1, -1), _mm256_permute2f128_pd(v, v, 0x01));
  }
};
struct I64x4 {
  using Elem = std::int64_t;
  static constexpr std::size_t W = 4, K = 8, KB = 8, KS = 8;
  __m256i v;
  static I64x4 load(const std::int64_t* p) { return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))}; }
  void store(std::int64_t* p) const { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static I64x4 add(I64x4 a, I64x4 b) { return {_mm256_add_epi64(a.v, b.v)}; }
  static I64x4 sub(I64x4 a, I64x4 b) { return {_mm256_sub_epi64(a.v, b.v)}; }
  void lane_stages() {
    __m256i s = _mm256_shuffle_epi32(v, 0x4E);
    v = _mm256_blend_epi32(_mm256_add_epi64(v, s), _mm256_sub_epi64(s, v), 0xCC);
    s = _mm256_permute2x128_si256(v, v, 0x01);
    v = _mm256_blend_epi32(_mm256_add_epi64(v, s), _mm256_sub_epi64(s, v), 0xF0);
  }
};
using VecF32 = F32x8;
using VecF64 = F64x4;
using VecI64 = I64x4;
#else
using VecF32 = Lanes<float, 4>;
using VecF64 = Lanes<double, 2>;
using VecI64 = Lanes<std::int64_t, 2>;
#endif

// ---------------------------------------------------------------------------------------
// Transform built on a vector type V.

template <class V>
struct Fwht {
  using T = typename V::Elem;
  static constexpr std::size_t W = V::W;
  static constexpr std::size_t K = V::K;    // rows per pass across rows
  static constexpr std::size_t KB = V::KB;  // vectors per contiguous register block
  static constexpr std::size_t KS = V::KS;  // rows per pass right above the blocks

  // The log2(Q) stages across Q vectors held in registers (stage H, then 2H, ...; the
  // recursion guarantees full unrolling so x never leaves registers).
  template <std::size_t Q, std::size_t H = 1>
  static inline __attribute__((always_inline)) void butterflies(V* x) {
    if constexpr (H < Q) {
#pragma GCC unroll 16
      for (std::size_t i = 0; i < Q; ++i)
        if (!(i & H)) {
          const V a = x[i], b = x[i + H];
          x[i] = V::add(a, b);
          x[i + H] = V::sub(a, b);
        }
      butterflies<Q, 2 * H>(x);
    }
  }

  // Rows shorter than one vector: textbook loops.
  static void tiny(T* p, std::size_t n) {
    for (std::size_t h = 1; h < n; h <<= 1)
      for (std::size_t b = 0; b < n; b += 2 * h)
        for (std::size_t j = b; j < b + h; ++j) {
          const T a = p[j], c = p[j + h];
          p[j] = add_elem(a, c);
          p[j + h] = sub_elem(a, c);
        }
  }

  // Complete transform of Q * W contiguous elements in registers.
  template <std::size_t Q>
  static void block(T* p) {
    V x[Q];
#pragma GCC unroll 16
    for (std::size_t i = 0; i < Q; ++i) {
      x[i] = V::load(p + i * W);
      x[i].lane_stages();
    }
    butterflies<Q>(x);
#pragma GCC unroll 16
    for (std::size_t i = 0; i < Q; ++i) x[i].store(p + i * W);
  }

  // Radix-Q pass across rows: for each row group {base + q * h : q < Q} (stride `stride`
  // elements between rows) and each column in [c0, c1), the Q-point butterflies.
  template <std::size_t Q>
  static void pass(T* p, std::size_t rows, std::size_t stride, std::size_t h, std::size_t c0, std::size_t c1) {
    for (std::size_t hi = 0; hi < rows; hi += Q * h)
      for (std::size_t lo = hi; lo < hi + h; ++lo) {
        T* base = p + lo * stride;
        const std::size_t step = h * stride;
        for (std::size_t c = c0; c < c1; c += W) {
          V x[Q];
#pragma GCC unroll 16
          for (std::size_t q = 0; q < Q; ++q) x[q] = V::load(base + q * step + c);
          butterflies<Q>(x);
#pragma GCC unroll 16
          for (std::size_t q = 0; q < Q; ++q) x[q].store(base + q * step + c);
        }
      }
  }

  static void pass_any(std::size_t q, T* p, std::size_t rows, std::size_t stride, std::size_t h, std::size_t c0,
                       std::size_t c1) {
    switch (q) {
      case 2: return pass<2>(p, rows, stride, h, c0, c1);
      case 4: return pass<4>(p, rows, stride, h, c0, c1);
      case 8: return pass<8>(p, rows, stride, h, c0, c1);
      default:
        if constexpr (KS >= 16) return pass<16>(p, rows, stride, h, c0, c1);
    }
  }

  // All stages across `rows` rows for columns [c0, c1): one register pass when rows <= K,
  // otherwise column strips small enough for L1, each finished with several passes.
  static void columns(T* p, std::size_t rows, std::size_t stride, std::size_t c0, std::size_t c1) {
    if (rows <= 1) return;
    if (rows <= K) return pass_any(rows, p, rows, stride, 1, c0, c1);
    std::size_t strip = (std::size_t{16384} / sizeof(T)) / rows;
    if (strip < W) strip = W;
    for (std::size_t s = c0; s < c1; s += strip) {
      const std::size_t e = s + strip < c1 ? s + strip : c1;
      for (std::size_t h = 1; h < rows; h *= K) {
        const std::size_t q = rows / h < K ? rows / h : K;
        pass_any(q, p, rows, stride, h, s, e);
      }
    }
  }

  static void row(T* p, std::size_t n) {
    if (n < W) return tiny(p, n);
    switch (n / W) {
      case 1: return block<1>(p);
      case 2: return block<2>(p);
      case 4: return block<4>(p);
      case 8: return block<8>(p);
      case 16:
        if constexpr (KB >= 16) return block<16>(p);
        break;
      default: break;
    }
    std::size_t r = n / (KB * W);
    if (r > K && r != KS) r = K;
    const std::size_t c = n / r;
    for (std::size_t i = 0; i < r; ++i) row(p + i * c, c);
    pass_any(r, p, r, c, 1, 0, c);
  }
};

void f32_row(float* p, std::size_t n) { Fwht<VecF32>::row(p, n); }
void f64_row(double* p, std::size_t n) { Fwht<VecF64>::row(p, n); }
void i64_row(std::int64_t* p, std::size_t n) { Fwht<VecI64>::row(p, n); }
void f32_columns(float* p, std::size_t r, std::size_t s, std::size_t c0, std::size_t c1) {
  Fwht<VecF32>::columns(p, r, s, c0, c1);
}
void f64_columns(double* p, std::size_t r, std::size_t s, std::size_t c0, std::size_t c1) {
  Fwht<VecF64>::columns(p, r, s, c0, c1);
}
void i64_columns(std::int64_t* p, std::size_t r, std::size_t s, std::size_t c0, std::size_t c1) {
  Fwht<VecI64>::columns(p, r, s, c0, c1);
}

}  // namespace

extern const FwhtKernels fwht_kernels = {
    {&f32_row, &f32_columns}, {&f64_row, &f64_columns}, {&i64_row, &i64_columns}};

}  // namespace LDPFAST_ISA_NS
}  // namespace ldpfast
