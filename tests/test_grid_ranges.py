"""Multi-dimensional range queries: TDG, HDG and the adaptive grid (protocols/multiattribute).
The aggregator contract, the registered variance and the privacy audit of each are checked by
tests/test_conformance.py (ldpfast.testing); here: unbiased cell answers, the post-processing
(Norm-Sub, consistency, weighted update, the lambda-D estimation), the query API and bad input."""

import itertools

import numpy as np
import pytest
from scipy import stats

from ldpfast.errors import DTypeError, ParameterError, ReportError
from ldpfast.protocols.multiattribute import adaptive_grid, hdg, tdg
from ldpfast.protocols.multiattribute._grid_answer import Answers, block_sums, make_consistent, norm_sub
from ldpfast.protocols.multiattribute._grid_hooks import EXAMPLE_DOMAINS, EXAMPLE_NAMES, example_records

#: Two-sided false-alarm probability of each statistical assertion.
ALPHA = 1e-6
RUNS = 60


def _hdg(**changes):
    return hdg.HDGParams(**{"epsilon": 1.5, "domains": EXAMPLE_DOMAINS, "g1": 4, "g2": 2, "names": EXAMPLE_NAMES,
                            **changes})


@pytest.fixture(scope="module")
def runs():
    """RUNS independent simulated collections of the example's 3000 records (HDG), one server each."""
    params, records = _hdg(), example_records()
    reports = hdg.HDGClient(params, rng=7).perturb(np.tile(records, (RUNS, 1)))
    n = len(records)
    columns = reports.columns()
    servers = [hdg.HDGServer(params).update(hdg.HDGReports.from_columns({k: v[r * n:(r + 1) * n]
                                                                           for k, v in columns.items()}))
               for r in range(RUNS)]
    return params, records, servers


def _t_limit(runs):
    return stats.t.isf(ALPHA / 2, runs - 1)


def test_cell_box_answers_are_unbiased(runs):
    """The sum of the raw cell estimates over a box of whole cells (a 1-D box of the 1-D grid
    of "age", a 2-D box of the grid of ("age", "hours")) is unbiased for the box's true share:
    the runs are independent, so (mean - truth)/(s/sqrt(R)) is Student's t with R - 1 degrees
    of freedom (CLT; each run sums 3000 independent reports); |t| stays below its 1 - ALPHA/2
    quantile (5.7 at R = 60) unless the estimator is biased by about s/sqrt(R)."""
    params, records, servers = runs
    grids, offsets = params.grids(), params.offsets
    one, two = 0, len(EXAMPLE_DOMAINS)                      # grid indices: "age" 1-D, ("age", "hours") 2-D
    boxes = {"1-D": (one, np.array([1, 2])), "2-D": (two, np.array([0, 1]))}  # cells 0,1 of the 2x2 grid: age < 4
    for name, (j, cells) in boxes.items():
        truth = np.isin(grids[j].cell_of(records), cells).mean()
        answers = np.array([s.estimate(offsets[j] + cells).sum() for s in servers])
        t = (answers.mean() - truth) / (answers.std(ddof=1) / np.sqrt(RUNS))
        assert abs(t) < _t_limit(RUNS), f"{name} box: mean {answers.mean():.4f}, truth {truth:.4f}, t = {t:.1f}"


def test_range_answers_are_close_to_the_truth(runs):
    """The post-processed answers are biased (Norm-Sub, cells cut by the query) but must be
    near the truth: over the runs, the mean absolute error of 2-D queries of half the domain
    stays below the raw sum's standard deviation over the cells they cover (a box answer from
    9 groups of ~333 users at eps = 1.5; measured 0.03-0.04 here)."""
    params, records, servers = runs
    lows = np.array([[0, 0, 0], [4, 0, 0], [2, 4, 0], [0, 0, 3]])
    highs = np.array([[3, 3, 5], [7, 7, 5], [5, 7, 5], [7, 3, 5]])
    inside = np.all((records[:, None, :] >= lows) & (records[:, None, :] <= highs), axis=2).mean(axis=0)
    errors = np.array([np.abs(s.range_batch(lows, highs) - inside) for s in servers])
    group = len(EXAMPLE_DOMAINS)                        # the first 2-D grid
    raw_std = np.sqrt(params.cell_variance(group, len(records) / len(params.grids()), len(records), 0.25) * 4)
    assert errors.mean() < raw_std, (errors.mean(axis=0), raw_std)


def test_norm_sub_is_the_simplex_projection():
    """max(x - tau, 0) summing to 1: non-negative, one common shift on the kept entries, and
    every dropped entry at or below the shift (the projection's optimality conditions)."""
    gen = np.random.default_rng(1)
    for size in (1, 2, 7, 64):
        x = gen.normal(1.0 / size, 0.3, size)
        r = norm_sub(x)
        assert (r >= 0).all() and abs(r.sum() - 1) < 1e-12
        kept = r > 0
        shift = (x - r)[kept]
        assert np.ptp(shift) < 1e-12 and (x[~kept] <= shift[0] + 1e-12).all()


