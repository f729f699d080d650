"""The command line's surface: help text without markup, Ctrl-C, ``audit --eps``, the
shuffle guide's command, and ``aggregate`` naming the parameters a file differs in. Every
command runs in this process, at tiny sizes."""

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from ldpfast import cli, experiments
from ldpfast._registry import protocol

ROOT = Path(__file__).resolve().parents[1]


def run_cli(capsys, *argv):
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_help_has_no_restructuredtext_markup(capsys):
    texts = []
    for argv in [[]] + [[name] for name in cli.COMMANDS]:
        with pytest.raises(SystemExit):
            cli.main(argv + ["--help"])
        texts.append(capsys.readouterr().out)
    assert "``ldpfast``" in cli.__doc__           # the markup is there to be removed
    for text in texts:
        assert "``" not in text and not re.search(r":[a-z]+:`", text), text
    assert "The ldpfast command line (also python -m ldpfast)." in texts[0]


def test_ctrl_c_prints_one_line_and_exits_130(capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(experiments, "simulate", interrupted)
    rc, out, err = run_cli(capsys, "simulate", "--runs", "1", "--no-plot", "--quiet")
    assert rc == cli.EXIT_INTERRUPTED == 130
    assert err == "ldpfast simulate: interrupted\n" and out == ""


def test_audit_takes_eps_as_a_list_like_every_command(capsys):
    audited = []
    for eps in (["0.5,1"], ["0.5", "1"]):
        rc, out, _ = run_cli(capsys, "audit", "grr", "--eps", *eps, "--reports", "500", "--seed", "3", "--json")
        assert rc in (0, 3)      # 500 reports: passed or inconclusive
        audited.append(json.loads(out)["results"])
    assert [r["epsilon"] for r in audited[0]] == [0.5, 1.0]
    assert audited[0] == audited[1]   # same seed, same epsilons: the same audit
    rc, _, err = run_cli(capsys, "audit", "grr", "--eps", "1,x")
    assert rc == 2 and err.startswith("ldpfast audit: error: --eps must be") and err.count("\n") == 1


def test_the_shuffle_guides_simulate_command_runs(capsys, tmp_path, monkeypatch):
    guide = (ROOT / "docs" / "guide" / "shuffle.md").read_text()
    command = next(line for line in guide.splitlines() if line.startswith("ldpfast simulate"))
    monkeypatch.chdir(tmp_path)
    # as printed, with fewer runs and no plot (the command is checked, not the simulation)
    rc, out, err = run_cli(capsys, *shlex.split(command)[1:], "--runs", "1", "--no-plot", "--quiet")
    assert rc == 0, err
    assert "central epsilon of 10,000 shuffled reports at delta = 1e-06 over 10 rounds:" in out
    rc, _, err = run_cli(capsys, "simulate", "-p", "l-grr", "--eps", "1", "--rounds", "3", "--shuffle-delta", "1e-6")
    assert rc == 2 and "use --shuffle-rounds T" in err and err.count("\n") == 1


def test_aggregate_names_the_file_and_the_parameter_it_differs_in(capsys, tmp_path):
    grr = protocol("grr")
    folder = tmp_path / "reports"
    folder.mkdir()
    from ldpfast import arrow

    for i, eps in enumerate((1.0, 2.0)):
        params = grr.params(epsilon=eps, d=8)
        arrow.write_parquet(grr.client(params, rng=i).perturb(np.arange(40) % 8), folder / f"part-{i}.parquet",
                            params)
    state = tmp_path / "state"
    rc, _, err = run_cli(capsys, "aggregate", "--reports", folder, "--state", state)
    assert rc == 2
    # the differing parameter, then the reader's refusal in parentheses (the file and both fingerprints)
    assert err.startswith(f"ldpfast aggregate: error: {folder / 'part-1.parquet'} was made with other parameters: "
                          "epsilon 2.0 (expected 1.0) (")
    assert err.count(str(folder / "part-1.parquet")) == 2 and "Traceback" not in err
    (tmp_path / "other.json").write_text(grr.params(epsilon=1.0, d=9).to_json())
    rc, _, err = run_cli(capsys, "aggregate", "--reports", folder, "--state", state, "--params",
                         tmp_path / "other.json")
    assert rc == 2 and err.endswith(f"--state {state} holds an aggregator with other parameters: d 8 (expected 9)\n")


@pytest.mark.parametrize("protocols, lines", [
    ("grr,olh", [[f"w{i % 7}" if i % 3 else "naïve café"] for i in range(2000)]),
    ("ps-olh", [[f"w{(i * j) % 11}" for j in range(1, 1 + i % 4)] for i in range(2000)]),
])
def test_simulate_takes_label_files_as_their_first_appearance_ids(capsys, tmp_path, protocols, lines):
    if protocols == "grr,olh":
        lines = [[label.replace(" ", "_") for label in line] for line in lines]   # one label per line
    ids = {}
    for line in lines:
        for label in line:
            ids.setdefault(label, len(ids))
    # the same file name: the runs' seeds derive from it
    for folder, text in (("labels", "\n".join(" ".join(line) for line in lines)),
                         ("ids", "\n".join(" ".join(str(ids[x]) for x in line) for line in lines))):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "data.txt").write_text(text + "\n", encoding="utf-8")
    results = []
    for folder in ("labels", "ids"):
        rc, _, err = run_cli(capsys, "simulate", "-p", protocols, "--data", tmp_path / folder / "data.txt",
                             "--d", len(ids), "--eps", "2", "--runs", "1", "--no-plot", "--quiet",
                             "--json", tmp_path / "out.json")
        assert rc == 0, err
        result = json.loads((tmp_path / "out.json").read_text())
        result.pop("note", None)
        for cell in result["cells"]:
            cell.pop("seconds")
        results.append(json.dumps(result, sort_keys=True))
    assert results[0] == results[1]      # seeded: the same simulation
