"""The documentation's Python examples run as written (each in a fresh interpreter, as a
user would paste it), so the user guide cannot drift from the API."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ldpfast

DOCS = Path(__file__).resolve().parent.parent / "docs"
GUIDE_BLOCKS = [
    pytest.param(code, id=f"{page.stem}-{i}")
    for page in sorted((DOCS / "guide").glob("*.md"))
    for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S))
]


def _env():
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(ldpfast.__file__)))
    paths = [package_root, os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))


def test_every_protocol_family_has_a_runnable_example():
    assert {p.id.split("-")[0] for p in GUIDE_BLOCKS} >= {
        "ocms", "hadamard", "heavy", "privsketch"}


@pytest.mark.parametrize("code", GUIDE_BLOCKS)
def test_guide_examples_run(code):
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr


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
    readme = (DOCS.parent / "README.md").read_text()
    example = re.findall(r"```python\n(.*?)```", readme, flags=re.S)[1]
    copy = (DOCS.parent / "tests" / "typing" / "readme_example_2.py").read_text()
    assert copy.split("\n", 2)[2] == example
