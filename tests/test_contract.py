"""The aggregator contract, checked generically for every registered protocol.

Each protocol's case is its registered ``Protocol.example`` (required for the protocols
shipped with ldpfast; others without one are skipped with a reason that names them), plus
``SERVER_OPTIONS`` for servers with options. The toy protocol (tests/_toy_protocol.py) is
always included so the harness itself is exercised.
"""

import copy
import dataclasses
import hashlib
import inspect
import json
import pickle
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest

import _toy_protocol  # noqa: F401  (registers "toy-count")
from ldpfast._base import Aggregator, load_aggregator, params_from_json, protocols, read_header
from ldpfast.errors import FormatError, IncompatibleError, ReportError

SEED = 20261121


def _family(pid, name):
    return getattr(protocols()[pid], name)


#: Extra cases for server options (case id -> (protocol id, zero(params) -> empty
#: aggregator)), run on the protocol's registered example. Every registered protocol's
#: own case comes from its ``Protocol.example``.
SERVER_OPTIONS = {
    "ocms-candidates": ("ocms", lambda params: _family("ocms", "aggregator")(params, candidates=np.arange(0, 300, 7))),
    "cms-rappor-candidates": ("cms-rappor", lambda params: _family("cms-rappor", "aggregator")(
        params, candidates=np.arange(0, 300, 7))),
}


def _estimate(agg):
    """``estimate()``, or for aggregators that need candidates, the first 64 values."""
    first = next(iter(inspect.signature(agg.estimate).parameters.values()), None)
    if first is not None and first.default is inspect.Parameter.empty:
        return agg.estimate(np.arange(min(agg.params.d, 64)))
    return agg.estimate()


def contract_cases():
    """case id -> (protocol id, example, zero factory or None): every registered protocol
    with a ``Protocol.example``, plus the server-option cases."""
    registered = protocols()
    out = {pid: (pid, proto.example, None) for pid, proto in sorted(registered.items()) if proto.example}
    out.update({case_id: (pid, registered[pid].example, zero) for case_id, (pid, zero) in SERVER_OPTIONS.items()
                if pid in registered})
    return out


def _cases():
    """The contract cases as fixture parameters; a registered protocol without an example is
    listed as skipped here and, when it ships with ldpfast, fails
    test_every_builtin_protocol_registers_an_example."""
    out = [pytest.param(case, id=case_id) for case_id, case in contract_cases().items()]
    out += [pytest.param((pid, None, None), id=pid, marks=pytest.mark.skip(
        reason=f"protocol {pid!r} has no contract example (Protocol.example)"))
        for pid, proto in sorted(protocols().items()) if proto.example is None]
    return out


def test_every_builtin_protocol_registers_an_example():
    missing = sorted(pid for pid, proto in protocols().items() if proto.builtin and proto.example is None)
    assert not missing, ("built-in protocols without Protocol.example (needed by these tests and the golden "
                         f"files): {missing}")


@pytest.fixture(scope="module", params=_cases())
def case(request):
    return make_case(*request.param)