def test_consistency_keeps_consistent_grids_and_reconciles_noisy_ones(runs):
    """True (consistent, non-negative) cell shares are a fixed point; noisy grids come out
    non-negative, summing to 1, and every attribute's marginal agrees across its grids far
    better than before."""
    params, records, servers = runs
    grids, offsets = params.grids(), params.offsets
    truth = [np.bincount(g.cell_of(records), minlength=g.cells).reshape(g.shape) / len(records) for g in grids]
    again = make_consistent(grids, [t.copy() for t in truth], 3, 1e-12, np.ones(len(grids)))
    for a, b in zip(truth, again):
        np.testing.assert_allclose(a, b, atol=1e-12)

    def disagreement(tables):
        worst = 0.0
        for a in range(3):
            margins = [t.sum(axis=tuple(i for i in range(t.ndim) if i != g.attributes.index(a)))
                       for g, t in zip(grids, tables) if a in g.attributes]
            coarse = [m.reshape(2, -1).sum(axis=1) for m in margins]   # the common 2 intervals
            worst = max(worst, float(np.ptp(coarse, axis=0).max()))
        return worst
    raw = servers[0].estimate()
    tables = [raw[offsets[j]:offsets[j + 1]].reshape(g.shape) for j, g in enumerate(grids)]
    fixed = make_consistent(grids, tables, 3, 1.0 / 3000, np.ones(len(grids)))
    assert all((t >= 0).all() and abs(t.sum() - 1) < 1e-9 for t in fixed)
    assert disagreement(fixed) < disagreement(tables) / 10, (disagreement(fixed), disagreement(tables))


def test_weighted_update_fits_the_two_way_cells(runs):
    """The weighted update ends with the 2-D cells fitted: each pair matrix's block sums equal
    its consistent 2-D grid (up to rounding)."""
    params, _, servers = runs
    answers = servers[0]._answers()
    for j, grid in enumerate(params.grids()):
        if len(grid.attributes) == 2:
            a, b = grid.attributes
            matrix = np.diff(np.diff(answers.prefix[(a, b)], axis=0), axis=1)
            np.testing.assert_allclose(block_sums(matrix, *grid.edges), answers.tables[j], atol=1e-9)


def test_exact_grids_answer_exactly_and_many_dimensions_fit_independence():
    """Cells of one value each and exact shares: 1-D and 2-D answers are exact, and a 3-D
    query over independent attributes gets the product of its 1-D answers (the fitted table of
    independent 2 x 2 margins is their product)."""
    domains = (4, 4, 4)
    params = hdg.HDGParams(epsilon=1.0, domains=domains, g1=4, g2=4)
    margins = [np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.25] * 4), np.array([0.5, 0.3, 0.1, 0.1])]
    cells = np.concatenate([margins[g.attributes[0]] if len(g.attributes) == 1 else
                            np.outer(margins[g.attributes[0]], margins[g.attributes[1]]).ravel()
                            for g in params.grids()])
    answers = Answers(params, cells, 10**6, weighted=True, noise=np.ones(len(params.grids())))
    lo, hi = np.array([[1, 0, 0], [0, 2, 1], [1, 1, 0]]), np.array([[2, 3, 3], [3, 3, 2], [3, 2, 1]])
    inside = [[m[lo[q, a]:hi[q, a] + 1].sum() for a, m in enumerate(margins)] for q in range(3)]
    np.testing.assert_allclose(answers.boxes(lo, hi), np.prod(inside, axis=1), atol=1e-9)


def test_query_api_by_name_index_and_batch(runs):
    params, _, servers = runs
    server = servers[0]
    by_name = server.range({"age": (2, 5), "hours": (0, 3)})
    assert by_name == server.range({0: (2, 5), 1: (0, 3)})
    assert by_name == server.range_batch([[2, 0, 0]], [[5, 3, 5]])[0]
    assert server.range({}) == 1.0
    np.testing.assert_allclose(server.marginal("age").sum(), 1.0)


@pytest.mark.parametrize("records, message", [
    (np.zeros((3, 2), dtype=np.int64), r"shape \(n, 3\).*got shape \(3, 2\)"),
    (np.zeros((3, 4), dtype=np.int64), r"shape \(n, 3\).*got shape \(3, 4\)"),
    (np.array([[0, 8, 0]]), r"attribute 'hours' must be in \[0, 8\), got 8"),
    (np.array([[0, 0, -1]]), r"attribute 'education' must be in \[0, 6\), got -1"),
])
def test_bad_records_name_the_attribute_and_value(records, message):
    with pytest.raises(ParameterError, match=message):
        hdg.HDGClient(_hdg(), rng=1).perturb(records)


def test_float_records_are_refused():
    with pytest.raises(DTypeError, match="records must be integers"):
        hdg.HDGClient(_hdg(), rng=1).perturb(np.zeros((2, 3)))


