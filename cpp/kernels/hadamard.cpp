// Hadamard-family kernels, compiled once per ISA (see dispatch.hpp): client perturbation
// (one +-1 bit per user, ChaCha20 per element) and server accumulation z[cell] += bit.
#include "ldpfast/kernels/hadamard.hpp"

#include <cstring>

#include "ldpfast/read_once.hpp"

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
// time when the table fits in L2). The reports come from a block already copied into L1.
constexpr std::size_t kPrefetchDistance = 64;
constexpr std::size_t kUnroll = 16;

// Calls add(t, cell, bit) for reports [begin, end), cell = cell_base[group[i]] + row[i].
template <bool PrefetchCells, class T, class Add>
inline void scatter(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                    std::size_t begin, std::size_t end, const std::uint64_t* cell_base, T* t, Add&& add) {
  const std::size_t ahead_end = end > kPrefetchDistance ? end - kPrefetchDistance : 0;
  std::size_t i = begin;
  if (!group) {
    const std::uint64_t base = cell_base[0];
    for (; i < ahead_end; ++i) {
      if (PrefetchCells) __builtin_prefetch(t + base + row[i + kPrefetchDistance], 1, 3);
      add(t, base + row[i], bits[i]);
    }
    for (; i < end; ++i) add(t, base + row[i], bits[i]);
    return;
  }
  for (; i < ahead_end; ++i) {
    if (PrefetchCells)
      __builtin_prefetch(t + cell_base[group[i + kPrefetchDistance]] + row[i + kPrefetchDistance], 1, 3);
    add(t, cell_base[group[i]] + row[i], bits[i]);
  }
  for (; i < end; ++i) add(t, cell_base[group[i]] + row[i], bits[i]);
}

inline bool bad_bit(std::int8_t bit) { return (static_cast<std::uint8_t>(bit + 1) & 0xFDu) != 0; }

