// Hadamard-family kernels, compiled once per ISA (see dispatch.hpp): client perturbation
// (one +-1 bit per user, ChaCha20 per element) and server accumulation z[cell] += bit.
#include "ldpfast/kernels/hadamard.hpp"

#if defined(__AVX2__) || defined(__AVX512F__)
#include "ldpfast/simd.hpp"
#endif

namespace ldpfast {
namespace LDPFAST_ISA_NS {
namespace {

// H[r, c] = (-1)^popcount(r & c): +1 when the parity is even.
inline int hadamard_sign(std::uint64_t r, std::uint64_t c) { return __builtin_parityll(r & c) ? -1 : 1; }

void perturb(const HadamardPlan& plan, const RngKey& key, const std::uint64_t* x, std::size_t begin,
             std::size_t end, std::uint32_t* group, bool draw_groups, std::uint32_t* row, bool draw_rows,
             std::int8_t* bits) {
  for_each_element_rng(key, kStreamHadamard, begin, end, [&](std::size_t i, ElementRng& rng) {
    std::uint32_t g = 0;
    if (group) {
      if (draw_groups) {
        const std::size_t level = plan.n_levels > 1 ? static_cast<std::size_t>(rng.below(plan.n_levels)) : 0;
        const std::uint32_t count = plan.level_count[level];
        g = plan.level_first[level] + (count > 1 ? static_cast<std::uint32_t>(rng.below(count)) : 0u);
        group[i] = g;
      } else {
        g = group[i];
      }
    }
    const HadamardGroup& grp = plan.groups[g];
    std::uint64_t r;
    if (draw_rows) {
      r = rng.below(grp.rows);
      row[i] = static_cast<std::uint32_t>(r);
    } else {
      r = row[i];
    }
    std::uint64_t y = x[i] >> grp.shift;
    if (grp.hash_modulus) y = FieldHasher(*plan.field, grp.a0, grp.a1).value(y) % grp.hash_modulus;
    int sign = hadamard_sign(r, y + grp.col_offset);
    if (rng.bernoulli(plan.flip_threshold)) sign = -sign;
    bits[i] = static_cast<std::int8_t>(sign);
  });
}

constexpr std::size_t kScanBlock = 4096;

std::size_t first_invalid(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                          std::size_t begin, std::size_t end, const std::uint64_t* group_rows,
                          std::size_t n_groups) {
  for (std::size_t b = begin; b < end; b += kScanBlock) {
    const std::size_t e = end - b < kScanBlock ? end : b + kScanBlock;
    // Branch-free check of the whole block (vectorizes); exact index only on failure.
    unsigned bad = 0;
    if (!group) {
      const std::uint64_t rows = group_rows[0];
      for (std::size_t i = b; i < e; ++i) bad |= static_cast<unsigned>(row[i] >= rows);
    } else {
      for (std::size_t i = b; i < e; ++i) {
        const std::uint32_t g = group[i];
        const bool g_bad = g >= n_groups;
        bad |= static_cast<unsigned>(g_bad) | static_cast<unsigned>(row[i] >= group_rows[g_bad ? 0 : g]);
      }
    }
    if (bits)
      for (std::size_t i = b; i < e; ++i)
        bad |= static_cast<unsigned>((static_cast<std::uint8_t>(bits[i] + 1) & 0xFDu) != 0);
    if (!bad) continue;
    for (std::size_t i = b; i < e; ++i) {
      const std::uint32_t g = group ? group[i] : 0u;
      if (g >= n_groups || row[i] >= group_rows[g]) return i;
      if (bits && bits[i] != 1 && bits[i] != -1) return i;
    }
  }
  return end;
}

// Random increments into a table that may exceed the L2 cache: prefetch the cell a fixed
// distance ahead (into L1) so several misses are in flight (PrefetchCells; it only costs
// time when the table fits in L2), and the report columns further ahead, once per 16
// reports, so their stream from memory does not stall the loop.
constexpr std::size_t kPrefetchDistance = 64;
constexpr std::size_t kStreamAhead = 1024;
constexpr std::size_t kUnroll = 16;

// Calls add(t, cell, bit) for reports [begin, end), cell = cell_base[group[i]] + row[i].
template <bool PrefetchCells, class T, class Add>
inline void scatter(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                    std::size_t begin, std::size_t end, const std::uint64_t* cell_base, T* t, Add&& add) {
  const std::size_t ahead_end = end > kPrefetchDistance ? end - kPrefetchDistance : 0;
  std::size_t i = begin;
  if (!group) {
    const std::uint64_t base = cell_base[0];
    for (; i + kUnroll <= ahead_end; i += kUnroll) {
      __builtin_prefetch(row + i + kStreamAhead, 0, 0);
      __builtin_prefetch(bits + i + kStreamAhead, 0, 0);
      for (std::size_t j = i; j < i + kUnroll; ++j) {
        if (PrefetchCells) __builtin_prefetch(t + base + row[j + kPrefetchDistance], 1, 3);
        add(t, base + row[j], bits[j]);
      }
    }
    for (; i < end; ++i) add(t, base + row[i], bits[i]);
    return;
  }
  for (; i + kUnroll <= ahead_end; i += kUnroll) {
    __builtin_prefetch(group + i + kStreamAhead, 0, 0);
    __builtin_prefetch(row + i + kStreamAhead, 0, 0);
    __builtin_prefetch(bits + i + kStreamAhead, 0, 0);
    for (std::size_t j = i; j < i + kUnroll; ++j) {
      if (PrefetchCells)
        __builtin_prefetch(t + cell_base[group[j + kPrefetchDistance]] + row[j + kPrefetchDistance], 1, 3);
      add(t, cell_base[group[j]] + row[j], bits[j]);
    }
  }
  for (; i < end; ++i) add(t, cell_base[group[i]] + row[i], bits[i]);
}

// True when one of the kUnroll reports from i (single group) has row > max_row or a bit
// other than +-1.
inline bool block_invalid(const std::uint32_t* row, const std::int8_t* bits, std::size_t i,
                          std::uint32_t max_row) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  static_assert(kUnroll == 16, "one zmm of rows");
  const __m512i r = _mm512_loadu_si512(row + i);
  const __mmask16 row_bad = _mm512_cmpgt_epu32_mask(r, _mm512_set1_epi32(static_cast<int>(max_row)));
  const __m128i b = _mm_abs_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i)));
  const __mmask16 bit_ok = _mm_cmpeq_epi8_mask(b, _mm_set1_epi8(1));
  return (row_bad | static_cast<__mmask16>(~bit_ok)) != 0;
