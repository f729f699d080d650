"""``ldpfast simulate`` for set-valued protocols and heavy hitters, and ``reproduce --quick``."""

import json
import math
import os

import numpy as np
import pytest
from ldpfast import cli, experiments
from ldpfast.datasets import SetData, ValueData
from ldpfast.errors import ParameterError
from ldpfast.theory import privsketch as theory_ps


def run_cli(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def pair_sets(n=20_000, d=200, seed=5) -> SetData:
    """Every user holds exactly 2 distinct items (Zipf(1) weights): PS-OLH's padding (the P90
    of the set sizes) is then 2 = every set's size, so its estimate is unbiased and its
    whole-domain MSE equals the mean of its closed-form variance."""
    gen = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, d + 1)
    weights /= weights.sum()
    return SetData.from_lists([gen.choice(d, size=2, replace=False, p=weights) for _ in range(n)], d=d,
                              name="pairs")


def test_ps_olh_mse_matches_closed_form():
    sets = pair_sets()
    runs = 20
    result = experiments.simulate_sets(["ps-olh"], sets, [1.0, 3.0], runs, k=10, seed=1)
    f = sets.frequencies()
    for cell in result.cells:
        var = theory_ps.ps_olh_variance(cell.epsilon, sets.n, f, pad_len=2)
        assert cell.theory_mse == pytest.approx(float(np.mean(var)), rel=1e-12)
        # Each run's MSE is a mean of d squared errors; with near-Gaussian errors its variance is
        # (2/d^2) sum_x Var(x)^2, so the mean of `runs` runs has the standard error below. The
        # measured SE also covers correlations between items (hash collisions); 5 of the larger
        # one bounds a false failure by ~6e-7 under normality.
        se = max(cell.mse_se, math.sqrt(2 * np.sum(var ** 2) / (sets.d ** 2 * runs)))
        assert abs(cell.mse - cell.theory_mse) <= 5 * se, (cell.epsilon, cell.mse, cell.theory_mse, se)
        assert 0 < cell.ncr <= 1 and cell.var > 0
    low, high = result.cell("ps-olh", 1.0), result.cell("ps-olh", 3.0)
    assert high.theory_mse < low.theory_mse / 10  # the closed forms differ 16x: the check above orders them


def test_privsketch_mse_at_least_its_variance():
    """PrivSketch estimates the count-min frequency ftilde >= f with variance
    [KM e^eps/(e^eps-1)^2 + (KM-1) ftilde]/n ([PS] Thm 3.1 with R2's estimator), so its MSE
    (variance + bias^2) is at least the mean of that variance at ftilde = f."""
    sets = pair_sets(n=10_000)
    runs = 5
    result = experiments.simulate_sets(["privsketch", "svim"], sets, [2.0], runs, k=10, seed=2)
    cell = result.cell("privsketch", 2.0)
    floor = float(np.mean(theory_ps.privsketch_variance(2.0, sets.n, sets.frequencies())))
    assert cell.mse >= floor - 5 * cell.mse_se
    svim = result.cell("svim", 2.0)
    assert svim.mse is None and 0 < svim.ncr <= 1  # SVIM reports only its top-k: no whole-domain MSE
    text = result.table("all")
    assert "PrivSketch" in text and "NCR" in text and "SVIM" in text


def planted_values(n=200_000, d=2**20, share=0.8, seed=3) -> ValueData:
    """``share`` of the users hold the value 12345; the others a uniform value of [0, d)."""
    gen = np.random.default_rng(seed)
    values = gen.integers(0, d, size=n)
    values[: int(share * n)] = 12345
    return ValueData(values, d, np.array([12345]), float(share), "planted", "one planted heavy value")


