"""Fuzzing: malformed bytes give FormatError in time and memory bounded by their size, and a
batch is added whole or refused (ReportError, IncompatibleError) leaving the state unchanged,
whatever its columns hold or were reassigned to after construction."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import struct
import time
import tracemalloc
import warnings
import zlib
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Tuple, Type

import numpy as np

from .._base import FORMAT_MAGIC, FORMAT_VERSION, Aggregator, Params, Reports, load_aggregator
from ..errors import FormatError, IncompatibleError, ReportError
from ._case import Case, CheckSkipped, register, state_arrays

#: A few-kilobyte blob must be refused within this time and traced allocation, far below
#: what the absurd headers declare (gigabytes to exabytes): a reader that allocated from the
#: header before checking it would exceed them.
TIME_LIMIT_S = 2.0
MEMORY_LIMIT = 64 << 20


def seal(header: Mapping[str, Any], arrays: Mapping[str, Any], raw_header: Optional[bytes] = None) -> bytes:
    """Aggregator bytes (format version 1) with the given header and state arrays (or raw
    ``.npy`` images) and a valid CRC: what a writer that follows the layout but lies about
    the content makes."""
    head = raw_header if raw_header is not None else json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    buf = io.BytesIO()
    buf.write(FORMAT_MAGIC + struct.pack("<HI", FORMAT_VERSION, len(head)) + head)
    buf.write(struct.pack("<I", len(arrays)))
    for name in sorted(arrays):
        value = arrays[name]
        if isinstance(value, bytes):
            image = value
        else:
            raw = io.BytesIO()
            np.save(raw, np.asarray(value), allow_pickle=False)
            image = raw.getvalue()
        buf.write(struct.pack("<HQ", len(name.encode()), len(image)) + name.encode() + image)
    body = buf.getvalue()
    return body + struct.pack("<I", zlib.crc32(body))


def header_of(params: Params) -> Dict[str, Any]:
    """The container header of ``params``."""
    return {"protocol": params.protocol, "params": json.loads(params.to_json())["params"],
            "fingerprint": params.fingerprint}


def reseal(blob: bytes) -> bytes:
    """``blob`` with its CRC-32 recomputed."""
    body = blob[:-4]
    return body + struct.pack("<I", zlib.crc32(body))


def _refuses(load: Callable[[bytes], Any], blob: bytes, what: str, errors: Tuple[Type[BaseException], ...] =
             (FormatError,)) -> None:
    try:
        load(blob)
    except errors:
        return
    raise AssertionError(f"{what}: loaded without {' or '.join(e.__name__ for e in errors)}")


def _load_bounded(load: Callable[[bytes], Aggregator], blob: bytes) -> Optional[Aggregator]:
    """``load(blob)``, or None on FormatError; within :data:`TIME_LIMIT_S` and
    :data:`MEMORY_LIMIT` (plus 4 bytes per input byte) of traced allocations."""
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
        assert elapsed < TIME_LIMIT_S, f"refusing {len(blob)} bytes took {elapsed:.2f} s"
        assert peak < MEMORY_LIMIT + 4 * len(blob), f"refusing {len(blob)} bytes allocated {peak} bytes"


@register("bytes")
def corrupted_or_truncated_bytes_raise_format_error(case: Case) -> None:
    """Every one-bit flip among the first 600 bytes and 200 random ones, 164 truncations, a
    trailing byte and a non-bytes argument: FormatError (the CRC-32 catches them all)."""
    load = case.aggregator.from_bytes
    blob = case.server(case.reports).to_bytes()
    rng = np.random.default_rng(case.options.seed)
    for pos in sorted(set(range(min(len(blob), 600))) | set(rng.integers(0, len(blob), 200).tolist())):
        bad = bytearray(blob)
        bad[pos] ^= 1 << int(rng.integers(0, 8))
        _refuses(load, bytes(bad), f"bit flipped at byte {pos}")
    for length in sorted(set(range(0, 64)) | set(rng.integers(0, len(blob), 100).tolist())):
        _refuses(load, blob[:length], f"truncated to {length} bytes")
    _refuses(load, blob + b"\x00", "one byte appended")
    _refuses(load, "not bytes", "a str")  # type: ignore[arg-type]


def _quiet(load: Callable[[bytes], Aggregator]) -> Callable[[bytes], Aggregator]:
    """``load`` without the warnings numpy's ``.npy`` header parser (``ast.literal_eval``)
    emits for changed header text, e.g. an invalid escape sequence: noise here, and an
    error under ``-W error``."""
    def quiet(blob: bytes) -> Aggregator:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", SyntaxWarning)
            return load(blob)
    return quiet


@register("bytes")
def resealed_changes_load_or_raise_format_error(case: Case) -> None:
    """Bytes changed by someone who recomputes the CRC (every structural byte, a few payload
    bytes, and 100 random 1-4 byte changes) load or raise FormatError, never another error,
    in bounded time and memory; what loads serializes and loads again."""
    load = _quiet(case.aggregator.from_bytes)
    blob = case.server(case.reports).to_bytes()
    rng = np.random.default_rng(case.options.seed + 1)
    # the structure: version, header length and JSON, then per array its entry (name length,
    # size, name) and .npy header; plus a few payload bytes
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
            try:
                load(reseal(bytes(body) + b"\0\0\0\0"))
            except FormatError:
                pass
    for _ in range(100):
        changed = bytearray(blob)
        for pos in rng.integers(8, len(blob) - 4, int(rng.integers(1, 5))):
            changed[int(pos)] = int(rng.integers(0, 256))
        agg = _load_bounded(load, reseal(bytes(changed)))
        if agg is not None:
            assert load(agg.to_bytes()) == agg


_ABSURD_INTS = (2**27, 2**31 + 1, 2**40, 2**62, 2**64 + 1, -1, 0, 10**30)


def _fingerprinted(protocol_id: str, params: Mapping[str, Any]) -> Dict[str, Any]:
    text = json.dumps({"protocol": protocol_id, "params": params}, sort_keys=True, separators=(",", ":"))
    return {"protocol": protocol_id, "params": dict(params), "fingerprint": hashlib.sha256(text.encode()).hexdigest()}


@register("bytes")
def absurd_parameter_values_fail_fast_and_small(case: Case) -> None:
    """Each integer parameter set to huge, negative or zero values, with a matching
    fingerprint (only the size checks stand between the header and an allocation): refused
    or loaded within the time and memory bounds."""
    arrays = state_arrays(case.server(case.reports))
    params = header_of(case.params)["params"]
    names = [name for name, value in params.items() if isinstance(value, int) and not isinstance(value, bool)]
    if not names:
        raise CheckSkipped(f"protocol {case.id!r} has no integer parameter")
    for name in names:
        for absurd in _ABSURD_INTS:
            _load_bounded(Aggregator.from_bytes, seal(_fingerprinted(case.id, {**params, name: absurd}), arrays))


def _npy(shape: str, descr: str = "<i8", extra: bytes = b"") -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}".encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + extra


def _raw(head: bytes, count: int, entries: bytes = b"", header_len: Optional[int] = None) -> bytes:
    """A container with every length field as given and a valid CRC."""
    body = (FORMAT_MAGIC + struct.pack("<HI", FORMAT_VERSION, len(head) if header_len is None else header_len)
            + head + struct.pack("<I", count) + entries)
    return body + struct.pack("<I", zlib.crc32(body))


def _entry(name: bytes, image: bytes, size: Optional[int] = None) -> bytes:
    return struct.pack("<HQ", len(name), len(image) if size is None else size) + name + image


def _structural_corpus(params: Params) -> Iterator[Tuple[str, bytes]]:
    header = header_of(params)
    head = json.dumps(header, sort_keys=True).encode()
    nested_params = json.dumps({**header, "params": "@"}).encode().replace(b'"@"', b"[" * 100_000)
    yield "deep JSON header", _raw(b"[" * 200_000 + b"]" * 200_000, 0)
    yield "deep JSON params", _raw(nested_params, 0)
    yield "huge integer in JSON", _raw(b'{"d": ' + b"9" * 100_000 + b"}", 0)
    yield "header length beyond the end", _raw(head, 0, header_len=2**32 - 1)
    yield "array count 2^32-1", _raw(head, 2**32 - 1)
    yield "array size 2^64-1", _raw(head, 1, _entry(b"n", b"", size=2**64 - 1))
    yield "array name not UTF-8", _raw(head, 1, _entry(b"\xff", _npy("(1,)", extra=b"\0" * 8)))
    yield "array stored twice", _raw(head, 2, 2 * _entry(b"n", _npy("(1,)", extra=b"\0" * 8)))
    yield "npy shape 2^40", _raw(head, 1, _entry(b"n", _npy("(1099511627776,)")))
    yield "npy negative shape", _raw(head, 1, _entry(b"n", _npy("(0, -5)")))
    yield "npy object dtype", _raw(head, 1, _entry(b"n", _npy("(1,)", "|O", b"\0" * 8)))
    yield "npy structured dtype", _raw(head, 1, _entry(b"n", _npy("(1,)", "[('a', '<i8')]", b"\0" * 8)))
    yield "npy deep shape", _raw(head, 1, _entry(b"n", _npy("(" + "1," * 5000 + ")")))
    yield "npy garbage header", _raw(head, 1, _entry(b"n", b"\x93NUMPY\x01\x00\xff\xff" + b"{" * 100))
    yield "params not an object", seal({**header, "params": [1, 2]}, {})
    yield "params nested lists", seal(_fingerprinted(params.protocol, {**header["params"], "d": [[[[[1]]]]]}), {})
    yield "unknown protocol", seal({**header, "protocol": "no-such"}, {})
    yield "unknown authentication", seal({**header, "mac": "md5"}, {})
    yield "fingerprint of other params", seal({**header, "fingerprint": "0" * 64}, {})
    yield "authenticated, MAC missing", seal({**header, "mac": "hmac-sha256"}, {})


@register("bytes")
def structurally_absurd_containers_give_format_error(case: Case) -> None:
    """Containers that lie about their structure (deep JSON, huge counts and sizes, bad
    ``.npy`` headers, unknown protocol or MAC, with valid CRCs): FormatError, fast and small."""
    for what, blob in _structural_corpus(case.params):
        assert _load_bounded(Aggregator.from_bytes, blob) is None, what


@register("bytes")
def impossible_state_values_are_refused(case: Case) -> None:
    """Each integer state array with one entry set to its dtype's extreme (a negative count,
    a count above n, one that would wrap, a value out of range) does not load."""
    state = state_arrays(case.server(case.reports))
    for name, array in state.items():
        if not array.size or array.dtype.kind not in "iu":
            continue
        info = np.iinfo(array.dtype)
        bad = array.copy()
        bad.flat[0] = info.min if info.min < 0 else info.max
        _refuses(case.aggregator.from_bytes, seal(header_of(case.params), {**state, name: bad}),
                 f"state array {name!r} with {bad.flat[0]} first")


@register("bytes")
def keyed_mac_round_trip_and_refusals(case: Case) -> None:
    """Bytes written with a key load with it and only with it; unsigned bytes given a key and
    signed bytes changed (CRC recomputed) are refused."""
    load = case.aggregator.from_bytes
    agg = case.server(case.reports)
    key = b"a secret shared by the servers"
    signed, blob = agg.to_bytes(key=key), agg.to_bytes()
    assert load(signed, key=key) == agg and load_aggregator(signed, key=key) == agg
    for what, data, given, message in (("no key", signed, None, "pass the key"),
                                       ("another key", signed, b"another key", "fail authentication"),
                                       ("unsigned with a key", blob, key, "not authenticated")):
        try:
            load(data, key=given)
        except FormatError as exc:
            assert message in str(exc), (what, exc)
        else:
            raise AssertionError(f"signed bytes loaded with {what}")
    tampered = bytearray(signed)
    tampered[-40] ^= 1  # the last state byte: the CRC is recomputed, the MAC cannot be
    _refuses(lambda b: load(b, key=key), reseal(bytes(tampered)), "signed bytes changed")


def _refused_batch(agg: Aggregator, batch: Any, what: str, errors: Tuple[Type[BaseException], ...] =
                   (ReportError,)) -> None:
    before = agg.to_bytes()
    try:
        agg.update(batch)
    except errors:
        assert agg.to_bytes() == before, f"{what}: the refused batch changed the state"
        return
    raise AssertionError(f"{what}: the batch was added")


@register("batches")
def rejected_batch_leaves_the_aggregator_unchanged(case: Case) -> None:
    """A batch with one column's first or last entry set to its dtype's maximum (assigned
    after construction: the aggregator must check it) is refused whole."""
    agg = case.server(case.parts[0])
    batch = case.parts[1]
    for name, column in batch.columns().items():
        top = np.iinfo(column.dtype).max if column.dtype.kind in "iu" else np.finfo(column.dtype).max
        for position in (0, len(column) - 1):
            bad = copy.copy(batch)
            broken = column.copy()
            broken.reshape(len(column), -1)[position] = top
            setattr(bad, name, broken)
            _refused_batch(agg, bad, f"column {name!r} set to {top} at report {position}")


def _reassignments(column: np.ndarray, several_columns: bool) -> Iterator[Tuple[str, Any]]:
    n = len(column)
    other = {"uint64": np.int64, "int64": np.uint64, "uint32": np.int64, "uint16": np.int32, "int8": np.int16}
    yield "another integer dtype", column.astype(other.get(column.dtype.name, np.int64))
    yield "float", column.astype(np.float64)
    yield "bool", column.astype(bool)
    yield "object", column.astype(object)
    yield "a Python list", column.tolist()
    if several_columns:
        yield "one row short", column[:-1]
    yield "a scalar", column[0]
    yield "an extra dimension", column.reshape((n, 1) + column.shape[1:])
    if column.ndim > 1:
        yield "a missing dimension", column.reshape(n, -1)[:, 0]


@register("batches")
def reassigned_columns_are_checked_again(case: Case) -> None:
    """A column reassigned after construction (another dtype, floats, a list, a scalar, one
    row short, another number of dimensions) is refused by ``update``, state unchanged."""
    agg = case.server(case.parts[0])
    batch = case.parts[1]
    columns = batch.columns()
    for name, column in columns.items():
        for what, replacement in _reassignments(column, len(columns) > 1):
            bad = copy.copy(batch)
            setattr(bad, name, replacement)
            _refused_batch(agg, bad, f"column {name!r} reassigned as {what}")


@register("batches")
def random_column_values_are_added_whole_or_refused(case: Case) -> None:
    """100 batches of 1-6 reports whose columns, each with probability 1/2, hold arbitrary
    values of their dtype (extremes, small numbers, valid values, uniform draws): added
    whole (``n`` grows by the batch size) or refused with ReportError, state unchanged."""
    rng = np.random.default_rng(case.options.seed + 2)
    agg = case.server(case.parts[0])
    batch = case.parts[1]
    for _ in range(100):
        rows = int(rng.integers(1, 7))
        bad = copy.copy(batch)
        for name, column in batch.columns().items():
            if rng.random() < 0.5:
                setattr(bad, name, column[:rows])
                continue
            info = np.iinfo(column.dtype)
            shape = (rows,) + column.shape[1:]
            pool = np.concatenate([np.array([info.min, info.max, 0, 1, info.max - 1], dtype=column.dtype),
                                   column.ravel()[:64]])
            values = np.where(rng.random(shape) < 0.5, rng.choice(pool, shape),
                              rng.integers(info.min, info.max, shape, dtype=column.dtype, endpoint=True))
            setattr(bad, name, values.astype(column.dtype))
        before, count = agg.to_bytes(), getattr(agg, "n", None)
        try:
            agg.update(bad)
        except ReportError:
            assert agg.to_bytes() == before, "a refused batch changed the state"
        else:
            assert count is None or getattr(agg, "n") == count + rows, "a batch was added in part"  # noqa: B009


@register("batches")
def batches_made_with_other_parameters_are_refused(case: Case) -> None:
    """A batch whose fingerprint is of other parameters (another epsilon) is refused with an
    IncompatibleError naming both; the same batch built by hand (no fingerprint) is added."""
    other = case.other_params()
    if other is None:
        raise CheckSkipped(f"protocol {case.id!r} has no epsilon to change")
    agg = case.server(case.parts[0])
    foreign: Reports = copy.copy(case.reports)
    foreign.params_fingerprint = other.fingerprint
    before = agg.to_bytes()
    try:
        agg.update(foreign)
    except IncompatibleError as exc:
        assert "other parameters" in str(exc), exc
        assert str(getattr(other, "epsilon")) in str(exc) and str(getattr(case.params, "epsilon")) in str(exc), exc  # noqa: B009
    else:
        raise AssertionError("a batch made with other parameters was added")
    assert agg.to_bytes() == before
    foreign.params_fingerprint = None
    agg.update(foreign)


@register("batches")
def clients_record_the_fingerprint(case: Case) -> None:
    """Batches from ``perturb`` carry their parameters' fingerprint (not as a column)."""
    assert case.reports.params_fingerprint == case.params.fingerprint
    assert "params_fingerprint" not in case.reports.columns()


@register("batches")
def batch_with_unequal_columns_is_rejected(case: Case) -> None:
    """A batch whose first column lost its last row is refused, state unchanged."""
    batch = case.parts[1]
    if len(batch.column_names()) < 2:
        raise CheckSkipped("a single column cannot have unequal lengths")
    bad = copy.copy(batch)
    first = batch.column_names()[0]
    setattr(bad, first, getattr(batch, first)[:-1])
    _refused_batch(case.server(case.parts[0]), bad, "one column a row short")
