"""The documentation's Python examples run as written, so the pages cannot drift from the API.

Each page (README.md and every docs/**/*.md) is one script: its ```python blocks run in
order in one namespace, in a fresh interpreter, in an empty temporary directory, as a user
would run them one after the other in a notebook. A block that must not run starts with
the line ``# docs: not run (REASON)``. Blocks that import ``ldpfast.spark`` or ``pyspark``
are left out here: tests/test_spark.py runs the pages that have them whole, on one
local Spark session (a session per page would cost a Spark start each), and
tests/test_spark.py runs docs/spark.md.
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ldpfast

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
NOT_RUN = "# docs: not run"
RUN_ELSEWHERE = {DOCS / "spark.md": "tests/test_spark.py runs it on its Spark session"}


def python_blocks(page: Path):
    return re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M)


PAGES = [page for page in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
         if python_blocks(page) and page not in RUN_ELSEWHERE and "_build" not in page.parts]

SPARK_BLOCK = r"^\s*(import|from) (pyspark|ldpfast\.spark)\b"

# Runs in the fresh interpreter (argv: the page).
RUNNER = """
import re, sys
page = sys.argv[1]
text = open(page, encoding="utf-8").read()
namespace = {"__name__": "__main__"}
for index, block in enumerate(re.findall(r"^```python\\n(.*?)^```", text, flags=re.S | re.M)):
    if not block.startswith(%r) and not re.search(%r, block, flags=re.M):
        exec(compile(block, "%%s, block %%d" %% (page, index), "exec"), namespace)
""" % (NOT_RUN, SPARK_BLOCK)


def _env():
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(ldpfast.__file__)))
    paths = [package_root, os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p), MPLBACKEND="Agg")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_runs_as_one_script(page, tmp_path):
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(page)],
                          capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_blocks_not_run_are_few_and_say_why():
    marked = [(page, block.splitlines()[0]) for page in PAGES for block in python_blocks(page)
              if block.startswith(NOT_RUN)]
    assert len(marked) <= 3, marked
    for page, line in marked:
        assert re.fullmatch(re.escape(NOT_RUN) + r" \(.+\)", line), (page, line)


def test_every_protocol_family_has_a_runnable_example():
    guide = {page.stem for page in PAGES if page.parent.name == "guide"}
    assert guide >= {"ocms", "hadamard", "heavy-hitters", "privsketch", "end-to-end"}


def test_formulas_render_without_a_network():
    """The site renders formulas to MathML at build time (docs/_ext/mathml_math.py): no
    MathJax script from a CDN, so the pages work offline."""
    pytest.importorskip("latex2mathml")
    conf = (DOCS / "conf.py").read_text()
    assert "sphinx.ext.mathjax" not in conf and 'html_math_renderer = "mathml"' in conf
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        from mathml_math import to_mathml
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    formulas = [f for page in DOCS.rglob("*.md") for f in re.findall(r"\$\$(.+?)\$\$", page.read_text(), re.S)]
    assert formulas
    for latex in formulas:
        html = to_mathml(latex, "block")
        assert html.startswith("<math") and "\\" not in html, latex    # every command was translated


def test_readme_example_2_is_the_type_checked_copy():
    """tests/typing/readme_example_2.py (checked by mypy --strict in CI) is README.md's
    second Python example, verbatim."""
    example = python_blocks(ROOT / "README.md")[1]
    copy = (ROOT / "tests" / "typing" / "readme_example_2.py").read_text()
    assert copy.split("\n", 2)[2] == example


def _tool(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quoted_numbers_are_those_the_script_wrote():
    """tools/docs_numbers.py regenerates the numbers the pages quote into docs/numbers.json;
    every quoting sentence must show the recorded value."""
    numbers = json.loads((DOCS / "numbers.json").read_text())
    assert _tool("docs_numbers").stale_quotes(numbers) == []


def test_api_pages_are_those_the_script_writes():
    """One API page per module, written by tools/docs_api.py from its MODULES list."""
    assert _tool("docs_api").main(["--check"]) == 0


def test_the_fast_subset_the_readme_gives_names_existing_tests():
    """Every line of tests/smoke.txt (`pytest --smoke`) names a test file or folder that
    exists, so a renamed file cannot drop out of the subset unnoticed."""
    readme = (ROOT / "README.md").read_text()
    assert "python -m pytest -q --smoke tests" in readme
    lines = [line.strip().lstrip("!") for line in (ROOT / "tests" / "smoke.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines
    missing = [line for line in lines if not (ROOT / line.split("::")[0]).exists()]
    assert missing == []
