#!/usr/bin/env bash
# CI: static checks, after the package is installed (.ci/run's first lines).
# 1. mypy --strict on the public API (scope and the list of not-yet-clean modules:
#    [tool.mypy] in pyproject.toml);
# 2. the documentation site, with every Sphinx warning an error.
# Installs the `typecheck` and `docs` extras' tools only (the package is already built).
set -euo pipefail
cd "$(dirname "$0")/.."
python - <<'PY' > "${TMPDIR:-/tmp}/ldpfast-static-requirements.txt"
import tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
print("\n".join(extras["typecheck"] + extras["docs"]))
PY
python -m pip install --quiet -r "${TMPDIR:-/tmp}/ldpfast-static-requirements.txt"
python -m mypy
python -m sphinx -W --keep-going -q -b html docs "${TMPDIR:-/tmp}/ldpfast-docs-html"