#elif defined(__AVX2__)
  static_assert(kUnroll == 16, "two ymm of rows");
  const __m256i m = _mm256_set1_epi32(static_cast<int>(max_row));
  const __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i));
  const __m256i r1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i + 8));
  const __m256i ok = _mm256_and_si256(_mm256_cmpeq_epi32(_mm256_max_epu32(r0, m), m),
                                      _mm256_cmpeq_epi32(_mm256_max_epu32(r1, m), m));
  const __m128i b = _mm_abs_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i)));
  return _mm256_movemask_epi8(ok) != -1 || _mm_movemask_epi8(_mm_cmpeq_epi8(b, _mm_set1_epi8(1))) != 0xFFFF;
#else
  unsigned bad = 0;
  for (std::size_t j = i; j < i + kUnroll; ++j)
    bad |= static_cast<unsigned>(row[j] > max_row) |
           static_cast<unsigned>((static_cast<std::uint8_t>(bits[j] + 1) & 0xFDu) != 0);
  return bad != 0;
#endif
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// Several groups: true when one of the kUnroll reports from i has group >= n_groups,
// row >= group_rows[group] or a bit other than +-1 (n_groups < 2^32).
inline bool block_invalid_groups(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                                 std::size_t i, const std::uint64_t* group_rows, std::uint32_t n_groups) {
  const __m512i g = _mm512_loadu_si512(group + i);
  const __mmask16 group_ok = _mm512_cmplt_epu32_mask(g, _mm512_set1_epi32(static_cast<int>(n_groups)));
  const __m512i safe = _mm512_maskz_mov_epi32(group_ok, g);  // out-of-range groups read group 0
  const __m512i limit_lo = _mm512_i32gather_epi64(_mm512_castsi512_si256(safe), group_rows, 8);
  const __m512i limit_hi = _mm512_i32gather_epi64(_mm512_extracti64x4_epi64(safe, 1), group_rows, 8);
  const __m512i r = _mm512_loadu_si512(row + i);
  const __mmask8 row_ok_lo = _mm512_cmplt_epu64_mask(_mm512_cvtepu32_epi64(_mm512_castsi512_si256(r)), limit_lo);
  const __mmask8 row_ok_hi =
      _mm512_cmplt_epu64_mask(_mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(r, 1)), limit_hi);
  const __m128i b = _mm_abs_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i)));
  const __mmask16 bit_ok = _mm_cmpeq_epi8_mask(b, _mm_set1_epi8(1));
  const __mmask16 row_ok = static_cast<__mmask16>(row_ok_lo | (static_cast<unsigned>(row_ok_hi) << 8));
  return static_cast<__mmask16>(group_ok & row_ok & bit_ok) != 0xFFFF;
}
#endif

