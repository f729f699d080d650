"""``ldpfast estimate``: each format reads back to the Python API's estimates, labels and
intervals (in process, tiny sizes)."""

import csv
import json

import pytest

from ldpfast import Domain, HashedDomain, arrow, cli
from ldpfast._aggregator import load_aggregator
from ldpfast._registry import protocol

pytest.importorskip("pyarrow")

LABELS = ["apple", "banana", "cherry", "dur ian", "élan"]


def run_cli(capsys, *argv):
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def aggregated(tmp_path_factory):
    """A GRR run over a vocabulary, aggregated by ``ldpfast aggregate``: the folder, the
    state and aggregator files, and the Python API's estimate of the same state."""
    folder = tmp_path_factory.mktemp("estimate")
    (folder / "reports").mkdir()
    grr = protocol("grr")
    domain = Domain(LABELS)
    params = grr.params(epsilon=2.0, d=5).with_domain(domain)
    for i in range(2):
        users = ["apple"] * 300 + ["banana"] * 150 + ["élan"] * 50
        arrow.write_parquet(grr.client(params, rng=i).perturb(users), folder / "reports" / f"{i}.parquet", params)
    (folder / "labels.txt").write_text("\n".join(LABELS) + "\n", encoding="utf-8")
    assert cli.main(["aggregate", "--reports", str(folder / "reports"), "--state", str(folder / "state"),
                     "--output", str(folder / "agg.bin")]) == 0
    expected = load_aggregator((folder / "agg.bin").read_bytes(), domain=domain).frequencies()
    return folder, expected


def _check(rows, expected, confidence=0.95):
    low, high = expected.confidence_interval(confidence=confidence)
    assert [r["label"] for r in rows] == LABELS
    assert [int(r["candidate"]) for r in rows] == list(range(5))
    for name, values in (("estimate", expected.values), ("std", expected.std), ("count", expected.counts),
                         ("ci_low", low), ("ci_high", high)):
        assert [float(r[name]) for r in rows] == values.tolist(), name    # full precision: exact


def test_csv_json_and_parquet_read_back_to_the_python_api(capsys, aggregated):
    folder, expected = aggregated
    base = ["estimate", folder / "state", "--labels", folder / "labels.txt"]
    rc, out, err = run_cli(capsys, *base, "--format", "csv")
    assert rc == 0, err
    _check(list(csv.DictReader(out.splitlines())), expected)
    rc, out, _ = run_cli(capsys, *base, "--format", "json", "--confidence", "0.9")
    document = json.loads(out)
    assert rc == 0 and document["n"] == 1000 and document["protocol"] == "grr" and document["confidence"] == 0.9
    _check(document["rows"], expected, confidence=0.9)
    rc, _, _ = run_cli(capsys, *base, "--format", "parquet", "--output", folder / "est.parquet")
    import pyarrow.parquet as pq

    assert rc == 0
    _check(pq.read_table(folder / "est.parquet").to_pylist(), expected)


def test_table_of_aggregator_bytes_and_candidates(capsys, aggregated):
    folder, expected = aggregated
    (folder / "candidates.txt").write_text("élan\napple\n", encoding="utf-8")
    rc, out, _ = run_cli(capsys, "estimate", folder / "agg.bin", "--labels", folder / "labels.txt",
                         "--candidates", folder / "candidates.txt")
    lines = out.splitlines()
    assert rc == 0 and lines[0].startswith("grr: n=1,000 reports, debiased estimates") and len(lines) == 4
    assert lines[1].split() == ["candidate", "label", "estimate", "std", "count", "ci_low", "ci_high"]
    assert lines[2].split()[:3] == ["4", "élan", f"{expected.values[4]:.6g}"]
    assert lines[3].split()[:2] == ["0", "apple"]
    rc, out, _ = run_cli(capsys, "estimate", folder / "state", "--format", "json")   # no labels: ids only
    assert rc == 0 and "label" not in json.loads(out)["rows"][0]


def test_an_open_dictionary_takes_label_candidates(capsys, tmp_path):
    olh = protocol("olh")
    params = olh.params(epsilon=3.0, d=2**48, g=20).with_domain(HashedDomain())
    server = olh.aggregator(params)
    server.update(olh.client(params, rng=5).perturb(["x"] * 200 + ["y"] * 100))
    (tmp_path / "agg.bin").write_bytes(server.to_bytes())
    (tmp_path / "candidates.txt").write_text("y\nnever\n")
    rc, out, _ = run_cli(capsys, "estimate", tmp_path / "agg.bin", "--candidates", tmp_path / "candidates.txt",
                         "--format", "json")
    rows = json.loads(out)["rows"]
    assert rc == 0 and [r["label"] for r in rows] == ["y", "never"]
    assert [r["estimate"] for r in rows] == server.frequencies(["y", "never"]).values.tolist()


def test_bad_inputs_give_one_line_errors(capsys, aggregated, tmp_path):
    folder, _ = aggregated
    (tmp_path / "wrong.txt").write_text("apple\nbanana\n")
    (tmp_path / "junk").write_bytes(b"not a state")
    for argv, message in (
            ([folder / "state", "--labels", tmp_path / "wrong.txt"], "--labels"),
            ([tmp_path / "junk"], "junk"),
            ([tmp_path / "missing"], "cannot read"),
            ([folder / "state", "--format", "parquet"], "--format parquet needs --output"),
            ([folder / "state", "--confidence", "95"], "--confidence must be in [0.5, 1), got 95.0"),
            ([folder / "state", "--candidates", tmp_path / "wrong.txt"], "give its labels with --labels FILE")):
        rc, _, err = run_cli(capsys, "estimate", *argv)
        assert rc == 2 and err.startswith("ldpfast estimate: error: ") and message in err and err.count("\n") == 1
