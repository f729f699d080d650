"""Smoke test of bench/limits.py (every server's throughput against the machine's limits): a
tiny run must list every registered protocol, each with a row of positive, consistent
numbers or the reason it was not run, grouped by family."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

import ldpfast
from ldpfast._registry import protocols

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "bench" / "limits.py"
_ENV = {**os.environ, "PYTHONPATH": str(pathlib.Path(ldpfast.__file__).resolve().parents[1])}
_ROW = re.compile(r"^\s*(\S+)(?: \S+)?\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$")


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          env=_ENV)


@pytest.fixture(scope="module")
def tiny_run():
    done = _run("--n", "2000", "--budget", "0.01")
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_every_protocol_has_a_row_or_a_reason(tiny_run):
    rows = {}
    for line in tiny_run:
        match = _ROW.match(line)
        if match:
            rows.setdefault(match.group(1), []).append(match.groups()[1:])
    not_run = {line.split()[0] for line in tiny_run if " not run: " in line}
    # the script's own process registers the built-in protocols (the suite's in-process test
    # doubles, e.g. toy-count, are not there)
    assert set(rows) | not_run >= {pid for pid, p in protocols().items() if p.builtin}
    assert len(rows["grr"]) == len(rows["oue"]) == len(rows["hrr"]) == 2   # the special rows
    read = float(re.search(r"read bandwidth: (\S+) GB/s", "\n".join(tiny_run)).group(1))
    for pid, measured in rows.items():
        for batch, per_report, rate, gbs, of_read, scatter, of_scatter, of_kernel in measured:
            assert int(batch) >= 1 and float(per_report) > 0 and float(rate) > 0, pid
            # columns printed to 2 decimals (GB/s) and 3 significant digits: 1 % and 0.01 apart
            assert float(gbs) == pytest.approx(float(rate) * float(per_report) / 1e9, rel=0.01, abs=0.01), pid
            assert float(of_read) == pytest.approx(float(gbs) / read, rel=0.01, abs=0.01), pid
            assert (scatter == "-") == (of_scatter == "-"), pid
            assert of_kernel == "-" or float(of_kernel) > 0, pid
    assert rows["grr"][0][5] != "-" and rows["sue"][0][5] == "-"     # one increment per report, or not
    assert rows["oue"][0][7] != "-" and rows["grr"][0][7] == "-"     # the bare kernel: OUE only


def test_rows_are_grouped_by_family(tiny_run):
    headings = [line[3:] for line in tiny_run if line.startswith("-- ")]
    families = {p.module.split(".")[2] for p in protocols().values() if p.builtin}
    assert len(headings) == len(set(headings)) and set(headings) - {"plug-in"} == families


def test_an_unknown_only_id_is_refused_by_name():
    done = _run("--only", "olh,no-such-protocol")
    assert done.returncode == 2 and "no-such-protocol" in done.stderr and "Traceback" not in done.stderr
