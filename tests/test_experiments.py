"""The simulation harness: closed forms against SPEC section 6, metrics, seeding, and a
statistical check of the whole loop with a small pure-numpy GRR (not registered)."""

import dataclasses
import io
import math

import numpy as np
import pytest

from ldpfast import datasets as ds
from ldpfast import experiments as ex
from ldpfast.errors import ParameterError
from ldpfast.theory.ocms import grr_variance

# -- closed forms (SPEC section 6) ---------------------------------------------------


def test_appendix_k_factor():
    assert ex.appendix_k_factor(100, 100) == pytest.approx(1.7034127, abs=1e-7)
    assert ex.appendix_k_factor(1000, 100) == pytest.approx(1.8274659, abs=1e-7)
    assert ex.appendix_k_factor(10000, 100) == pytest.approx(1.9428653, abs=1e-7)
    with pytest.raises(ParameterError):
        ex.appendix_k_factor(0, 100)


def _ocms(eps, data, mode):
    alg = ex.ALGORITHMS["ocms-mse" if mode == "mse" else "ocms-l"]
    return alg, alg.make_params(eps, data, None)


def test_zipf_theory_curves_match_spec():
    # SPEC 6: Zipf worst-case MSE with integer m (MSE-OCMS, f* = 1: m = 3, 4, 5, 8, 13)
    mse, l2 = [], []
    for eps in range(1, 6):
        data = ds.pan_zipf(eps)
        alg, params = _ocms(eps, data, "mse")
        mse.append(float(np.max(alg.variance(params, data, data.frequencies()))))
        alg, params = _ocms(eps, data, "l")
        l2.append(alg.l2(params, data.n, 100))
    np.testing.assert_allclose(mse, [3.99817e-4, 9.32772e-5, 3.98147e-5, 1.88685e-5, 9.86793e-6], rtol=1e-5)
    # l-OCMS (d = 1e6: m = 4, 8, 21, 56, 149), l2 with |X| = 100 and l1 = sqrt(|X| l2)
    np.testing.assert_allclose(l2, [0.0370384, 0.0073390, 0.0023052, 0.00086099, 0.00037291], rtol=2e-5)
    np.testing.assert_allclose(np.sqrt(100 * np.array(l2)), [1.92454, 0.85668, 0.48012, 0.29343, 0.19311],
                               rtol=2e-5)


def test_gaussian_theory_curve_close_to_paper():
    # Eq. 20 with the integer m (4, 8, 21, 56, 149 for f* = 0) is within 0.5% of PAN's
    # Thm 3.7 curve (max f + 4e/(e-1)^2)/n that SPEC 6 lists.
    data = ds.pan_gaussian()
    ours = []
    for eps in range(1, 6):
        alg, params = _ocms(eps, data, "mse")
        assert params.m == (4, 8, 21, 56, 149)[eps - 1]
        ours.append(float(np.max(alg.variance(params, data, data.frequencies()))))
    np.testing.assert_allclose(ours, [3.69319e-4, 7.34562e-5, 2.31064e-5, 8.65218e-6, 3.78187e-6], rtol=5e-3)


# -- metrics ------------------------------------------------------------------------

def test_metrics_by_hand():
    truth = np.array([0.5, 0.25, 0.0])
    est = np.array([[0.6, 0.25, -0.1], [0.5, 0.05, 0.1]])
    # per-value MSE: (0.01+0)/2, (0+0.04)/2, (0.01+0.01)/2 -> max 0.02
    assert ex.worst_case_mse(est, truth) == pytest.approx(0.02)
    assert ex.l1_loss(est, truth) == pytest.approx((0.2 + 0.3) / 2)
    assert ex.l2_loss(est, truth) == pytest.approx((0.02 + 0.05) / 2)


# -- the harness with a small GRR ------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _GrrParams:
    epsilon: float
    d: int

    def to_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass
class _Reports:
    y: np.ndarray


class _Client:
    def __init__(self, params, rng=None):
        self.params, self.gen = params, np.random.default_rng(rng)

    def perturb(self, values):
        d, e = self.params.d, math.exp(self.params.epsilon)
        flip = self.gen.random(values.size) < (d - 1) / (e + d - 1)
        other = self.gen.integers(0, d - 1, values.size)
        other += other >= values
        return _Reports(np.where(flip, other, values))


class _Server:
    def __init__(self, params):
        self.params, self.counts = params, np.zeros(params.d, np.int64)

    def update(self, reports):
        self.counts += np.bincount(reports.y, minlength=self.params.d)
        return self

    def estimate(self, candidates=None):
        d, e = self.params.d, math.exp(self.params.epsilon)
        p, q = e / (e + d - 1), 1 / (e + d - 1)
        n = self.counts.sum()
        c = self.counts if candidates is None else self.counts[candidates]
        return (c / n - q) / (p - q)


GRR = ex.Algorithm("test-grr", "GRR", "datasets",
                   lambda eps, data, gen: _GrrParams(eps, data.d),
                   variance=lambda p, data, f: grr_variance(p.epsilon, p.d, data.n, f),
                   client=_Client, server=_Server)


def _toy(eps=None):
    values = np.repeat(np.arange(6), [500, 300, 100, 60, 40, 0])
    return ds.ValueData(values, 6, np.arange(6), name="toy")


