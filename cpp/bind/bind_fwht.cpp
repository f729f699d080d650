// FWHT binding: transforms numpy arrays in place, never copying.
#include "common.hpp"
#include "ldpfast/fwht.hpp"

namespace ldpfast::bind {

namespace {
template <class T>
void transform(py::array& arr, int threads) {
  auto a = checked_array<T>(arr, "data", -1, true);  // writable
  const std::size_t n = static_cast<std::size_t>(a.shape(a.ndim() - 1));
  const std::size_t rows = n ? static_cast<std::size_t>(a.size()) / n : 0;
  T* data = a.mutable_data();
  if (reinterpret_cast<std::uintptr_t>(data) % alignof(T) != 0)
    throw py::value_error("data must be aligned to its element size (fwht never copies)");
  interruptible([&] { fwht_rows(data, rows, n, threads); });
}

void py_fwht(const py::object& obj, int threads) {
  if (!py::isinstance<py::array>(obj))
    throw py::type_error("data must be a numpy array, got " +
                         std::string(py::str(py::type::of(obj).attr("__name__"))));
  py::array data = py::reinterpret_borrow<py::array>(obj);
  if (threads < 0)
    throw py::value_error("threads must be an integer >= 0 (0 = default), got " + std::to_string(threads));
  if (data.ndim() != 1 && data.ndim() != 2)
    throw py::value_error("data must be 1-D or 2-D (rows), got ndim=" + std::to_string(data.ndim()));
  const auto n = static_cast<std::uint64_t>(data.shape(data.ndim() - 1));
  if (n < 2 || n > (std::uint64_t{1} << 30) || (n & (n - 1)) != 0)
    throw py::value_error("data's last dimension must be a power of two in [2, 2^30], got " + std::to_string(n));
  if (!(data.flags() & py::array::c_style))
    throw py::value_error("data must be C-contiguous (fwht works in place and never copies)");
  if (has_dtype<float>(data)) return transform<float>(data, threads);
  if (has_dtype<double>(data)) return transform<double>(data, threads);
  if (has_dtype<std::int64_t>(data)) return transform<std::int64_t>(data, threads);
  throw py::type_error("data must have dtype float32, float64 or int64 (native byte order), got " +
                       std::string(py::str(data.dtype().attr("str"))));
}

}  // namespace

void register_fwht(py::module_& m) {
  m.def("fwht", &py_fwht, py::arg("data"), py::arg("threads") = 0,
        "In-place unnormalized fast Walsh-Hadamard transform of a 1-D array or of each row of a 2-D array "
        "(float32, float64 or int64, C-contiguous, aligned, writable; never copied). GIL released; interrupted "
        "(Ctrl-C), data is left partly transformed.");
}

}  // namespace ldpfast::bind
