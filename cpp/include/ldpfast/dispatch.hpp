// Runtime selection among the copies of each kernel compiled for scalar, AVX2 and AVX-512.
//
// Every file in cpp/kernels is compiled once per ISA with -DLDPFAST_ISA_NS=isa_<name> and
// defines its kernel table inside `namespace ldpfast::LDPFAST_ISA_NS`. Kernel files must
// give every function internal linkage (anonymous namespace, `static`, or the ISA
// namespace) and avoid out-of-line std templates, so no ISA-specific code leaks into
// another copy through the linker.
#pragma once

namespace ldpfast {

enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2 };

const char* isa_name(Isa isa);
bool isa_from_name(const char* name, Isa* out);
bool isa_supported(Isa isa);  // CPU and OS support
Isa best_supported_isa();
Isa active_isa();             // LDPFAST_ISA env var at load time, else the best supported
void set_active_isa(Isa isa); // throws std::invalid_argument if unsupported

template <class Table>
const Table& select_isa(const Table& scalar, const Table* avx2, const Table* avx512) {
  switch (active_isa()) {
    case Isa::avx512: return avx512 ? *avx512 : scalar;
    case Isa::avx2: return avx2 ? *avx2 : scalar;
    default: return scalar;
  }
}

}  // namespace ldpfast

#if defined(LDPFAST_X86_ISAS)
#define LDPFAST_DECLARE_ISA_TABLE(Type, var)                                    \
  namespace ldpfast {                                                           \
  namespace isa_scalar { extern const Type var; }                               \
  namespace isa_avx2 { extern const Type var; }                                 \
  namespace isa_avx512 { extern const Type var; }                               \
  inline const Type& var##_active() {                                           \
    return select_isa<Type>(isa_scalar::var, &isa_avx2::var, &isa_avx512::var); \
  }                                                                             \
  }
#else
#define LDPFAST_DECLARE_ISA_TABLE(Type, var)                                                        \
  namespace ldpfast {                                                                               \
  namespace isa_scalar { extern const Type var; }                                                   \
  inline const Type& var##_active() { return select_isa<Type>(isa_scalar::var, nullptr, nullptr); } \
  }
#endif
