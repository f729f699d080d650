// Bit-vector protocol bindings: column counts of bit rows, the unary-encoding, memoized
// (longitudinal), dBitFlip and RAPPOR clients.
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "ldpfast/bitvec.hpp"

namespace ldpfast::bind {

namespace {

constexpr std::size_t kMaxBits = std::size_t{1} << 32;  // bits per row

std::size_t row_bytes_of(std::size_t k) { return (k + 7) / 8; }

void check_bits_param(std::size_t k, std::size_t max_bits = kMaxBits) {
  if (k < 1 || k > max_bits)
    throw py::value_error("k must be in [1, " + std::to_string(max_bits) + "], got " + std::to_string(k));
}

// A 2-D uint8 array of n rows and `width` bytes per row (width 0: any width >= 1).
py::array_t<std::uint8_t> checked_rows(const py::handle& obj, const char* name, std::size_t width) {
  auto rows = checked_array<std::uint8_t>(obj, name, 2);
  if (width && static_cast<std::size_t>(rows.shape(1)) != width)
    throw py::value_error(std::string(name) + " must have " + std::to_string(width) + " bytes per row, got " +
                          std::to_string(rows.shape(1)));
  if (!width && rows.shape(1) < 1)
    throw py::value_error(std::string(name) + " must have at least 1 byte per row");
  return rows;
}

py::array_t<std::uint8_t> new_rows(std::size_t n, std::size_t width) {
  return py::array_t<std::uint8_t>(
      std::vector<py::ssize_t>{static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(width)});
}

py::array_t<std::uint8_t> user_secrets(const py::handle& obj, std::size_t n) {
  auto secrets = checked_rows(obj, "secrets", 32);
  check_same_length(static_cast<py::ssize_t>(n), secrets.shape(0), "secrets");
  return secrets;
}

py::tuple py_column_counts(const py::handle& rows_obj, std::size_t k, std::optional<py::array> group_obj,
                           std::size_t n_groups, int threads) {
  check_bits_param(k);
  auto rows = checked_rows(rows_obj, "rows", row_bytes_of(k));
  const std::size_t n = static_cast<std::size_t>(rows.shape(0));
  if (n_groups < 1 || n_groups > (std::size_t{1} << 32))
    throw py::value_error("n_groups must be in [1, 2^32], got " + std::to_string(n_groups));
  py::array_t<std::uint32_t> group;
  if (group_obj) {
    group = checked_array<std::uint32_t>(*group_obj, "groups");
    check_same_length(static_cast<py::ssize_t>(n), group.size(), "groups");
  }
  py::array_t<std::uint64_t> counts(
      std::vector<py::ssize_t>{static_cast<py::ssize_t>(n_groups), static_cast<py::ssize_t>(k)});
  py::array_t<std::uint64_t> group_n(static_cast<py::ssize_t>(n_groups));
  const std::uint8_t* pr = rows.data();
  const std::uint32_t* pg = group_obj ? group.data() : nullptr;
  std::uint64_t* pc = counts.mutable_data();
  std::uint64_t* pn = group_n.mutable_data();
  const std::size_t first_invalid = interruptible([&] {
    std::fill(pc, pc + n_groups * k, 0);
    std::fill(pn, pn + n_groups, 0);
    return bitvec_column_counts(pr, row_bytes_of(k), k, pg, n_groups, n, pc, pn, threads);
  });
  return py::make_tuple(counts, group_n, first_invalid);
}

py::array_t<std::uint8_t> py_unary_perturb(const py::bytes& key, const py::handle& hot_obj, std::size_t k,
                                           std::uint64_t t_hot, std::uint64_t t_cold, int threads) {
  check_bits_param(k);
  auto hot = checked_array<std::uint64_t>(hot_obj, "hot");
  const std::size_t n = static_cast<std::size_t>(hot.size());
  auto out = new_rows(n, row_bytes_of(k));
  const RngKey rk = key_from_bytes(key);
  const std::uint64_t* ph = hot.data();
  std::uint8_t* po = out.mutable_data();
  interruptible([&] { unary_perturb(rk, ph, n, k, t_hot, t_cold, po, threads); });
  return out;
}

py::array_t<std::uint8_t> py_memo_unary_perturb(const py::bytes& key, const py::handle& secrets_obj,
                                                const py::handle& hot_obj, std::size_t k, std::uint64_t t1_hot,
                                                std::uint64_t t1_cold, bool instantaneous, std::uint64_t t2_one,
                                                std::uint64_t t2_zero, int threads) {
  check_bits_param(k);
  auto hot = checked_array<std::uint64_t>(hot_obj, "hot");
  const std::size_t n = static_cast<std::size_t>(hot.size());
  auto secrets = user_secrets(secrets_obj, n);
  auto out = new_rows(n, row_bytes_of(k));
  const RngKey rk = key_from_bytes(key);
  const std::uint64_t* ph = hot.data();
  const std::uint8_t* ps = secrets.data();
  std::uint8_t* po = out.mutable_data();
  interruptible([&] {
    memo_unary_perturb(rk, ps, ph, n, k, t1_hot, t1_cold, instantaneous, t2_one, t2_zero, po, threads);
  });
  return out;
}

py::array_t<std::uint8_t> py_bit_response(const py::bytes& key, const py::handle& rows_obj, std::size_t k,
                                          std::uint64_t t_one, std::uint64_t t_zero, int threads) {
  check_bits_param(k);
  auto rows = checked_rows(rows_obj, "rows", row_bytes_of(k));
  const std::size_t n = static_cast<std::size_t>(rows.shape(0));
  auto out = new_rows(n, row_bytes_of(k));
  const RngKey rk = key_from_bytes(key);
  const std::uint8_t* pr = rows.data();
  std::uint8_t* po = out.mutable_data();
  interruptible([&] { bit_response(rk, pr, k, n, t_one, t_zero, po, threads); });
  return out;
}

py::array_t<std::uint64_t> py_memo_grr(const py::bytes& key, const py::handle& secrets_obj,
                                       const py::handle& x_obj, std::uint64_t m, std::uint64_t t1,
                                       bool instantaneous, std::uint64_t t2, int threads) {
  if (m < 2) throw py::value_error("m must be >= 2, got " + std::to_string(m));
  auto x = checked_array<std::uint64_t>(x_obj, "x");
  const std::size_t n = static_cast<std::size_t>(x.size());
  auto secrets = user_secrets(secrets_obj, n);
  py::array_t<std::uint64_t> out(static_cast<py::ssize_t>(n));
  const RngKey rk = key_from_bytes(key);
  const std::uint64_t* px = x.data();
  const std::uint8_t* ps = secrets.data();
  std::uint64_t* po = out.mutable_data();
  interruptible([&] { memo_grr(rk, ps, px, n, m, t1, instantaneous, t2, po, threads); });
  return out;
}

py::tuple py_dbitflip_perturb(const py::handle& secrets_obj, const py::handle& x_obj, std::uint64_t b,
                              std::size_t sampled, std::uint64_t t_hot, std::uint64_t t_cold, int threads) {
  if (b < 1 || b > (std::uint64_t{1} << 32))
    throw py::value_error("b must be in [1, 2^32], got " + std::to_string(b));
  if (sampled < 1 || sampled > b || sampled > 4096)
    throw py::value_error("sampled must be in [1, min(b, 4096)], got " + std::to_string(sampled));
  auto x = checked_array<std::uint64_t>(x_obj, "x");
  const std::size_t n = static_cast<std::size_t>(x.size());
  auto secrets = user_secrets(secrets_obj, n);
  py::array_t<std::uint32_t> buckets(
      std::vector<py::ssize_t>{static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(sampled)});
  auto bits = new_rows(n, sampled);
  const std::uint64_t* px = x.data();
  const std::uint8_t* ps = secrets.data();
  std::uint32_t* pb = buckets.mutable_data();
  std::uint8_t* po = bits.mutable_data();
  interruptible([&] { dbitflip_perturb(ps, px, n, b, sampled, t_hot, t_cold, pb, po, threads); });
  return py::make_tuple(buckets, bits);
}

py::array_t<std::uint64_t> py_memo_draws(const py::handle& secrets_obj, std::uint64_t purpose,
                                         std::uint64_t bound, std::size_t count, int threads) {
  if (bound < 1) throw py::value_error("bound must be >= 1");
  auto secrets = checked_rows(secrets_obj, "secrets", 32);
  const std::size_t n = static_cast<std::size_t>(secrets.shape(0));
  py::array_t<std::uint64_t> out(
      std::vector<py::ssize_t>{static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(count)});
  const std::uint8_t* ps = secrets.data();
  std::uint64_t* po = out.mutable_data();
  interruptible([&] { memo_draws(ps, n, purpose, bound, count, po, threads); });
  return out;
}

void check_encoding(int encoding, std::size_t k) {
  if (encoding < kRapporPython || encoding > kRapporCppDrbg)
    throw py::value_error("encoding must be 0 (python), 1 (cpp) or 2 (cpp-drbg), got " +
                          std::to_string(encoding));
  if (encoding == kRapporCppDrbg) {
    check_bits_param(k, kRapporMaxBits);
    if (k % 8)
      throw py::value_error("k must be a multiple of 8 in the cpp-drbg encoding, got " + std::to_string(k));
  } else {
    check_bits_param(k, 32);
  }
}

py::array_t<std::uint32_t> py_rappor_bloom_positions(int encoding, std::size_t k, std::size_t h,
                                                     const py::handle& data_obj, const py::handle& offsets_obj,
                                                     const py::handle& cohort_obj, int threads) {
  check_encoding(encoding, k);
  auto data = checked_array<std::uint8_t>(data_obj, "data");
  auto offsets_in = checked_array<std::int64_t>(offsets_obj, "offsets");
  auto cohort_in = checked_array<std::uint32_t>(cohort_obj, "cohorts");
  if (offsets_in.size() < 1) throw py::value_error("offsets must have n + 1 entries");
  const std::size_t n = static_cast<std::size_t>(offsets_in.size() - 1);
  check_same_length(static_cast<py::ssize_t>(n), cohort_in.size(), "cohorts");
  std::size_t per_hash = 1;
  if (encoding == kRapporCppDrbg)
    while ((std::size_t{1} << (8 * per_hash)) < k) ++per_hash;
  if (h < 1 || h * per_hash > 16)
    throw py::value_error("h must be in [1, " + std::to_string(16 / per_hash) + "] (MD5 bytes), got " +
                          std::to_string(h));
  py::array_t<std::uint32_t> out(
      std::vector<py::ssize_t>{static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(h)});
  const std::uint8_t* pd = data.data();
  const std::int64_t* po_in = offsets_in.data();
  const std::uint32_t* pc = cohort_in.data();
  const std::size_t n_data = static_cast<std::size_t>(data.size());
  std::uint32_t* po = out.mutable_data();
  interruptible([&] {
    // The kernel reads this checked copy of the offsets, whatever happens to the input.
    std::vector<std::int64_t> offsets(po_in, po_in + n + 1);
    for (std::size_t i = 0; i < n; ++i)
      if (offsets[i] < 0 || offsets[i] > offsets[i + 1])
        throw py::value_error("offsets must be non-decreasing from >= 0, got offsets[" + std::to_string(i) +
                              "] = " + std::to_string(offsets[i]));
    if (static_cast<std::size_t>(offsets[n]) > n_data)
      throw py::value_error("offsets[-1] = " + std::to_string(offsets[n]) + " exceeds the data length " +
                            std::to_string(n_data));
    rappor_bloom_positions(encoding, k, h, pd, offsets.data(), pc, n, po, threads);
  });
  return out;
}

py::array_t<std::uint32_t> py_rappor_cohorts(int encoding, const py::handle& secrets_obj, std::uint32_t m,
                                             int threads) {
  check_encoding(encoding, encoding == kRapporCppDrbg ? 8 : 1);
  if (m < 1) throw py::value_error("m must be >= 1");
  auto secrets = checked_rows(secrets_obj, "secrets", 0);
  const std::size_t n = static_cast<std::size_t>(secrets.shape(0));
  const std::size_t len = static_cast<std::size_t>(secrets.shape(1));
  py::array_t<std::uint32_t> out(static_cast<py::ssize_t>(n));
  const std::uint8_t* ps = secrets.data();
  std::uint32_t* po = out.mutable_data();
  interruptible([&] { rappor_cohorts(encoding, ps, len, n, m, po, threads); });
  return out;
}

py::array_t<std::uint8_t> py_rappor_permanent(int encoding, std::size_t k, std::uint32_t f128,
                                              const py::handle& secrets_obj, const py::bytes& encoder_id,
                                              const py::handle& bloom_obj, int threads) {
  check_encoding(encoding, k);
  if (f128 > 128) throw py::value_error("f128 must be in [0, 128], got " + std::to_string(f128));
  const std::string id = encoder_id;
  if (id.size() > kRapporMaxEncoderId)
    throw py::value_error("encoder_id must be at most " + std::to_string(kRapporMaxEncoderId) + " bytes");
  auto bloom = checked_rows(bloom_obj, "bloom", row_bytes_of(k));
  const std::size_t n = static_cast<std::size_t>(bloom.shape(0));
  auto secrets = checked_rows(secrets_obj, "secrets", 0);
  check_same_length(static_cast<py::ssize_t>(n), secrets.shape(0), "secrets");
  const std::size_t len = static_cast<std::size_t>(secrets.shape(1));
  auto out = new_rows(n, row_bytes_of(k));
  const std::uint8_t* ps = secrets.data();
  const std::uint8_t* pb = bloom.data();
  std::uint8_t* po = out.mutable_data();
  interruptible([&] {
    rappor_permanent(encoding, k, f128, ps, len, reinterpret_cast<const std::uint8_t*>(id.data()), id.size(), pb,
                     n, po, threads);
  });
  return out;
}

// A sparse 0/1 design in compressed-column form, copied into library memory and checked
// (the loops read it many times).
struct Design {
  std::vector<std::int64_t> col_ptr;
  std::vector<std::int32_t> rows;
  std::size_t C = 0;
  std::size_t R = 0;
};

Design checked_design(const py::handle& col_ptr_obj, const py::handle& rows_obj, std::size_t n_rows) {
  auto col_ptr = checked_array<std::int64_t>(col_ptr_obj, "col_ptr");
  auto rows = checked_array<std::int32_t>(rows_obj, "rows");
  if (col_ptr.size() < 1) throw py::value_error("col_ptr must have C + 1 entries");
  if (n_rows < 1 || n_rows > (std::size_t{1} << 31)) throw py::value_error("n_rows must be in [1, 2^31]");
  Design d;
  d.C = static_cast<std::size_t>(col_ptr.size() - 1);
  d.R = n_rows;
  const std::int64_t* pc = col_ptr.data();
  const std::int32_t* pr = rows.data();
  const std::size_t nnz = static_cast<std::size_t>(rows.size());
  without_gil([&] {
    d.col_ptr.assign(pc, pc + d.C + 1);
    d.rows.assign(pr, pr + nnz);
    if (d.col_ptr[0] != 0 || static_cast<std::size_t>(d.col_ptr[d.C]) != nnz)
      throw py::value_error("col_ptr must start at 0 and end at len(rows)");
    for (std::size_t i = 0; i < d.C; ++i)
      if (d.col_ptr[i] > d.col_ptr[i + 1]) throw py::value_error("col_ptr must be non-decreasing");
    for (std::int32_t r : d.rows)
      if (r < 0 || static_cast<std::size_t>(r) >= n_rows)
        throw py::value_error("rows must be in [0, n_rows), got " + std::to_string(r));
    return 0;
  });
  return d;
}

py::array_t<double> f64_of_length(const py::handle& obj, const char* name, std::size_t n, bool writable = false) {
  auto arr = checked_array<double>(obj, name, 1, writable);
  check_same_length(static_cast<py::ssize_t>(n), arr.size(), name);
  return arr;
}

std::size_t py_sparse_nn_lasso(const py::handle& col_ptr, const py::handle& rows, std::size_t n_rows,
                               const py::handle& target_obj, const py::handle& weight_obj,
                               const py::handle& penalty_obj, double tol, std::size_t max_passes,
                               const py::handle& beta_obj) {
  const Design d = checked_design(col_ptr, rows, n_rows);
  auto target = f64_of_length(target_obj, "target", d.R);
  auto weight = f64_of_length(weight_obj, "weight", d.R);
  auto penalty = f64_of_length(penalty_obj, "penalty", d.C);
  auto beta = f64_of_length(beta_obj, "beta", d.C, true);
  const double* pt = target.data();
  const double* pw = weight.data();
  const double* pp = penalty.data();
  double* pb = beta.mutable_data();
  return interruptible([&] {
    // Copies of the inputs the loop reads many times.
    const std::vector<double> t(pt, pt + d.R), w(pw, pw + d.R), pen(pp, pp + d.C);
    for (double v : w)
      if (!(v >= 0.0) || !std::isfinite(v)) throw py::value_error("weight must be finite and >= 0");
    return sparse_nn_lasso(d.col_ptr.data(), d.rows.data(), d.C, d.R, t.data(), w.data(), pen.data(), tol,
                           max_passes, pb);
  });
}

py::tuple py_sparse_bit_em(const py::handle& col_ptr, const py::handle& rows, std::size_t n_rows,
                           const py::handle& y_obj, const py::handle& trials_obj, double p_one, double p_zero,
                           double other_rate, double f_other, double tol, std::size_t max_iter,
                           const py::handle& f_obj) {
  const Design d = checked_design(col_ptr, rows, n_rows);
  auto y = f64_of_length(y_obj, "y", d.R);
  auto trials = f64_of_length(trials_obj, "trials", d.R);
  auto f = f64_of_length(f_obj, "f", d.C, true);
  if (!(p_one >= 0.0 && p_one <= 1.0 && p_zero >= 0.0 && p_zero <= 1.0 && p_one != p_zero))
    throw py::value_error("p_one and p_zero must be distinct probabilities");
  const double* py_ = y.data();
  const double* ptr = trials.data();
  double* pf = f.mutable_data();
  const std::size_t iterations = interruptible([&] {
    const std::vector<double> yy(py_, py_ + d.R), tt(ptr, ptr + d.R);
    for (std::size_t r = 0; r < d.R; ++r)
      if (!(yy[r] >= 0.0 && yy[r] <= tt[r]) || !std::isfinite(tt[r]))
        throw py::value_error("y must be in [0, trials], got row " + std::to_string(r));
    return sparse_bit_em(d.col_ptr.data(), d.rows.data(), d.C, d.R, yy.data(), tt.data(), p_one, p_zero,
                         other_rate, tol, max_iter, pf, &f_other);
  });
  return py::make_tuple(iterations, f_other);
}

py::array_t<double> py_sparse_gram(const py::handle& col_ptr, const py::handle& rows, std::size_t n_rows,
                                   const py::handle& weight_obj) {
  const Design d = checked_design(col_ptr, rows, n_rows);
  auto weight = f64_of_length(weight_obj, "weight", d.R);
  py::array_t<double> gram(
      std::vector<py::ssize_t>{static_cast<py::ssize_t>(d.C), static_cast<py::ssize_t>(d.C)});
  const double* pw = weight.data();
  double* pg = gram.mutable_data();
  interruptible([&] {
    const std::vector<double> w(pw, pw + d.R);
    sparse_gram(d.col_ptr.data(), d.rows.data(), d.C, d.R, w.data(), pg);
  });
  return gram;
}

}  // namespace

void register_bitvec(py::module_& m) {
  m.def("bitvec_column_counts", &py_column_counts, py::arg("rows"), py::arg("k"), py::arg("groups"),
        py::arg("n_groups"), py::arg("threads") = 0,
        "(counts uint64[n_groups, k], group_n uint64[n_groups], first_invalid): per-group counts of every bit "
        "of the LSB-first rows (uint8[n, ceil(k/8)]); first_invalid == n when every group is < n_groups and "
        "no bit beyond k is set (else the counts are unspecified).");
  m.def("unary_perturb", &py_unary_perturb, py::arg("key"), py::arg("hot"), py::arg("k"), py::arg("t_hot"),
        py::arg("t_cold"), py::arg("threads") = 0,
        "Unary encoding rows uint8[n, ceil(k/8)]: bit hot[i] is 1 with probability t_hot / 2^64, the others "
        "with t_cold / 2^64.");
  m.def("memo_unary_perturb", &py_memo_unary_perturb, py::arg("key"), py::arg("secrets"), py::arg("hot"),
        py::arg("k"), py::arg("t1_hot"), py::arg("t1_cold"), py::arg("instantaneous"), py::arg("t2_one"),
        py::arg("t2_zero"), py::arg("threads") = 0,
        "Memoized unary encoding: the permanent rows (a function of secrets[i] and hot[i]) or, with "
        "instantaneous, their fresh instantaneous responses.");
  m.def("bit_response", &py_bit_response, py::arg("key"), py::arg("rows"), py::arg("k"), py::arg("t_one"),
        py::arg("t_zero"), py::arg("threads") = 0,
        "Fresh response rows: bit 1 with probability t_one / 2^64 where the given bit is 1, t_zero / 2^64 where "
        "it is 0.");
  m.def("memo_grr", &py_memo_grr, py::arg("key"), py::arg("secrets"), py::arg("x"), py::arg("m"), py::arg("t1"),
        py::arg("instantaneous"), py::arg("t2"), py::arg("threads") = 0,
        "Memoized k-ary randomized response on [0, m): permanent RR(x) from the secrets, then (instantaneous) "
        "a fresh RR of it.");
  m.def("dbitflip_perturb", &py_dbitflip_perturb, py::arg("secrets"), py::arg("x"), py::arg("b"),
        py::arg("sampled"), py::arg("t_hot"), py::arg("t_cold"), py::arg("threads") = 0,
        "dBitFlip with memoization: (buckets uint32[n, sampled] ascending, bits uint8[n, sampled]).");
  m.def("memo_draws", &py_memo_draws, py::arg("secrets"), py::arg("purpose"), py::arg("bound"), py::arg("count"),
        py::arg("threads") = 0, "Per-user draws below bound made once from each secret: uint64[n, count].");
  m.def("rappor_bloom_positions", &py_rappor_bloom_positions, py::arg("encoding"), py::arg("k"), py::arg("h"),
        py::arg("data"), py::arg("offsets"), py::arg("cohorts"), py::arg("threads") = 0,
        "Bloom positions uint32[n, h] of items data[offsets[i]:offsets[i+1]] in cohorts[i] (reference "
        "encodings: 0 python, 1 cpp, 2 cpp-drbg).");
  m.def("rappor_cohorts", &py_rappor_cohorts, py::arg("encoding"), py::arg("secrets"), py::arg("m"),
        py::arg("threads") = 0,
        "Cohorts derived from the secrets (rows of equal length) as the C++ client does.");
  m.def("rappor_permanent", &py_rappor_permanent, py::arg("encoding"), py::arg("k"), py::arg("f128"),
        py::arg("secrets"), py::arg("encoder_id"), py::arg("bloom"), py::arg("threads") = 0,
        "Permanent randomized response rows of the Bloom rows (HMAC-SHA256 or HMAC-DRBG masks keyed by the "
        "secrets).");
  m.def("sparse_nn_lasso", &py_sparse_nn_lasso, py::arg("col_ptr"), py::arg("rows"), py::arg("n_rows"),
        py::arg("target"), py::arg("weight"), py::arg("penalty"), py::arg("tol"), py::arg("max_passes"),
        py::arg("beta"),
        "Non-negative weighted lasso over a sparse 0/1 design by coordinate descent; beta (in place) starts "
        "from its values; returns the full passes run.");
  m.def("sparse_bit_em", &py_sparse_bit_em, py::arg("col_ptr"), py::arg("rows"), py::arg("n_rows"), py::arg("y"),
        py::arg("trials"), py::arg("p_one"), py::arg("p_zero"), py::arg("other_rate"), py::arg("f_other"),
        py::arg("tol"), py::arg("max_iter"), py::arg("f"),
        "EM of the composite likelihood of bit counts over a sparse 0/1 design; f (in place) starts from its "
        "values; returns (iterations, f_other).");
  m.def("sparse_gram", &py_sparse_gram, py::arg("col_ptr"), py::arg("rows"), py::arg("n_rows"), py::arg("weight"),
        "Dense X^T diag(weight) X of a sparse 0/1 design.");
}

}  // namespace ldpfast::bind
