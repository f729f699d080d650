"""Compact wire encoding of reports: exactly the bits the papers count for one report.

Each protocol declares the fields of one report, in order, as :class:`WireField`
``(column, bits)`` (an unsigned value in ``[0, 2**bits)``) or ``(column, bits, codebook)``
(a value from ``codebook``, sent as its index), optionally with the decoded dtype. One report is
the concatenation of its fields, most significant bit first; for OCMS with a prime field
``pH`` and hash range ``m`` that is ``2 ceil(log2 pH) + ceil(log2 m)`` bits ([PAN]
section 2.4).

Two framings:

* :func:`encode_each` / :func:`decode_each`: one message per client, ``ceil(bits/8)``
  bytes, the spare low bits of the last byte zero. This is what a client sends.
* :func:`encode` / :func:`decode`: a batch packed back to back, ``ceil(n*bits/8)`` bytes
  (no per-report padding), for moving many reports between servers.

Neither framing carries the parameters: both ends must agree on them (they define the
field widths). The encoder refuses a batch made with other parameters, and the decoded
batch records the decoder's (``Reports.params_fingerprint``). Decoding checks lengths and
padding, rejects values outside a field's range or codebook, and then runs the protocol's
own batch validation, so anything that decodes is a batch the aggregator accepts.

Adding the wire encoding to a protocol: pass ``wire_fields`` to its registration
(:class:`ldpfast._base.Protocol`), a function of the parameters returning
:class:`WireField` tuples ``(column, bits[, codebook[, dtype[, shape]]])``, e.g.::

    register_protocol(Protocol("ocms", Params, Reports, Server, Client, ...,
                               wire_fields=lambda p: [("z", bits_for(p.m)), ("a0", bits_for(p.field_size)),
                                                      ("a1", bits_for(p.field_size))]))

(or a ``wire_fields`` classmethod on the ``Reports`` class, which takes precedence, or,
from outside the protocol's module, :func:`register_fields`). Multi-dimensional columns
(sketches, ordering matrices) declare their per-report ``shape`` and send every entry in
the field's width. Fields are at most 64 bits wide (columns are numpy integer arrays).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ._base import Params, Reports, WireField, bits_for, protocol
from ._registry import _REGISTRY
from .errors import IncompatibleError, ReportError

__all__ = ["WireField", "bits_for", "report_bits", "fields", "register_fields", "encode", "decode",
           "encode_each", "decode_each"]

_CHUNK = 1 << 16  # reports packed per step (bounds the temporary bit matrix)
_base_wire_fields = vars(Reports)["wire_fields"].__func__  # the function under Reports' classmethod


def register_fields(protocol_id: str, fields_of: Callable[[Params], Sequence[Any]]) -> None:
    """Declare the wire fields of a registered protocol from outside its module (sets the
    registration's ``wire_fields``; the Reports class's own ``wire_fields`` still takes
    precedence)."""
    known = protocol(protocol_id)
    _REGISTRY[protocol_id] = dataclasses.replace(known, wire_fields=fields_of)


def fields(params: Params) -> List[WireField]:
    """The wire fields of one report of the protocol ``params`` belong to, checked.

    Raises:
        NotImplementedError: the protocol has no wire encoding.
    """
    proto = protocol(params.protocol)
    reports_type = proto.reports
    own = getattr(reports_type.wire_fields, "__func__", None) is not _base_wire_fields
    if own:
        declared = reports_type.wire_fields(params)
    elif proto.wire_fields is not None:
        declared = proto.wire_fields(params)
    else:
        raise NotImplementedError(f"protocol {params.protocol!r} has no wire encoding: register it with "
                                  f"Protocol(..., wire_fields=...) (see ldpfast.wire)")
    out: List[WireField] = []
    names = reports_type.column_names()
    for spec in declared:
        field = WireField(*spec)
        name, bits = field.column, int(field.bits)
        codebook = None if field.codebook is None else tuple(int(v) for v in field.codebook)
        dtype = field.dtype or ("int64" if codebook is not None else "uint64")
        if name not in names:
            raise ValueError(f"wire fields of {params.protocol!r} name unknown column {name!r}")
        if not 0 <= bits <= 64:
            raise ValueError(f"wire field {name!r} must be 0..64 bits, got {bits}")
        if codebook is not None and len(codebook) > (1 << bits):
            raise ValueError(f"wire field {name!r}: {len(codebook)} codebook entries need more "
                             f"than {bits} bits")
        shape = tuple(int(v) for v in field.shape)
        if any(v < 1 for v in shape):
            raise ValueError(f"wire field {name!r} must have a positive shape, got {shape}")
        out.append(WireField(name, bits, codebook, np.dtype(dtype).name, shape))
    if sorted(f.column for f in out) != sorted(names):
        raise ValueError(f"wire fields of {params.protocol!r} must cover the columns {names} once each")
    return out


def report_bits(params: Params) -> int:
    """Bits in one report of the protocol ``params`` belong to."""
    return sum(f.bits * _entries(f) for f in fields(params))


def _entries(field: WireField) -> int:
    """Values of ``field`` in one report (1 for a 1-D column)."""
    return int(np.prod(field.shape, dtype=np.int64)) if field.shape else 1


def _to_codes(name: str, column: np.ndarray, bits: int, codebook: Optional[Sequence[int]]) -> np.ndarray:
    """The unsigned field values of a column (validated to fit ``bits``)."""
    column = np.asarray(column)
    if codebook is not None:
        book = np.asarray(codebook, dtype=np.int64)
        order = np.argsort(book, kind="stable")
        ranks = np.searchsorted(book[order], column)
        ranks = np.minimum(ranks, len(book) - 1)
        codes = order[ranks]
        bad = book[codes] != column
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ReportError(f"report column {name!r} must take values in {book.tolist()}, "
                              f"got {column[i]!r} at index {i}")
        return codes.astype(np.uint64)
    if column.dtype.kind not in "iub":
        raise ReportError(f"report column {name!r} must be integral for the wire encoding, "
                          f"got dtype {column.dtype}")
    if column.dtype.kind == "i" and column.size and column.min() < 0:
        i = int(np.argmin(column))
        raise ReportError(f"report column {name!r} must be non-negative, got {column[i]} at index {i}")
    codes = column.astype(np.uint64)
    if bits < 64 and codes.size and codes.max() >> np.uint64(bits):
        i = int(np.argmax(codes >> np.uint64(bits) != 0))
        raise ReportError(f"report column {name!r} must be < 2**{bits}, got {column[i]} at index {i}")
    return codes


def _bit_matrix(codes: Sequence[np.ndarray], widths: Sequence[int]) -> np.ndarray:
    """(n, sum(widths)) uint8 matrix of the fields' bits, most significant first."""
    parts = []
    for values, bits in zip(codes, widths):
        if bits == 0:
            continue
        big_endian = values.astype(">u8").view(np.uint8).reshape(-1, 8)
        parts.append(np.unpackbits(big_endian, axis=1)[:, 64 - bits:])
    return np.concatenate(parts, axis=1) if parts else np.zeros((len(codes[0]), 0), np.uint8)