// Validated accumulation, returning the first invalid index in [begin, end) or end when
// all were valid and added. Validation is fused into the scatter loop, each kUnroll reports
// checked (SIMD) while in L1, before any of them is added; several groups without
// AVX-512: blocks of kScanBlock reports checked by first_invalid, then added.
template <bool PrefetchCells, class T, class Add>
std::size_t scatter_checked(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                            std::size_t begin, std::size_t end, const std::uint64_t* cell_base,
                            const std::uint64_t* group_rows, std::size_t n_groups, T* t, Add&& add) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  if (group && n_groups <= 0xFFFFFFFFu) {
    const std::size_t ahead_end = end > kPrefetchDistance ? end - kPrefetchDistance : 0;
    const std::uint32_t groups32 = static_cast<std::uint32_t>(n_groups);
    std::size_t i = begin;
    for (; i + kUnroll <= ahead_end; i += kUnroll) {
      __builtin_prefetch(group + i + kStreamAhead, 0, 0);
      __builtin_prefetch(row + i + kStreamAhead, 0, 0);
      __builtin_prefetch(bits + i + kStreamAhead, 0, 0);
      if (block_invalid_groups(group, row, bits, i, group_rows, groups32))
        return first_invalid(group, row, bits, i, i + kUnroll, group_rows, n_groups);
      for (std::size_t j = i; j < i + kUnroll; ++j) {
        if (PrefetchCells) {
          const std::uint32_t g = group[j + kPrefetchDistance];  // not validated yet: clamp
          __builtin_prefetch(t + cell_base[g < n_groups ? g : 0u] + row[j + kPrefetchDistance], 1, 3);
        }
        add(t, cell_base[group[j]] + row[j], bits[j]);
      }
    }
    const std::size_t bad = first_invalid(group, row, bits, i, end, group_rows, n_groups);
    if (bad < end) return bad;
    scatter<PrefetchCells>(group, row, bits, i, end, cell_base, t, add);
    return end;
  }
#endif
  if (group || group_rows[0] == 0) {
    for (std::size_t b = begin; b < end; b += kScanBlock) {
      const std::size_t e = end - b < kScanBlock ? end : b + kScanBlock;
      const std::size_t bad = first_invalid(group, row, bits, b, e, group_rows, n_groups);
      if (bad < e) return bad;
      scatter<PrefetchCells>(group, row, bits, b, e, cell_base, t, add);
    }
    return end;
  }
  const std::uint32_t max_row =
      group_rows[0] > 0xFFFFFFFFu ? 0xFFFFFFFFu : static_cast<std::uint32_t>(group_rows[0] - 1);
  const std::uint64_t base = cell_base[0];
  const std::size_t ahead_end = end > kPrefetchDistance ? end - kPrefetchDistance : 0;
  std::size_t i = begin;
  for (; i + kUnroll <= ahead_end; i += kUnroll) {
    __builtin_prefetch(row + i + kStreamAhead, 0, 0);
    __builtin_prefetch(bits + i + kStreamAhead, 0, 0);
    if (block_invalid(row, bits, i, max_row))
      return first_invalid(nullptr, row, bits, i, i + kUnroll, group_rows, n_groups);
    for (std::size_t j = i; j < i + kUnroll; ++j) {
      // row[j + kPrefetchDistance] is not validated yet: a prefetch cannot fault.
      if (PrefetchCells) __builtin_prefetch(t + base + row[j + kPrefetchDistance], 1, 3);
      add(t, base + row[j], bits[j]);
    }
  }
  const std::size_t bad = first_invalid(nullptr, row, bits, i, end, group_rows, n_groups);
  if (bad < end) return bad;
  scatter<PrefetchCells>(nullptr, row, bits, i, end, cell_base, t, add);
  return end;
}

