"""The aggregator contract, checked generically for every registered protocol.

For each protocol id this needs a small example: ``Protocol.example`` when the protocol
registers one, else an entry of ``EXAMPLES`` below. Ids with neither are skipped with a
reason that names them. The toy protocol (tests/_toy_protocol.py) is always included so
the harness itself is exercised.
"""

import copy
import dataclasses
import pickle

import numpy as np
import pytest

import _toy_protocol  # noqa: F401  (registers "toy-count")
from ldpfast._base import Aggregator, load_aggregator, protocols, read_header
from ldpfast.errors import FormatError, IncompatibleError, ReportError

SEED = 20261121


def _other_by_epsilon(params):
    return dataclasses.replace(params, epsilon=params.epsilon * 1.5)


#: protocol id -> (example () -> (params, values), other_params(params) -> different params).
#: Filled for the families present on this branch; others use Protocol.example.
EXAMPLES = {}


def _example(proto):
    if proto.id in EXAMPLES:
        make, other = EXAMPLES[proto.id]
        return make, other
    if proto.example is not None:
        return proto.example, None
    return None, None


def _cases():
    out = []
    for pid, proto in sorted(protocols().items()):
        make, _ = _example(proto)
        marks = () if make else pytest.mark.skip(
            reason=f"protocol {pid!r} has no contract example (Protocol.example or EXAMPLES)")
        out.append(pytest.param(pid, id=pid, marks=marks))
    return out


@pytest.fixture(scope="module", params=_cases())
def case(request):
    """(protocol, params, three report batches, different params or None)."""
    proto = protocols()[request.param]
    make, other = _example(proto)
    params, values = make()
    reports = proto.client(params, rng=SEED).perturb(values)
    n = len(reports)
    cuts = [0, n // 5, n // 2, n]
    parts = [_slice(reports, cuts[i], cuts[i + 1]) for i in range(3)]
    if other is not None:
        other_params = other(params)
    elif "epsilon" in {f.name for f in dataclasses.fields(params)}:
        other_params = _other_by_epsilon(params)
    else:
        other_params = None
    return proto, params, reports, parts, other_params


def _slice(reports, start, stop):
    return type(reports).from_columns({k: v[start:stop] for k, v in reports.columns().items()})


def _agg(proto, params, *batches):
    agg = proto.aggregator(params)
    for batch in batches:
        assert agg.update(batch) is agg
    return agg


def test_empty_aggregator_is_the_merge_identity(case):
    proto, params, reports, parts, _ = case
    full = _agg(proto, params, reports)
    blob = full.to_bytes()
    assert proto.aggregator(params).merge(full).to_bytes() == blob
    assert full.merge(proto.aggregator(params)).to_bytes() == blob
    empty = proto.aggregator(params)
    assert proto.aggregator.from_bytes(empty.to_bytes()).to_bytes() == empty.to_bytes()


def test_merge_is_exact_associative_and_commutative(case):
    proto, params, reports, (a, b, c), _ = case
    whole = _agg(proto, params, reports).to_bytes()
    in_parts = _agg(proto, params, a, b, c).to_bytes()
    left = _agg(proto, params, a).merge(_agg(proto, params, b)).merge(_agg(proto, params, c))
    right = _agg(proto, params, a).merge(_agg(proto, params, b).merge(_agg(proto, params, c)))
    swapped = _agg(proto, params, c).merge(_agg(proto, params, a)).merge(_agg(proto, params, b))
    assert whole == in_parts == left.to_bytes() == right.to_bytes() == swapped.to_bytes()


def test_merge_modifies_only_the_left_side(case):
    proto, params, _, (a, b, _c), _ = case
    left, right = _agg(proto, params, a), _agg(proto, params, b)
    before = right.to_bytes()
    left.merge(right)
    assert right.to_bytes() == before


def test_merge_refuses_other_parameters_and_other_protocols(case):
    proto, params, _, (a, _b, _c), other_params = case
    agg = _agg(proto, params, a)
    before = agg.to_bytes()
    if other_params is not None:
        assert other_params != params
        with pytest.raises(IncompatibleError, match="different parameters"):
            agg.merge(proto.aggregator(other_params))
    foreign_id = next(pid for pid in protocols() if pid != proto.id) if len(protocols()) > 1 else None
    if foreign_id is not None:
        fp = protocols()[foreign_id]
        fmake, _ = _example(fp)
        if fmake is not None:
            with pytest.raises(IncompatibleError):
                agg.merge(fp.aggregator(fmake()[0]))
            with pytest.raises(FormatError, match="aggregator, not"):
                fp.aggregator.from_bytes(before)
    assert agg.to_bytes() == before


def test_bytes_and_pickle_round_trip(case):
    proto, params, reports, _, _ = case
    agg = _agg(proto, params, reports)
    blob = agg.to_bytes()
    for restored in (proto.aggregator.from_bytes(blob), pickle.loads(pickle.dumps(agg)),
                     load_aggregator(blob), Aggregator.from_bytes(bytearray(blob))):
        assert type(restored) is proto.aggregator
        assert restored == agg
        assert restored.to_bytes() == blob
        np.testing.assert_array_equal(restored.estimate(), agg.estimate())
    header = read_header(blob)
    assert header["protocol"] == proto.id and header["fingerprint"] == params.fingerprint


def test_corrupted_or_truncated_bytes_raise_format_error(case):
    proto, params, reports, _, _ = case
    blob = _agg(proto, params, reports).to_bytes()
    rng = np.random.default_rng(SEED)
    positions = sorted(set(range(min(len(blob), 600))) | set(rng.integers(0, len(blob), 200).tolist()))
    for pos in positions:
        bad = bytearray(blob)
        bad[pos] ^= 1 << int(rng.integers(0, 8))
        with pytest.raises(FormatError):
            proto.aggregator.from_bytes(bytes(bad))
    for length in sorted(set(range(0, 64)) | set(rng.integers(0, len(blob), 100).tolist())):
        with pytest.raises(FormatError):
            proto.aggregator.from_bytes(blob[:length])
    with pytest.raises(FormatError):
        proto.aggregator.from_bytes(blob + b"\x00")
    with pytest.raises(FormatError):
        proto.aggregator.from_bytes("not bytes")


def test_rejected_batch_leaves_the_aggregator_unchanged(case):
    proto, params, reports, (a, b, _c), _ = case
    agg = _agg(proto, params, a)
    before = agg.to_bytes()
    for name, column in b.columns().items():
        info = np.iinfo(column.dtype) if column.dtype.kind in "iu" else np.finfo(column.dtype)
        for position in (0, len(column) - 1):
            bad = copy.copy(b)
            broken = column.copy()
            broken[position] = info.max
            setattr(bad, name, broken)  # bypass construction checks: the aggregator must validate
            with pytest.raises(ReportError):
                agg.update(bad)
            assert agg.to_bytes() == before, f"state changed by a batch with bad {name!r}"
    # A batch with columns of unequal lengths.
    bad = copy.copy(b)
    first = b.column_names()[0]
    setattr(bad, first, getattr(b, first)[:-1])
    with pytest.raises(ReportError):
        agg.update(bad)
    assert agg.to_bytes() == before