def _codes_of(params: Params, reports: Reports) -> Tuple[List[int], List[np.ndarray]]:
    if reports.protocol != params.protocol:
        raise IncompatibleError(f"reports are {reports.protocol!r}, params are {params.protocol!r}")
    made_with = reports.params_fingerprint
    if made_with is not None and made_with != params.fingerprint:
        raise IncompatibleError(f"the reports were made with other parameters (fingerprint {made_with[:16]}) "
                                f"than the given {params}")
    spec = fields(params)
    columns = reports.columns()
    codes: List[np.ndarray] = []
    widths: List[int] = []
    for f in spec:
        column = np.asarray(columns[f.column])
        if column.shape[1:] != f.shape:
            raise ReportError(f"report column {f.column!r} must have shape (n, {', '.join(map(str, f.shape))}) "
                              f"for the wire encoding, got {column.shape}")
        flat = column.reshape(column.shape[0], _entries(f))
        for entry in range(flat.shape[1]):
            codes.append(_to_codes(f.column, flat[:, entry], f.bits, f.codebook))
            widths.append(f.bits)
    return widths, codes


def encode(params: Params, reports: Reports) -> bytes:
    """Pack a batch back to back: ``ceil(len(reports) * report_bits(params) / 8)`` bytes.

    Raises:
        ReportError: a value does not fit its field.
    """
    widths, codes = _codes_of(params, reports)
    n = len(reports)
    out = []
    for start in range(0, n, _CHUNK):  # _CHUNK is a multiple of 8: chunks end on a byte
        chunk = [c[start:start + _CHUNK] for c in codes]
        out.append(np.packbits(_bit_matrix(chunk, widths).reshape(-1)).tobytes())
    return b"".join(out)


