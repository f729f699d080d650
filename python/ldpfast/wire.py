"""Compact wire encoding of reports: exactly the bits the papers count for one report.

Each protocol's ``Reports.wire_fields(params)`` declares the fields of one report, in
order, as ``(column, bits)`` (an unsigned value in ``[0, 2**bits)``) or
``(column, bits, codebook)`` (a value from ``codebook``, sent as its index). One report is
the concatenation of its fields, most significant bit first; for OCMS with a prime field
``pH`` and hash range ``m`` that is ``2 ceil(log2 pH) + ceil(log2 m)`` bits ([PAN]
section 2.4).

Two framings:

* :func:`encode_each` / :func:`decode_each`: one message per client, ``ceil(bits/8)``
  bytes, the spare low bits of the last byte zero. This is what a client sends.
* :func:`encode` / :func:`decode`: a batch packed back to back, ``ceil(n*bits/8)`` bytes
  (no per-report padding), for moving many reports between servers.

Neither framing carries the parameters: both ends must agree on them (they define the
field widths). Decoding checks lengths and padding, rejects values outside a field's
range or codebook, and then runs the protocol's own batch validation, so anything that
decodes is a batch the aggregator accepts.

Adding the wire encoding to a protocol: implement ``wire_fields`` as a classmethod on its
``Reports`` class, e.g.::

    @classmethod
    def wire_fields(cls, params):
        return [("z", bits_for(params.m)), ("a0", bits_for(params.field_size)),
                ("a1", bits_for(params.field_size))]

Fields are at most 64 bits wide (columns are numpy integer arrays).
"""

from __future__ import annotations

from typing import Any, List, Sequence, Tuple

import numpy as np

from ._base import Params, Reports, protocol
from .errors import IncompatibleError, ReportError

__all__ = ["bits_for", "report_bits", "fields", "encode", "decode", "encode_each", "decode_each"]

_CHUNK = 1 << 16  # reports packed per step (bounds the temporary bit matrix)


def bits_for(size: int) -> int:
    """``ceil(log2 size)``: the bits needed for a value in ``[0, size)`` (0 when size is 1)."""
    size = int(size)
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    return (size - 1).bit_length()


def fields(params: Params) -> List[Tuple[str, int, Any]]:
    """The normalized wire fields of one report: ``[(column, bits, codebook or None)]``."""
    reports_type = protocol(params.protocol).reports
    out = []
    names = reports_type.column_names()
    for spec in reports_type.wire_fields(params):
        name, bits = spec[0], int(spec[1])
        codebook = None if len(spec) < 3 or spec[2] is None else np.asarray(spec[2])
        if name not in names:
            raise ValueError(f"{reports_type.__name__}.wire_fields names unknown column {name!r}")
        if not 0 <= bits <= 64:
            raise ValueError(f"wire field {name!r} must be 0..64 bits, got {bits}")
        if codebook is not None and len(codebook) > (1 << bits):
            raise ValueError(f"wire field {name!r}: {len(codebook)} codebook entries need more "
                             f"than {bits} bits")
        out.append((name, bits, codebook))
    if sorted(f[0] for f in out) != sorted(names):
        raise ValueError(f"{reports_type.__name__}.wire_fields must cover the columns {names} once each")
    return out


def report_bits(params: Params) -> int:
    """Bits in one report of the protocol ``params`` belong to."""
    return sum(bits for _, bits, _ in fields(params))


def _to_codes(name: str, column: np.ndarray, bits: int, codebook) -> np.ndarray:
    """The unsigned field values of a column (validated to fit ``bits``)."""
    column = np.asarray(column)
    if codebook is not None:
        order = np.argsort(codebook, kind="stable")
        ranks = np.searchsorted(codebook[order], column)
        ranks = np.minimum(ranks, len(codebook) - 1)
        codes = order[ranks]
        bad = codebook[codes] != column
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ReportError(f"report column {name!r} must take values in {codebook.tolist()}, "
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


def _codes_of(params: Params, reports: Reports):
    if reports.protocol != params.protocol:
        raise IncompatibleError(f"reports are {reports.protocol!r}, params are {params.protocol!r}")
    spec = fields(params)
    columns = reports.columns()
    codes = [_to_codes(name, columns[name], bits, cb) for name, bits, cb in spec]
    return spec, codes


def encode(params: Params, reports: Reports) -> bytes:
    """Pack a batch back to back: ``ceil(len(reports) * report_bits(params) / 8)`` bytes.

    Raises:
        ReportError: a value does not fit its field.
    """
    spec, codes = _codes_of(params, reports)
    widths = [bits for _, bits, _ in spec]
    n = len(reports)
    out = []
    for start in range(0, n, _CHUNK):  # _CHUNK is a multiple of 8: chunks end on a byte
        chunk = [c[start:start + _CHUNK] for c in codes]
        out.append(np.packbits(_bit_matrix(chunk, widths).reshape(-1)).tobytes())
    return b"".join(out)


def _columns_from_bits(spec, bitmat: np.ndarray) -> dict:
    columns = {}
    offset = 0
    n = bitmat.shape[0]
    for name, bits, codebook in spec:
        padded = np.zeros((n, 64), np.uint8)
        padded[:, 64 - bits:] = bitmat[:, offset:offset + bits]
        offset += bits
        values = np.packbits(padded, axis=1).view(">u8").reshape(n).astype(np.uint64)
        if codebook is not None:
            if values.size and values.max() >= len(codebook):
                i = int(np.argmax(values >= len(codebook)))
                raise ReportError(f"wire field {name!r} holds code {values[i]} at report {i}, "
                                  f"but its codebook has {len(codebook)} entries")
            values = codebook[values.astype(np.intp)]
        columns[name] = values
    return columns


def _finish(params: Params, columns: dict) -> Reports:
    proto = protocol(params.protocol)
    reports_type = proto.reports
    names = reports_type.column_names()
    reports = reports_type.from_columns({n: columns[n] for n in names}, params)
    validate = getattr(proto.aggregator, "_validate", None)
    if validate is not None:
        validate(proto.aggregator(params), reports)
    return reports


def decode(params: Params, blob: bytes, n: int) -> Reports:
    """Inverse of :func:`encode` for ``n`` reports.

    Raises:
        ReportError: wrong length, non-zero padding, or values the protocol rejects.
    """
    spec = fields(params)
    total = sum(bits for _, bits, _ in spec)
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
    columns = {name: np.concatenate([p[name] for p in parts]) if parts else
               _columns_from_bits(spec, np.zeros((0, total), np.uint8))[name] for name, _, _ in spec}
    return _finish(params, columns)


def encode_each(params: Params, reports: Reports) -> List[bytes]:
    """One message per report, ``ceil(report_bits(params)/8)`` bytes each."""
    spec, codes = _codes_of(params, reports)
    widths = [bits for _, bits, _ in spec]
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
    total = sum(bits for _, bits, _ in spec)
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
