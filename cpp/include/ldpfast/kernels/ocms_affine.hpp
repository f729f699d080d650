// Kernel table for the OCMS+RR decode by solving, for GF(2^l) fields and m = 2^b.
//
// There x -> (a1 x) mod 2^b is GF(2)-linear, so the candidates matching a report
// (h(x) = ((a0 + a1 x) in GF(2^l)) mod 2^b = z) form an affine subspace x0 + span(V) of
// dimension l - min(b, l) (or the whole field when a1 = 0 and z = a0 mod 2^b, or nothing).
// With V in reduced echelon form (distinct leading bits, each leading bit set in one
// vector only, none in x0), u -> x0 ^ sum_i u_i V_i is strictly increasing in the integer
// u: the matches come out in increasing order, so a report's matches inside a candidate
// tile are found by a cursor instead of a search. Cost per report: O(l^2) bit operations
// to solve, then one counter increment per match (about d/m), instead of d hash checks.
//
// Report records (affine_record_words(l, b) words each, written by prepare):
//   [0] kind (kEmpty, kAffine, kAll) | n_low << 8
//   [1] x0 (no leading bit of V set)
//   [2] leading-bit mask of the high vectors (leading bit >= tile_bits)
//   [3 .. 3 + n_low) prefix XORs P_j = L_0 ^ .. ^ L_j of the low vectors L (leading bit
//       < tile_bits) sorted by leading bit: the steps of a binary counter over them
//   [3 + n_low .. 3 + dim) the same for the high vectors (leading bit >= tile_bits).
// Every ISA gives the same records and the same counts.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ldpfast/dispatch.hpp"
#include "ldpfast/field.hpp"

namespace ldpfast {

enum AffineKind : std::uint64_t { kAffineEmpty = 0, kAffineSubspace = 1, kAffineAll = 2 };

inline int affine_dimension(int l, int b) { return l - (b < l ? b : l); }
inline std::size_t affine_record_words(int l, int b) {
  return 3 + static_cast<std::size_t>(affine_dimension(l, b));
}
constexpr std::size_t kAffineCursorBlock = std::size_t{1} << 16;

struct OcmsAffineKernels {
  // Records for reports [0, n): m = 2^b (1 <= b <= 63). z may be anything (z >= m never
  // matches); a0, a1 must be field elements.
  void (*prepare)(const BinaryField& field, int b, int tile_bits, const std::uint64_t* z, const std::uint64_t* a0,
                  const std::uint64_t* a1, std::size_t n, std::uint64_t* records);
  // counts[j] += #{i < n : report i matches x_begin + j}, j < x_count, from n records
  // prepared with the same l, b and tile_bits. x_begin + x_count <= 2^l. Reports are
  // walked over the candidate tiles kAffineCursorBlock at a time (their records stream;
  // the tile of counts stays in cache), with 2 * kAffineCursorBlock words of `cursors`.
  void (*count)(const std::uint64_t* records, std::size_t n, int l, int b, int tile_bits, std::uint64_t x_begin,
                std::size_t x_count, std::uint64_t* counts, std::uint64_t* cursors);
};

}  // namespace ldpfast

LDPFAST_DECLARE_ISA_TABLE(OcmsAffineKernels, ocms_affine_kernels)
