#!/usr/bin/env bash
# CI: the oldest supported versions. Builds and installs ldpfast with the oldest supported
# Python into a fresh virtual environment, pins numpy (and the test tools, so the resolver
# does not backtrack) to .ci/floor-constraints.txt, and runs the fast subset of the tests
# (tests/smoke.txt: what the versions of Python and the dependencies can break; the whole
# suite runs in .ci/run under today's releases). LDPFAST_FLOOR_PYTHON overrides the
# interpreter; the floor in pyproject.toml (requires-python, numpy) must match this file.
set -euo pipefail
cd "$(dirname "$0")/.."
floor_version=3.9

find_python() {
  local candidate
  for candidate in "${LDPFAST_FLOOR_PYTHON:-}" "python$floor_version" \
      "$(pyenv root 2>/dev/null)"/versions/"$floor_version".*/bin/python"$floor_version"; do
    [ -n "$candidate" ] || continue
    if "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$floor_version'.split('.'))))" 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

python_floor=$(find_python) || {
  echo "floor.sh: no Python $floor_version found (set LDPFAST_FLOOR_PYTHON)" >&2
  exit 1
}
grep -q "requires-python = \">=$floor_version\"" pyproject.toml || {
  echo "floor.sh: pyproject.toml's requires-python does not match $floor_version" >&2
  exit 1
}
numpy_floor=$(sed -n 's/^numpy==//p' .ci/floor-constraints.txt)
grep -q "\"numpy>=$numpy_floor\"" pyproject.toml || {
  echo "floor.sh: pyproject.toml's numpy floor does not match $numpy_floor" >&2
  exit 1
}

venv=$(mktemp -d)/venv
trap 'rm -rf "$(dirname "$venv")"' EXIT
"$python_floor" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install -c .ci/floor-constraints.txt ".[test]"
"$venv/bin/python" -c "import sys, numpy; print('floor: Python', sys.version.split()[0], 'numpy', numpy.__version__)"
"$venv/bin/python" -m pytest -q -p no:cacheprovider --smoke tests