def test_bad_queries_name_the_attribute_and_value(runs):
    server = runs[2][0]
    with pytest.raises(ParameterError, match="unknown attribute 'weight'"):
        server.range({"weight": (0, 3)})
    with pytest.raises(ParameterError, match=r"attribute 'hours' has an empty range \(5, 2\)"):
        server.range({"hours": (5, 2)})
    with pytest.raises(ParameterError, match=r"attribute 'education' bound must be in \[0, 5\], got 6"):
        server.range({"education": (0, 6)})
    with pytest.raises(ParameterError, match=r"lows must have shape \(q, 3\)"):
        server.range_batch([[0, 0]], [[1, 1]])
    with pytest.raises(ParameterError, match=r"attribute 'age' needs \(low, high\), got \(1.5, 3\)"):
        server.range({"age": (1.5, 3)})
    with pytest.raises(ParameterError, match=r"candidates must be cell indices in \[0, 24\), got 24"):
        server.estimate([24])


def test_refused_batch_leaves_the_server_unchanged(runs):
    params, records, servers = runs
    server = hdg.HDGServer(params).update(hdg.HDGClient(params, rng=2).perturb(records[:100]))
    before = server.to_bytes()
    bad = hdg.HDGClient(params, rng=3).perturb(records[:50])
    bad.group[10] = len(params.grids())
    with pytest.raises(ReportError, match="group must be < number of grids=6, got 6 at index 10"):
        server.update(bad)
    assert server.to_bytes() == before


def test_bad_parameters_name_the_value():
    with pytest.raises(ParameterError, match=r"domains\[1\] must be"):
        tdg.TDGParams(epsilon=1.0, domains=(8, 1), g2=2)
    with pytest.raises(ParameterError, match="names must be 2 distinct"):
        tdg.TDGParams(epsilon=1.0, domains=(8, 8), g2=2, names=("x", "x"))
    with pytest.raises(ParameterError, match=r"cuts2\[0\] must be strictly increasing"):
        adaptive_grid.AdaptiveGridParams(epsilon=1.0, domains=(8, 8), cuts1=((4,), (4,)), cuts2=((4, 2), (4,)))
    with pytest.raises(ParameterError, match="not 2 to 65536"):
        hdg.HDGParams(epsilon=1.0, domains=(1024, 1024), g1=4, g2=1024)


def test_labels_are_refused_by_name():
    from ldpfast import Domain

    with pytest.raises(ParameterError, match="takes records of integer attributes, not labels"):
        _hdg().with_domain(Domain(["a", "b"]))


def test_guideline_granularities_of_the_benchmark_setting():
    """n = 1e6, 6 attributes of 64 values (21 HDG groups, 15 TDG groups). At eps = 1 by hand:
    g1 = (n (e-1)^2 0.7^2 / (2 * 21 e))^(1/3) = 23.3 -> 16; g2 = sqrt(2 * 0.03 (e-1)
    sqrt(n / (21 e))) = 3.7 -> 4 (TDG: 15 groups, 3.99 -> 4)."""
    assert (hdg.HDGParams.create(1.0, (64,) * 6, 10**6).g1, hdg.HDGParams.create(1.0, (64,) * 6, 10**6).g2) == (16, 4)
    assert tdg.TDGParams.create(1.0, (64,) * 6, 10**6).g2 == 4


def test_adaptive_cuts_split_the_mass_evenly_and_nest():
    mass = np.array([1, 1, 1, 1, 10, 10, 10, 10, 1, 1, 1, 1], dtype=float)
    params = adaptive_grid.AdaptiveGridParams.plan(4.0, (12, 12), 10**7, [mass, np.ones(12)], uniform_share=1e-9)
    for cuts1, cuts2, m in zip(params.cuts1, params.cuts2, (mass, np.ones(12))):
        assert set(cuts2) <= set(cuts1) and len(cuts1) >= 3
        shares = np.add.reduceat(m, np.array((0, *cuts1))) / m.sum()
        # equal shares 1/cells, each off by at most the mass of the one value at its boundary
        assert np.abs(shares - 1.0 / shares.size).max() <= m.max() / m.sum() + 1e-9, shares
    with pytest.raises(ParameterError, match="one distribution per attribute"):
        adaptive_grid.AdaptiveGridParams.plan(1.0, (12, 12), 1000, [mass])


def test_every_pair_has_a_matrix():
    params = tdg.TDGParams(epsilon=1.0, domains=(4, 4, 4, 4), g2=2)
    records = np.array(list(itertools.product(range(4), repeat=4)))
    server = tdg.TDGServer(params).update(tdg.TDGClient(params, rng=5).perturb(np.tile(records, (4, 1))))
    assert set(server._answers().prefix) == set(itertools.combinations(range(4), 2))
    assert 0.0 <= server.range({"a0": (0, 1), "a1": (0, 1), "a2": (2, 3)}) <= 1.0


def test_range_answers_too_large_for_memory_are_refused_by_name():
    """Range answers need one value matrix per pair: 2^20 x 2^20 values are refused before
    anything is allocated (the memory budget), the server still usable."""
    params = tdg.TDGParams(epsilon=1.0, domains=(1 << 20, 1 << 20), g2=2)
    server = tdg.TDGServer(params).update(tdg.TDGClient(params, rng=1).perturb(np.array([[0, 0], [5, 7]])))
    with pytest.raises(ParameterError, match="range answers' value matrices"):
        server.range({"a0": (0, 10)})
    assert np.isfinite(server.estimate()).all()