template <class T>
void accumulate(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits, std::size_t begin,
                std::size_t end, const std::uint64_t* cell_base, T* z, bool prefetch) {
  auto add = [](T* t, std::uint64_t cell, std::int8_t bit) { t[cell] += bit; };
  if (prefetch)
    scatter<true>(group, row, bits, begin, end, cell_base, z, add);
  else
    scatter<false>(group, row, bits, begin, end, cell_base, z, add);
}

void accumulate64(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                  std::size_t begin, std::size_t end, const std::uint64_t* cell_base, std::int64_t* z,
                  bool prefetch) {
  accumulate(group, row, bits, begin, end, cell_base, z, prefetch);
}

void accumulate32(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                  std::size_t begin, std::size_t end, const std::uint64_t* cell_base, std::int32_t* t,
                  bool prefetch) {
  accumulate(group, row, bits, begin, end, cell_base, t, prefetch);
}

// t[cell] += bit in an int16 partial table that never overflows: an increment that leaves
// the int16 range moves the exact sum to the spill log and resets the cell to 0. From 0, a
// cell needs >= 256 increments of |bit| <= 128 to spill again. The SIMD builds add straight
// to memory and test the overflow flag (2 instructions per increment, as fast as an
// unchecked int32 add); the portable build (scalar backend) checks the sum instead.
inline void add_spilling(std::int16_t* t, std::uint64_t cell, std::int8_t bit, SpillLog& log) {
#if defined(__x86_64__) && defined(__GNUC__) && defined(__AVX2__)
  const std::int16_t b16 = bit;
  asm goto("addw %1, %0\n\tjo %l[overflow]" : : "m"(t[cell]), "r"(b16) : "memory", "cc" : overflow);
  return;
overflow:
  // The 16-bit add wrapped by 2^16 towards the opposite sign.
  log.value[log.count] = static_cast<std::int64_t>(t[cell]) + (bit > 0 ? 65536 : -65536);
#else
  std::int16_t sum;
  if (__builtin_expect(!__builtin_add_overflow(t[cell], static_cast<std::int16_t>(bit), &sum), 1)) {
    t[cell] = sum;
    return;
  }
  log.value[log.count] = static_cast<std::int64_t>(t[cell]) + bit;
#endif
  log.cell[log.count] = static_cast<std::uint32_t>(cell);
  ++log.count;
  t[cell] = 0;
}

void accumulate16(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                  std::size_t begin, std::size_t end, const std::uint64_t* cell_base, std::int16_t* t,
                  bool prefetch, SpillLog* spill) {
  SpillLog log = *spill;
  auto add = [&log](std::int16_t* table, std::uint64_t cell, std::int8_t bit) {
    add_spilling(table, cell, bit, log);
  };
  if (prefetch)
    scatter<true>(group, row, bits, begin, end, cell_base, t, add);
  else
    scatter<false>(group, row, bits, begin, end, cell_base, t, add);
  spill->count = log.count;
}

std::size_t accumulate32_checked(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                                 std::size_t begin, std::size_t end, const std::uint64_t* cell_base,
                                 const std::uint64_t* group_rows, std::size_t n_groups, std::int32_t* t,
                                 bool prefetch) {
  auto add = [](std::int32_t* table, std::uint64_t cell, std::int8_t bit) { table[cell] += bit; };
  if (prefetch)
    return scatter_checked<true>(group, row, bits, begin, end, cell_base, group_rows, n_groups, t, add);
  return scatter_checked<false>(group, row, bits, begin, end, cell_base, group_rows, n_groups, t, add);
}

