"""The command line (tiny sizes) and the README's code blocks."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import ldpfast
from ldpfast import cli, experiments
from ldpfast.theory import ocms as theory

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _env():
    """The environment for child interpreters: the ldpfast this test imported comes first."""
    paths = [os.path.dirname(os.path.dirname(os.path.abspath(ldpfast.__file__))), os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))


def test_python_dash_m_help():
    out = subprocess.run([sys.executable, "-m", "ldpfast", "--help"], capture_output=True, text=True, env=_env(),
                         check=True).stdout
    for name in ("demo", "params", "simulate", "reproduce"):
        assert name in out


# -- params ---------------------------------------------------------------------------

def _table(out):
    """``{protocol name: [rank, name, id, m, bits, mse, l2, l1, seconds, state...]}`` of ``ldpfast params``."""
    return {line.split()[1]: line.split() for line in out.splitlines()
            if line.split() and (line.split()[0].isdigit() or line.split()[0] == "-") and len(line.split()) > 8}


def test_params_table(capsys):
    rc, out, _ = run_cli(capsys, "params", "--eps", "2", "--d", "100000", "--n", "10000", "--query", "top-k")
    assert rc == 0
    rows = _table(out)
    assert set(rows) >= {"MSE-OCMS+RR", "l-OCMS+RR", "HE", "CMS+HE", "OLH", "RHR", "HRR", "GRR", "PGR", "SS"}
    assert rows["MSE-OCMS+RR"][2:5] == ["ocms", "4", "130"]       # SPEC 6: m = 4 at eps 2; 128 + 2 bits
    assert rows["l-OCMS+RR"][3] == "8" and rows["CMS+HE"][2] == "cmshe"
    assert float(rows["HE"][5]) == pytest.approx(1.7241e-4, rel=1e-4)  # SPEC 6, HE at n = 10,000
    # SUE (sRP's m -> inf limit, a 100,000-bit report) has the lowest worst-case MSE, CMS+sRP
    # (m = 310, 438 bits) is 1% above it and MSE-OCMS+RR 4.9% (the integer m = 4 costs it
    # more than sRP's 1% from its limit): within 10%, the 130-bit report ranks first.
    assert min(rows.values(), key=lambda r: float(r[5]))[1] == "SUE"
    assert [rows[name][0] for name in ("MSE-OCMS+RR", "CMS+sRP", "SUE")] == ["1", "2", "3"]
    assert "recommended: MSE-OCMS+RR (ocms)" in out and "lowest: SUE" in out


def test_params_constraints_exclude_options(capsys):
    rc, out, _ = run_cli(capsys, "params", "--eps", "2", "--d", "1e5", "--n", "1e6", "--max-report-bits", "64",
                         "--server-budget", "1", "--protocol", "ocms,olh,pgr,cms-he")
    rows = _table(out)
    assert rc == 0 and set(rows) == {"MSE-OCMS+RR", "l-OCMS+RR", "OLH", "PGR", "CMS+HE"}
    assert rows["PGR"][0] == "1" and rows["OLH"][0] == "-"
    assert "OLH: excluded, 131 bits > max_report_bits=64; 100 s of server work > server_budget=1 s" in out


def test_params_json_and_compact_field(capsys):
    rc, out, _ = run_cli(capsys, "params", "--eps", "3", "--d", "100000", "--n", "1", "--mode", "mse",
                         "--field", "compact", "--json")
    assert rc == 0
    data = json.loads(out)
    first = data["protocols"][0]
    assert first["protocol"] == "MSE-OCMS+RR" and first["m"] == 5 and first["bits"] == 37  # SPEC 6
    assert first["mse"] == pytest.approx(theory.ocms_variance(3, 5, 1, 0.0), rel=1e-9)
    assert first["l1"] == pytest.approx(np.sqrt(100000 * first["l2"]))


def test_params_prior_changes_m(capsys):
    _, out, _ = run_cli(capsys, "params", "--eps", "4", "--d", "1000000", "--f-star", "0.01", "--json")
    assert json.loads(out)["protocols"][0]["m"] == 45  # SPEC 6: f* = 0.01 at eps 4


@pytest.mark.parametrize("argv,match", [(("--eps", "-1", "--d", "10"), "epsilon"),
                                        (("--eps", "1", "--d", "1"), "d must"),
                                        (("--eps", "1", "--d", "10", "--f-star", "2"), "f_star")])
def test_params_errors(capsys, argv, match):
    rc, _, err = run_cli(capsys, "params", *argv)
    assert rc == 2 and "ldpfast params: error:" in err and match in err


# -- simulate -------------------------------------------------------------------------

def test_simulate_zipf(capsys, tmp_path):
    path = tmp_path / "res.json"
    rc, out, err = run_cli(capsys, "simulate", "-p", "ocms-mse,he", "--data", "zipf", "--n", "500",
                           "--eps", "1,2", "--runs", "3", "--no-plot", "--json", str(path), "--progress")
    assert rc == 0
    assert "zipf: worst-case MSE (PAN Eq. 19)" in out and "zipf: l2 loss" in out
    assert "MSE-OCMS+RR" in out and "HE" in out and "App. K bound" in out
    assert "12/12" in err  # progress bar: 2 protocols x 2 eps x 3 runs
    saved = json.loads(path.read_text())
    assert saved["n"] == 500 and saved["runs"] == 3 and len(saved["cells"]) == 4
    assert {c["epsilon"] for c in saved["cells"]} == {1.0, 2.0}


def test_simulate_is_seeded(capsys, tmp_path):
    outs = []
    for seed in ("5", "5", "6"):
        rc, out, _ = run_cli(capsys, "simulate", "-p", "ocms-l", "--data", "gaussian", "--candidates", "900:1100",
                             "--eps", "2", "--runs", "2", "--no-plot", "--quiet", "--seed", seed)
        outs.append(out)
    assert outs[0] == outs[1] and outs[0] != outs[2]
    assert "|X|=200" in outs[0]


def test_simulate_file_and_plot(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    data = tmp_path / "values.txt"
    data.write_text("\n".join(str(v) for v in np.random.default_rng(1).integers(0, 30, 400)))
    png = tmp_path / "out.png"
    rc, out, _ = run_cli(capsys, "simulate", "-p", "grr,ocms-mse", "--data", str(data), "--candidates", "10",
                         "--eps", "1", "--runs", "2", "--plot", str(png), "--quiet", "--markdown")
    assert rc == 0 and png.read_bytes()[:4] == b"\x89PNG"
    assert "| algorithm | eps=1 |" in out and f"wrote {png}" in out


def test_simulate_set_file_sampled(capsys):
    rc, out, _ = run_cli(capsys, "simulate", "-p", "he", "--data", "bms-webview-2", "--values", "sample",
                         "--candidates", "5", "--eps", "2", "--runs", "1", "--no-plot", "--quiet")
    assert rc == 0 and "one uniformly sampled item per user" in out and "n=77512" in out


def test_simulate_mini_kosarak_from_a_file(capsys, tmp_path):
    source = tmp_path / "k.dat"
    source.write_text("1 2\n2 3\n2\n" * 50)  # 150 users, 250 clicks
    rc, out, _ = run_cli(capsys, "simulate", "-p", "ocms-mse", "--data", "mini-kosarak", "--kosarak", str(source),
                         "--candidates", "0:6", "--eps", "2", "--runs", "1", "--no-plot", "--quiet")
    # default scale 100 * 150 / 990002 = 0.01515 (the full file's per-user density): counts
    # -2: 150, -1: 250, item 1: 50, item 2: 150, item 3: 50 -> 9900 + 16500 + 3300 + 9900 + 3300
    assert rc == 0 and "from k.dat" in out and "n=42900 users" in out and "|X|=6" in out


def test_simulate_list(capsys):
    rc, out, _ = run_cli(capsys, "simulate", "--list")
    assert rc == 0
    for name in ("ocms-mse", "ocms-l", "grr", "zipf", "gaussian", "mini-kosarak", "kosarak-prefix"):
        assert name in out


@pytest.mark.parametrize("argv,match", [(("-p", "nope"), "protocol must be one of"),
                                        (("--data", "missing.txt"), "data must be one of"),
                                        (("--eps", "a,b"), "--eps must be"),
                                        (("--runs", "0"), "runs must be"),
                                        (("--candidates", "x"), "--candidates must be"),
                                        (("--threads", "-1"), "--threads must be")])
def test_simulate_errors(capsys, argv, match):
    rc, _, err = run_cli(capsys, "simulate", "--no-plot", "--quiet", "--n", "100", "--runs", "1", "--eps", "1",
                         *argv)
    assert rc == 2 and match in err


def test_simulate_without_matplotlib(capsys, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    rc, _, err = run_cli(capsys, "simulate", "-p", "ocms-mse", "--n", "100", "--eps", "1", "--runs", "1")
    assert rc == 2 and "pip install 'ldpfast[plot]'" in err and "--no-plot" in err


# -- reproduce --------------------------------------------------------------------------

def test_reproduce_small(capsys, tmp_path):
    report = tmp_path / "report.md"
    argv = ["reproduce", "--datasets", "zipf", "--runs", "3", "--eps", "1,2", "--report", str(report),
            "--plots", str(tmp_path / "img"), "--quiet", "--json", str(tmp_path / "cells.json")]
    available = [a.name for a in experiments.available_algorithms()]
    if not all(a in available for a in experiments.PAN_ALGORITHMS):
        argv += ["--algorithms", "ocms-mse,ocms-l"]
    if not _has_matplotlib():
        argv.append("--no-plot")
    rc, out, _ = run_cli(capsys, *argv)
    assert rc == 0
    text = report.read_text()
    assert text.startswith("# Reproduction of Pan") and "ldpfast reproduce" in text
    assert "**3. Does every measured worst-case MSE sit between" in text
    assert "| zipf | 1 |" in text  # the band table has one row per eps
    # the report describes the runs it made, not the paper's 100 runs of 10,000 users
    assert "n = 10,000 users" in text and "3 runs per eps" in text and "at t = 3 runs" in text
    assert "100 runs" not in text and "100-run" not in text and "t = 100" not in text
    saved = json.loads((tmp_path / "cells.json").read_text())
    assert saved["command"].startswith("ldpfast reproduce --datasets zipf")
    cells = saved["results"]["zipf"]["cells"]
    assert len(cells) == 2 * (len(argv[argv.index("--algorithms") + 1].split(",")) if "--algorithms" in argv
                              else len(experiments.PAN_ALGORITHMS))
    if "--no-plot" not in argv:
        assert (tmp_path / "img" / "pan_zipf.png").exists() and "](img/pan_zipf.png)" in text
    # Re-rendering from the JSON gives the same tables.
    again = tmp_path / "again.md"
    rc, _, _ = run_cli(capsys, "reproduce", "--from-json", str(tmp_path / "cells.json"), "--report", str(again),
                       "--no-plot")
    assert rc == 0
    rerendered = again.read_text()
    assert rerendered.split("## Checks")[1] == text.split("## Checks")[1]
    assert "re-rendered from" in rerendered and saved["command"] in rerendered


def test_reproduce_rejects_unknown_dataset(capsys):
    rc, _, err = run_cli(capsys, "reproduce", "--datasets", "mnist", "--no-plot")
    assert rc == 2 and "--datasets must name" in err


def _has_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


# -- demo -----------------------------------------------------------------------------

def test_demo_real_data_part(capsys):
    rc, out, _ = run_cli(capsys, "demo", "--n", "2000", "--d", "300", "--runs", "2", "--top", "10",
                         "--real", "bms-webview-1", "--values", "sample", "--seed", "3")
    assert rc == 0
    assert "OCMS+RR demo" in out  # part 1 (synthetic Zipf) is kept
    assert "59,601 reports (one sampled item per user)" in out
    assert "bms-webview-1: worst-case MSE (PAN Eq. 19)" in out and "lowest worst-case MSE:" in out


def test_demo_without_real_data(capsys):
    rc, out, _ = run_cli(capsys, "demo", "--n", "500", "--d", "50", "--runs", "1", "--top", "5",
                         "--real", "none")
    assert rc == 0 and "Real data" not in out


def test_demo_old_flag_names_are_deprecated_aliases(capsys):
    common = ["--runs", "1", "--top", "5", "--real", "none", "--seed", "2"]
    rc, new_out, new_err = run_cli(capsys, "demo", "--n", "400", "--d", "40", "--eps", "1.5", *common)
    assert rc == 0 and "deprecated" not in new_err
    rc, old_out, old_err = run_cli(capsys, "demo", "--users", "400", "--dict-size", "40", "--epsilon", "1.5", *common)
    assert rc == 0
    for old, new in (("--users", "--n"), ("--dict-size", "--d"), ("--epsilon", "--eps")):
        assert f"{old} is deprecated, use {new}" in old_err
    assert old_out.splitlines()[:3] == new_out.splitlines()[:3]
    assert "--users" not in build_help("demo") and "--n" in build_help("demo")


def build_help(command):
    return cli.build_parser()._subparsers._group_actions[0].choices[command].format_help()


# -- the command line as a whole ---------------------------------------------------------

def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"ldpfast {ldpfast.__version__}"


def test_broken_pipe_ends_quietly():
    """`ldpfast params --json | head -1`: the reader is gone before we write. The read end
    is closed before the child starts, so every write fails (deterministic)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "ldpfast", "params", "--eps", "2", "--d", "1000", "--json"],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, env=_env(), timeout=120)
    finally:
        os.close(write_end)
    assert proc.stderr == "" and proc.returncode == cli.EXIT_BROKEN_PIPE


