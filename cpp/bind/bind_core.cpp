// Backend selection, threads, the ChaCha20 block (for test vectors) and field types.
#include <pybind11/stl.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"
#include "ldpfast/dispatch.hpp"
#include "ldpfast/parallel.hpp"
#include "ldpfast/read_once.hpp"

namespace ldpfast::bind {

RngKey key_from_bytes(const py::bytes& key) {
  const std::string raw = key;
  if (raw.size() != 32) throw py::value_error("key must be 32 bytes, got " + std::to_string(raw.size()));
  RngKey out;
  for (int i = 0; i < 8; ++i) {
    out.words[i] = 0;
    for (int b = 0; b < 4; ++b)
      out.words[i] |= static_cast<std::uint32_t>(static_cast<unsigned char>(raw[4 * i + b])) << (8 * b);
  }
  return out;
}

namespace {
// The main thread's ident, read once when the module is imported (every kernel call asks).
unsigned long main_thread_ident = 0;
}  // namespace

bool on_main_thread() { return main_thread_ident == PyThread_get_thread_ident(); }

namespace {
// The interrupt hook (parallel.hpp): runs on the thread that called into the module, which
// has released the GIL. A handler's exception stays set for interruptible() to raise.
bool python_signal_raised() {
  py::gil_scoped_acquire gil;
  return PyErr_CheckSignals() != 0;
}

std::vector<std::string> supported_backends() {
  std::vector<std::string> out;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (isa_supported(isa)) out.emplace_back(isa_name(isa));
  return out;
}

std::vector<std::string> compiled_backends() {
#if defined(LDPFAST_X86_ISAS)
  return {"scalar", "avx2", "avx512"};
#else
  return {"scalar"};
#endif
}

void set_backend(const std::string& name) {
  Isa isa;
  if (!isa_from_name(name.c_str(), &isa))
    throw py::value_error("backend must be one of 'scalar', 'avx2', 'avx512', got '" + name + "'");
  set_active_isa(isa);
}

py::bytes py_chacha20_block(const py::bytes& key, std::uint64_t counter, std::uint64_t nonce) {
  std::uint32_t out[16];
  chacha20_block(key_from_bytes(key), counter, nonce, out);
  return py::bytes(reinterpret_cast<const char*>(out), sizeof(out));
}

FieldSpec prime_field(std::uint64_t p) {
  if (p < 3 || p % 2 == 0) throw py::value_error("prime must be an odd prime >= 3, got " + std::to_string(p));
  FieldSpec f{};
  f.binary = false;
  f.prime = make_prime_field(p);
  return f;
}

FieldSpec binary_field(int l, std::uint64_t poly_low) {
  if (l < 1 || l > 64) throw py::value_error("l must be in [1, 64], got " + std::to_string(l));
  if (l < 64 && (poly_low >> l) != 0) throw py::value_error("poly_low must have degree < l");
  FieldSpec f{};
  f.binary = true;
  f.gf = make_binary_field(l, poly_low);
  return f;
}

std::string field_repr(const FieldSpec& f) {
  if (f.binary)
    return "Field.binary(l=" + std::to_string(f.gf.l) + ", poly_low=" + std::to_string(f.gf.poly_low) + ")";
  return "Field.prime(" + std::to_string(f.prime.p) + ")";
}

py::array_t<std::uint64_t> field_mul(const FieldSpec& f, const py::handle& a_obj, const py::handle& b_obj) {
  auto a = checked_array<std::uint64_t>(a_obj, "a");
  auto b = checked_array<std::uint64_t>(b_obj, "b");
  check_same_length(a.size(), b.size(), "b");
  py::array_t<std::uint64_t> out(a.size());
  const std::uint64_t* pa = a.data();
  const std::uint64_t* pb = b.data();
  std::uint64_t* po = out.mutable_data();
  const py::ssize_t n = a.size();
  without_gil([&] {
    for (py::ssize_t i = 0; i < n; ++i)
      po[i] = f.binary ? gf_mul(pa[i], pb[i], f.gf)
                       : mont_redc(static_cast<u128>(to_montgomery(pa[i], f.prime)) * pb[i], f.prime);
  });
  return out;
}

// dst[i] = src[i] for C-contiguous arrays of one dtype. Each aligned element of 2, 4 or 8
// bytes is read with one load of its width, so an element another thread changes meanwhile
// is copied as its old or its new value, never a mix of their bytes: memcpy gives no such
// promise (AddressSanitizer's memmove copies byte by byte). Single bytes are whole in any
// copy, and misaligned elements cannot be read atomically: those go through memcpy.
template <class T>
void copy_elements(const void* src, void* dst, std::size_t n) {
  const T* from = static_cast<const T*>(src);
  T* to = static_cast<T*>(dst);
  for (std::size_t i = 0; i < n; ++i) to[i] = read_once(from + i);
}

void copy_once(const py::array& src, py::array dst) {
  const auto c_order = py::array::c_style;
  const auto aligned = py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  if (!(src.flags() & c_order) || !(dst.flags() & c_order))
    throw py::value_error("src and dst must be C-contiguous");
  if (!(dst.flags() & aligned) || !dst.writeable()) throw py::value_error("dst must be aligned and writable");
  if (src.dtype().kind() == 'O' || src.dtype().not_equal(dst.dtype()) || dst.size() != src.size())
    throw py::value_error("dst must have src's dtype (not object) and length, got " +
                          std::string(py::str(dst.dtype())) + " x " + std::to_string(dst.size()) + " for " +
                          std::string(py::str(src.dtype())) + " x " + std::to_string(src.size()));
  const py::ssize_t width = src.itemsize();
  const void* from = src.data();
  void* to = dst.mutable_data();
  const std::size_t n = static_cast<std::size_t>(src.size());
  const bool atomic = (src.flags() & aligned) && (width == 2 || width == 4 || width == 8);
  without_gil([&] {
    if (!atomic) {
      if (n) std::memcpy(to, from, n * static_cast<std::size_t>(width));
    } else if (width == 8) {
      copy_elements<std::uint64_t>(from, to, n);
    } else if (width == 4) {
      copy_elements<std::uint32_t>(from, to, n);
    } else {
      copy_elements<std::uint16_t>(from, to, n);
    }
  });
}

// The common length of the columns named `names` in `columns` (a batch's __dict__) when
// each is a numpy array of exactly the dtype object dtypes[i] with ndims[i] dimensions,
// C-contiguous and aligned; -1 otherwise (the caller's own check then names what differs).
py::ssize_t plain_columns_length(const py::dict& columns, const py::tuple& names, const py::tuple& dtypes,
                                 const py::tuple& ndims) {
  const auto& api = py::detail::npy_api::get();
  const int wanted = py::array::c_style | py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  py::ssize_t length = -1;
  const py::ssize_t count = static_cast<py::ssize_t>(names.size());
  if (static_cast<py::ssize_t>(dtypes.size()) != count || static_cast<py::ssize_t>(ndims.size()) != count)
    return -1;
  for (py::ssize_t i = 0; i < count; ++i) {
    PyObject* column = PyDict_GetItem(columns.ptr(), PyTuple_GET_ITEM(names.ptr(), i));  // borrowed
    if (column == nullptr || !api.PyArray_Check_(column)) return -1;
    auto* array = py::detail::array_proxy(column);
    if (reinterpret_cast<PyObject*>(array->descr) != PyTuple_GET_ITEM(dtypes.ptr(), i) ||
        array->nd != PyLong_AsLong(PyTuple_GET_ITEM(ndims.ptr(), i)) || array->nd == 0 ||
        (array->flags & wanted) != wanted || (length >= 0 && array->dimensions[0] != length))
      return -1;
    length = array->dimensions[0];
  }
  return length;
}

}  // namespace

void register_core(py::module_& m) {
  main_thread_ident = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  set_interrupt_hook(&python_signal_raised);
  // Resolve LDPFAST_ISA now, so that a bad value fails the import with its message.
  active_isa();
  m.def("active_backend", [] { return std::string(isa_name(active_isa())); });
  m.def("supported_backends", &supported_backends);
  m.def("compiled_backends", &compiled_backends);
  m.def("set_backend", &set_backend);
  m.def("get_num_threads", &default_threads);
  m.def("set_num_threads", &set_default_threads);
  m.def("chacha20_block", &py_chacha20_block, py::arg("key"), py::arg("counter"), py::arg("nonce"),
        "One ChaCha20 block (64-bit counter, 64-bit nonce), little-endian bytes.");

  py::class_<FieldSpec>(m, "Field", "A finite field for hashing: F_p (odd prime p < 2^64) or GF(2^l), l <= 64.")
      .def_static("prime", &prime_field, py::arg("p"))
      .def_static("binary", &binary_field, py::arg("l"), py::arg("poly_low"))
      .def_property_readonly("is_binary", [](const FieldSpec& f) { return f.binary; })
      .def("__repr__", &field_repr);

  m.def("field_mul", &field_mul, py::arg("field"), py::arg("a"), py::arg("b"),
        "Elementwise field product (reference/testing helper).");
  m.def("plain_columns_length", &plain_columns_length, py::arg("columns"), py::arg("names"), py::arg("dtypes"),
        py::arg("ndims"),
        "The common length of columns[names[i]] when each is a numpy array whose dtype is the object dtypes[i], "
        "with ndims[i] (>= 1) dimensions, C-contiguous and aligned; -1 otherwise.");
  m.def("copy_once", &copy_once, py::arg("src"), py::arg("dst"),
        "dst[...] = src for C-contiguous arrays of one item size, each aligned element read with one load of "
        "its width (copied old or new when another thread changes it, never torn).");
}

}  // namespace ldpfast::bind
