#!/usr/bin/env bash
# CI: static checks, after the package is installed (.ci/run's first lines).
# 1. mypy --strict on the public API (scope and the list of not-yet-clean modules:
#    [tool.mypy] in pyproject.toml);
# 2. the documentation site, with every Sphinx warning an error;
# 3. the site in a headless Chromium (tests/test_docs_browser.py: nothing cut off, no console
#    error, no request to the network). Chromium comes from apt-get where this runs as root
#    (Debian: chromium, chromium-driver); without it the browser test skips, saying so.
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
html="${TMPDIR:-/tmp}/ldpfast-docs-html"
python -m sphinx -W --keep-going -q -b html docs "$html"
if ! command -v chromedriver >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get install -y -qq chromium chromium-driver >/dev/null \
    || { apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; } \
    || echo "static.sh: could not install Chromium; the browser check will skip" >&2
fi
LDPFAST_DOCS_HTML="$html" python -m pytest -q -p no:cacheprovider tests/test_docs_browser.py
