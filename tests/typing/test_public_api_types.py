"""The public API as a user's type checker sees it.

CI checks this module with ``mypy --strict`` (configuration in pyproject.toml): a public
function left unannotated fails with "call to untyped function", and a result that
degrades to ``Any`` (for instance a lazily imported submodule the checker cannot see)
fails an ``assert_type``. pytest runs it too, so every call below is a working use of the
API (small, seeded simulations: these check types, the statistics are tested elsewhere).
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Union

import numpy as np
import pytest

import ldpfast as lf

if sys.version_info >= (3, 11):
    from typing import assert_type
else:  # typing.assert_type is new in 3.11; at run time it only returns its argument
    def assert_type(value: Any, expected: Any, /) -> Any:
        return value

#: The family package, reached as an attribute (typed through its TYPE_CHECKING imports).
frequency = lf.protocols.frequency
privsketch_ldp = lf.protocols.sets.privsketch_ldp
D = 64
VALUES = np.random.default_rng(1).integers(0, D, 2_000)
CANDIDATES = np.arange(4)


def test_backend_helpers() -> None:
    info = assert_type(lf.backend_info(), Dict[str, Any])
    assert info["active"] in info["compiled"]
    lf.set_num_threads(0)
    with pytest.raises(lf.errors.ParameterError):
        lf.set_backend("no-such-isa")


def test_ocms_round_trip() -> None:
    params = assert_type(frequency.ocms.OCMSParams.optimal(epsilon=2.0, d=D), frequency.ocms.OCMSParams)
    reports = assert_type(frequency.ocms.OCMSClient(params, rng=7).perturb(VALUES), frequency.ocms.OCMSReports)
    server = assert_type(frequency.ocms.OCMSServer(params).update(reports), frequency.ocms.OCMSServer)
    other = frequency.ocms.OCMSServer(params).update(frequency.ocms.OCMSClient(params, rng=8).perturb(VALUES))
    assert_type(server.merge(other), frequency.ocms.OCMSServer)
    estimate = assert_type(server.estimate(CANDIDATES), np.ndarray)
    restored = assert_type(frequency.ocms.OCMSServer.from_bytes(server.to_bytes()), frequency.ocms.OCMSServer)
    assert np.array_equal(restored.estimate(CANDIDATES), estimate)


def test_grr_and_hadamard_family() -> None:
    grr = frequency.grr.GRRParams(epsilon=3.0, d=D)
    grr_server = assert_type(frequency.grr.GRRServer(grr).update(frequency.grr.GRRClient(grr, rng=1).perturb(VALUES)),
                             frequency.grr.GRRServer)
    assert_type(grr_server.estimate(CANDIDATES), np.ndarray)

    he = frequency.hadamard.HEParams(epsilon=3.0, d=D)
    he_server = frequency.hadamard.HEServer(he)
    he_server.update(assert_type(frequency.hadamard.HEClient(he, rng=2).perturb(VALUES),
                                 frequency.hadamard.HEReports))
    assert_type(he_server.estimate(CANDIDATES), np.ndarray)

    rhr = frequency.rhr.RHRParams(epsilon=3.0, d=D)
    rhr_server = assert_type(frequency.rhr.RHRServer(rhr), frequency.rhr.RHRServer)
    rhr_server.update(assert_type(frequency.rhr.RHRClient(rhr, rng=3).perturb(VALUES), frequency.rhr.RHRReports))
    assert_type(rhr_server.estimate(CANDIDATES), np.ndarray)

    olh = frequency.olh.OLHParams(epsilon=3.0, d=D)
    olh_server = frequency.olh.OLHServer(olh).update(frequency.olh.OLHClient(olh, rng=4).perturb(VALUES))
    assert_type(olh_server, frequency.olh.OLHServer)
    assert_type(olh_server.estimate(CANDIDATES), np.ndarray)

    hrr = frequency.hadamard.HRRParams(epsilon=3.0, d=D)
    hrr_server = frequency.hadamard.HRRServer(hrr)
    hrr_server.update(assert_type(frequency.hadamard.HRRClient(hrr, rng=5).perturb(VALUES),
                                  frequency.hadamard.HRRReports))
    assert_type(hrr_server.estimate(CANDIDATES), np.ndarray)

    cmshe = frequency.hadamard.CMSHEParams(epsilon=3.0, d=D, hash_seed=11)
    cmshe_server = frequency.hadamard.CMSHEServer(cmshe)
    cmshe_server.update(frequency.hadamard.CMSHEClient(cmshe, rng=6).perturb(VALUES))
    assert_type(cmshe_server.estimate(CANDIDATES), np.ndarray)


def test_hadaoracle_and_hadaheavy() -> None:
    values = np.random.default_rng(3).integers(0, 2**20, 5_000, dtype=np.uint64)
    oracle = assert_type(frequency.hadaoracle.HadaOracleParams.create(epsilon=4.0, d=2**20, n=5_000),
                         frequency.hadaoracle.HadaOracleParams)
    server = frequency.hadaoracle.HadaOracleServer(oracle)
    server.update(assert_type(frequency.hadaoracle.HadaOracleClient(oracle, rng=1).perturb(values),
                              frequency.hadaoracle.HadaOracleReports))
    assert_type(server.estimate(CANDIDATES), np.ndarray)

    heavy = assert_type(lf.protocols.heavy.hadaheavy.HadaHeavyParams.create(epsilon=4.0, d=2**20, n=5_000),
                        lf.protocols.heavy.hadaheavy.HadaHeavyParams)
    hh_server = lf.protocols.heavy.hadaheavy.HadaHeavyServer(heavy)
    hh_server.update(lf.protocols.heavy.hadaheavy.HadaHeavyClient(heavy, rng=2).perturb(values))
    found = assert_type(hh_server.heavy_hitters(), lf.protocols.heavy.hadaheavy.HeavyHitters)
    assert_type(found.items, np.ndarray)
    assert_type(found.fractions, np.ndarray)


def test_privsketch_safe_variant_and_datasets() -> None:
    sets = assert_type(lf.datasets.zipf_sets(n=500, d=D, length=5, seed=1), lf.datasets.SetData)
    params = assert_type(privsketch_ldp.SafeParams.create(epsilon=4.0, d=sets.d, K=2, M=16, seed=1),
                         privsketch_ldp.SafeParams)
    server = assert_type(privsketch_ldp.SafeServer(params), privsketch_ldp.SafeServer)
    server.update(assert_type(privsketch_ldp.SafeClient(params, rng=2).perturb(sets),
                              privsketch_ldp.SafeReports))
    assert_type(server.estimate(CANDIDATES), np.ndarray)
    assert_type(sets.frequencies(), np.ndarray)


def test_estimates_with_error_bars_and_generic_loading() -> None:
    params = frequency.grr.GRRParams(epsilon=3.0, d=D)
    server = frequency.grr.GRRServer(params).update(frequency.grr.GRRClient(params, rng=9).perturb(VALUES))
    result = assert_type(server.frequencies(CANDIDATES), lf.estimates.Estimate)
    low, high = result.confidence_interval(0.05)
    assert_type(low, np.ndarray)
    assert_type(result.top_k(2), lf.estimates.Estimate)
    assert_type(result.std, np.ndarray)
    restored = lf.load(server.to_bytes())
    assert np.array_equal(restored.estimate(CANDIDATES), server.estimate(CANDIDATES))
    assert_type(restored, lf._aggregator.Aggregator)


def test_labels_recommend_and_closed_forms() -> None:
    vocabulary = lf.Domain([f"w{i}" for i in range(D)])
    params = frequency.grr.GRRParams(epsilon=3.0, d=D).with_domain(vocabulary)
    assert_type(params, frequency.grr.GRRParams)
    client = frequency.grr.GRRClient(params, rng=4)
    server = frequency.grr.GRRServer(params).update(client.perturb(["w1", "w2", "w1"]))
    assert_type(server.estimate(["w1"]), np.ndarray)
    assert_type(vocabulary.encode(["w3"]), np.ndarray)
    options = assert_type(lf.recommend(2.0, 10_000, 100_000, max_report_bits=64), List[lf.planning.Option])
    assert options[0].fits and isinstance(options[0].bits, int)
    assert_type(lf.theory.ocms_l2(2.0, 1000), Union[float, np.ndarray])
    assert_type(lf.theory.ocms_variance(2.0, 4, n=1000, f=0.1), Union[float, np.ndarray])
    assert_type(lf.theory.grr_variance(2.0, 10, 100), Union[float, np.ndarray])


def test_estimates_index_like_data() -> None:
    params = frequency.grr.GRRParams(epsilon=3.0, d=D)
    server = frequency.grr.GRRServer(params).update(frequency.grr.GRRClient(params, rng=9).perturb(VALUES))
    result = server.frequencies(CANDIDATES)
    assert_type(result[0], float)
    assert_type(result[1:3], lf.estimates.Estimate)
    low, _ = result.confidence_interval(confidence=0.9)
    assert_type(low, np.ndarray)