// Each report read once straight from the caller's columns into registers, checked and
// handed to use(cell, bit), in one pass (no copy). Returns the first invalid index (the
// reports before it were used) or end.
template <class Use>
std::size_t for_each_checked_report(const ReportColumns& in, std::size_t begin, std::size_t end,
                                    const GroupMap& map, std::int64_t* group_counts, Use&& use) {
  if (!in.group) {
    const std::uint64_t rows = map.group_rows[0], base = map.cell_base[0];
    for (std::size_t i = begin; i < end; ++i) {
      const std::uint32_t row = read_once(in.row + i);
      const std::int8_t bit = read_once(in.bits + i);
      if (__builtin_expect((row >= rows) | bad_bit(bit), 0)) return i;
      use(base + row, bit);
    }
    if (group_counts) group_counts[0] += static_cast<std::int64_t>(end - begin);
    return end;
  }
  for (std::size_t i = begin; i < end; ++i) {
    const std::uint32_t g = read_once(in.group + i);
    const std::uint32_t row = read_once(in.row + i);
    const std::int8_t bit = read_once(in.bits + i);
    const bool g_bad = g >= map.n_groups;
    if (__builtin_expect(g_bad | (row >= map.group_rows[g_bad ? 0 : g]) | bad_bit(bit), 0)) return i;
    use(map.cell_base[g] + row, bit);
    if (group_counts) ++group_counts[g];
  }
  return end;
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

// Reports copied out of the caller's columns, a block at a time (9 KiB, in L1).
constexpr std::size_t kCopyBlock = 1024;

struct ReportBlock {
  alignas(64) std::uint32_t group[kCopyBlock];
  alignas(64) std::uint32_t row[kCopyBlock];
  alignas(64) std::int8_t bits[kCopyBlock];
};

// Copies reports [begin, begin + count) into blk: the only read of the caller's columns.
// The empty asm tells the compiler that blk may have changed, so every later use reads
// the copy and none is re-read from the columns (which another thread may be changing).
inline void copy_block(const ReportColumns& in, std::size_t begin, std::size_t count, ReportBlock& blk) {
  if (in.group) std::memcpy(blk.group, in.group + begin, count * sizeof(std::uint32_t));
  std::memcpy(blk.row, in.row + begin, count * sizeof(std::uint32_t));
  std::memcpy(blk.bits, in.bits + begin, count);
  asm volatile("" : : "r"(&blk) : "memory");
}

// First invalid report of a copied block (see first_invalid), count when all are valid:
// 16 reports at a time with SIMD where the ISA has it, the rest branch-free.
inline std::size_t check_block(const std::uint32_t* group, const std::uint32_t* row, const std::int8_t* bits,
                               std::size_t count, const GroupMap& map) {
  std::size_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  if (group && map.n_groups <= 0xFFFFFFFFu) {
    const std::uint32_t groups32 = static_cast<std::uint32_t>(map.n_groups);
    for (; i + kUnroll <= count; i += kUnroll)
      if (block_invalid_groups(group, row, bits, i, map.group_rows, groups32))
        return first_invalid(group, row, bits, i, i + kUnroll, map.group_rows, map.n_groups);
  }
#endif
  if (!group && map.group_rows[0] != 0) {
    const std::uint32_t max_row =
        map.group_rows[0] > 0xFFFFFFFFu ? 0xFFFFFFFFu : static_cast<std::uint32_t>(map.group_rows[0] - 1);
    for (; i + kUnroll <= count; i += kUnroll)
      if (block_invalid(row, bits, i, max_row))
        return first_invalid(nullptr, row, bits, i, i + kUnroll, map.group_rows, map.n_groups);
  }
  return first_invalid(group, row, bits, i, count, map.group_rows, map.n_groups);
}

inline void count_groups(const std::uint32_t* group, std::size_t count, std::int64_t* group_counts) {
  if (!group_counts) return;
  if (!group) {
    group_counts[0] += static_cast<std::int64_t>(count);
    return;
  }
  for (std::size_t j = 0; j < count; ++j) ++group_counts[group[j]];
}

// Copies, checks and hands each block of [begin, end) to use(blk group or null, blk, b,
// count); returns the first invalid index or end.
template <class Use>
std::size_t for_each_checked_block(const ReportColumns& in, std::size_t begin, std::size_t end,
                                   const GroupMap& map, std::int64_t* group_counts, Use&& use) {
  ReportBlock blk;
  const std::uint32_t* group = in.group ? blk.group : nullptr;
  for (std::size_t b = begin; b < end; b += kCopyBlock) {
    const std::size_t count = end - b < kCopyBlock ? end - b : kCopyBlock;
    copy_block(in, b, count, blk);
    const std::size_t bad = check_block(group, blk.row, blk.bits, count, map);
    if (bad < count) return b + bad;
    use(group, blk, b, count);
    count_groups(group, count, group_counts);
  }
  return end;
}

template <class T, class Add>
std::size_t fill(const ReportColumns& in, std::size_t begin, std::size_t end, const GroupMap& map, T* t,
                 TableAccess access, std::int64_t* group_counts, Add&& add) {
  if (access == TableAccess::kDirect)
    return for_each_checked_report(in, begin, end, map, group_counts,
                                   [&](std::uint64_t cell, std::int8_t bit) { add(t, cell, bit); });
  return for_each_checked_block(
      in, begin, end, map, group_counts,
      [&](const std::uint32_t* group, const ReportBlock& blk, std::size_t, std::size_t count) {
        if (access == TableAccess::kPrefetch)
          scatter<true>(group, blk.row, blk.bits, 0, count, map.cell_base, t, add);
        else
          scatter<false>(group, blk.row, blk.bits, 0, count, map.cell_base, t, add);
      });
}

std::size_t fill32(const ReportColumns& in, std::size_t begin, std::size_t end, const GroupMap& map,
                   std::int32_t* t, TableAccess access, std::int64_t* group_counts) {
  return fill(in, begin, end, map, t, access, group_counts,
              [](std::int32_t* table, std::uint64_t cell, std::int8_t bit) { table[cell] += bit; });
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

std::size_t fill16(const ReportColumns& in, std::size_t begin, std::size_t end, const GroupMap& map,
                   std::int16_t* t, TableAccess access, SpillLog* spill, std::int64_t* group_counts) {
  SpillLog log = *spill;
  const std::size_t bad = fill(
      in, begin, end, map, t, access, group_counts,
      [&log](std::int16_t* table, std::uint64_t cell, std::int8_t bit) { add_spilling(table, cell, bit, log); });
  spill->count = log.count;
  return bad;
}

// Packed staged reports: 2 * cell + (bit < 0), in 32 bits when every cell is below 2^31.
template <class P>
std::size_t stage(const ReportColumns& in, std::size_t begin, std::size_t end, const GroupMap& map, P* staged,
                  std::int64_t* group_counts) {
  return for_each_checked_block(
      in, begin, end, map, group_counts,
      [&](const std::uint32_t* group, const ReportBlock& blk, std::size_t b, std::size_t count) {
        P* out = staged + b;
        if (!group) {
          const P base2 = static_cast<P>(2 * map.cell_base[0]);
          for (std::size_t j = 0; j < count; ++j)
            out[j] = base2 + 2 * static_cast<P>(blk.row[j]) + static_cast<P>(blk.bits[j] < 0);
          return;
        }
        for (std::size_t j = 0; j < count; ++j)
          out[j] = static_cast<P>(2 * (map.cell_base[group[j]] + blk.row[j])) + static_cast<P>(blk.bits[j] < 0);
      });
}

// The signed value of a staged report: sign for a +1 bit, -sign for a -1 bit (the low bit
// of the packed word), computed without a branch (the bits are random: a branch would be
// mispredicted half the time).
template <class P>
inline std::int64_t staged_value(P packed, std::int64_t sign) {
  return sign - 2 * sign * static_cast<std::int64_t>(packed & 1);
}

template <class P>
void apply(const P* staged, std::size_t begin, std::size_t end, std::int64_t* z, int sign, bool prefetch) {
  std::size_t i = begin;
  if (prefetch)
    for (; i + kPrefetchDistance < end; ++i) {
      __builtin_prefetch(z + (staged[i + kPrefetchDistance] >> 1), 1, 3);
      z[staged[i] >> 1] += staged_value(staged[i], sign);
    }
  for (; i < end; ++i) z[staged[i] >> 1] += staged_value(staged[i], sign);
}

// Blocks of staged reports are first compacted branch-free to the ones in range, which
// are then added with their cells prefetched ahead.
template <class P>
void apply_range(const P* staged, std::size_t begin, std::size_t end, std::int64_t* z, std::uint64_t cell_lo,
                 std::uint64_t cell_hi, int sign) {
  constexpr std::size_t kBlock = 1024;
  std::uint64_t offset[kBlock + kPrefetchDistance];
  std::int8_t value[kBlock];
  const std::uint64_t span = cell_hi - cell_lo;
  std::int64_t* const zr = z + cell_lo;
  for (std::size_t b = begin; b < end; b += kBlock) {
    const std::size_t e = end - b < kBlock ? end : b + kBlock;
    std::size_t kept = 0;
    for (std::size_t i = b; i < e; ++i) {
      const P p = staged[i];
      const std::uint64_t off = static_cast<std::uint64_t>(p >> 1) - cell_lo;
      offset[kept] = off;
      value[kept] = static_cast<std::int8_t>(staged_value(p, sign));
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
    &perturb,
    &first_invalid,
    &fill32,
    &fill16,
    {&stage<std::uint32_t>, &apply<std::uint32_t>, &apply_range<std::uint32_t>},
    {&stage<std::uint64_t>, &apply<std::uint64_t>, &apply_range<std::uint64_t>},
    &rhr_perturb};

}  // namespace LDPFAST_ISA_NS
}  // namespace ldpfast
