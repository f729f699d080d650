#!/usr/bin/env bash
# CI: lint. `ruff check` (the version pinned in the `lint` extra, rules in
# [tool.ruff] of pyproject.toml) over the Python tree, then the C++ checks of
# .ci/cxx_lint.sh (-Werror builds with GCC and Clang, clang-format). Clang comes from
# Debian's packages when this machine has apt-get and none is installed; without it the
# Clang build is skipped, and the output says so. About 3-5 minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
python - <<'PY' > "${TMPDIR:-/tmp}/ldpfast-lint-requirements.txt"
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["lint"]))
PY
python -m pip install --quiet -r "${TMPDIR:-/tmp}/ldpfast-lint-requirements.txt"
python -m ruff check python tests bench tools
if ! command -v clang++ > /dev/null && command -v apt-get > /dev/null && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq clang > /dev/null) || echo "lint: could not install clang"
fi
.ci/cxx_lint.sh