def make_case(pid, make, zero=None):
    """(protocol, params, all reports, three batches, different params or None, zero factory)
    for protocol ``pid``, whose example ``make()`` gives (params, client inputs); the checks
    below take this tuple (tests/test_contributing.py runs them on its own protocol)."""
    proto = protocols()[pid]
    params, values = make()
    with warnings.catch_warnings():  # PrivSketch clients warn that they are not eps-LDP
        warnings.simplefilter("ignore")
        reports = proto.client(params, rng=SEED).perturb(values)
    n = len(reports)
    cuts = [0, n // 5, n // 2, n]
    parts = [_slice(reports, cuts[i], cuts[i + 1]) for i in range(3)]
    other_params = None
    if "epsilon" in {f.name for f in dataclasses.fields(params)}:
        other_params = dataclasses.replace(params, epsilon=params.epsilon * 1.5)
    zero = zero or proto.aggregator
    return proto, params, reports, parts, other_params, zero


def _slice(reports, start, stop):
    return type(reports).from_columns({k: v[start:stop] for k, v in reports.columns().items()})


def _agg(case, *batches):
    agg = case[5](case[1])
    for batch in batches:
        assert agg.update(batch) is agg
    return agg


def test_empty_aggregator_is_the_merge_identity(case):
    proto, params, reports, parts, _, zero = case
    full = _agg(case, reports)
    blob = full.to_bytes()
    assert zero(params).merge(full).to_bytes() == blob
    assert full.merge(zero(params)).to_bytes() == blob
    empty = zero(params)
    assert proto.aggregator.from_bytes(empty.to_bytes()).to_bytes() == empty.to_bytes()


def test_merge_is_exact_associative_and_commutative(case):
    proto, params, reports, (a, b, c), _, zero = case
    whole = _agg(case, reports).to_bytes()
    in_parts = _agg(case, a, b, c).to_bytes()
    left = _agg(case, a).merge(_agg(case, b)).merge(_agg(case, c))
    right = _agg(case, a).merge(_agg(case, b).merge(_agg(case, c)))
    swapped = _agg(case, c).merge(_agg(case, a)).merge(_agg(case, b))
    assert whole == in_parts == left.to_bytes() == right.to_bytes() == swapped.to_bytes()


def test_update_is_the_shared_template(case):
    """Every server adds batches through ``Aggregator.update`` (checked batch, fingerprint,
    one-step commit under the lock) and implements only ``_validate``/``_ingest``."""
    proto, params, _, _, _, zero = case
    agg = zero(params)
    assert type(agg).update is Aggregator.update
    assert type(agg)._ingest is not Aggregator._ingest
    assert hasattr(agg, "_st"), "the committed state lives in one attribute"


def test_merge_modifies_only_the_left_side(case):
    proto, params, _, (a, b, _c), _, zero = case
    left, right = _agg(case, a), _agg(case, b)
    before = right.to_bytes()
    left.merge(right)
    assert right.to_bytes() == before


def test_merge_refuses_other_parameters_and_other_protocols(case):
    proto, params, _, (a, _b, _c), other_params, zero = case
    agg = _agg(case, a)
    before = agg.to_bytes()
    if other_params is not None:
        assert other_params != params
        with pytest.raises(IncompatibleError, match="different parameters"):
            agg.merge(zero(other_params))
    foreign = _toy_protocol.PROTOCOL if proto.id != _toy_protocol.PROTOCOL_ID else protocols().get("grr")
    if foreign is not None:
        stranger = foreign.aggregator(foreign.example()[0])
        with pytest.raises(IncompatibleError):
            agg.merge(stranger)
        with pytest.raises(FormatError, match="aggregator, not"):
            foreign.aggregator.from_bytes(before)
    assert agg.to_bytes() == before


def test_bytes_and_pickle_round_trip(case):
    proto, params, reports, _, _, zero = case
    agg = _agg(case, reports)
    blob = agg.to_bytes()
    for restored in (proto.aggregator.from_bytes(blob), pickle.loads(pickle.dumps(agg)),
                     load_aggregator(blob), Aggregator.from_bytes(bytearray(blob)), copy.copy(agg),
                     copy.deepcopy(agg)):
        assert type(restored) is proto.aggregator
        assert restored == agg
        assert restored.to_bytes() == blob
        np.testing.assert_array_equal(_estimate(restored), _estimate(agg))
    header = read_header(blob)
    assert header["protocol"] == proto.id and header["fingerprint"] == params.fingerprint


def test_corrupted_or_truncated_bytes_raise_format_error(case):
    proto, params, reports, _, _, zero = case
    blob = _agg(case, reports).to_bytes()
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
    proto, params, reports, (a, b, _c), _, zero = case
    agg = _agg(case, a)
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


def test_batch_with_unequal_columns_is_rejected(case):
    proto, params, reports, (a, b, _c), _, zero = case
    if len(b.column_names()) < 2:
        pytest.skip("a single column cannot have unequal lengths")
    agg = _agg(case, a)
    before = agg.to_bytes()
    bad = copy.copy(b)
    first = b.column_names()[0]
    setattr(bad, first, getattr(b, first)[:-1])
    with pytest.raises(ReportError):
        agg.update(bad)
    assert agg.to_bytes() == before


# -- golden files of the byte format (written once by tests/golden/make_golden.py) --------
GOLDEN = Path(__file__).resolve().parent / "golden"
MANIFEST = json.loads((GOLDEN / "MANIFEST.json").read_text())


def _golden_cases():
    registered = protocols()
    return [pytest.param(case, id=case, marks=() if entry["protocol"] in registered else
                         pytest.mark.skip(reason=f"protocol {entry['protocol']!r} not in this build"))
            for case, entry in sorted(MANIFEST.items())]


@pytest.mark.parametrize("case_id", _golden_cases())
def test_golden_files_keep_loading_and_estimating(case_id):
    """The committed bytes of format version 1 must load, re-serialize byte for byte and
    estimate the same values. The state is integral and must match exactly; estimates go
    through floating-point debiasing, whose last bits may legitimately differ between
    numpy versions or kernels, hence the 1e-12 relative tolerance."""
    entry = MANIFEST[case_id]
    blob = (GOLDEN / f"{case_id}.bin").read_bytes()
    assert hashlib.sha256(blob).hexdigest() == entry["sha256"]
    agg = load_aggregator(blob)
    assert type(agg) is protocols()[entry["protocol"]].aggregator
    assert agg.params == params_from_json(entry["params"])
    assert agg.to_bytes() == blob
    expected = np.load(GOLDEN / f"{case_id}.estimate.npy", allow_pickle=False)
    np.testing.assert_allclose(_estimate(agg), expected, rtol=1e-12, atol=1e-15)


def test_every_builtin_protocol_has_a_golden_file():
    """A protocol shipped with ldpfast keeps its byte format only if a golden file pins it."""
    builtin = {pid for pid, proto in protocols().items() if proto.builtin}
    missing = sorted(builtin - {e["protocol"] for e in MANIFEST.values()})
    assert not missing, (f"no golden file for {missing}: run PYTHONPATH=python python tests/golden/make_golden.py "
                         "(it writes one from each new protocol's Protocol.example) and commit the files")


def test_future_format_versions_are_refused_by_name():
    params, values = _toy_protocol._example()
    blob = bytearray(_toy_protocol.ToyServer(params).update(
        _toy_protocol.ToyClient(params, rng=1).perturb(values)).to_bytes())
    blob[8:10] = (2).to_bytes(2, "little")
    body = bytes(blob[:-4])
    resealed = body + zlib.crc32(body).to_bytes(4, "little")
    with pytest.raises(FormatError, match="unsupported aggregator format version 2"):
        Aggregator.from_bytes(resealed)
    with pytest.raises(FormatError, match="version 2 .*or corrupt"):
        Aggregator.from_bytes(bytes(blob))


def test_reports_round_trip_through_parquet(case, tmp_path):
    """Every protocol's report batches survive Arrow/Parquet (multi-dimensional columns
    included) and aggregate to the same bytes."""
    pytest.importorskip("pyarrow")
    from ldpfast import arrow

    proto, params, reports, _, _, zero = case
    path = tmp_path / "r.parquet"
    arrow.write_parquet(reports, path, params, row_group_size=500)
    got_params, got = arrow.read_parquet(path)
    assert got_params == params and type(got) is type(reports)
    for name, column in reports.columns().items():
        assert getattr(got, name).dtype == column.dtype
        np.testing.assert_array_equal(getattr(got, name), column)
    streamed = _agg(case, *(batch for _, batch in arrow.iter_parquet(path, batch_rows=700)))
    assert streamed.to_bytes() == _agg(case, reports).to_bytes()


def test_resealed_tampering_raises_only_format_error(case):
    """Bytes changed and re-checksummed (so the CRC passes) must either load or raise
    FormatError: never struct.error, KeyError, UnicodeDecodeError or a numpy error."""
    proto, params, reports, _, _, zero = case
    blob = _agg(case, reports).to_bytes()
    rng = np.random.default_rng(SEED + 1)
    # The structure: version, header length and JSON, then per array its entry (name
    # length, size, name) and .npy header; plus a few payload bytes.
    header_end = 14 + int.from_bytes(blob[10:14], "little") + 4
    positions = set(range(8, header_end + 2))
    start = blob.find(b"\x93NUMPY")
    while start >= 0:
        positions |= set(range(max(header_end, start - 24), min(len(blob) - 4, start + 128), 3))
        start = blob.find(b"\x93NUMPY", start + 1)
    positions |= set(rng.integers(8, len(blob) - 4, 20).tolist())
    for pos in sorted(positions):
        for flip in (1, 0x80):
            body = bytearray(blob[:-4])
            body[pos] ^= flip
            resealed = bytes(body) + zlib.crc32(body).to_bytes(4, "little")
            try:
                proto.aggregator.from_bytes(resealed)
            except FormatError:
                pass


def test_params_are_hashable_and_round_trip_through_json(case):
    proto, params, _, _, _, _ = case
    again = params_from_json(params.to_json())
    assert type(again) is type(params) and again == params and hash(again) == hash(params)
    assert again.fingerprint == params.fingerprint
    assert type(params).from_json(params.to_json()) == params
    assert pickle.loads(pickle.dumps(params)) == params
    with pytest.raises(FormatError):
        params_from_json('{"protocol": "no-such-protocol", "params": {}}')
    with pytest.raises(FormatError):
        params_from_json("not json")


def test_wire_encoding_round_trips_where_registered(case):
    """Protocols with a wire encoding (``Protocol.wire_fields`` or ``Reports.wire_fields``)
    decode what they encode, in both framings, to a batch the aggregator accepts."""
    from ldpfast import wire

    proto, params, reports, (a, _b, _c), _, zero = case
    try:
        wire.fields(params)
    except NotImplementedError:
        pytest.skip(f"protocol {proto.id!r} has no wire encoding")
    back = wire.decode(params, wire.encode(params, a), len(a))
    assert back == a and back.params_fingerprint == params.fingerprint
    first = _slice(a, 0, 50)
    assert wire.decode_each(params, wire.encode_each(params, first)) == first
    assert _agg(case, back).to_bytes() == _agg(case, a).to_bytes()


def test_frequencies_have_standard_errors_or_say_why(case):
    """``frequencies()`` gives finite standard errors from the registered closed form
    (``Protocol.variance``), or NaN with a note saying why there is none."""
    proto, params, reports, _, _, zero = case
    agg = _agg(case, reports)
    first = next(iter(inspect.signature(agg.estimate).parameters.values()), None)
    needs_candidates = first is not None and first.default is inspect.Parameter.empty
    est = agg.frequencies(np.arange(min(params.d, 16)) if needs_candidates else None)
    assert est.values.shape == est.std.shape == est.candidates.shape and est.note
    if np.isnan(est.std).all():
        assert proto.variance is None or "no closed-form" in est.note
    else:
        assert proto.variance is not None and np.isfinite(est.std).all() and (est.std > 0).all()