def test_heavy_hitters_find_a_planted_value():
    data = planted_values()
    result = experiments.simulate_heavy(list(experiments.HEAVY_ALGORITHMS), data, [2.0], runs=2, seed=4)
    count = int(0.8 * data.n)
    for cell in result.cells:
        # The search keeps a prefix whose estimate is >= tau - Delta, so missing the planted value
        # needs some level's estimate of a prefix of count >= c to be off by c - tau + Delta. Delta
        # bounds the (sub-Gaussian) error with probability 1 - beta per query, so an error of
        # r Delta has probability <= beta^(r^2); here r >= 3 (checked): <= 0.05^9 ~ 2e-12 per level.
        assert count - cell.tau + cell.delta >= 3 * cell.delta, cell
        assert cell.heavy == 1 and cell.recall == 1.0, cell
        assert cell.precision == 1.0 and cell.outputs >= 1
        assert cell.max_error is not None and cell.max_error <= cell.delta
    assert "recall" in result.table("all") and "Delta" in result.table("all")


def test_result_json_round_trip():
    result = experiments.simulate_sets(["ps-olh"], pair_sets(n=2000, d=50), [1.0], 2, k=5)
    again = experiments.SetSimulationResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again.cells == result.cells and again.kind == "sets"


def test_cli_sets_and_heavy(capsys, tmp_path):
    out_json = tmp_path / "sets.json"
    rc, out, _ = run_cli(capsys, "simulate", "-p", "privsketch-ldp,multi-pcms-mean,svim", "--data", "retail",
                         "--n", "3000", "--eps", "1,4", "--runs", "2", "--top-k", "10", "--no-plot", "--quiet",
                         "--json", str(out_json))
    assert rc == 0 and "PrivSketch-LDP" in out and "NCR" in out
    saved = json.loads(out_json.read_text())
    assert saved["kind"] == "sets" and saved["n"] == 3000 and len(saved["cells"]) == 6
    rc, out, _ = run_cli(capsys, "simulate", "-p", "hadaheavy", "--data", "zipf", "--n", "20000",
                         "--eps", "2", "--runs", "1", "--no-plot", "--quiet", "--markdown")
    assert rc == 0 and "| HadaHeavy |" in out


def test_cli_list_groups_kinds(capsys):
    rc, out, _ = run_cli(capsys, "simulate", "--list")
    assert rc == 0
    sets_at, heavy_at = out.index("set-valued protocols"), out.index("heavy hitters")
    assert sets_at < out.index("privsketch-nosmp") < heavy_at < out.index("treehist-cs")


@pytest.mark.parametrize("argv,match", [
    (("-p", "privsketch,ocms-mse"), "protocols of one kind"),
    (("-p", "hadaheavy,ps-olh"), "protocols of one kind"),
    (("-p", "ps-olh", "--data", "zipf"), "holds one value per user"),
    (("-p", "ocms-mse", "--data", "zipf-sets"), "is set-valued"),
    (("-p", "hadaheavy", "--beta", "1.5"), "--beta must be"),
])
def test_cli_kind_errors(capsys, argv, match):
    rc, _, err = run_cli(capsys, "simulate", "--no-plot", "--quiet", "--runs", "1", "--eps", "1", *argv)
    assert rc == 2 and match in err


def test_wrong_table_is_refused():
    with pytest.raises(ParameterError, match="is a values protocol"):
        experiments.simulate_sets(["ocms-mse"], pair_sets(n=100, d=20), [1.0], 1)


def test_reproduce_quick_writes_its_files(capsys, tmp_path):
    out = tmp_path / "quick"
    plots = experiments_has_matplotlib()
    rc, _, _ = run_cli(capsys, "reproduce", "--quick", "--out", str(out), "--quiet",
                          *([] if plots else ["--no-plot"]))
    assert rc == 0
    names = set(os.listdir(out))
    assert {"pan_reproduction.md", "pan_reproduction.json"} <= names
    if plots:
        assert {"pan_zipf.png", "pan_gaussian.png", "pan_kosarak.png"} <= names
    saved = json.loads((out / "pan_reproduction.json").read_text())
    assert "--quick" in saved["command"]
    zipf = saved["results"]["zipf"]
    assert zipf["runs"] == 2 and zipf["n"] == 2000
    assert sorted({c["epsilon"] for c in zipf["cells"]}) == [1.0, 3.0]


def experiments_has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True
