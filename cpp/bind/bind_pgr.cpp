// Projective Geometry Response bindings: client, histogram update, decoder.
#include <string>
#include <vector>

#include "common.hpp"
#include "ldpfast/pgr.hpp"

namespace ldpfast::bind {

namespace {

struct Geometry {
  PgrGeometry g;
  std::vector<std::uint32_t> inverse;
};

void make_geometry(std::uint64_t q, int t, Geometry* out) {
  const std::string error = pgr_geometry(q, t, &out->inverse, &out->g);
  if (!error.empty()) throw py::value_error(error);
}

py::array_t<std::uint32_t> py_pgr_perturb(const py::bytes& key, const py::handle& x_obj, std::uint64_t q, int t,
                                          std::uint64_t in_threshold, int threads) {
  auto x = checked_array<std::uint64_t>(x_obj, "x");
  Geometry G;
  make_geometry(q, t, &G);
  const std::size_t n = static_cast<std::size_t>(x.size());
  py::array_t<std::uint32_t> y(n);
  const RngKey k = key_from_bytes(key);
  const std::uint64_t* px = x.data();
  std::uint32_t* py_out = y.mutable_data();
  const std::size_t bad =
      interruptible([&] { return pgr_perturb(G.g, k, px, n, in_threshold, py_out, threads); });
  if (bad < n)
    throw py::value_error("x[" + std::to_string(bad) + "] is not a point: values must be below " +
                          std::to_string(G.g.P[t]));
  return y;
}

std::size_t py_pgr_update(const py::handle& y_obj, std::uint64_t points, const py::handle& counts_obj,
                          int threads) {
  auto y = checked_array<std::uint32_t>(y_obj, "y");
  auto counts = checked_array<std::uint64_t>(counts_obj, "counts", 1, true);
  check_same_length(static_cast<py::ssize_t>(points), counts.size(), "counts");
  const std::uint32_t* py_in = y.data();
  std::uint64_t* pc = counts.mutable_data();
  const std::size_t n = static_cast<std::size_t>(y.size());
  return interruptible([&] { return pgr_update(py_in, n, points, pc, threads); });
}

py::array_t<std::uint64_t> py_pgr_decode(const py::handle& counts_obj, std::uint64_t q, int t, int threads) {
  auto counts = checked_array<std::uint64_t>(counts_obj, "counts");
  Geometry G;
  make_geometry(q, t, &G);
  check_same_length(static_cast<py::ssize_t>(G.g.P[t]), counts.size(), "counts");
  py::array_t<std::uint64_t> out(static_cast<py::ssize_t>(G.g.P[t]));
  const std::uint64_t* pc = counts.data();
  std::uint64_t* po = out.mutable_data();
  interruptible([&] { pgr_decode(G.g, pc, po, threads); });
  return out;
}

}  // namespace

void register_pgr(py::module_& m) {
  m.def("pgr_perturb", &py_pgr_perturb, py::arg("key"), py::arg("x"), py::arg("q"), py::arg("t"),
        py::arg("in_threshold"), py::arg("threads") = 0,
        "Projective Geometry Response client reports (uint32 points of PG(t-1, q)): a uniform point on the "
        "hyperplane of x with probability in_threshold / 2^64, else a uniform point off it.");
  m.def("pgr_update", &py_pgr_update, py::arg("y"), py::arg("points"), py::arg("counts"), py::arg("threads") = 0,
        "counts[y[i]] += 1 in place, each y[i] read once: returns len(y) when every y[i] < points, else the "
        "first invalid index (counts then hold part of the batch: pass a scratch copy).");
  m.def("pgr_decode", &py_pgr_decode, py::arg("counts"), py::arg("q"), py::arg("t"), py::arg("threads") = 0,
        "Hyperplane sums: out[x] = sum of counts[y] over the points y orthogonal to x (uint64, one per point).");
}

}  // namespace ldpfast::bind
