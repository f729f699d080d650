#!/usr/bin/env bash
# CI: C++ hygiene of cpp/.
# 1. The extension built with LDPFAST_WERROR=ON (-Wall -Wextra -Werror) by the default
#    compiler (build-lint-default/);
# 2. the same with Clang (build-lint-clang/) when clang++ is on PATH; skipped, and said
#    so, when it is not;
# 3. clang-format, the exact version pinned in the `lint` extra of pyproject.toml,
#    reports no change to any C++ file (style: .clang-format).
# Separate build directories: the in-place build and the installed package are untouched.
# Takes a few minutes on two cores (two full builds).
set -euo pipefail
cd "$(dirname "$0")/.."
python - <<'PY' > "${TMPDIR:-/tmp}/ldpfast-lint-requirements.txt"
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["lint"]))
PY
python -m pip install --quiet "pybind11>=2.12" "cmake>=3.26" ninja -r "${TMPDIR:-/tmp}/ldpfast-lint-requirements.txt"
pybind11_dir=$(python -m pybind11 --cmakedir)

werror_build() {  # werror_build <build dir> [CC=... CXX=...]
  local build=$1
  shift
  mkdir -p "$build"
  env "$@" cmake -S . -B "$build" -G Ninja -DLDPFAST_WERROR=ON -Dpybind11_DIR="$pybind11_dir" \
    > "$build/configure.log" || { cat "$build/configure.log"; return 1; }
  echo "cxx_lint: -Werror build in $build with $(sed -n 's/^-- ldpfast: \([^,]*\) on .*/\1/p' "$build/configure.log")"
  cmake --build "$build" -j"$(nproc)"
}

werror_build build-lint-default
if command -v clang++ > /dev/null; then
  werror_build build-lint-clang CC=clang CXX=clang++
else
  echo "cxx_lint: SKIPPED the Clang -Werror build: no clang++ on PATH"
fi

clang_format=$(python -c 'import clang_format; print(clang_format.get_executable("clang-format"))')
echo "cxx_lint: $("$clang_format" --version)"
find cpp -name '*.cpp' -o -name '*.hpp' | sort | xargs "$clang_format" --dry-run --Werror
echo "cxx_lint: OK"
