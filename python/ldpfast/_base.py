"""The contract every protocol follows: parameters, report batches, aggregators.

* ``Params`` subclasses are frozen dataclasses: hashable, comparable, serializable to a
  canonical JSON dict, with a ``fingerprint`` (sha256 of that JSON).
* ``Reports`` subclasses are typed containers of equal-length numpy columns.
* ``Aggregator`` subclasses hold integral state only (counts), so ``merge`` is exact,
  associative and commutative. An empty aggregator is the merge identity; ``update``
  validates a whole batch before touching the state; ``to_bytes``/``from_bytes`` (also
  used by pickle) write a versioned, checksummed container.

Aggregator byte layout (format version 1, all integers little-endian)::

    magic      8 bytes  b"LDPFAGG\0"
    version    u16      FORMAT_VERSION
    hlen       u32      length of the header
    header     hlen     UTF-8 JSON {"fingerprint", "params", "protocol"} (sorted keys)
    count      u32      number of state arrays
    count x    u16 nlen, u64 size, name (nlen bytes, UTF-8), .npy image (size bytes)
    crc32      u32      zlib.crc32 of everything before it

Every malformed input (truncated, corrupted, wrong protocol, unknown version, state that
does not fit the parameters) raises :class:`~ldpfast.errors.FormatError`.

Optional hooks a protocol may provide (the Arrow, wire, Dask and command-line layers use
them generically): ``Reports.from_columns`` (build a batch from named arrays, converting
dtypes), ``Reports.wire_fields`` (per-report bit widths, see :mod:`ldpfast.wire`),
``Aggregator._validate`` (checks a batch without touching the state) and
``Protocol.example`` (a small seeded example used by the contract tests).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import struct
import zlib
from typing import (TYPE_CHECKING, Any, Callable, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple, Type,
                    TypeVar)

import numpy as np

from .errors import FormatError, IncompatibleError, ParameterError, ReportError

if TYPE_CHECKING:
    from .estimates import Estimate

__all__ = ["Params", "Reports", "Aggregator", "ClientBase", "Protocol", "register_protocol", "protocols",
           "protocol", "params_from_json", "load_aggregator", "read_header", "FORMAT_MAGIC",
           "FORMAT_VERSION"]

FORMAT_MAGIC = b"LDPFAGG\x00"
FORMAT_VERSION = 1

P = TypeVar("P", bound="Params")
A = TypeVar("A", bound="Aggregator")
R = TypeVar("R", bound="Reports")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def _short(value: Any) -> str:
    """``repr`` of a parameter value, long sequences cut to their first items."""
    if isinstance(value, (tuple, list, np.ndarray)) and len(value) > 6:
        return f"({', '.join(repr(_jsonable(v)) for v in list(value[:3]))}, ... {len(value)} items)"
    return repr(_jsonable(value) if isinstance(value, np.generic) else value)


def params_summary(params: Any) -> str:
    """``"epsilon=2.0, d=1000, m=4"``: every field of a Params dataclass, long ones cut."""
    if not dataclasses.is_dataclass(params):
        return repr(params)
    return ", ".join(f"{f.name}={_short(getattr(params, f.name))}" for f in dataclasses.fields(params)
                     if f.repr)


class Params:
    """Mixin for frozen dataclass parameter objects. Subclasses set ``protocol``."""

    protocol: ClassVar[str] = ""

    def to_dict(self) -> Dict[str, Any]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls: Type[P], data: Mapping[str, Any]) -> P:
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name in data:
                value = data[f.name]
                kwargs[f.name] = tuple(value) if isinstance(value, list) else value
        return cls(**kwargs)

    def to_json(self) -> str:
        return json.dumps({"protocol": self.protocol, "params": self.to_dict()}, sort_keys=True,
                          separators=(",", ":"))

    @property
    def fingerprint(self) -> str:
        """sha256 (hex) of the canonical JSON form: equal parameters, equal fingerprint."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @classmethod
    def from_json(cls: Type[P], text: str) -> P:
        """Inverse of :meth:`to_json`; the stored protocol id must be this class's.

        Raises:
            FormatError: the text is not the JSON written by ``to_json`` or names
                another protocol.
        """
        protocol_id, data = _parse_params_json(text)
        if protocol_id != cls.protocol:
            raise FormatError(f"params JSON is for protocol {protocol_id!r}, not {cls.protocol!r}")
        return cls.from_dict(data)


