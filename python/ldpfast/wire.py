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
batch records the decoder's (``Reports.params_fingerprint``). Decoding checks lengths and padding, rejects values outside a field's
range or codebook, and then runs the protocol's own batch validation, so anything that
decodes is a batch the aggregator accepts.

Adding the wire encoding to a protocol: implement ``wire_fields`` as a classmethod on its
``Reports`` class, returning :class:`WireField` tuples ``(column, bits[, codebook[,
dtype]])``, e.g.::

    @classmethod
    def wire_fields(cls, params):
        return [("z", bits_for(params.m)), ("a0", bits_for(params.field_size)),
                ("a1", bits_for(params.field_size))]

(or, from outside the class, :func:`register_fields`). The families of this version
(``ocms``, ``grr``, ``hrr``, ``he``, ``cmshe``, ``rhr``, ``olh``, ``hadaoracle``,
``hadaheavy``, ``ps-olh``, ``svim-*``, ``privsketch``, ``privsketch-nosmp``,
``multi-pcms-*``, ``privsketch-ldp``) are declared in this module. Multi-dimensional columns
(sketches, ordering matrices) declare their per-report ``shape`` and send every entry in
the field's width. Fields are at most 64 bits wide (columns are numpy integer arrays).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ._base import Params, Reports, protocol
from ._base import Reports as _Reports
from .errors import IncompatibleError, ParameterError, ReportError

__all__ = ["WireField", "bits_for", "report_bits", "fields", "register_fields", "encode", "decode",
           "encode_each", "decode_each"]

_CHUNK = 1 << 16  # reports packed per step (bounds the temporary bit matrix)
_base_wire_fields = _Reports.wire_fields.__func__


def bits_for(size: int) -> int:
    """``ceil(log2 size)``: the bits needed for a value in ``[0, size)`` (0 when size is 1)."""
    size = int(size)
    if size < 1:
        raise ParameterError(f"size must be >= 1, got {size}")
    return (size - 1).bit_length()


class WireField(NamedTuple):
    """One field of a report: ``column`` sent in ``bits`` bits. With a ``codebook`` the
    value must be one of its entries and the index is sent. ``dtype`` is the column's
    numpy dtype after decoding (default: the codebook's, else uint64). ``shape``: the
    per-report shape of a multi-dimensional column (e.g. ``(K, M)`` for a sketch); every
    entry is sent in ``bits`` bits, in C order."""

    column: str
    bits: int
    codebook: Optional[Tuple[int, ...]] = None
    dtype: Optional[str] = None
    shape: Tuple[int, ...] = ()


def _ceil_log2(value: int) -> int:
    return (int(value) - 1).bit_length()