def test_broken_pipe_through_a_shell_pipeline():
    head = subprocess.run(f"{sys.executable} -m ldpfast params --eps 2 --d 1000 --json | head -c 1",
                          shell=True, capture_output=True, text=True, env=_env(), timeout=120)
    assert head.stdout == "{" and "Traceback" not in head.stderr


@pytest.mark.parametrize("text,value", [("100000", 100000), ("100_000", 100000), ("1e5", 100000),
                                        ("1.5e3", 1500), ("1E5", 100000)])
def test_integer_flags_accept_scientific_and_underscores(capsys, text, value):
    rc, out, _ = run_cli(capsys, "params", "--eps", "2", "--d", text, "--n", "1e4", "--json")
    assert rc == 0 and json.loads(out)["d"] == value and json.loads(out)["n"] == 10_000


@pytest.mark.parametrize("text", ["1.5", "1e-3", "1e", "inf", "1__0", "ten"])
def test_integer_flags_reject_non_integers(capsys, text):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["params", "--eps", "2", "--d", text])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "expected an integer" in err and repr(text) in err


def _assert_clean_error(rc, err, *words):
    assert rc == 2, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    for word in words:
        assert word in err, err


def test_bad_data_files_give_one_line_errors(capsys, tmp_path):
    strings = tmp_path / "strings.txt"
    strings.write_text("abc\ndef\n")       # labels: simulated (tests/test_cli_surface.py), not for mini-kosarak
    sets = tmp_path / "sets.txt"
    sets.write_text("1 2\n3 x\n")
    rc, _, err = run_cli(capsys, "simulate", "--data", str(sets), "--no-plot", "--runs", "1", "--eps", "1")
    _assert_clean_error(rc, err, "sets.txt holds several labels on a line")
    binary = tmp_path / "binary.gz"
    binary.write_bytes(b"\x1f\x8b not really gzip")
    rc, _, err = run_cli(capsys, "simulate", "--data", str(binary), "--no-plot", "--runs", "1", "--eps", "1")
    _assert_clean_error(rc, err, "binary.gz")
    rc, _, err = run_cli(capsys, "simulate", "--data", str(tmp_path), "--no-plot", "--runs", "1", "--eps", "1")
    _assert_clean_error(rc, err, "Is a directory")
    rc, _, err = run_cli(capsys, "simulate", "--data", "mini-kosarak", "--kosarak", str(strings), "--no-plot",
                         "--runs", "1", "--eps", "1")
    _assert_clean_error(rc, err, "line 1")


