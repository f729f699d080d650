// Shared helpers for the thin pybind11 layer: numpy arrays are used in place (never
// copied or cast); a wrong dtype (byte-swapped included), layout (strided, misaligned) or
// length raises, naming the parameter.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "ldpfast/field.hpp"
#include "ldpfast/parallel.hpp"
#include "ldpfast/rng.hpp"

namespace ldpfast::bind {

namespace py = pybind11;

template <class T>
const char* dtype_name() {
  if (std::is_same<T, std::uint64_t>::value) return "uint64";
  if (std::is_same<T, std::int64_t>::value) return "int64";
  if (std::is_same<T, std::uint32_t>::value) return "uint32";
  if (std::is_same<T, std::int32_t>::value) return "int32";
  if (std::is_same<T, std::uint16_t>::value) return "uint16";
  if (std::is_same<T, std::uint8_t>::value) return "uint8";
  if (std::is_same<T, std::int8_t>::value) return "int8";
  if (std::is_same<T, double>::value) return "float64";
  if (std::is_same<T, float>::value) return "float32";
  return "?";
}

// Equivalent dtypes match (not only the identical dtype object, which unpickled or
// np.load-ed arrays do not share); byte-swapped layouts do not.
template <class T>
bool has_dtype(const py::array& arr) {
  return py::isinstance<py::array_t<T>>(arr);
}

// Checks that `obj` is a C-contiguous numpy array of dtype T (and ndim, when >= 0).
template <class T>
py::array_t<T> checked_array(const py::handle& obj, const char* name, int ndim = 1, bool writable = false) {
  if (!py::isinstance<py::array>(obj))
    throw py::type_error(std::string(name) + " must be a numpy array, got " +
                         std::string(py::str(py::type::of(obj).attr("__name__"))));
  py::array arr = py::reinterpret_borrow<py::array>(obj);
  if (!has_dtype<T>(arr))
    throw py::type_error(std::string(name) + " must have dtype " + dtype_name<T>() + ", got " +
                         std::string(py::str(arr.dtype())));
  if (!(arr.flags() & py::array::c_style)) throw py::value_error(std::string(name) + " must be C-contiguous");
  if (!(arr.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_))
    throw py::value_error(std::string(name) + " must be aligned to its dtype (numpy.array(" + name +
                          ") makes an aligned copy)");
  if (ndim >= 0 && arr.ndim() != ndim)
    throw py::value_error(std::string(name) + " must have " + std::to_string(ndim) + " dimension(s), got " +
                          std::to_string(arr.ndim()));
  if (writable && !arr.writeable()) throw py::value_error(std::string(name) + " must be writable");
  return py::reinterpret_borrow<py::array_t<T>>(arr);
}

inline void check_same_length(py::ssize_t expected, py::ssize_t got, const char* name) {
  if (expected != got)
    throw py::value_error(std::string(name) + " has length " + std::to_string(got) + ", expected " +
                          std::to_string(expected));
}

// True on the thread Python runs signal handlers on (the main thread).
bool on_main_thread();

// Runs f() with the GIL released. On the main thread the call is interruptible: between
// chunks of work (at most every ~20 ms, see parallel.hpp) it briefly takes the GIL to run
// Python's signal handlers, and when one raises (KeyboardInterrupt for Ctrl-C) the workers
// stop and that exception propagates. Arrays the call was writing are then in an
// unspecified state: the Python layer passes scratch buffers and commits them only after
// the call returns.
template <class F>
auto interruptible(F&& f) -> decltype(f()) {
  InterruptScope scope(on_main_thread());
  try {
    py::gil_scoped_release release;
    return f();
  } catch (const Interrupted&) {
    throw py::error_already_set();  // the GIL is held again; the handler's exception is set
  }
}

// Runs f() with the GIL released and returns its result: for O(n) input checks that must
// come before other checks or Python calls (checks followed directly by the work go into
// the interruptible() call instead). f touches no Python object; a py::value_error it
// throws is raised once the GIL is back.
template <class F>
auto without_gil(F&& f) -> decltype(f()) {
  py::gil_scoped_release release;
  return f();
}

// 32 bytes of key material -> ChaCha20 key.
RngKey key_from_bytes(const py::bytes& key);

void register_core(py::module_& m);
void register_fwht(py::module_& m);
void register_ocms(py::module_& m);
void register_hadamard(py::module_& m);
void register_privsketch(py::module_& m);
void register_pgr(py::module_& m);
void register_bitvec(py::module_& m);
void register_histogram(py::module_& m);
void register_square_wave(py::module_& m);

}  // namespace ldpfast::bind
