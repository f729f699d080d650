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
