"""The ``ldpfast demo`` command, at small sizes."""

import numpy as np
import pytest

from ldpfast import cli, theory
from ldpfast.commands import demo


def test_demo_runs_through_the_cli(capsys):
    assert cli.main(["demo", "--users", "3000", "--dict-size", "500", "--runs", "3", "--top", "20",
                     "--seed", "4", "--epsilon", "1.5", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    for name in ("MSE-OCMS+RR (f*=1)", "l-OCMS+RR", "CMS+RR m=2 (HE)", "GRR (k-ary RR)", "MSEmax"):
        assert name in out


def test_demo_rejects_bad_options(capsys):
    assert cli.main(["demo", "--runs", "0"]) == 2
    assert "--runs must be >= 1, got 0" in capsys.readouterr().err


def test_simulate_rows_are_consistent():
    values = demo.zipf_values(4000, 300, seed=2)
    assert values.min() >= 0 and values.max() < 300
    np.testing.assert_array_equal(values, demo.zipf_values(4000, 300, seed=2))
    candidates, freqs = demo.top_values(values, 300, 10)
    assert freqs[0] == np.bincount(values).max() / 4000 and np.all(np.diff(freqs) <= 0)
    rows = demo.simulate(values, 300, 2.0, runs=4, top=10, seed=2)
    first, second = rows, demo.simulate(values, 300, 2.0, runs=4, top=10, seed=2)
    assert [r["l2"] for r in first] == [r["l2"] for r in second]  # seeded end to end
    mse_row = rows[0]
    assert mse_row["m"] == 4 and mse_row["bits"] == 130
    var = theory.ocms_variance(2.0, 4, 4000, freqs)
    assert mse_row["mse_max_theory"] == pytest.approx(var.max(), rel=1e-12)
    assert mse_row["l2_theory"] == pytest.approx(var.sum(), rel=1e-12)
    assert mse_row["l1_bound"] == pytest.approx(np.sqrt(10 * var.sum()), rel=1e-12)
    assert all(np.isfinite(r[k]) for r in rows for k in ("mse_max", "l1", "l2"))
    assert "GRR" in demo.format_table(rows)


def test_real_part_states_what_it_spends_per_user(capsys):
    # Users with 1, 3, 0 and 7 items: two of four send more than one report (50.0%), the
    # largest sends 7 reports (7 x eps); sampling spends eps per user.
    sizes = np.array([1, 3, 0, 7])
    line = demo.privacy_spending(sizes, "entries", 2.0)
    assert "NOT eps-LDP per user" in line and "50.0% of the 4 users spend more than eps = 2" in line
    assert "7 x eps = 14" in line
    sample = demo.privacy_spending(sizes, "sample", 2.0)
    assert "eps = 2 per user" in sample and "1 users with empty sets send nothing" in sample
    assert cli.main(["demo", "--n", "2000", "--d", "200", "--runs", "1", "--top", "10",
                     "--seed", "1", "--real", "kosarak-prefix"]) == 0
    out = capsys.readouterr().out
    assert "% of the 36,681 users spend more than eps = 2, the most active one" in out