def _parse_params_json(text: str) -> Tuple[str, Dict[str, Any]]:
    try:
        doc = json.loads(text)
    except (ValueError, TypeError) as exc:
        raise FormatError(f"params JSON is not valid JSON: {exc}") from None
    if (not isinstance(doc, dict) or not isinstance(doc.get("protocol"), str)
            or not isinstance(doc.get("params"), dict)):
        raise FormatError('params JSON must be an object {"protocol": str, "params": {...}} '
                          "as written by Params.to_json()")
    return doc["protocol"], doc["params"]


def params_from_json(text: str) -> Params:
    """Parameters of any registered protocol from the JSON written by ``Params.to_json()``.

    Raises:
        FormatError: malformed JSON or an unknown protocol id.
        ParameterError: the stored values are rejected by the protocol's validation.
    """
    protocol_id, data = _parse_params_json(text)
    return protocol_or_format_error(protocol_id).params.from_dict(data)


class Reports:
    """Mixin for report batches: a dataclass whose fields are equal-length numpy columns.

    Equality compares the columns with ``np.array_equal`` (batches of one type only), and
    ``repr`` names the protocol and the number of reports instead of printing arrays."""

    protocol: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The dataclass decorator runs after this and adds __eq__/__repr__ only where the
        # class body has none, so placing the array-aware ones here keeps them.
        cls.__eq__ = Reports.__eq__  # type: ignore[method-assign]
        cls.__repr__ = Reports.__repr__  # type: ignore[method-assign]
        cls.__hash__ = None  # type: ignore[assignment]  # mutable columns

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        mine, theirs = self.columns(), other.columns()  # type: ignore[attr-defined]
        return all(np.array_equal(mine[k], theirs[k]) for k in mine)

    def __repr__(self) -> str:
        size: object
        try:
            size = len(self)
        except Exception:  # half-built batch (a constructor that raised part way)
            size = "?"
        return (f"{type(self).__module__.replace('ldpfast.', '')}.{type(self).__name__}"
                f"(protocol={self.protocol!r}, n={size}, columns={self.column_names()})")

    def columns(self) -> Dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def __len__(self) -> int:
        first = dataclasses.fields(self)[0].name
        return int(len(getattr(self, first)))

    def _check_lengths(self) -> None:
        lengths = {name: len(col) for name, col in self.columns().items()}
        if len(set(lengths.values())) > 1:
            raise ReportError(f"report columns must have equal lengths, got {lengths}")

    @classmethod
    def column_names(cls) -> List[str]:
        """The column names, in declaration order."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_columns(cls: Type[R], columns: Mapping[str, Any], params: Optional[Params] = None) -> R:
        """A batch from named array-likes (e.g. Arrow, pandas or decoded wire columns).

        The default passes ``columns`` to the constructor, which checks dtypes; protocols
        whose columns may arrive in another integer type override this to convert safely.

        Raises:
            ReportError: a column is missing or unexpected.
        """
        names = cls.column_names()
        missing = [n for n in names if n not in columns]
        extra = [n for n in columns if n not in names]
        if missing or extra:
            raise ReportError(f"{cls.__name__} columns must be {names}, "
                              f"missing {missing}, unexpected {extra}")
        return cls(**{n: np.asarray(columns[n]) for n in names})

    @classmethod
    def wire_fields(cls, params: Params) -> Sequence[Tuple[Any, ...]]:
        """Per-report fields of the compact wire encoding (see :mod:`ldpfast.wire`):
        ``[(column, bits)]`` for unsigned columns with values in ``[0, 2**bits)``, or
        ``(column, bits, codebook[, dtype])`` for a column whose values are the entries of
        ``codebook`` (sent as the index); ``dtype`` is the decoded column's numpy dtype.
        Protocols that support :mod:`ldpfast.wire` override this with the bit counts
        their paper states for one report."""
        raise NotImplementedError(f"{cls.__name__} does not define a wire encoding (wire_fields)")

    def to_arrow(self, params: Optional[Params] = None):
        """This batch as a ``pyarrow.Table`` whose schema metadata names the protocol and,
        when ``params`` is given, the parameters (see :mod:`ldpfast.arrow`)."""
        from . import arrow

        return arrow.to_arrow(self, params)

    @classmethod
    def from_arrow(cls: Type[R], table: Any, params: Optional[Params] = None) -> R:
        """A batch from a ``pyarrow.Table``/``RecordBatch``; validates the protocol id and,
        when both are known, the parameter fingerprint (see :mod:`ldpfast.arrow`)."""
        from . import arrow

        return arrow.from_arrow(table, params, reports_type=cls)


class Aggregator:
    """Base class for server-side aggregators. Subclasses implement ``_state``,
    ``_set_state`` and ``_ingest``; ``update`` calls ``_validate`` first.

    The contract (checked for every protocol by tests/test_contract.py): ``cls(params)``
    is empty and the merge identity; ``update`` validates the whole batch before changing
    anything; ``merge`` is exact, associative and commutative and changes only ``self``;
    equal states give equal bytes. Aggregators that keep reports instead of counts must
    store them in a canonical order (e.g. sorted), or merged bytes depend on the order."""

    protocol: ClassVar[str] = ""
    params_type: ClassVar[type] = Params

    def __init__(self, params: Params):
        if not isinstance(params, self.params_type):
            raise IncompatibleError(
                f"params must be {self.params_type.__name__}, got {type(params).__name__}")
        self.params = params

    # -- to implement ---------------------------------------------------------------
    def _state(self) -> Dict[str, np.ndarray]:
        """The integral state arrays (merge adds them elementwise)."""
        raise NotImplementedError

    def _set_state(self, state: Dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    # -- contract -------------------------------------------------------------------
    def merge(self: A, other: A) -> A:
        """Add ``other``'s reports into this aggregator (exact; ``other`` is unchanged)."""
        if type(other) is not type(self):
            raise IncompatibleError(
                f"cannot merge {type(other).__name__} into {type(self).__name__}")
        if other.params != self.params:
            raise IncompatibleError(
                f"cannot merge aggregators with different parameters: {self.params} vs {other.params}")
        mine, theirs = self._state(), other._state()
        merged = {name: np.add(mine[name], theirs[name], dtype=mine[name].dtype) for name in mine}
        self._set_state(merged)
        return self

    def to_bytes(self) -> bytes:
        """Versioned container: magic, format version, protocol id, parameter JSON and
        fingerprint, the state arrays (.npy), and a CRC-32 of everything before it."""
        header = json.dumps({
            "protocol": self.protocol,
            "params": json.loads(self.params.to_json())["params"],
            "fingerprint": self.params.fingerprint,
        }, sort_keys=True, separators=(",", ":")).encode()
        buf = io.BytesIO()
        buf.write(FORMAT_MAGIC)
        buf.write(struct.pack("<HI", FORMAT_VERSION, len(header)))
        buf.write(header)
        state = self._state()
        buf.write(struct.pack("<I", len(state)))
        for name in sorted(state):
            raw = io.BytesIO()
            array = np.asarray(state[name])
            np.save(raw, np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")),
                    allow_pickle=False)
            encoded = name.encode()
            buf.write(struct.pack("<HQ", len(encoded), raw.tell()))
            buf.write(encoded)
            buf.write(raw.getvalue())
        body = buf.getvalue()
        return body + struct.pack("<I", zlib.crc32(body))

    @classmethod
    def from_bytes(cls: Type[A], blob: bytes) -> A:
        """Inverse of :meth:`to_bytes`. On the base class ``Aggregator`` itself, returns an
        aggregator of whichever registered protocol the bytes hold.

        Raises:
            FormatError: the bytes are truncated, corrupt, of another format version or
                protocol, or hold state that does not fit their parameters.
        """
        header, arrays = _parse_container(blob)
        if cls.protocol and header["protocol"] != cls.protocol:
            raise FormatError(f"bytes hold a {header['protocol']!r} aggregator, not {cls.protocol!r}")
        target = cls if cls.protocol else protocol_or_format_error(header["protocol"]).aggregator
        try:
            params = target.params_type.from_dict(header["params"])
        except Exception as exc:  # the stored values are untrusted: any rejection is a format error
            raise FormatError(f"stored parameters are invalid: {exc!r}") from None
        if params.fingerprint != header["fingerprint"]:
            raise FormatError("parameter fingerprint does not match the stored parameters")
        state = {}
        for name, image in arrays:
            if name in state:
                raise FormatError(f"state array {name!r} is stored twice")
            state[name] = _native(_read_npy(name, image))
        agg = target(params)
        agg._check_state(state)
        agg._set_state(state)
        return agg

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        """Raise FormatError unless ``state`` (read by ``from_bytes``) fits this aggregator.
        The default wants the names, shapes and dtypes of an empty aggregator's state;
        aggregators whose state size varies (e.g. kept reports) override it."""
        expected = self._state()
        if set(state) != set(expected):
            raise FormatError(f"stored state arrays {sorted(state)} do not match the parameters, "
                              f"which need {sorted(expected)}")
        for k in state:
            want = np.asarray(expected[k])
            if state[k].shape != want.shape or state[k].dtype != want.dtype:
                raise FormatError(
                    f"state array {k!r} has shape {state[k].shape} and dtype {state[k].dtype}; "
                    f"the parameters need {want.shape} and {want.dtype}")

    def __reduce__(self):
        return (type(self).from_bytes, (self.to_bytes(),))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        a, b = self._state(), other._state()
        return (self.params == other.params and set(a) == set(b)
                and all(np.array_equal(a[k], b[k]) for k in a))

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        n = getattr(self, "n", None)
        extra = self._repr_extra()
        return (f"{type(self).__module__.replace('ldpfast.', '')}.{type(self).__name__}"
                f"(protocol={self.protocol!r}, n={n}, {params_summary(self.params)}"
                f"{', ' + extra if extra else ''})")

    def _repr_extra(self) -> str:
        """More state to show in ``repr`` (e.g. a mode); empty by default."""
        return ""

    def frequencies(self, candidates: Any = None) -> "Estimate":
        """The frequency estimates of ``candidates`` with standard errors, as an
        :class:`ldpfast.estimates.Estimate` (intervals, top-k, heavy hitters with
        false-discovery control, consistency post-processing, ``to_pandas``).
        ``candidates`` as for :meth:`estimate`."""
        from . import estimates

        return estimates.estimate(self, candidates)


