#!/usr/bin/env bash
# CI: the C++ core built with AddressSanitizer + UndefinedBehaviorSanitizer (any error
# aborts the process and fails this step), then the kernel tests and the fuzz tests run
# against it. The sanitized module lives in its own build and package copy
# (build-sanitize/), so the normal build and install are untouched. Arguments are passed
# to pytest (e.g. -k field_mul).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-sanitize
python -m pip install --quiet "pybind11>=2.12" "cmake>=3.26" ninja
cmake -S . -B "$build" -G Ninja -DLDPFAST_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=OFF -Dpybind11_DIR="$(python -m pybind11 --cmakedir)"
cmake --build "$build" -j"$(nproc)"

pkg="$build/python"
rm -rf "$pkg"
mkdir -p "$pkg"
cp -r python/ldpfast "$pkg/"
rm -f "$pkg"/ldpfast/_core*.so
cp "$build"/_core*.so "$pkg/ldpfast/"

# Python is not instrumented: the ASan runtime of the compiler that built the module must
# be loaded first, and the C++ runtime with it (ASan intercepts __cxa_throw and must find
# the real one at startup). Python's own allocations are never freed at exit, so leak
# checks are off.
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
runtime=$("$cxx" -print-file-name=libasan.so)
[ -f "$runtime" ] || runtime=$("$cxx" -print-file-name="libclang_rt.asan-$(uname -m).so")
[ -f "$runtime" ] || { echo "sanitize.sh: no ASan runtime found for $cxx" >&2; exit 1; }
runtime="$runtime $("$cxx" -print-file-name=libstdc++.so.6)"

tests=(tests/test_kernels_ocms.py tests/test_fwht.py tests/test_hadamard.py tests/test_privsketch*.py
       tests/test_rng.py tests/test_dispatch.py tests/test_interrupt.py tests/test_binding_bounds.py
       tests/test_bitvec.py)
shopt -s nullglob
tests+=(tests/test_fuzz_*.py)
shopt -u nullglob

# Reports go to stderr; --capture=sys leaves file descriptor 2 alone so that they show even
# when the process aborts. Any error exits non-zero (a test's child process included).
LD_PRELOAD="$runtime" \
ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1" \
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
PYTHONPATH="$pkg" \
  python -m pytest -q -p no:cacheprovider --capture=sys "${tests[@]}" "$@"