def test_simulate_matches_grr_theory():
    runs = 400
    result = ex.simulate([GRR], _toy, [0.5, 2.0], runs, seed=11)
    for cell in result.cells:
        # l2 is a mean of `runs` i.i.d. per-run losses: |l2 - E l2| < 5.3 standard errors
        # (two-sided normal tail 1.2e-7; the sample SE itself is within a few % at 400 runs).
        assert abs(cell.l2 - cell.exact_l2) < 5.3 * cell.l2_se
        assert cell.theory_mse == pytest.approx(float(grr_variance(cell.epsilon, 6, 1000, 0.5)))
        assert cell.appendix_k == pytest.approx(cell.theory_mse * ex.appendix_k_factor(6, runs))
        assert cell.theory_l2 is None and cell.within_band in (True, False)
        assert cell.n == 1000 and cell.runs == runs and cell.params == {"epsilon": cell.epsilon, "d": 6}


def test_simulate_is_reproducible_and_order_independent():
    a = ex.simulate([GRR], _toy(), [1.0, 3.0], 5, seed=3)
    b = ex.simulate([GRR], _toy(), [3.0], 5, seed=3)
    c = ex.simulate([GRR], _toy(), [3.0], 5, seed=4)
    assert a.cell("test-grr", 3.0).l2 == b.cell("test-grr", 3.0).l2
    assert a.cell("test-grr", 3.0).l2 != c.cell("test-grr", 3.0).l2


def test_simulate_validates():
    with pytest.raises(ParameterError, match="protocol must be one of"):
        ex.simulate(["nope"], _toy(), [1.0], 2)
    with pytest.raises(ParameterError, match="runs"):
        ex.simulate([GRR], _toy(), [1.0], 0)
    with pytest.raises(ParameterError, match="epsilon"):
        ex.simulate([GRR], _toy(), [-1.0], 2)


def test_tables_json_and_progress():
    buf = io.StringIO()
    bar = ex.ProgressBar(4, stream=buf)
    result = ex.simulate([GRR], _toy(), [1.0, 2.0], 2, progress=bar)
    assert bar.done == 4 and "4/4" in buf.getvalue()
    text = result.table("mse")
    lines = text.splitlines()
    assert "worst-case MSE" in lines[0] and lines[1].split() == ["algorithm", "eps=1", "eps=2"]
    assert lines[2].split()[0] == "GRR" and lines[4].split()[:3] == ["App.", "K", "bound"]
    assert len(lines) == 5  # title, header, measured, closed form, bound
    md = result.table("all", markdown=True)
    assert md.count("| algorithm |") == 3 and "| GRR App. K bound |" in md
    assert result.to_dict()["cells"][0]["algorithm"] == "test-grr"
    with pytest.raises(ParameterError, match="metric"):
        result.table("l3")


def test_plot_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    result = ex.simulate([GRR], _toy(), [1.0, 2.0], 2)
    path = tmp_path / "p.png"
    fig = ex.plot_results(result, str(path))
    with open(path, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    from matplotlib.figure import Figure

    assert isinstance(fig, Figure) and len(fig.axes) == 3      # one panel per metric
    assert isinstance(ex.plot_results(result), Figure)         # no path: nothing written


def test_plot_without_matplotlib(monkeypatch, tmp_path):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    result = ex.simulate([GRR], _toy(), [1.0], 2)
    with pytest.raises(ParameterError, match=r"pip install 'ldpfast\[plot\]'"):
        ex.plot_results(result, str(tmp_path / "p.png"))


# -- every registered frequency oracle through the harness ------------------------------

@pytest.mark.parametrize("name,runs", [("ocms-mse", 200), ("ocms-l", 200), ("he", 200), ("cms-he", 200),
                                       ("rhr", 200), ("olh", 200), ("hrr", 200), ("grr", 200)])
def test_protocols_match_their_closed_forms(name, runs):
    alg = ex.ALGORITHMS[name]
    if not alg.available():
        pytest.skip(f"ldpfast.{alg.module} is not in this build")
    values = np.minimum(np.random.default_rng(0).zipf(1.5, 2000) - 1, 63)
    data = ds.ValueData(values, 64, np.arange(64), name="toy")
    result = ex.simulate([name], data, [1.0, 4.0], runs, seed=1)
    for cell in result.cells:
        # The mean of `runs` i.i.d. per-run l2 losses has expectation sum_x Var(x) (the
        # estimators are unbiased); 5.3 standard errors: two-sided normal tail 1.2e-7.
        assert abs(cell.l2 - cell.exact_l2) < 5.3 * cell.l2_se, (cell.epsilon, cell.l2, cell.exact_l2)


def test_hadaoracle_runs_through_the_harness():
    alg = ex.ALGORITHMS["hadaoracle"]
    if not alg.available():
        pytest.skip("ldpfast.protocols.frequency.hadaoracle is not in this build")
    data = ds.ValueData(np.repeat([3, 9], [1500, 500]), 64, np.arange(64), name="toy")
    cell = ex.simulate(["hadaoracle"], data, [4.0], 5, seed=1).cells[0]
    assert cell.theory_mse is None and np.isfinite(cell.l2) and cell.params["k"] % 2 == 1


def test_results_do_not_depend_on_threads_or_backend():
    import ldpfast
    from ldpfast import _core

    data = ds.pan_zipf(2.0, n=3000, d=50_000)
    names = [n for n in ("ocms-mse", "he", "rhr", "olh") if ex.ALGORITHMS[n].available()]
    previous = _core.active_backend()
    results = {}
    try:
        for backend in _core.supported_backends():
            ldpfast.set_backend(backend)
            for threads in (1, 2):
                ldpfast.set_num_threads(threads)
                res = ex.simulate(names, data, [2.0], 2, seed=8)
                results[backend, threads] = [(c.worst_mse, c.l1, c.l2) for c in res.cells]
    finally:
        ldpfast.set_num_threads(0)
        _core.set_backend(previous)
    first = next(iter(results.values()))
    assert all(r == first for r in results.values()), list(results)
