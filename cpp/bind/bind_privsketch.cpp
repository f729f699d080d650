// PrivSketch bindings: batched sketch clients, the decode-first collector, padding-sampling.
#include <algorithm>
#include <vector>

#include "common.hpp"
#include "ldpfast/kernels/privsketch.hpp"
#include "ldpfast/privsketch.hpp"

namespace ldpfast::bind {

namespace {
void check_sketch_shape(std::uint32_t K, std::uint32_t M) {
  if (K < 1 || M < 2 || static_cast<std::uint64_t>(K) * M > 65536)
    throw py::value_error("K >= 1, M >= 2 and K*M <= 65536 required, got K=" + std::to_string(K) +
                          ", M=" + std::to_string(M));
}

void check_order(const py::array_t<std::uint16_t>& order, py::ssize_t n, std::uint32_t K, std::uint32_t M) {
  if (order.shape(0) != n || order.shape(1) != K || order.shape(2) != M)
    throw py::value_error("order must have shape (n, K, M) = (" + std::to_string(n) + ", " + std::to_string(K) +
                          ", " + std::to_string(M) + ")");
}
// Every sketch-cell index must address one of the K*M cells. O(count): called without the GIL.
template <class T>
void check_cells(const T* cells, py::ssize_t count, std::uint32_t K, std::uint32_t M, const char* name) {
  for (py::ssize_t e = 0; e < count; ++e)
    if (cells[e] >= static_cast<std::size_t>(K) * M)
      throw py::value_error(std::string(name) + " entries must be < K*M = " + std::to_string(K * M) + ", got " +
                            std::to_string(cells[e]) + " at index " + std::to_string(e));
}

// offsets: n + 1 non-decreasing item offsets from 0 to n_items. O(n): called without the GIL.
void check_offsets(const std::int64_t* offsets, std::size_t n, py::ssize_t n_items) {
  if (offsets[0] != 0 || offsets[n] != n_items)
    throw py::value_error("offsets must start at 0 and end at len(items)");
  for (std::size_t i = 0; i < n; ++i)
    if (offsets[i + 1] < offsets[i]) throw py::value_error("offsets must be non-decreasing");
}

py::tuple py_privsketch_perturb(const FieldSpec& field, const py::handle& a0_obj, const py::handle& a1_obj,
                                std::uint32_t K, std::uint32_t M, const py::handle& offsets_obj,
                                const py::handle& items_obj, const py::bytes& key, int sampling, bool with_order,
                                std::uint64_t flip_threshold, int threads) {
  check_sketch_shape(K, M);
  auto a0 = checked_array<std::uint64_t>(a0_obj, "a0");
  auto a1 = checked_array<std::uint64_t>(a1_obj, "a1");
  auto offsets = checked_array<std::int64_t>(offsets_obj, "offsets");
  auto items = checked_array<std::uint64_t>(items_obj, "items");
  check_same_length(K, a0.size(), "a0");
  check_same_length(K, a1.size(), "a1");
  if (offsets.size() < 1) throw py::value_error("offsets must have length n + 1 >= 1");
  if (sampling < kSketchFull || sampling > kSketchRow) throw py::value_error("sampling must be 0, 1 or 2");
  const std::size_t n = static_cast<std::size_t>(offsets.size() - 1);
  const std::int64_t* po = offsets.data();
  const py::ssize_t n_items = items.size();
  without_gil([&] { check_offsets(po, n, n_items); });
  const RngKey k = key_from_bytes(key);
  const std::size_t per_user = sampling == kSketchCell ? 1 : sampling == kSketchRow ? M : std::size_t{K} * M;
  py::array_t<std::uint32_t> sampled(n);
  py::array_t<std::int8_t> bits(
      std::vector<py::ssize_t>{static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(per_user)});
  py::object order_obj = py::none();
  std::uint16_t* porder = nullptr;
  if (with_order) {
    py::array_t<std::uint16_t> order(std::vector<py::ssize_t>{static_cast<py::ssize_t>(n), K, M});
    porder = order.mutable_data();
    order_obj = order;
  }
  const std::uint64_t* pa0 = a0.data();
  const std::uint64_t* pa1 = a1.data();
  const std::uint64_t* pitems = items.data();
  std::uint32_t* ps = sampled.mutable_data();
  std::int8_t* pb = bits.mutable_data();
  interruptible([&] {
    // Unused without sampling, but zeroed: no stale heap bytes are handed out.
    if (sampling == kSketchFull) std::fill(ps, ps + n, 0);
    privsketch_perturb(field, pa0, pa1, K, M, po, pitems, n, k, sampling, flip_threshold, ps, pb, porder,
                       threads);
  });
  return py::make_tuple(sampled, bits, order_obj);
}

py::tuple py_privsketch_decode_cell(std::uint32_t K, std::uint32_t M, const py::handle& order_obj,
                                    const py::handle& cell_obj, const py::handle& bits_obj,
                                    const py::handle& offsets_obj, const py::handle& cand_obj,
                                    const py::handle& cells_obj, std::size_t n_cand, int threads) {
  check_sketch_shape(K, M);
  auto order = checked_array<std::uint16_t>(order_obj, "order", 3);
  auto cell = checked_array<std::uint32_t>(cell_obj, "cell");
  auto bits = checked_array<std::int8_t>(bits_obj, "bits");
  auto offsets = checked_array<std::int64_t>(offsets_obj, "bucket_offsets");
  auto cand = checked_array<std::uint32_t>(cand_obj, "bucket_cand");
  auto cells = checked_array<std::uint16_t>(cells_obj, "bucket_cells", 2);
  const py::ssize_t n = cell.size();
  check_order(order, n, K, M);
  check_same_length(n, bits.size(), "bits");
  check_same_length(static_cast<py::ssize_t>(K) * M + 1, offsets.size(), "bucket_offsets");
  check_same_length(cand.size(), cells.shape(0), "bucket_cells");
  if (cells.shape(1) != K) throw py::value_error("bucket_cells must have K columns");
  const std::size_t n_cells = static_cast<std::size_t>(K) * M;
  const std::int64_t* po = offsets.data();
  const std::uint32_t* pc = cand.data();
  const py::ssize_t n_bucket = cand.size();
  const std::uint16_t* pcells = cells.data();
  const py::ssize_t n_bucket_cells = cells.size();
  const std::uint32_t* pcell = cell.data();
  py::array_t<std::int64_t> pos(n_cand), neg(n_cand);
  const std::uint16_t* pord = order.data();
  const std::int8_t* pb = bits.data();
  std::int64_t* pp = pos.mutable_data();
  std::int64_t* pn = neg.mutable_data();
  const std::size_t bad = interruptible([&] {
    if (po[0] != 0 || po[n_cells] != n_bucket)
      throw py::value_error("bucket_offsets must start at 0 and end at len(bucket_cand)");
    for (std::size_t c = 0; c < n_cells; ++c)
      if (po[c + 1] < po[c]) throw py::value_error("bucket_offsets must be non-decreasing");
    for (py::ssize_t e = 0; e < n_bucket; ++e)
      if (pc[e] >= n_cand) throw py::value_error("bucket_cand entries must be < n_cand");
    check_cells(pcells, n_bucket_cells, K, M, "bucket_cells");
    std::fill(pp, pp + n_cand, 0);
    std::fill(pn, pn + n_cand, 0);
    return privsketch_decode_cell(K, M, pord, pcell, pb, static_cast<std::size_t>(n), po, pc, pcells, n_cand, pp,
                                  pn, threads);
  });
  return py::make_tuple(pos, neg, bad);
}

py::tuple py_privsketch_decode_full(std::uint32_t K, std::uint32_t M, const py::handle& order_obj,
                                    const py::handle& bits_obj, const py::handle& cells_obj, int threads) {
  check_sketch_shape(K, M);
  auto order = checked_array<std::uint16_t>(order_obj, "order", 3);
  auto bits = checked_array<std::int8_t>(bits_obj, "bits", 2);
  auto cells = checked_array<std::uint16_t>(cells_obj, "cand_cells", 2);
  const py::ssize_t n = order.shape(0);
  check_order(order, n, K, M);
  if (bits.shape(0) != n || bits.shape(1) != static_cast<py::ssize_t>(K) * M)
    throw py::value_error("bits must have shape (n, K*M)");
  if (cells.shape(1) != K) throw py::value_error("cand_cells must have K columns");
  const std::uint16_t* pcells = cells.data();
  const py::ssize_t n_cand_cells = cells.size();
  const std::size_t n_cand = static_cast<std::size_t>(cells.shape(0));
  py::array_t<std::int64_t> pos(n_cand), neg(n_cand);
  const std::uint16_t* pord = order.data();
  const std::int8_t* pb = bits.data();
  std::int64_t* pp = pos.mutable_data();
  std::int64_t* pn = neg.mutable_data();
  const std::size_t bad = interruptible([&] {
    check_cells(pcells, n_cand_cells, K, M, "cand_cells");
    std::fill(pp, pp + n_cand, 0);
    std::fill(pn, pn + n_cand, 0);
    return privsketch_decode_full(K, M, pord, pb, static_cast<std::size_t>(n), pcells, n_cand, pp, pn, threads);
  });
  return py::make_tuple(pos, neg, bad);
}

py::array_t<std::uint64_t> py_privsketch_padding_sample(const py::bytes& key, const py::handle& offsets_obj,
                                                        const py::handle& items_obj, std::uint64_t pad_len,
                                                        std::uint64_t dummy, int threads) {
  auto offsets = checked_array<std::int64_t>(offsets_obj, "offsets");
  auto items = checked_array<std::uint64_t>(items_obj, "items");
  if (pad_len < 1) throw py::value_error("pad_len must be >= 1");
  if (offsets.size() < 1) throw py::value_error("offsets must have length n + 1 >= 1");
  const std::size_t n = static_cast<std::size_t>(offsets.size() - 1);
  const std::int64_t* po = offsets.data();
  const py::ssize_t n_items = items.size();
  without_gil([&] { check_offsets(po, n, n_items); });
  const RngKey k = key_from_bytes(key);
  py::array_t<std::uint64_t> out(n);
  const std::uint64_t* pi = items.data();
  std::uint64_t* pout = out.mutable_data();
  interruptible([&] { privsketch_padding_sample(k, po, pi, n, pad_len, dummy, pout, threads); });
  return out;
}

}  // namespace

void register_privsketch(py::module_& m) {
  m.def("privsketch_perturb", &py_privsketch_perturb, py::arg("field"), py::arg("a0"), py::arg("a1"),
        py::arg("K"), py::arg("M"), py::arg("offsets"), py::arg("items"), py::arg("key"), py::arg("sampling"),
        py::arg("with_order"), py::arg("flip_threshold"), py::arg("threads") = 0,
        "Sketch client reports (sampled uint32[n], bits int8[n, per_user], order uint16[n, K, M] or None). "
        "sampling: 0 = every cell, 1 = one cell k*M+m, 2 = one row. Items must be field elements.");
  m.def("privsketch_decode_cell", &py_privsketch_decode_cell, py::arg("K"), py::arg("M"), py::arg("order"),
        py::arg("cell"), py::arg("bits"), py::arg("bucket_offsets"), py::arg("bucket_cand"),
        py::arg("bucket_cells"), py::arg("n_cand"), py::arg("threads") = 0,
        "Decode-first PrivSketch collector with sampling: (pos, neg, first_invalid_user) where "
        "first_invalid_user is the first user whose cell is >= K*M or whose ordering matrix is not a permutation "
        "(n: none).");
  m.def("privsketch_decode_full", &py_privsketch_decode_full, py::arg("K"), py::arg("M"), py::arg("order"),
        py::arg("bits"), py::arg("cand_cells"), py::arg("threads") = 0,
        "Decode-first PrivSketch-noSmp collector: (pos, neg, first_invalid_user).");
  m.def("privsketch_padding_sample", &py_privsketch_padding_sample, py::arg("key"), py::arg("offsets"),
        py::arg("items"), py::arg("pad_len"), py::arg("dummy"), py::arg("threads") = 0,
        "Padding and sampling: one item per user (uniform if size > pad_len, else item r or dummy for r < "
        "pad_len).");
}

}  // namespace ldpfast::bind
