"""Key-value protocols (PCKV-UE, PCKV-GRR, the PrivKV baseline): the estimators against their closed forms, the
composed privacy budget, and bad input. The contract (merge, bytes, Arrow/Parquet, wire,
audit, extremes, frequency variance) runs through ldpfast.testing in test_conformance.py."""

import numpy as np
import pytest

from _moments import check_mean, check_variance
from ldpfast._base import protocols
from ldpfast.errors import ParameterError, ReportError
from ldpfast.protocols.multiattribute import _kv, pckv, privkv

PROTOCOLS = ("pckv-ue", "pckv-grr", "privkv")
# Every user holds at most PAD_LEN pairs, so the frequencies and totals are unbiased and the
# closed forms exact (PrivKV's always are). RUNS independent runs of N users each share one
# client call.
D, N, PAD_LEN, RUNS, EPSILON = 6, 10000, 3, 60, 4.0


def _params(pid, **kw):
    """The protocol's parameters (PrivKV samples from the whole domain: no pad_len)."""
    if pid == "privkv":
        return privkv.PrivKVParams(**kw)
    return protocols()[pid].params(pad_len=kw.pop("pad_len", PAD_LEN), **kw)


@pytest.fixture(scope="module", params=PROTOCOLS)
def runs(request):
    proto = protocols()[request.param]
    params = _params(request.param, epsilon=EPSILON, d=D)
    offsets, keys, values = data = _kv.ratings(D, N, max_pairs=PAD_LEN, seed=5)
    sizes = np.tile(np.diff(offsets), RUNS)
    tiled = (np.concatenate(([0], np.cumsum(sizes))).astype(np.int64), np.tile(keys, RUNS), np.tile(values, RUNS))
    reports = proto.client(params, rng=17).perturb(tiled)
    columns = reports.columns()
    servers = [proto.aggregator(params).update(type(reports).from_columns({k: v[r * N:(r + 1) * N]
                                                                          for k, v in columns.items()}))
               for r in range(RUNS)]
    f, s, q2 = _kv.truth(data, D)
    return params, servers, f, s, q2


def test_frequencies_are_unbiased_with_the_closed_form_variance(runs):
    """Each run's fhat is an affine function of a sum of N independent Bernoullis, so its mean
    over RUNS runs is normal around f and its sample variance chi-square around the closed
    form (tests/_moments.py: each assertion fails with probability 5e-9 when both are right)."""
    params, servers, f, _, _ = runs
    fhat = np.array([s.estimate() for s in servers])
    variance = params.rates.frequency_variance(N, f)
    for key in range(D):
        check_mean(fhat[:, key], f[key], variance[key])
        check_variance(fhat[:, key], variance[key], 0.0)


def test_value_totals_are_unbiased_with_the_closed_form_variance(runs):
    """shat is unbiased for f m (the discretized sign has mean v), with the closed form of
    Rates.total_variance: as above."""
    params, servers, f, s, q2 = runs
    shat = np.array([server.totals() for server in servers])
    variance = params.rates.total_variance(N, f, q2)
    for key in range(D):
        check_mean(shat[:, key], s[key], variance[key])
        check_variance(shat[:, key], variance[key], 0.0)


def test_means_match_the_delta_method(runs):
    """mhat = shat/fhat is a ratio: to second order its mean is m + (m Var fhat - Cov)/f^2 and
    its variance the delta method's (Rates.mean_variance). On the keys held by at least 20% of
    the users (relative sd of fhat <= 0.075 here) the neglected third-order terms are below 1% of
    the mean's tolerance, and no run clips (|m| is 5.5 sd or more below 1) or returns NaN."""
    params, servers, f, s, q2 = runs
    rates, held = params.rates, np.flatnonzero(f >= 0.2)
    assert held.size >= 3
    mhat = np.array([server.means(held) for server in servers])
    m = s[held] / f[held]
    cov = rates.pad_len * (1 - rates.pi1) * f[held] * m / (N * (rates.a - rates.b))
    bias = (m * rates.frequency_variance(N, f[held]) - cov) / f[held] ** 2
    variance = rates.mean_variance(N, f[held], m, q2[held])
    assert np.isfinite(mhat).all() and (np.abs(mhat) < 1).all()
    for i in range(held.size):
        check_mean(mhat[:, i], m[i] + bias[i], variance[i])


@pytest.mark.parametrize("pid", PROTOCOLS)
@pytest.mark.parametrize("epsilon, value_epsilon", [(0.5, None), (1.0, 0.4), (4.0, None), (4.0, 1.0), (12.0, None)])
def test_the_pair_spends_what_it_claims(pid, epsilon, value_epsilon):
    """PCKV: the samplers' thresholds give max(eps2, eps1 + log(2e^eps2/(e^eps2 + 1))) <= epsilon
    within their 2^-31 rounding, while the naive composition eps1 + eps2 exceeds it. PrivKV
    claims the naive eps1 + eps2 = epsilon; its exact loss is that correlated bound, below."""
    params = _params(pid, epsilon=epsilon, d=5, value_epsilon=value_epsilon)
    eps1, eps2 = params.key_budget, params.value_budget
    correlated = max(eps2, eps1 + np.log(2 * np.exp(eps2) / (np.exp(eps2) + 1)))
    assert correlated - 1e-8 < params.effective_epsilon <= correlated + 1e-12
    if pid == "privkv":
        assert params.effective_epsilon <= params.true_epsilon < eps1 + eps2 <= epsilon
        assert eps2 == (epsilon / 2 if value_epsilon is None else value_epsilon)
    else:
        assert epsilon - 1e-8 < params.effective_epsilon <= epsilon < eps1 + eps2
        assert eps2 == (epsilon if value_epsilon is None else value_epsilon)


