// OCMS+RR bindings: hashing, client perturbation, randomized response, match counting.
#include <pybind11/stl.h>

#include "common.hpp"
#include "ldpfast/ocms.hpp"

namespace ldpfast::bind {

namespace {
// Hash inputs must be field elements: rejected, never reduced (reducing would make
// distinct values collide).
void check_field_elements(const std::uint64_t* data, std::size_t n, const FieldSpec& field, const char* name) {
  const std::uint64_t size = field.size();
  if (size == 0) return;  // GF(2^64): every 64-bit word is an element
  for (std::size_t i = 0; i < n; ++i)
    if (data[i] >= size)
      throw py::value_error(std::string(name) + " must hold field elements in [0, " + std::to_string(size) +
                            "), got " + name + "[" + std::to_string(i) + "] = " + std::to_string(data[i]));
}

OcmsDecode decode_method(const std::string& name) {
  if (name == "auto") return OcmsDecode::automatic;
  if (name == "scan") return OcmsDecode::scan;
  if (name == "affine") return OcmsDecode::affine;
  throw py::value_error("method must be 'auto', 'scan' or 'affine', got '" + name + "'");
}

void check_range_in_field(std::uint64_t x_begin, std::size_t count, const FieldSpec& field) {
  const std::uint64_t size = field.size();
  if (count == 0) return;
  if (size == 0) {  // GF(2^64): the range must not wrap past 2^64 - 1
    if (count - 1 > ~std::uint64_t{0} - x_begin)
      throw py::value_error("candidates x_begin .. x_begin + len(counts) - 1 must be < 2^64, got x_begin = " +
                            std::to_string(x_begin) + " with " + std::to_string(count) + " candidates");
    return;
  }
  if (x_begin >= size || count > size - x_begin)
    throw py::value_error("candidates x_begin .. x_begin + len(counts) - 1 must lie in [0, " +
                          std::to_string(size) + "), got x_begin = " + std::to_string(x_begin) + " with " +
                          std::to_string(count) + " candidates");
}

py::array_t<std::uint64_t> py_ocms_hash(const FieldSpec& field, const py::handle& a0_obj,
                                        const py::handle& a1_obj, const py::handle& x_obj, std::uint64_t modulus,
                                        int threads) {
  auto a0 = checked_array<std::uint64_t>(a0_obj, "a0");
  auto a1 = checked_array<std::uint64_t>(a1_obj, "a1");
  auto x = checked_array<std::uint64_t>(x_obj, "x");
  check_same_length(a0.size(), a1.size(), "a1");
  check_same_length(a0.size(), x.size(), "x");
  if (modulus < 1) throw py::value_error("m must be >= 1, got 0");
  py::array_t<std::uint64_t> out(x.size());
  const std::uint64_t* pa0 = a0.data();
  const std::uint64_t* pa1 = a1.data();
  const std::uint64_t* px = x.data();
  std::uint64_t* po = out.mutable_data();
  const std::size_t n = static_cast<std::size_t>(x.size());
  interruptible([&] {
    check_field_elements(pa0, n, field, "a0");
    check_field_elements(pa1, n, field, "a1");
    check_field_elements(px, n, field, "x");
    ocms_hash(field, pa0, pa1, px, n, modulus, po, threads);
  });
  return out;
}

py::tuple py_ocms_perturb(const FieldSpec& field, const py::bytes& key, const py::handle& x_obj,
                          std::uint64_t modulus, std::uint64_t flip_threshold, int threads) {
  auto x = checked_array<std::uint64_t>(x_obj, "x");
  if (modulus < 2) throw py::value_error("m must be >= 2, got " + std::to_string(modulus));
  const RngKey k = key_from_bytes(key);
  const std::size_t n = static_cast<std::size_t>(x.size());
  py::array_t<std::uint64_t> z(n), a0(n), a1(n);
  const std::uint64_t* px = x.data();
  std::uint64_t* pz = z.mutable_data();
  std::uint64_t* pa0 = a0.mutable_data();
  std::uint64_t* pa1 = a1.mutable_data();
  interruptible([&] {
    check_field_elements(px, n, field, "x");
    ocms_perturb(field, k, px, n, modulus, flip_threshold, pz, pa0, pa1, threads);
  });
  return py::make_tuple(z, a0, a1);
}

py::array_t<std::uint64_t> py_randomized_response(const py::bytes& key, const py::handle& y_obj,
                                                  std::uint64_t modulus, std::uint64_t flip_threshold,
                                                  int threads) {
  auto y = checked_array<std::uint64_t>(y_obj, "y");
  if (modulus < 2) throw py::value_error("m must be >= 2, got " + std::to_string(modulus));
  const RngKey k = key_from_bytes(key);
  const std::size_t n = static_cast<std::size_t>(y.size());
  py::array_t<std::uint64_t> out(n);
  const std::uint64_t* py_ = y.data();
  std::uint64_t* po = out.mutable_data();
  interruptible([&] {
    for (std::size_t i = 0; i < n; ++i)
      if (py_[i] >= modulus)
        throw py::value_error("y must hold symbols in [0, m) with m = " + std::to_string(modulus) + ", got y[" +
                              std::to_string(i) + "] = " + std::to_string(py_[i]));
    randomized_response(k, py_, n, modulus, flip_threshold, po, threads);
  });
  return out;
}

void py_ocms_count_range(const FieldSpec& field, const py::handle& z_obj, const py::handle& a0_obj,
                         const py::handle& a1_obj, std::uint64_t modulus, std::uint64_t x_begin,
                         const py::handle& counts_obj, int threads, const std::string& method_name) {
  const OcmsDecode method = decode_method(method_name);
  auto z = checked_array<std::uint64_t>(z_obj, "z");
  auto a0 = checked_array<std::uint64_t>(a0_obj, "a0");
  auto a1 = checked_array<std::uint64_t>(a1_obj, "a1");
  auto counts = checked_array<std::uint64_t>(counts_obj, "counts", 1, true);
  check_same_length(z.size(), a0.size(), "a0");
  check_same_length(z.size(), a1.size(), "a1");
  if (modulus < 2) throw py::value_error("m must be >= 2, got " + std::to_string(modulus));
  const std::uint64_t* pz = z.data();
  const std::uint64_t* pa0 = a0.data();
  const std::uint64_t* pa1 = a1.data();
  std::uint64_t* pc = counts.mutable_data();
  const std::size_t n = static_cast<std::size_t>(z.size());
  const std::size_t nx = static_cast<std::size_t>(counts.size());
  interruptible([&] {
    check_field_elements(pa0, n, field, "a0");
    check_field_elements(pa1, n, field, "a1");
    check_range_in_field(x_begin, nx, field);
    if (method == OcmsDecode::affine && !ocms_affine_applicable(field, modulus))
      throw py::value_error("method='affine' needs a GF(2^l) field and m a power of two, got m = " +
                            std::to_string(modulus) + (field.binary ? "" : " over a prime field"));
    ocms_count_range(field, pz, pa0, pa1, n, modulus, x_begin, nx, pc, threads, method);
  });
}

void py_ocms_count_list(const FieldSpec& field, const py::handle& z_obj, const py::handle& a0_obj,
                        const py::handle& a1_obj, std::uint64_t modulus, const py::handle& xs_obj,
                        const py::handle& counts_obj, int threads) {
  auto z = checked_array<std::uint64_t>(z_obj, "z");
  auto a0 = checked_array<std::uint64_t>(a0_obj, "a0");
  auto a1 = checked_array<std::uint64_t>(a1_obj, "a1");
  auto xs = checked_array<std::uint64_t>(xs_obj, "candidates");
  auto counts = checked_array<std::uint64_t>(counts_obj, "counts", 1, true);
  check_same_length(z.size(), a0.size(), "a0");
  check_same_length(z.size(), a1.size(), "a1");
  check_same_length(xs.size(), counts.size(), "counts");
  if (modulus < 2) throw py::value_error("m must be >= 2, got " + std::to_string(modulus));
  const std::uint64_t* pz = z.data();
  const std::uint64_t* pa0 = a0.data();
  const std::uint64_t* pa1 = a1.data();
  const std::uint64_t* px = xs.data();
  std::uint64_t* pc = counts.mutable_data();
  const std::size_t n = static_cast<std::size_t>(z.size());
  const std::size_t nx = static_cast<std::size_t>(xs.size());
  interruptible([&] {
    check_field_elements(pa0, n, field, "a0");
    check_field_elements(pa1, n, field, "a1");
    check_field_elements(px, nx, field, "candidates");
    ocms_count_list(field, pz, pa0, pa1, n, modulus, px, nx, pc, threads);
  });
}

// Report bits must be 0 or 1. The OR of all bytes exceeds 1 iff one does (a vectorizable
// pass); only then is the first offender located.
void check_bits(const std::uint8_t* bits, std::size_t n, std::size_t m) {
  std::uint8_t any = 0;
  for (std::size_t k = 0; k < n * m; ++k) any |= bits[k];
  if (any <= 1) return;
  std::size_t k = 0;
  while (bits[k] <= 1) ++k;
  throw py::value_error("bits must hold 0 or 1, got bits[" + std::to_string(k / m) + ", " +
                        std::to_string(k % m) + "] = " + std::to_string(bits[k]));
}

// The report columns of a lookup: bits (n, m) uint8, a0 and a1 of length n.
struct LookupReports {
  py::array_t<std::uint8_t> bits;
  py::array_t<std::uint64_t> a0, a1;
};

LookupReports checked_lookup_reports(const py::handle& bits_obj, const py::handle& a0_obj,
                                     const py::handle& a1_obj, std::uint64_t modulus) {
  LookupReports r{checked_array<std::uint8_t>(bits_obj, "bits", 2), checked_array<std::uint64_t>(a0_obj, "a0"),
                  checked_array<std::uint64_t>(a1_obj, "a1")};
  check_same_length(r.bits.shape(0), r.a0.size(), "a0");
  check_same_length(r.bits.shape(0), r.a1.size(), "a1");
  if (modulus < 2) throw py::value_error("m must be >= 2, got " + std::to_string(modulus));
  if (static_cast<std::uint64_t>(r.bits.shape(1)) != modulus)
    throw py::value_error("bits must have m = " + std::to_string(modulus) + " columns, got " +
                          std::to_string(r.bits.shape(1)));
  return r;
}

// Their values, checked with the GIL released.
void check_lookup_values(const LookupReports& r, const FieldSpec& field) {
  const std::size_t n = static_cast<std::size_t>(r.a0.size());
  check_field_elements(r.a0.data(), n, field, "a0");
  check_field_elements(r.a1.data(), n, field, "a1");
  check_bits(r.bits.data(), n, static_cast<std::size_t>(r.bits.shape(1)));
}

void py_ocms_lookup_list(const FieldSpec& field, const py::handle& bits_obj, const py::handle& a0_obj,
                         const py::handle& a1_obj, std::uint64_t modulus, const py::handle& xs_obj,
                         const py::handle& counts_obj, int threads) {
  const LookupReports r = checked_lookup_reports(bits_obj, a0_obj, a1_obj, modulus);
  auto xs = checked_array<std::uint64_t>(xs_obj, "candidates");
  auto counts = checked_array<std::uint64_t>(counts_obj, "counts", 1, true);
  check_same_length(xs.size(), counts.size(), "counts");
  const std::uint64_t* px = xs.data();
  std::uint64_t* pc = counts.mutable_data();
  const std::size_t n = static_cast<std::size_t>(r.a0.size());
  const std::size_t nx = static_cast<std::size_t>(xs.size());
  interruptible([&] {
    check_lookup_values(r, field);
    check_field_elements(px, nx, field, "candidates");
    ocms_lookup_list(field, r.bits.data(), r.a0.data(), r.a1.data(), n, modulus, px, nx, pc, threads);
  });
}

void py_ocms_lookup_range(const FieldSpec& field, const py::handle& bits_obj, const py::handle& a0_obj,
                          const py::handle& a1_obj, std::uint64_t modulus, std::uint64_t x_begin,
                          const py::handle& counts_obj, int threads) {
  const LookupReports r = checked_lookup_reports(bits_obj, a0_obj, a1_obj, modulus);
  auto counts = checked_array<std::uint64_t>(counts_obj, "counts", 1, true);
  std::uint64_t* pc = counts.mutable_data();
  const std::size_t n = static_cast<std::size_t>(r.a0.size());
  const std::size_t nx = static_cast<std::size_t>(counts.size());
  interruptible([&] {
    check_lookup_values(r, field);
    check_range_in_field(x_begin, nx, field);
    ocms_lookup_range(field, r.bits.data(), r.a0.data(), r.a1.data(), n, modulus, x_begin, nx, pc, threads);
  });
}

}  // namespace

void register_ocms(py::module_& m) {
  m.def("ocms_hash", &py_ocms_hash, py::arg("field"), py::arg("a0"), py::arg("a1"), py::arg("x"), py::arg("m"),
        py::arg("threads") = 0,
        "h(x) = ((a0 + a1 x) in field) mod m, elementwise. Inputs must be field elements.");
  m.def("ocms_perturb", &py_ocms_perturb, py::arg("field"), py::arg("key"), py::arg("x"), py::arg("m"),
        py::arg("flip_threshold"), py::arg("threads") = 0,
        "OCMS+RR client reports (z, a0, a1) for values x; flips with probability flip_threshold / 2^64.");
  m.def("randomized_response", &py_randomized_response, py::arg("key"), py::arg("y"), py::arg("m"),
        py::arg("flip_threshold"), py::arg("threads") = 0,
        "k-ary randomized response on [0, m), batched; y must be < m.");
  m.def("ocms_count_range", &py_ocms_count_range, py::arg("field"), py::arg("z"), py::arg("a0"), py::arg("a1"),
        py::arg("m"), py::arg("x_begin"), py::arg("counts"), py::arg("threads") = 0, py::arg("method") = "auto",
        "counts[j] += #{i : h_i(x_begin + j) == z[i]} in place. method: 'scan' checks every pair; "
        "'affine' (GF(2^l), m a power of two) solves h(x) = z per report and visits only the "
        "matches; 'auto' picks the faster (see ocms_decode_method). Counts are identical. Interrupted "
        "(Ctrl-C): counts holds partial sums.");
  m.def(
      "ocms_decode_method",
      [](const FieldSpec& field, std::uint64_t modulus, std::size_t x_count) {
        return std::string(ocms_affine_preferred(field, modulus, x_count) ? "affine" : "scan");
      },
      py::arg("field"), py::arg("m"), py::arg("x_count"),
      "The method ocms_count_range(method='auto') uses for x_count contiguous candidates.");
  m.def("ocms_count_list", &py_ocms_count_list, py::arg("field"), py::arg("z"), py::arg("a0"), py::arg("a1"),
        py::arg("m"), py::arg("candidates"), py::arg("counts"), py::arg("threads") = 0,
        "counts[j] += #{i : h_i(candidates[j]) == z[i]} in place. Interrupted (Ctrl-C): counts holds partial "
        "sums.");
  m.def("ocms_lookup_list", &py_ocms_lookup_list, py::arg("field"), py::arg("bits"), py::arg("a0"), py::arg("a1"),
        py::arg("m"), py::arg("candidates"), py::arg("counts"), py::arg("threads") = 0,
        "counts[j] += sum_i bits[i, h_i(candidates[j])] in place; bits: (n, m) uint8 of 0/1, one row per "
        "report. Interrupted (Ctrl-C): counts holds partial sums.");
  m.def("ocms_lookup_range", &py_ocms_lookup_range, py::arg("field"), py::arg("bits"), py::arg("a0"),
        py::arg("a1"), py::arg("m"), py::arg("x_begin"), py::arg("counts"), py::arg("threads") = 0,
        "ocms_lookup_list over the candidates x_begin + j, j < len(counts) (prime fields: no product per pair). "
        "Interrupted (Ctrl-C): counts holds partial sums.");
}

}  // namespace ldpfast::bind