class ClientBase:
    """Shared by every protocol's Client: a ``repr`` naming the protocol, the parameters
    and whether the randomness is seeded (simulation) or from the OS (private use)."""

    params: Any

    def __repr__(self) -> str:
        keys = getattr(self, "_keys", None)
        rng = "seeded (simulation only)" if keys is not None and keys.seeded else "os-entropy"
        return (f"{type(self).__module__.replace('ldpfast.', '')}.{type(self).__name__}"
                f"(protocol={getattr(self.params, 'protocol', '?')!r}, {params_summary(self.params)}, "
                f"rng={rng!r})")


_MAX_STATE_ARRAYS = 1024


def _native(array: np.ndarray) -> np.ndarray:
    """``array`` contiguous, in native byte order, with numpy's canonical dtype object
    (the C++ bindings compare dtypes by identity; ``np.load`` builds new dtype objects)."""
    dtype = array.dtype.newbyteorder("=")
    if dtype.kind in "biufc":
        dtype = np.dtype(dtype.char)
    array = np.ascontiguousarray(array, dtype=dtype)
    return array if array.dtype is dtype else array.view(dtype)


def _read_npy(name: str, image: memoryview) -> np.ndarray:
    """A writable copy of the array in a .npy image, with its declared size checked
    against the bytes present (no pickled objects)."""
    fmt = np.lib.format
    head = io.BytesIO(bytes(image[:min(len(image), 1 << 16)]))
    try:
        version = fmt.read_magic(head)
        reader = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = reader(head)
    except Exception as exc:  # numpy's header parser raises many types on malformed input
        raise FormatError(f"state array {name!r} is not a valid .npy image: {exc!r}") from None
    if dtype.hasobject:
        raise FormatError(f"state array {name!r} holds Python objects, which are not allowed")
    count = int(np.prod(shape, dtype=object))
    offset = head.tell()
    if len(image) - offset != count * dtype.itemsize:
        raise FormatError(f"state array {name!r} declares shape {shape} of {dtype} "
                          f"({count * dtype.itemsize} bytes) but holds {len(image) - offset}")
    flat = np.frombuffer(image, dtype=dtype, count=count, offset=offset)
    return flat.reshape(shape, order="F" if fortran else "C").copy(order="C")


