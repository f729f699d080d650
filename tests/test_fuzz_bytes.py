"""Deserialization refusals the issues reported, by name (every protocol's bytes are fuzzed
by ldpfast.testing: tests/test_conformance.py): headers declaring huge states, inconsistent
counts, field sizes outside the 64-bit primes, group sizes whose int64 sum wraps."""

import numpy as np
import pytest

from ldpfast._base import Aggregator
from ldpfast.errors import FormatError
from ldpfast.protocols.sets import privsketch_ldp, ps_olh, svim
from ldpfast.testing._fuzz import _fingerprinted, _load_bounded, header_of, seal


def test_headers_declaring_huge_states_are_refused_before_allocating():
    """The issue's reproducer: a 300-byte blob declaring PrivSketch with d = 2^27 (and the
    same for every fixed-size state: GRR d = 2^40, HRR d = 2^30, SVIM d = 2^40)."""
    from ldpfast.protocols.frequency import grr, hadamard
    from ldpfast.protocols.sets import privsketch

    for params in (privsketch.PrivSketchParams.create(epsilon=1.0, d=2**27, K=2, M=8, seed=1),
                   grr.GRRParams(epsilon=10.0, d=2**40), hadamard.HRRParams(epsilon=1.0, d=2**30),
                   svim.SVIMItemParams(epsilon=1.0, d=2**40)):
        blob = seal(header_of(params), {})
        assert len(blob) < 600
        assert _load_bounded(Aggregator.from_bytes, blob) is None


def test_negative_report_count_and_inconsistent_counts():
    from ldpfast.protocols.frequency import hadamard

    params = hadamard.HRRParams(epsilon=1.0, d=64)
    server = hadamard.HRRServer(params).update(hadamard.HRRClient(params, rng=1).perturb(np.arange(64)))
    state = dict(server._state())
    for change in ({"n": np.array([-1])}, {"n": state["n"] + 1}, {"group_sizes": state["group_sizes"] + 2},
                   {"z": state["z"] + 2}):
        with pytest.raises(FormatError):
            hadamard.HRRServer.from_bytes(seal(header_of(params), {**state, **change}))
    sparams = privsketch_ldp.SafeParams.create(epsilon=1.0, d=20, K=2, M=4, seed=1)
    safe = privsketch_ldp.SafeServer(sparams).update(privsketch_ldp.SafeClient(sparams, rng=1).perturb([[1, 2]] * 50))
    sstate = dict(safe._state())
    with pytest.raises(FormatError, match="add up"):
        privsketch_ldp.SafeServer.from_bytes(seal(header_of(sparams), {**sstate, "n": sstate["n"] + 1}))


def test_olh_field_sizes_outside_the_64_bit_primes_do_not_load():
    """PS-OLH and SVIM once accepted any field_size (e.g. 2^64 + 1): such bytes loaded and
    the next update failed inside the C++ binding."""

    for params in (ps_olh.PSOLHParams(epsilon=1.0, d=60, pad_len=3), svim.SVIMItemParams(epsilon=1.0, d=60)):
        agg = {"ps-olh": ps_olh.PSOLHServer, "svim-items": svim.SVIMItemServer}[params.protocol](params)
        arrays = {k: np.asarray(v) for k, v in agg._state().items()}
        for size in (2**64 + 1, 2**40, 10**30, "7"):
            header = _fingerprinted(params.protocol, {**header_of(params)["params"], "field_size": size})
            with pytest.raises(FormatError, match="field_size"):
                Aggregator.from_bytes(seal(header, arrays))


def test_group_sizes_whose_int64_sum_wraps_to_n_are_refused():
    """Group sizes that each fit int64 and keep their parity, but whose int64 sum wraps
    around to the stored n (four of them raised by 2^62), must not load."""
    from ldpfast.protocols.frequency import hashtogram

    params = hashtogram.HashtogramParams(epsilon=1.0, d=64, R=5, T=4, hash_seed=1)
    server = hashtogram.HashtogramServer(params).update(hashtogram.HashtogramClient(params,
                                                                                    rng=1).perturb(np.arange(64)))
    state = dict(server._state())
    sizes = state["group_sizes"] + np.array([2**62] * 4 + [0], dtype=np.int64)
    assert int(sizes.sum()) == int(state["n"][0])  # numpy's int64 sum wraps
    with pytest.raises(FormatError, match="add up"):
        hashtogram.HashtogramServer.from_bytes(seal(header_of(params), {**state, "group_sizes": sizes}))