std::size_t accumulate16_checked(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                                 std::size_t begin, std::size_t end, const std::uint64_t* cell_base,
                                 const std::uint64_t* group_rows, std::size_t n_groups, std::int16_t* t,
                                 bool prefetch, SpillLog* spill) {
  SpillLog log = *spill;
  auto add = [&log](std::int16_t* table, std::uint64_t cell, std::int8_t bit) {
    add_spilling(table, cell, bit, log);
  };
  const std::size_t bad =
      prefetch ? scatter_checked<true>(group, row, bits, begin, end, cell_base, group_rows, n_groups, t, add)
               : scatter_checked<false>(group, row, bits, begin, end, cell_base, group_rows, n_groups, t, add);
  spill->count = log.count;
  return bad;
}

// z[cell] += bit for the reports whose cell lies in [cell_lo, cell_hi) (a worker's share,
// ~1/T of them): blocks of reports are first compacted branch-free to the ones in range,
// which are then added with their cells prefetched ahead.
void accumulate64_range(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                        std::size_t begin, std::size_t end, const std::uint64_t* cell_base, std::int64_t* z,
                        std::uint64_t cell_lo, std::uint64_t cell_hi) {
  constexpr std::size_t kBlock = 1024;
  std::uint64_t offset[kBlock + kPrefetchDistance];
  std::int8_t value[kBlock];
  const std::uint64_t span = cell_hi - cell_lo;
  std::int64_t* const zr = z + cell_lo;
  for (std::size_t b = begin; b < end; b += kBlock) {
    const std::size_t e = end - b < kBlock ? end : b + kBlock;
    if (group) __builtin_prefetch(group + b + kStreamAhead, 0, 0);
    __builtin_prefetch(row + b + kStreamAhead, 0, 0);
    std::size_t kept = 0;
    for (std::size_t i = b; i < e; ++i) {
      const std::uint64_t off = (group ? cell_base[group[i]] : cell_base[0]) + row[i] - cell_lo;
      offset[kept] = off;
      value[kept] = bits[i];
      kept += off < span;
    }
    for (std::size_t j = 0; j < kPrefetchDistance; ++j) offset[kept + j] = 0;
    for (std::size_t j = 0; j < kept; ++j) {
      __builtin_prefetch(zr + offset[j + kPrefetchDistance], 1, 3);
      zr[offset[j]] += value[j];
    }
  }
}

void rhr_perturb(const RngKey& key, const std::uint64_t* x, std::size_t begin, std::size_t end,
                 std::uint32_t base_bits, std::uint64_t hsize, std::uint64_t flip_threshold, std::uint32_t* row,
                 bool draw_rows, std::uint32_t* z) {
  const std::uint64_t low_mask = (std::uint64_t{1} << base_bits) - 1;
  const std::uint64_t symbols = std::uint64_t{1} << (base_bits + 1);
  for_each_element_rng(key, kStreamHadamard, begin, end, [&](std::size_t i, ElementRng& rng) {
    std::uint64_t r;
    if (draw_rows) {
      r = rng.below(hsize);
      row[i] = static_cast<std::uint32_t>(r);
    } else {
      r = row[i];
    }
    const std::uint64_t h01 = hadamard_sign(r, (x[i] >> base_bits) + 1) > 0 ? 1 : 0;
    const std::uint64_t y = 2 * (x[i] & low_mask) + h01;
    z[i] = static_cast<std::uint32_t>(randomized_response(rng, y, symbols, flip_threshold));
  });
}

}  // namespace

extern const HadamardKernels hadamard_kernels = {
    &perturb,      &first_invalid,        &accumulate64,         &accumulate32,
    &accumulate16, &accumulate32_checked, &accumulate16_checked, &accumulate64_range,
    &rhr_perturb};

}  // namespace LDPFAST_ISA_NS
}  // namespace ldpfast