def _columns_from_bits(spec: Sequence[WireField], bitmat: np.ndarray) -> Dict[str, np.ndarray]:
    columns = {}
    offset = 0
    n = bitmat.shape[0]
    for field in spec:
        name, bits, codebook, dtype = field.column, field.bits, field.codebook, field.dtype
        entries = _entries(field)
        padded = np.zeros((n, entries, 64), np.uint8)
        padded[:, :, 64 - bits:] = bitmat[:, offset:offset + bits * entries].reshape(n, entries, bits)
        offset += bits * entries
        values = np.packbits(padded, axis=2).view(">u8").reshape(n, entries).astype(np.uint64)
        if codebook is not None:
            if values.size and values.max() >= len(codebook):
                i = int(np.argmax((values >= len(codebook)).any(axis=1)))
                raise ReportError(f"wire field {name!r} holds code {int(values[i].max())} at report {i}, "
                                  f"but its codebook has {len(codebook)} entries")
            decoded = np.asarray(codebook, dtype=dtype)[values.astype(np.intp)]
        else:
            decoded = values.astype(dtype)  # fits: values < 2**bits, checked by fields()
        columns[name] = decoded.reshape((n,) + field.shape) if field.shape else decoded.reshape(n)
    return columns


def _finish(params: Params, columns: Dict[str, np.ndarray]) -> Reports:
    """Build the batch and run the protocol's own validation on it."""
    proto = protocol(params.protocol)
    reports = proto.reports.from_columns({n: columns[n] for n in proto.reports.column_names()}, params)
    reports.params_fingerprint = params.fingerprint
    validate = getattr(reports, "validate", None)  # a Reports class's own check, where it has one
    if callable(validate):
        validate(params)
    else:
        proto.aggregator(params).validate(reports)
    return reports


def decode(params: Params, blob: bytes, n: int) -> Reports:
    """Inverse of :func:`encode` for ``n`` reports.

    Raises:
        ReportError: wrong length, non-zero padding, or values the protocol rejects.
    """
    spec = fields(params)
    total = sum(f.bits * _entries(f) for f in spec)
    n = int(n)
    if n < 0:
        raise ReportError(f"n must be >= 0, got {n}")
    expected = (n * total + 7) // 8
    if len(blob) != expected:
        raise ReportError(f"{n} packed reports of {total} bits need {expected} bytes, got {len(blob)}")
    raw = np.frombuffer(bytes(blob), np.uint8)
    if n * total % 8 and raw[-1] & ((1 << (8 - n * total % 8)) - 1):
        raise ReportError("padding bits after the last report must be zero")
    parts = []
    for start in range(0, n, _CHUNK):
        count = min(_CHUNK, n - start)
        first = start * total // 8
        bits = np.unpackbits(raw[first:first + (count * total + 7) // 8])[:count * total]
        parts.append(_columns_from_bits(spec, bits.reshape(count, total)))
    if not parts:
        parts = [_columns_from_bits(spec, np.zeros((0, total), np.uint8))]
    columns = {f.column: np.concatenate([p[f.column] for p in parts]) for f in spec}
    return _finish(params, columns)


def encode_each(params: Params, reports: Reports) -> List[bytes]:
    """One message per report, ``ceil(report_bits(params)/8)`` bytes each."""
    widths, codes = _codes_of(params, reports)
    total = sum(widths)
    size = (total + 7) // 8
    n = len(reports)
    out: List[bytes] = []
    for start in range(0, n, _CHUNK):
        bitmat = _bit_matrix([c[start:start + _CHUNK] for c in codes], widths)
        padded = np.zeros((bitmat.shape[0], size * 8), np.uint8)
        padded[:, :total] = bitmat
        packed = np.packbits(padded, axis=1)
        out.extend(row.tobytes() for row in packed)
    return out


def decode_each(params: Params, messages: Sequence[bytes]) -> Reports:
    """Inverse of :func:`encode_each`: a batch from one message per report.

    Raises:
        ReportError: a message of the wrong length or with non-zero padding bits, or
            values the protocol rejects (the index of the first bad message is named).
    """
    spec = fields(params)
    total = sum(f.bits * _entries(f) for f in spec)
    size = (total + 7) // 8
    for i, message in enumerate(messages):
        if len(message) != size:
            raise ReportError(f"message {i} has {len(message)} bytes; a report is {size} bytes")
    raw = np.frombuffer(b"".join(bytes(m) for m in messages), np.uint8).reshape(len(messages), size)
    bitmat = np.unpackbits(raw, axis=1)
    if bitmat[:, total:].any():
        i = int(np.flatnonzero(bitmat[:, total:].any(axis=1))[0])
        raise ReportError(f"message {i} has non-zero padding bits")
    return _finish(params, _columns_from_bits(spec, bitmat[:, :total]))