def test_unwritable_outputs_and_bad_json_give_one_line_errors(capsys, tmp_path):
    rc, _, err = run_cli(capsys, "simulate", "--data", "zipf", "--n", "200", "--runs", "1", "--eps", "1",
                         "--no-plot", "--json", str(tmp_path / "missing" / "dir" / "x.json"))
    _assert_clean_error(rc, err, "--json must be a file path in an existing folder")
    rc, _, err = run_cli(capsys, "simulate", "--data", "zipf", "--n", "200", "--runs", "1", "--eps", "1",
                         "--plot", str(tmp_path))
    _assert_clean_error(rc, err, "--plot must be a file path")
    garbage = tmp_path / "garbage.json"
    garbage.write_text("not json")
    rc, _, err = run_cli(capsys, "reproduce", "--from-json", str(garbage), "--no-plot", "--out", str(tmp_path))
    _assert_clean_error(rc, err, "not a file written by")
    rc, _, err = run_cli(capsys, "reproduce", "--from-json", str(tmp_path / "absent.json"), "--no-plot",
                         "--out", str(tmp_path))
    _assert_clean_error(rc, err, "absent.json")


def test_reproduce_writes_to_its_output_folder_and_keeps_existing_reports(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["reproduce", "--datasets", "zipf", "--algorithms", "ocms-mse,he", "--runs", "2", "--eps", "1",
            "--no-plot", "--quiet"]
    rc, _, _ = run_cli(capsys, *argv)
    assert rc == 0
    assert sorted(p.name for p in (tmp_path / "ldpfast-reproduce").iterdir()) == [
        "pan_reproduction.json", "pan_reproduction.md"]
    tracked = tmp_path / "docs" / "pan_reproduction.md"
    tracked.parent.mkdir()
    tracked.write_text("the committed report")
    rc, _, err = run_cli(capsys, *argv, "--report", str(tracked))
    assert rc == 2 and "--force" in err and tracked.read_text() == "the committed report"
    rc, _, _ = run_cli(capsys, *argv, "--report", str(tracked), "--force")
    assert rc == 0 and tracked.read_text().startswith("# Reproduction of Pan")


def test_reproduce_calibrates_and_estimates_the_remaining_time(capsys, tmp_path, monkeypatch):
    from ldpfast.commands import reproduce

    monkeypatch.setattr(reproduce, "CALIBRATE_FROM_RUNS", 2)
    rc, _, err = run_cli(capsys, "reproduce", "--datasets", "zipf", "--algorithms", "ocms-mse", "--runs", "2",
                         "--eps", "1,2", "--no-plot", "--quiet", "--out", str(tmp_path))
    assert rc == 0 and "calibration: one run of each of the 2 cells" in err and "runs should take about" in err
    # Remaining time = calibrated cost left x (elapsed / calibrated cost done).
    bar = reproduce.CalibratedProgress([1.0, 3.0], runs=2, enabled=False)
    bar.advance(2)
    assert bar.remaining(elapsed=4.0) == pytest.approx(6.0 * 2.0)
    bar.advance(1)
    assert bar.remaining(elapsed=5.0) == pytest.approx(3.0 * 1.0)


# -- README ---------------------------------------------------------------------------

def _readme_blocks(lang):
    with open(os.path.join(ROOT, "README.md")) as fh:
        text = fh.read()
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_readme_commands_match_ci():
    bash = "\n".join(_readme_blocks("bash"))
    assert 'pip install ".[test]" && python -m pytest -q tests' in bash
    with open(os.path.join(ROOT, ".ci", "run")) as fh:
        ci = fh.read()
    assert 'python -m pip install ".[test]"' in ci and "python -m pytest -q tests" in ci


# The README's Python blocks run in tests/test_docs.py (with every docs page).


# -- one name per protocol ------------------------------------------------------------

def test_unknown_arguments_show_the_subcommands_usage(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["audit", "hrr", "--d", "1000", "--eps", "1"])    # no abbreviation of --detect either
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.startswith("usage: ldpfast audit") and "ldpfast audit: error: unrecognized arguments: --d 1000" in err


def test_every_command_takes_registry_ids_and_aliases(capsys):
    from ldpfast._registry import aliases, protocols

    names = aliases()
    assert names["cms-he"] == "cmshe" and names["ocms-l"] == "ocms" and names["svim"] == "svim-items"
    assert set(names.values()) <= set(protocols())
    rc, out, _ = run_cli(capsys, "audit", "cms-he", "--eps", "1", "--reports", "2000", "--seed", "1")
    # 2,000 reports: passed or inconclusive (exit 0 or 3), printed under the registry id
    assert rc in (0, 3) and out.splitlines()[1].split()[0] == "cmshe"
    rc, out, _ = run_cli(capsys, "simulate", "-p", "cmshe,ocms", "--n", "300", "--d", "1000", "--eps", "2",
                         "--runs", "1", "--no-plot", "--quiet")
    assert rc == 0 and "CMS+HE" in out and "MSE-OCMS+RR" in out     # the ids run their first entry
    rc, out, _ = run_cli(capsys, "params", "--eps", "2", "--d", "1000", "--protocol", "cms-srp,olh")
    assert rc == 0 and {row[2] for row in _table(out).values()} == {"cms-rappor", "olh"}
    rc, _, err = run_cli(capsys, "simulate", "-p", "svim-lengths", "--no-plot")
    _assert_clean_error(rc, err, "'svim-lengths' has no simulation entry")
