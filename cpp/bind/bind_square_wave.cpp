// Square Wave bindings: the client and the EM/EMS estimator of the input distribution.
#include <cmath>
#include <string>

#include "common.hpp"
#include "ldpfast/square_wave.hpp"

namespace ldpfast::bind {

namespace {

void check_shape(std::uint64_t d, std::uint64_t band) {
  if (d < 2 || d > (std::uint64_t{1} << 32))
    throw py::value_error("d must be in [2, 2^32], got " + std::to_string(d));
  if (band > (std::uint64_t{1} << 32)) throw py::value_error("band must be <= 2^32, got " + std::to_string(band));
}

py::array_t<std::uint64_t> py_square_wave_perturb(const py::bytes& key, const py::handle& x_obj, std::uint64_t d,
                                                  std::uint64_t band, std::uint64_t flip_threshold, int threads) {
  auto x = checked_array<std::uint64_t>(x_obj, "x");
  check_shape(d, band);
  const RngKey k = key_from_bytes(key);
  const std::size_t n = static_cast<std::size_t>(x.size());
  py::array_t<std::uint64_t> out(n);
  const std::uint64_t* px = x.data();
  std::uint64_t* po = out.mutable_data();
  const std::size_t bad =
      interruptible([&] { return square_wave_perturb(k, px, n, d, band, flip_threshold, po, threads); });
  if (bad < n)
    throw py::value_error("x must hold buckets in [0, d) with d = " + std::to_string(d) + ", got x[" +
                          std::to_string(bad) + "] = " + std::to_string(px[bad]));
  return out;
}

py::tuple py_square_wave_em(const py::handle& counts_obj, std::uint64_t d, std::uint64_t band, double near,
                            double far, bool smooth, std::size_t max_iterations, double likelihood_tol,
                            double l1_tol) {
  auto counts = checked_array<std::uint64_t>(counts_obj, "counts");
  check_shape(d, band);
  check_same_length(static_cast<py::ssize_t>(d + 2 * band), counts.size(), "counts");
  if (!(far > 0.0 && near >= far && std::isfinite(near)))
    throw py::value_error("the channel needs 0 < far <= near < inf, got near = " + std::to_string(near) +
                          ", far = " + std::to_string(far));
  py::array_t<double> theta(static_cast<py::ssize_t>(d));
  const std::uint64_t* pc = counts.data();
  double* pt = theta.mutable_data();
  const SquareWaveEmResult result = interruptible(
      [&] { return square_wave_em(pc, d, band, near, far, smooth, max_iterations, likelihood_tol, l1_tol, pt); });
  return py::make_tuple(theta, result.iterations, result.log_likelihood);
}

}  // namespace

void register_square_wave(py::module_& m) {
  m.def(
      "square_wave_perturb", &py_square_wave_perturb, py::arg("key"), py::arg("x"), py::arg("d"), py::arg("band"),
      py::arg("flip_threshold"), py::arg("threads") = 0,
      "Discrete Square Wave reports in [0, d + 2 band) of buckets x in [0, d): randomized response over [0, d) "
      "with flip probability flip_threshold / 2^64, a kept value moved uniformly into its band [x, x + 2 band], "
      "another symbol y mapped to y (y < x) or y + 2 band.");
  m.def("square_wave_em", &py_square_wave_em, py::arg("counts"), py::arg("d"), py::arg("band"), py::arg("near"),
        py::arg("far"), py::arg("smooth"), py::arg("max_iterations"), py::arg("likelihood_tol"),
        py::arg("l1_tol"),
        "(theta, iterations, log_likelihood): EM (smooth=True: EMS) estimate of the input distribution from the "
        "report histogram counts (length d + 2 band) under M[j, i] = near for i <= j <= i + 2 band, else far.");
}

}  // namespace ldpfast::bind