# Bit counts for the families whose Reports classes do not (yet) define ``wire_fields``,
# as the papers count one report ([PAN] Algorithm 1 and section 6, [WW] Fact 2.1). A protocol's own
# ``Reports.wire_fields`` takes precedence over this table.
_SIGN = (-1, 1)
_BUILTIN: Dict[str, Callable[[Params], Sequence[WireField]]] = {
    # [PAN] 2.4: 2 ceil(log2 pH) + ceil(log2 m).
    "ocms": lambda p: [WireField("z", bits_for(p.m)), WireField("a0", bits_for(p.field_size)),
                       WireField("a1", bits_for(p.field_size))],
    # k-ary RR: ceil(log2 d).
    "grr": lambda p: [WireField("y", bits_for(p.d))],
    # [WW] Fact 2.1: one bit, plus the Hadamard row when the client draws it.
    "hrr": lambda p: [WireField("rows", _ceil_log2(p.hadamard_size), dtype="uint32"),
                      WireField("bits", 1, _SIGN, "int8")],
    "he": lambda p: [WireField("rows", _ceil_log2(p.hadamard_size), dtype="uint32"),
                     WireField("bits", 1, _SIGN, "int8")],
    # Apple CMS+HE: the hash index, the row and one bit.
    "cmshe": lambda p: [WireField("groups", bits_for(p.k), dtype="uint32"),
                        WireField("rows", _ceil_log2(p.hadamard_size), dtype="uint32"),
                        WireField("bits", 1, _SIGN, "int8")],
    # RHR: b-bit symbol and the row.
    "rhr": lambda p: [WireField("z", p.b, dtype="uint32"),
                      WireField("rows", _ceil_log2(p.hadamard_size), dtype="uint32")],
    # OLH with the [PAN] hash over F_PRIME: ceil(log2 g) + 2 * 64.
    "olh": lambda p: [WireField("z", bits_for(p.g)), WireField("a0", 64), WireField("a1", 64)],
    # HadaOracle / HadaHeavy ([WW] Alg. 1, section 4): the subset j, the Hadamard row r and
    # one bit. When the server assigns (j, r), only the bit has to travel (1 bit, [WW]).
    "hadaoracle": lambda p: [WireField("groups", bits_for(p.k), dtype="uint32"),
                             WireField("rows", bits_for(p.m), dtype="uint32"),
                             WireField("bits", 1, _SIGN, "int8")],
    "hadaheavy": lambda p: [WireField("groups", bits_for(p.t * p.k), dtype="uint32"),
                            WireField("rows", bits_for(p.m), dtype="uint32"),
                            WireField("bits", 1, _SIGN, "int8")],
    # PS-OLH ([PS] baseline): OLH over F_pH after padding and sampling.
    "ps-olh": lambda p: [WireField("z", bits_for(p.g)), WireField("a0", bits_for(p.field_size)),
                         WireField("a1", bits_for(p.field_size))],
    # SVIM ([PS] baseline, Wang et al.'s set-valued item mining): OLH reports over F_pH in
    # phases 1 and 2; phase 3 is OLH, or GRR on |C| + 1 values (then only z travels: the
    # hash columns are zero, 0-bit fields).
    "svim-items": lambda p: [WireField("z", bits_for(p.g)), WireField("a0", bits_for(p.field_size)),
                             WireField("a1", bits_for(p.field_size))],
    "svim-lengths": lambda p: [WireField("z", bits_for(p.g)), WireField("a0", bits_for(p.field_size)),
                               WireField("a1", bits_for(p.field_size))],
    "svim-padded": lambda p: ([WireField("z", bits_for(p.domain)), WireField("a0", 0), WireField("a1", 0)]
                              if p.uses_grr else
                              [WireField("z", bits_for(p.g)), WireField("a0", bits_for(p.field_size)),
                               WireField("a1", bits_for(p.field_size))]),
    # PrivSketch ([PS] Alg. 2): the sampled cell (k, m), its bit, and the ordering matrix as
    # one rank in [0, K M) per cell, ceil(log2(K M)) bits each (a permutation of the cells).
    "privsketch": lambda p: [WireField("k", bits_for(p.K), dtype="uint16"),
                             WireField("m", bits_for(p.M), dtype="uint16"),
                             WireField("bit", 1, _SIGN, "int8"),
                             WireField("order", bits_for(p.K * p.M), dtype="uint16", shape=(p.K, p.M))],
    # PrivSketch-noSmp: every cell's bit and the ordering matrix.
    "privsketch-nosmp": lambda p: [WireField("bits", 1, _SIGN, "int8", (p.K, p.M)),
                                   WireField("order", bits_for(p.K * p.M), dtype="uint16", shape=(p.K, p.M))],
    # Multi-PCMS-Mean: the row and its M bits; Multi-PCMS-Min: the whole K x M sketch.
    "multi-pcms-mean": lambda p: [WireField("row", bits_for(p.K), dtype="uint16"),
                                  WireField("bits", 1, _SIGN, "int8", (p.M,))],
    "multi-pcms-min": lambda p: [WireField("bits", 1, _SIGN, "int8", (p.K, p.M))],
    # LDP-safe PrivSketch variant: the sampled cell (k, m) and one bit. (PrivSketch itself
    # also sends a K x M ordering matrix, a multi-dimensional column: no wire encoding.)
    "privsketch-ldp": lambda p: [WireField("k", bits_for(p.K), dtype="uint16"),
                                 WireField("m", bits_for(p.M), dtype="uint16"),
                                 WireField("bit", 1, _SIGN, "int8")],
}


def register_fields(protocol_id: str, fields_of: Callable[[Params], Sequence[Any]]) -> None:
    """Declare the wire fields of a protocol from outside its Reports class (the class's
    own ``wire_fields`` still takes precedence)."""
    _BUILTIN[protocol_id] = fields_of


def fields(params: Params) -> List[WireField]:
    """The wire fields of one report of the protocol ``params`` belong to, checked.

    Raises:
        NotImplementedError: the protocol has no wire encoding.
    """
    reports_type = protocol(params.protocol).reports
    own = getattr(reports_type.wire_fields, "__func__", None) is not _base_wire_fields
    if own:
        declared = reports_type.wire_fields(params)
    elif params.protocol in _BUILTIN:
        declared = _BUILTIN[params.protocol](params)
    else:
        raise NotImplementedError(f"protocol {params.protocol!r} has no wire encoding: define "
                                  f"{reports_type.__name__}.wire_fields (see ldpfast.wire)")
    out = []
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


def _to_codes(name: str, column: np.ndarray, bits: int, codebook) -> np.ndarray:
    """The unsigned field values of a column (validated to fit ``bits``)."""
    column = np.asarray(column)
    if codebook is not None:
        codebook = np.asarray(codebook, dtype=np.int64)
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
    made_with = reports.params_fingerprint
    if made_with is not None and made_with != params.fingerprint:
        raise IncompatibleError(f"the reports were made with other parameters (fingerprint {made_with[:16]}) "
                                f"than the given {params}")
    spec = fields(params)
    columns = reports.columns()
    codes, widths = [], []
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


def _columns_from_bits(spec: Sequence[WireField], bitmat: np.ndarray) -> dict:
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


def _finish(params: Params, columns: dict) -> Reports:
    """Build the batch and run the protocol's own validation on it."""
    proto = protocol(params.protocol)
    reports = proto.reports.from_columns({n: columns[n] for n in proto.reports.column_names()}, params)
    reports.params_fingerprint = params.fingerprint
    if callable(getattr(reports, "validate", None)):
        reports.validate(params)
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
