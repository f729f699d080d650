"""Every command-line excerpt in README.md and docs/ is regenerated and compared with the
text shown, so the documentation cannot drift from the output.

An excerpt is a fenced block whose opening fence follows the line ``<!-- cli-excerpt -->``
(an HTML comment: invisible on GitHub and in the Sphinx site). Its first line is
``$ ldpfast ARGS``; the others are the command's standard output exactly, where a line
``...`` stands for any number of lines (notes too long to show). The commands run in this
process, so keep excerpts to small, fast ones. A fenced block that shows ``$ ldpfast``
with output lines but no marker fails the last test: mark it, or show the command alone.
"""

import contextlib
import io
import re
import shlex
from pathlib import Path
from typing import List, Tuple

import pytest

from ldpfast import cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARKER = "<!-- cli-excerpt -->"


def _blocks(page: Path) -> List[Tuple[int, bool, List[str]]]:
    """``(line, marked, lines)`` of every fenced block of ``page``."""
    text = page.read_text(encoding="utf-8")
    out = []
    for match in re.finditer(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S):
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        out.append((text[:match.start()].count("\n") + 1, before.strip() == MARKER, match.group(1).splitlines()))
    return out


EXCERPTS = [pytest.param(lines, id=f"{page.relative_to(ROOT)}:{line}")
            for page in PAGES for line, marked, lines in _blocks(page) if marked]


def matches(expected: List[str], actual: List[str]) -> bool:
    """True when ``actual`` is ``expected`` with each ``...`` line standing for any lines."""
    parts: List[List[str]] = [[]]
    for line in expected:
        if line.strip() == "...":
            parts.append([])
        else:
            parts[-1].append(line)
    if len(parts) == 1:
        return actual == parts[0]
    first, *middle, last = parts
    if actual[:len(first)] != first or (last and actual[len(actual) - len(last):] != last):
        return False
    pos, end = len(first), len(actual) - len(last)
    for part in middle:
        while pos + len(part) <= end and actual[pos:pos + len(part)] != part:
            pos += 1
        if pos + len(part) > end:
            return False
        pos += len(part)
    return pos <= end


def test_the_docs_have_excerpts():
    assert EXCERPTS, "README.md shows `ldpfast params` as a marked excerpt"


@pytest.mark.parametrize("lines", EXCERPTS)
def test_excerpt_is_the_commands_output(lines):
    command = lines[0]
    assert command.startswith("$ ldpfast "), f"an excerpt starts with '$ ldpfast ...', got {command!r}"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        rc = cli.main(shlex.split(command)[2:])
    actual = stdout.getvalue().rstrip("\n").splitlines()
    assert rc == 0
    assert matches(lines[1:], actual), ("the excerpt differs from the output; the output now is:\n"
                                        + "\n".join([command, *actual]))


def test_matching_with_elisions():
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"]) and matches(["a", "..."], ["a", "b"])
    assert matches(["...", "c", "..."], ["a", "c", "d"]) and not matches(["a", "...", "a"], ["a"])
    assert not matches(["a", "b"], ["a", "b", "c"]) and not matches(["...", "x", "..."], ["a"])


def test_every_shown_cli_output_is_marked():
    unmarked = [f"{page.relative_to(ROOT)}:{line}" for page in PAGES for line, marked, lines in _blocks(page)
                if not marked and lines and lines[0].startswith("$ ldpfast") and len(lines) > 1]
    assert not unmarked, f"blocks showing ldpfast output without {MARKER}: {unmarked}"