@pytest.mark.parametrize("pid", PROTOCOLS)
@pytest.mark.parametrize("pairs, message", [
    ([{0: 0.5}, {1: float("nan")}], r"values must be in \[-1, 1\], got nan at index 1"),
    ([{0: 1.5}], r"values must be in \[-1, 1\], got 1.5 at index 0"),
    ([{0: 0.5}, {7: 0.0}], r"keys must be in \[0, d=5\), got 7 at index 1"),
    ([{2: 0.1}, [(3, 0.2), (3, -0.2)]], "keys must be distinct within a user, got key 3 twice for user 1"),
    ([[(1, 0.2, 3)]], r"each pair must be \(key, value\)"),
    ([5], "each user's pairs must be a mapping"),
])
def test_bad_input_is_refused_by_name(pid, pairs, message):
    client = protocols()[pid].client(_params(pid, epsilon=1.0, d=5), rng=1)
    with pytest.raises(ParameterError, match=message):
        client.perturb(pairs)


@pytest.mark.parametrize("change, message", [
    ({"value_epsilon": 2.0}, r"value_epsilon must be a number in \(0, 1\], got 2.0"),
    ({"value_epsilon": 0.0}, "value_epsilon must be"),
    ({"pad_len": 0}, r"pad_len must be in \[1, 4294967296\], got 0"),
    ({"d": 0}, "d must be in"),
])
def test_bad_parameters_are_refused_by_name(change, message):
    with pytest.raises(ParameterError, match=message):
        pckv.PCKVGRRParams(**{"epsilon": 1.0, "d": 5, "pad_len": 2, **change})


def test_refused_batches_leave_the_servers_unchanged():
    params = pckv.PCKVUEParams(epsilon=1.0, d=5, pad_len=2)
    server = pckv.PCKVUEServer(params).update(pckv.PCKVUEClient(params, rng=2).perturb([{0: 0.5}, {1: -1.0}]))
    before = server.to_bytes()
    both = pckv.PCKVUEReports(up=np.array([[1], [3]], dtype=np.uint8), down=np.array([[0], [2]], dtype=np.uint8))
    with pytest.raises(ReportError, match="up and down must not both be set for one key, got report 1"):
        server.update(both)
    assert server.to_bytes() == before
    grr = pckv.PCKVGRRParams(epsilon=1.0, d=5, pad_len=2)
    grr_server = pckv.PCKVGRRServer(grr)
    for bad, message in (({"key": [0, 6], "sign": [1, 1]}, r"key must be keys in \[0, 6\), got 6 at index 1"),
                         ({"key": [0, 1], "sign": [1, 0]}, "sign must be -1 or 1, got 0 at index 1")):
        with pytest.raises(ReportError, match=message):
            grr_server.update(pckv.PCKVGRRReports(**bad))
    assert grr_server.n == 0


def test_padding_samples_every_pair_of_a_short_set_with_probability_one_over_pad_len():
    """The shared padding kernel: users holding keys {0, 1} with pad_len 4 sample each key
    with probability 1/4 and the dummy with 1/2; the value +1 always discretizes to +1, -1 to -1.
    Binomial counts of 40000 draws: 5.3 standard deviations (sd <= 0.0025)."""
    n = 40000
    pairs = (np.arange(0, 2 * n + 1, 2, dtype=np.int64), np.tile(np.array([0, 1], dtype=np.uint64), n),
             np.tile([1.0, -1.0], n))
    from ldpfast._random import KeySource
    sampled, signs = _kv.sample_pairs(KeySource(3), pairs, 4, 2, 0)
    shares = np.bincount(sampled.astype(np.int64), minlength=3) / n
    np.testing.assert_allclose(shares, [0.25, 0.25, 0.5], atol=5.3 * 0.0025)
    assert (signs[sampled == 0] == 1).all() and (signs[sampled == 1] == 0).all()


def test_label_keys_need_the_parameters_domain():
    import ldpfast

    params = pckv.PCKVUEParams(epsilon=1.0, d=3, pad_len=2)
    with pytest.raises(ldpfast.errors.DTypeError, match=r"keys are labels .*with_domain"):
        pckv.PCKVUEClient(params, rng=1).perturb([{"a": 0.5}])
    labelled = params.with_domain(ldpfast.Domain(["a", "b", "c"]))
    by_label = pckv.PCKVUEClient(labelled, rng=1).perturb([{"a": 0.5, "c": -1.0}, {}])
    by_id = pckv.PCKVUEClient(labelled, rng=1).perturb([{0: 0.5, 2: -1.0}, {}])
    assert by_label == by_id


@pytest.mark.parametrize("pid", PROTOCOLS)
def test_simulation_entries_run_on_rated_set_data(pid):
    """``ldpfast simulate -p <pid>`` on set data: the items become keys with seeded ratings;
    no set exceeds the padding (P90 of the sizes 0, 1, 2, 2 is 2), so a closed form exists."""
    from ldpfast.datasets import SetData

    sets = SetData.from_lists([[0, 1], [2], [], [1, 3]] * 50)
    (entry,) = protocols()[pid].simulations()
    estimates = entry.run(2.0, sets, np.random.default_rng(1), 3)
    assert estimates.shape == (sets.d,) and np.isfinite(estimates).all()
    assert entry.theory_mse(2.0, sets) > 0
