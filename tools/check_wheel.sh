#!/usr/bin/env bash
# Install a built ldpfast wheel in a fresh virtual environment with no compiler reachable,
# time the install, and run `ldpfast demo` from it.
#
#   tools/check_wheel.sh wheelhouse/ldpfast-*-manylinux_*.whl [python]
#
# Proves the wheel is self-contained: PATH holds only the venv's bin directory, CC/CXX
# point at a command that fails, and pip may take nothing but wheels (--only-binary), so
# a missing or incompatible binary makes the install fail instead of compiling.
set -euo pipefail
wheel=$(realpath "${1:?usage: check_wheel.sh WHEEL [PYTHON]}")
python=${2:-python3}
python=$(command -v "$python")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" -m venv "$work/venv"
venv_bin="$work/venv/bin"
clean_env=(env -i HOME="$work" PATH="$venv_bin" CC=/bin/false CXX=/bin/false
           LANG=C.UTF-8 PIP_DISABLE_PIP_VERSION_CHECK=1)
for tool in cc c++ gcc g++ clang clang++ cmake; do
  if "${clean_env[@]}" "$venv_bin/python" -c "import shutil, sys; sys.exit(shutil.which('$tool') is None)"; then
    echo "check_wheel: $tool is reachable on the clean PATH" >&2
    exit 1
  fi
done

start=$(date +%s.%N)
"${clean_env[@]}" "$venv_bin/python" -m pip install --quiet --only-binary=:all: "$wheel"
end=$(date +%s.%N)
echo "check_wheel: installed $(basename "$wheel") and its dependencies in $(echo "$end - $start" | bc) s"

# Run from an empty directory so the source tree cannot shadow the installed package.
cd "$work"
"${clean_env[@]}" "$venv_bin/python" -c \
  "import ldpfast, sys; print('check_wheel: ldpfast', ldpfast.__version__, 'from', ldpfast.__file__); print(ldpfast.backend_info())"
"${clean_env[@]}" "$venv_bin/ldpfast" demo
echo "check_wheel: OK"
