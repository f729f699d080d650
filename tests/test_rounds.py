"""Repeated collection (ldpfast.experiments.rounds, ``ldpfast simulate --rounds``): the churn
model and the click-stream split by time, and each user's cumulative privacy loss, which
grows with the distinct values it reports, not with the rounds."""

import gzip
import json

import numpy as np
import pytest

from ldpfast import experiments
from ldpfast.cli import main
from ldpfast.datasets import bundled_path
from ldpfast.errors import ParameterError


def test_churn_model():
    constant = experiments.churn_rounds(500, 20, 6, 0.0, rng=1)
    assert (constant.values == constant.values[0]).all() and (constant.distinct_counts() == 1).all()
    moving = experiments.churn_rounds(20_000, 20, 3, 0.5, rng=1)
    changed = np.mean(moving.values[1] != moving.values[0])
    # a redraw lands on the old value with probability sum_v w_v^2 (Zipf weights); the share
    # of changes is a mean of 20,000 Bernoullis: within 5 sd of 0.5 (1 - sum w^2)
    w = 1.0 / np.arange(1, 21) ** 1.1
    w /= w.sum()
    expected = 0.5 * (1 - np.sum(w**2))
    assert abs(changed - expected) < 5 * np.sqrt(expected * (1 - expected) / 20_000)
    with pytest.raises(ParameterError, match="churn must be a probability"):
        experiments.churn_rounds(10, 5, 2, 1.5)


def test_distinct_counts():
    data = experiments.RoundsData(np.array([[0, 1], [0, 2], [3, 1], [0, 1]]), 4, "hand")
    assert data.distinct_counts().tolist() == [[1, 1], [1, 2], [2, 2], [2, 2]]


def test_click_streams_split_by_time():
    data = experiments.click_rounds(5, d=8, n=300)
    assert data.values.shape == (5, 300) and data.values.max() < 8
    with gzip.open(bundled_path("kosarak-prefix"), "rt") as fh:
        streams = [[int(v) for v in line.split()] for _, line in zip(range(300), fh)]
    items, counts = np.unique(np.concatenate(streams), return_counts=True)
    top = list(items[np.argsort(-counts, kind="stable")[:7]])
    for i in (0, 3, 17):
        for t in range(5):
            item = streams[i][min(t, len(streams[i]) - 1)]
            assert data.values[t, i] == (top.index(item) if item in top else 7)


def test_loss_grows_with_distinct_values_not_rounds():
    data = experiments.churn_rounds(2000, 16, 10, 0.0, rng=2)    # constant values
    result = experiments.simulate_rounds(["l-grr", "l-osue"], data, eps_1=0.5, eps_inf=1.5, seed=3)
    for pid in ("l-grr", "l-osue"):
        eps_1, eps_inf = result.budgets[pid]
        # constant values: min(t eps_1, eps_inf), the same for every user
        expected = np.minimum(np.arange(1, 11) * eps_1, eps_inf)
        np.testing.assert_allclose(result.loss[pid]["1.0"], expected, rtol=1e-12)
        np.testing.assert_allclose(result.loss[pid]["0.5"], expected, rtol=1e-12)
        np.testing.assert_allclose(result.rerandomized[pid], np.arange(1, 11) * eps_1, rtol=1e-12)
        assert len(result.mse[pid]) == 10 and np.isfinite(result.theory_mse[pid]).all()
    churning = experiments.churn_rounds(2000, 16, 10, 0.3, rng=2)
    moving = experiments.simulate_rounds(["l-grr"], churning, eps_1=0.5, eps_inf=1.5, seed=3)
    distinct = churning.distinct_counts()
    loss = np.minimum(np.arange(1, 11)[:, None] * 0.5, distinct * moving.budgets["l-grr"][1])
    np.testing.assert_allclose(moving.loss["l-grr"]["0.9"], np.quantile(loss, 0.9, axis=1))
    with pytest.raises(ParameterError, match="memoized"):
        experiments.simulate_rounds(["grr"], data, 1.0)


def test_simulate_rounds_command(tmp_path, capsys):
    path = tmp_path / "rounds.json"
    assert main(["simulate", "--rounds", "3", "-p", "l-grr,rappor", "--eps", "1", "--n", "1500", "--d", "8",
                 "--no-plot", "--quiet", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "l-grr" in out and "rappor" in out and "re-randomized" in out
    result = json.loads(path.read_text())
    assert result["rounds"] == 3 and set(result["mse"]) == {"l-grr", "rappor"}
    assert main(["simulate", "--rounds", "2", "--eps", "1,2", "--no-plot"]) == 2
    assert "one --eps" in capsys.readouterr().err


def test_audit_command_budget(capsys):
    # 20,000 reports detect an excess of 0.5 (exit 0); a stricter --detect would exit 3 (inconclusive)
    assert main(["audit", "l-oue", "--eps", "1", "--reports", "20000", "--seed", "1", "--budget", "permanent",
                 "--detect", "0.5"]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[0] == "l-oue" and float(row[1]) == 2.0 and float(row[2]) <= 2.0