class _Cursor:
    """Bounds-checked reads from a byte string (every failure is a FormatError)."""

    __slots__ = ("data", "pos")

    def __init__(self, data: memoryview, pos: int = 0):
        self.data, self.pos = data, pos

    def take(self, size: int, what: str) -> memoryview:
        if size < 0 or self.pos + size > len(self.data):
            raise FormatError(f"aggregator bytes are truncated (reading {what}: need {size} bytes "
                              f"at offset {self.pos}, {len(self.data) - self.pos} left)")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def unpack(self, fmt: str, what: str) -> Tuple[int, ...]:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))


def _parse_header(cur: _Cursor) -> Dict[str, Any]:
    (version,) = cur.unpack("<H", "format version")
    if version != FORMAT_VERSION:
        raise FormatError(f"unsupported aggregator format version {version} "
                          f"(this build reads {FORMAT_VERSION})")
    (header_len,) = cur.unpack("<I", "header length")
    raw = bytes(cur.take(header_len, "header"))
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"aggregator header is not valid JSON: {exc}") from None
    if (not isinstance(header, dict) or not isinstance(header.get("protocol"), str)
            or not isinstance(header.get("params"), dict)
            or not isinstance(header.get("fingerprint"), str)):
        raise FormatError("aggregator header must hold 'protocol', 'params' and 'fingerprint'")
    return header


