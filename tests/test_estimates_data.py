"""Estimates behave like data: they pickle (joblib, multiprocessing and Dask return them)
with their intervals and tests, index and slice like their values, take scipy's
``confidence=`` keyword (and refuse the ambiguous ``confidence_interval(0.95)``), and
carry the labels of the parameters' domain through top_k, heavy_hitters and to_pandas."""

import concurrent.futures
import multiprocessing
import pickle
import warnings

import numpy as np
import pytest

import ldpfast
from ldpfast._base import protocols
from ldpfast.errors import ParameterError
from ldpfast.protocols.frequency import grr

WORDS = ["apple", "banana", "cherry", "date"]


def _server():
    """GRR over four fruit labels; 5,000 users hold the first three (50%, 30%, 20%)."""
    params = grr.GRRParams(epsilon=3.0, d=4).with_domain(ldpfast.Domain(WORDS))
    users = np.random.default_rng(0).choice(WORDS[:3], 5000, p=[0.5, 0.3, 0.2])
    return grr.GRRServer(params).update(grr.GRRClient(params, rng=1).perturb(users))


def _fruit_estimate():
    return _server().frequencies()


def _estimate_of(pid):
    proto = protocols()[pid]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # PrivSketch's PrivacyWarning: not what is tested
        params, inputs = proto.example()
        server = proto.aggregator(params).update(proto.client(params, rng=3).perturb(inputs))
    try:
        return server.frequencies()
    except ParameterError:                   # servers that need candidates
        return server.frequencies(np.arange(min(params.d, 64)))


@pytest.mark.parametrize("pid", sorted(protocols()))
def test_every_protocols_estimate_pickles_with_its_intervals(pid):
    est = _estimate_of(pid)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.values, est.values)
    np.testing.assert_array_equal(again.std, est.std)
    if est.uncertainty is not None:   # the model pickles as the quadratic it is evaluated as: same numbers
        for a, b in zip(again.confidence_interval(), est.confidence_interval()):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(again.p_values(0.01), est.p_values(0.01))
        np.testing.assert_array_equal(again.top_k(3).confidence_interval()[0], est.top_k(3).confidence_interval()[0])


def _worker_estimate(_):
    return _fruit_estimate()


def test_a_worker_process_returns_an_estimate():
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        est = pool.submit(_worker_estimate, 0).result(timeout=120)
    local = _fruit_estimate()
    np.testing.assert_array_equal(est.values, local.values)
    assert est.labels.tolist() == WORDS and est.heavy_hitters(0.1).labels.tolist() == WORDS[:3]


def test_an_estimate_indexes_and_slices_like_its_values():
    est = _fruit_estimate()
    assert est[0] == est.values[0] and isinstance(est[np.int64(2)], float) and est[-1] == est.values[-1]
    assert est["banana"] == est.values[1] and list(est) == est.values.tolist()
    part = est[1:3]
    assert isinstance(part, ldpfast.estimates.Estimate) and part.labels.tolist() == ["banana", "cherry"]
    np.testing.assert_array_equal(part.confidence_interval()[0], est.confidence_interval()[0][1:3])
    assert est[est.values > 0.25].labels.tolist() == ["apple", "banana"]
    assert est[[3, 0]].labels.tolist() == ["date", "apple"]
    with pytest.raises(KeyError, match="kiwi"):
        est["kiwi"]
    with pytest.raises(IndexError):
        est[4]


def test_confidence_as_scipy_and_the_ambiguous_alpha_refused():
    est = _fruit_estimate()
    for a, b in zip(est.confidence_interval(confidence=0.9), est.confidence_interval(0.1)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(est.confidence_interval(), est.confidence_interval(alpha=0.05)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ParameterError, match=r"alpha=0.95 asks for 5% intervals.*confidence=0.95"):
        est.confidence_interval(0.95)
    with pytest.raises(ParameterError, match="not both"):
        est.confidence_interval(0.05, confidence=0.95)
    with pytest.raises(ParameterError, match=r"confidence must be in \[0.5, 1\)"):
        est.confidence_interval(confidence=0.05)
    frame = est.to_pandas(confidence=0.9)
    np.testing.assert_array_equal(frame["ci_low"], est.confidence_interval(confidence=0.9)[0])


def test_labels_travel_through_selections_and_exports():
    pd = pytest.importorskip("pandas")
    est = _fruit_estimate()
    assert est.labels.tolist() == WORDS and "'apple': 0.5" in repr(est)
    assert est.top_k(2).labels.tolist() == ["apple", "banana"]
    assert est.heavy_hitters(0.1).labels.tolist() == ["apple", "banana", "cherry"]
    assert est.postprocess("norm-sub").labels.tolist() == WORDS
    frame = est.to_pandas()
    assert isinstance(frame, pd.DataFrame) and frame["label"].tolist() == WORDS
    by_label = _server().frequencies(["date", "apple"])
    assert by_label.labels.tolist() == ["date", "apple"] and by_label.candidates.tolist() == [3, 0]

