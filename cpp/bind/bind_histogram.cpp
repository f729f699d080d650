// Histogram binding (GRR's server update): counts in place, all or nothing.
#include <vector>

#include "common.hpp"
#include "ldpfast/histogram.hpp"

namespace ldpfast::bind {

namespace {
py::tuple py_histogram_update(const py::handle& y_obj, const py::handle& counts_obj, int threads,
                              bool counts_zero, const py::handle& staging_obj) {
  auto y = checked_array<std::uint64_t>(y_obj, "y");
  auto counts = checked_array<std::uint64_t>(counts_obj, "counts", 1, true);
  if (threads < 0)
    throw py::value_error("threads must be an integer >= 0 (0 = default), got " + std::to_string(threads));
  const std::uint64_t* py_in = y.data();
  std::uint64_t* pc = counts.mutable_data();
  const std::size_t n = static_cast<std::size_t>(y.size()), size = static_cast<std::size_t>(counts.size());
  std::uint32_t* staging = nullptr;
  if (!staging_obj.is_none()) {
    auto buffer = checked_array<std::uint32_t>(staging_obj, "staging", 1, true);
    if (static_cast<std::size_t>(buffer.size()) < n)
      throw py::value_error("staging must have room for the " + std::to_string(n) + " values, got " +
                            std::to_string(buffer.size()));
    staging = buffer.mutable_data();
  }
  const HistogramUpdate r =
      interruptible([&] { return histogram_update(py_in, n, pc, size, threads, counts_zero, staging); });
  return py::make_tuple(r.first_bad, r.bad_value, r.overflow);
}

py::array_t<double> py_histogram_affine(const py::handle& counts_obj, double scale, double offset) {
  auto counts = checked_array<std::uint64_t>(counts_obj, "counts", -1);
  py::array_t<double> out(std::vector<py::ssize_t>(counts.shape(), counts.shape() + counts.ndim()));
  const std::uint64_t* pc = counts.data();
  double* po = out.mutable_data();
  const std::size_t n = static_cast<std::size_t>(counts.size());
  without_gil([&] { histogram_affine(pc, n, scale, offset, po); });
  return out;
}
}  // namespace

void register_histogram(py::module_& m) {
  m.def("histogram_update", &py_histogram_update, py::arg("y"), py::arg("counts"), py::arg("threads") = 0,
        py::arg("counts_zero") = false, py::arg("staging") = py::none(),
        "counts[y[i]] += 1 in place for every i, all or nothing, each y[i] read once (checked, then counted). "
        "Returns (first_bad, value, overflow): (len(y), 0, False) when the batch was added; else counts is "
        "unchanged and first_bad is the index of the first y[i] >= len(counts) (value: y[i] as read), or "
        "overflow is True (a counter would wrap). GIL released; an interruption (Ctrl-C) leaves counts "
        "unchanged. counts_zero=True promises every counter is 0 (then no staging buffer is needed: a "
        "failed batch is taken back by clearing counts). staging: a uint32 array of at least len(y) values, used "
        "instead of an allocation when the batch is staged (histogram_update_stages).");
  m.def("histogram_update_stages", &histogram_update_stages, py::arg("n"), py::arg("size"),
        py::arg("threads") = 0, py::arg("counts_zero") = false,
        "True when histogram_update stages n values as uint32 (then a staging buffer replaces its allocation).");
  m.def("histogram_affine", &py_histogram_affine, py::arg("counts"), py::arg("scale"), py::arg("offset"),
        "scale * counts + offset as a new float64 array of counts' shape (each count rounded to the nearest "
        "double), in one pass with the GIL released.");
  m.def("histogram_update_scratch_bytes", &histogram_update_scratch_bytes, py::arg("n"), py::arg("size"),
        py::arg("threads") = 0, py::arg("counts_zero") = false,
        "Bytes histogram_update allocates for n values into size counters.");
}

}  // namespace ldpfast::bind