def _parse_container(blob: bytes) -> Tuple[Dict[str, Any], List[Tuple[str, memoryview]]]:
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise FormatError(f"aggregator bytes must be bytes-like, got {type(blob).__name__}")
    blob = memoryview(blob).cast("B")  # no copies of large states while parsing
    if bytes(blob[:len(FORMAT_MAGIC)]) != FORMAT_MAGIC:
        raise FormatError("not an ldpfast aggregator (bad magic)")
    if len(blob) < len(FORMAT_MAGIC) + 4:
        raise FormatError("aggregator bytes are truncated (no checksum)")
    body, (crc,) = blob[:-4], struct.unpack("<I", blob[-4:])
    cur = _Cursor(body, len(FORMAT_MAGIC))
    intact = zlib.crc32(body) == crc
    # The version is checked before the checksum so that a future format (which may
    # checksum differently) is reported as such rather than as corruption.
    if len(body) >= cur.pos + 2:
        (version,) = struct.unpack_from("<H", body, cur.pos)
        if version != FORMAT_VERSION and not intact:
            raise FormatError(f"unsupported aggregator format version {version} "
                              f"(this build reads {FORMAT_VERSION}), or corrupt bytes")
    if not intact:
        raise FormatError("aggregator bytes are corrupt (checksum mismatch)")
    header = _parse_header(cur)
    (count,) = cur.unpack("<I", "array count")
    if count > _MAX_STATE_ARRAYS:
        raise FormatError(f"aggregator bytes declare {count} state arrays (at most {_MAX_STATE_ARRAYS})")
    arrays = []
    for _ in range(count):
        name_len, size = cur.unpack("<HQ", "array entry")
        try:
            name = bytes(cur.take(name_len, "array name")).decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError("state array name is not UTF-8") from None
        arrays.append((name, cur.take(size, f"array {name!r}")))
    if cur.pos != len(body):
        raise FormatError(f"aggregator bytes have {len(body) - cur.pos} unexpected trailing bytes")
    return header, arrays


def read_header(blob: bytes) -> Dict[str, Any]:
    """The header of serialized aggregator bytes, checked (magic, version, checksum):
    ``{"protocol": str, "params": dict, "fingerprint": str}``.

    Raises:
        FormatError: as :meth:`Aggregator.from_bytes`.
    """
    return _parse_container(blob)[0]


def load_aggregator(blob: bytes) -> "Aggregator":
    """The aggregator of whichever registered protocol ``blob`` holds (see
    :meth:`Aggregator.from_bytes`)."""
    return Aggregator.from_bytes(blob)


@dataclasses.dataclass(frozen=True)
class Protocol:
    """The classes of one protocol, found by its id (used by the Dask, Parquet and
    command-line layers to handle any protocol generically)."""

    id: str
    params: type
    reports: type
    aggregator: type
    client: type
    #: Optional ``() -> (params, values)``: small parameters and client inputs (what
    #: ``client(params, rng=seed).perturb`` accepts) used by the generic contract tests.
    example: Optional[Callable[[], Tuple[Params, Any]]] = None


_REGISTRY: Dict[str, Protocol] = {}


def register_protocol(protocol: Protocol) -> Protocol:
    """Called once by each protocol module at import."""
    for cls in (protocol.params, protocol.reports, protocol.aggregator):
        if getattr(cls, "protocol", protocol.id) != protocol.id:
            raise ValueError(f"{cls.__name__}.protocol != {protocol.id!r}")
    _REGISTRY[protocol.id] = protocol
    return protocol


def protocols() -> Dict[str, Protocol]:
    """Every registered protocol, importing all protocol modules first."""
    import importlib

    for module in ("ocms", "grr", "hadamard", "hadaoracle", "hadaheavy", "privsketch"):
        try:
            importlib.import_module(f"ldpfast.{module}")
        except ModuleNotFoundError as exc:  # a family not built into this version
            if exc.name != f"ldpfast.{module}":
                raise
    return dict(_REGISTRY)


def protocol(protocol_id: str) -> Protocol:
    """The registered protocol with id ``protocol_id``.

    Raises:
        ParameterError: no such protocol in this build (the message lists the known ids).
    """
    known = protocols()
    if protocol_id not in known:
        raise ParameterError(f"protocol must be one of {sorted(known)}, got {protocol_id!r}")
    return known[protocol_id]


def protocol_or_format_error(protocol_id: str) -> Protocol:
    try:
        return protocol(protocol_id)
    except ParameterError as exc:
        raise FormatError(f"serialized data names an unknown protocol: {exc}") from None
