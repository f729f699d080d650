"""Smoke test of bench/ww_reproduce.py --quick (the [WW] reproduction report): the files
exist and parse, every number is finite and consistent with the definitions, and the
error's growth with n has the theory's exponent 1/2."""

import importlib.util
import json
import math
import os

import pytest

pytest.importorskip("matplotlib")

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "bench", "ww_reproduce.py")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("ww_reproduce", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path_factory.mktemp("ww")
    assert module.main(["--quick", "--out", str(out)]) == 0
    with open(out / "ww_reproduction.json") as fh:
        return module, out, json.load(fh)


def test_files_exist_and_report_lists_every_cell(quick_run):
    module, out, result = quick_run
    for name in ("ww_reproduction.md", "ww_oracle.png", "ww_heavy.png"):
        assert (out / name).stat().st_size > 0
    with open(out / "ww_reproduction.md") as fh:
        text = fh.read()
    assert "### log-log slope fits" in text and "## What holds and what does not" in text
    cfg = result["config"]
    n_oracles = len(module.ORACLES)
    assert len(result["oracle"]["n"]) == n_oracles * len(cfg["n_grid"])
    assert len(result["oracle"]["eps"]) == n_oracles * len(cfg["eps_grid"])
    assert len(result["oracle"]["beta"]) == n_oracles * len(cfg["beta_grid"])
    names = {c["algorithm"] for c in result["heavy"]}
    assert names == {"HadaHeavy", "TreeHist", "TreeHist-CS", "PEM", "Hashtogram+dictionary"}
    assert len(result["heavy"]) == len(names) * len(cfg["hh_n"])


def test_oracle_cells_are_consistent(quick_run):
    _, _, result = quick_run
    from ldpfast.theory.hadamard import c_eps
    for cell in (c for cells in result["oracle"].values() for c in cells):
        theory = c_eps(cell["eps"]) * math.sqrt(cell["n"] * math.log(1 / cell["beta"]))
        assert cell["theory_shape"] == pytest.approx(theory, rel=1e-12)
        assert cell["ratio"] == pytest.approx(cell["quantile_error"] / theory, rel=1e-12)
        assert 0 < cell["quantile_error"] <= cell["max_error"]
        assert math.isfinite(cell["server_seconds"]) and cell["server_seconds"] >= 0


def test_error_grows_like_sqrt_n(quick_run):
    # Over n = 1e3..1e5 the HRR term is c_eps sqrt(nk) exactly and the collision term n/m with
    # m = 2^ceil(log2(sqrt(n/k)/c_eps)) is sqrt(n) up to a factor in [1, 2) from the rounding:
    # that moves the fitted exponent by at most ln 2 / ln 100 = 0.15. The quantile from 4,000
    # queries at beta = 0.05 (200 in the tail) has a relative error of a few percent, i.e.
    # +-0.02 on the exponent. So the exponent must lie in 0.5 +- 0.2.
    _, _, result = quick_run
    for name, fit in result["fits"].items():
        assert abs(fit["n"]["slope"] - 0.5) < 0.2, (name, fit["n"]["slope"])
        # error ~ c_eps over eps in {0.5, 1, 2}: c_eps spans a factor e^1.14 and the rounding of
        # m ~ 1/c_eps a factor below 2, so the exponent lies in 1 +- (ln 2 / 1.14 = 0.61)
        assert abs(fit["eps"]["slope"] - 1.0) < 0.61, (name, fit["eps"]["slope"])


def test_heavy_hitter_cells_are_consistent(quick_run):
    _, _, result = quick_run
    for cell in result["heavy"]:
        for key in ("recall", "precision"):
            assert math.isnan(cell[key]) or 0.0 <= cell[key] <= 1.0
        assert cell["max_error_planted"] <= cell["max_error_planted_worst"] + 1e-9
        assert math.isfinite(cell["server_seconds"]) and cell["server_seconds"] >= 0
        if cell["heavy"] == 0:
            assert math.isnan(cell["recall"])
