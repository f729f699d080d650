"""Deserialization fuzzing, for every registered protocol: whatever the bytes, ``from_bytes``
either returns a valid aggregator or raises FormatError, in time and memory bounded by the
input's size (never MemoryError, ValueError, RecursionError, OverflowError, ...).

Bounds: a few-kilobyte blob must be refused within ``TIME_LIMIT`` seconds and
``MEMORY_LIMIT`` bytes of traced allocations (numpy registers its buffers with
tracemalloc), far below what the absurd headers declare (gigabytes to exabytes), so a
reader that allocated from the header before checking would fail them."""

import hashlib
import json
import struct
import time
import tracemalloc
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _fuzz_cases import case_params, example, header_of, reseal, seal
from ldpfast._base import FORMAT_MAGIC, FORMAT_VERSION, Aggregator, load_aggregator
from ldpfast.protocols import privsketch_ldp, ps_olh, svim
from ldpfast.errors import FormatError

TIME_LIMIT = 2.0
MEMORY_LIMIT = 64 << 20
CASES = case_params()


@pytest.fixture(scope="module", params=CASES)
def blob_case(request):
    proto, params, reports, make = example(request.param)
    agg = make(params).update(reports)
    return proto, params, agg, agg.to_bytes()


def _load_bounded(load, blob):
    """``load(blob)``: returns the aggregator or None for FormatError; asserts the bounds."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        return load(blob)
    except FormatError:
        return None
    finally:
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert elapsed < TIME_LIMIT, f"took {elapsed:.2f} s"
        assert peak < MEMORY_LIMIT + 4 * len(blob), f"allocated {peak} bytes"


_FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_FUZZ
@given(data=st.data())
def test_truncated_or_flipped_bytes_raise_format_error(blob_case, data):
    proto, _, _, blob = blob_case
    cut = data.draw(st.integers(0, len(blob) - 1), label="length")
    with pytest.raises(FormatError):
        proto.aggregator.from_bytes(blob[:cut])
    pos = data.draw(st.integers(0, len(blob) - 1), label="position")
    bit = data.draw(st.integers(0, 7), label="bit")
    flipped = bytearray(blob)
    flipped[pos] ^= 1 << bit
    with pytest.raises(FormatError):  # the CRC-32 catches every single-bit error
        proto.aggregator.from_bytes(bytes(flipped))


@_FUZZ
@given(data=st.data())
def test_resealed_changes_load_or_raise_format_error(blob_case, data):
    """Bytes changed by someone who recomputes the CRC (1 to 4 random bytes, anywhere)."""
    proto, _, _, blob = blob_case
    changed = bytearray(blob)
    for _ in range(data.draw(st.integers(1, 4), label="changes")):
        pos = data.draw(st.integers(8, len(blob) - 5), label="position")
        changed[pos] = data.draw(st.integers(0, 255), label="value")
    agg = _load_bounded(proto.aggregator.from_bytes, reseal(bytes(changed)))
    if agg is not None:  # a valid aggregator: it serializes and loads again
        assert proto.aggregator.from_bytes(agg.to_bytes()) == agg


def _fingerprinted(protocol_id, params_dict):
    text = json.dumps({"protocol": protocol_id, "params": params_dict}, sort_keys=True, separators=(",", ":"))
    return {"protocol": protocol_id, "params": params_dict, "fingerprint": hashlib.sha256(text.encode()).hexdigest()}


ABSURD_INTS = (2**27, 2**31 + 1, 2**40, 2**62, 2**64 + 1, -1, 0, 10**30)


def test_absurd_parameter_values_fail_fast_and_small(blob_case):
    """Every integer parameter set to huge, negative or zero values, with a matching
    fingerprint (so only the size checks stand between the header and an allocation)."""
    proto, params, agg, blob = blob_case
    arrays = {name: np.asarray(value) for name, value in agg._state().items()}
    tried = 0
    for name, value in header_of(params)["params"].items():
        if isinstance(value, bool) or not isinstance(value, int):
            continue
        for absurd in ABSURD_INTS:
            header = _fingerprinted(proto.id, {**header_of(params)["params"], name: absurd})
            loaded = _load_bounded(Aggregator.from_bytes, seal(header, arrays))
            if loaded is not None:  # e.g. OCMS keeping reports: the state does not grow with d
                assert loaded.to_bytes() == seal(header, arrays) or type(loaded) is proto.aggregator
            tried += 1
    assert tried > 0 or proto.id == "toy-count"


def test_headers_declaring_huge_states_are_refused_before_allocating():
    """The issue's reproducer: a 300-byte blob declaring PrivSketch with d = 2^27 (and the
    same for every fixed-size state: GRR d = 2^40, HRR d = 2^30, SVIM d = 2^40)."""
    from ldpfast.protocols import grr, hadamard, privsketch

    for params in (privsketch.Params.create(epsilon=1.0, d=2**27, K=2, M=8, seed=1),
                   grr.Params(epsilon=10.0, d=2**40), hadamard.HRRParams(epsilon=1.0, d=2**30),
                   svim.SVIMItemParams(epsilon=1.0, d=2**40)):
        blob = seal(header_of(params), {})
        assert len(blob) < 600
        assert _load_bounded(Aggregator.from_bytes, blob) is None


def _npy(shape, descr="<i8", extra=b""):
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}".encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + extra


def _raw(head: bytes, count: int, entries: bytes = b"", header_len: int = None) -> bytes:
    """A container with every length field as given and a valid CRC."""
    body = (FORMAT_MAGIC + struct.pack("<HI", FORMAT_VERSION, len(head) if header_len is None else header_len)
            + head + struct.pack("<I", count) + entries)
    return body + struct.pack("<I", zlib.crc32(body))


def _entry(name: bytes, image: bytes, size: int = None) -> bytes:
    return struct.pack("<HQ", len(name), len(image) if size is None else size) + name + image


def _structural_corpus(params):
    """Containers that lie about their structure (with valid CRCs); each must give
    FormatError."""
    header = header_of(params)
    head = json.dumps(header, sort_keys=True).encode()
    nested_params = json.dumps({**header, "params": "@"}).encode().replace(b'"@"', b"[" * 100_000)
    return {
        "deep JSON header": _raw(b"[" * 200_000 + b"]" * 200_000, 0),
        "deep JSON params": _raw(nested_params, 0),
        "huge integer in JSON": _raw(b'{"d": ' + b"9" * 100_000 + b"}", 0),
        "header length beyond the end": _raw(head, 0, header_len=2**32 - 1),
        "array count 2^32-1": _raw(head, 2**32 - 1),
        "array size 2^64-1": _raw(head, 1, _entry(b"n", b"", size=2**64 - 1)),
        "array name not UTF-8": _raw(head, 1, _entry(b"\xff", _npy("(1,)", extra=b"\0" * 8))),
        "array stored twice": _raw(head, 2, 2 * _entry(b"n", _npy("(1,)", extra=b"\0" * 8))),
        "npy shape 2^40": _raw(head, 1, _entry(b"n", _npy("(1099511627776,)"))),
        "npy negative shape": _raw(head, 1, _entry(b"n", _npy("(0, -5)"))),
        "npy object dtype": _raw(head, 1, _entry(b"n", _npy("(1,)", "|O", b"\0" * 8))),
        "npy structured dtype": _raw(head, 1, _entry(b"n", _npy("(1,)", "[('a', '<i8')]", b"\0" * 8))),
        "npy deep shape": _raw(head, 1, _entry(b"n", _npy("(" + "1," * 5000 + ")"))),
        "npy garbage header": _raw(head, 1, _entry(b"n", b"\x93NUMPY\x01\x00\xff\xff" + b"{" * 100)),
        "params not an object": seal({**header, "params": [1, 2]}, {}),
        "params nested lists": seal(_fingerprinted(params.protocol, {**header["params"], "d": [[[[[1]]]]]}), {}),
        "unknown protocol": seal({**header, "protocol": "no-such"}, {}),
        "unknown authentication": seal({**header, "mac": "md5"}, {}),
        "fingerprint of other params": seal({**header, "fingerprint": "0" * 64}, {}),
        "authenticated, MAC missing": seal({**header, "mac": "hmac-sha256"}, {}),
    }


def test_structurally_absurd_containers_give_format_error(blob_case):
    proto, params, _, blob = blob_case
    for name, bad in _structural_corpus(params).items():
        assert _load_bounded(Aggregator.from_bytes, bad) is None, name


def _extreme(dtype):
    info = np.iinfo(dtype)
    return info.min if info.min < 0 else info.max


def test_impossible_state_values_are_refused(blob_case):
    """Each state array with one entry set to its dtype's extreme (a negative count, a
    count above n, one that would wrap, a value out of range) must not load."""
    proto, params, agg, _ = blob_case
    if proto.id == "toy-count":
        pytest.skip("the toy test double checks no state values")
    state = {name: np.array(value) for name, value in agg._state().items()}
    for name, array in state.items():
        if not array.size or array.dtype.kind not in "iu":
            continue
        bad = array.copy()
        bad.flat[0] = _extreme(array.dtype)
        blob = seal(header_of(params), {**state, name: bad})
        with pytest.raises(FormatError):
            proto.aggregator.from_bytes(blob)


def test_negative_report_count_and_inconsistent_counts():
    from ldpfast.protocols import hadamard

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


# -- keyed authentication --------------------------------------------------------------
def test_keyed_mac_round_trip_and_refusals(blob_case):
    proto, params, agg, blob = blob_case
    key = b"a secret shared by the servers"
    signed = agg.to_bytes(key=key)
    assert proto.aggregator.from_bytes(signed, key=key) == agg
    assert load_aggregator(signed, key=key) == agg
    with pytest.raises(FormatError, match="pass the key"):
        proto.aggregator.from_bytes(signed)
    with pytest.raises(FormatError, match="fail authentication"):
        proto.aggregator.from_bytes(signed, key=b"another key")
    with pytest.raises(FormatError, match="not authenticated"):
        proto.aggregator.from_bytes(blob, key=key)
    tampered = bytearray(signed)
    tampered[-40] ^= 1  # the last state byte; the CRC is recomputed, the MAC cannot be
    with pytest.raises(FormatError, match="fail authentication"):
        proto.aggregator.from_bytes(reseal(bytes(tampered)), key=key)
    # stripping the MAC (header flag and code) and resealing is refused when a key is given
    assert blob != signed


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
    from ldpfast.protocols import hashtogram

    params = hashtogram.Params(epsilon=1.0, d=64, R=5, T=4, hash_seed=1)
    server = hashtogram.Server(params).update(hashtogram.Client(params, rng=1).perturb(np.arange(64)))
    state = dict(server._state())
    sizes = state["group_sizes"] + np.array([2**62] * 4 + [0], dtype=np.int64)
    assert int(sizes.sum()) == int(state["n"][0])  # numpy's int64 sum wraps
    with pytest.raises(FormatError, match="add up"):
        hashtogram.Server.from_bytes(seal(header_of(params), {**state, "group_sizes": sizes}))
