// <immintrin.h>, included through this header only. GCC 12's AVX-512 intrinsics build
// their "undefined" operands as `__m512i __Y = __Y;`, which -Wuninitialized and
// -Wmaybe-uninitialized report at every inlined use (GCC bug 105593, fixed in GCC 13):
// both are silenced inside the system header, nowhere else.
#pragma once
#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64) || defined(_M_IX86)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif
