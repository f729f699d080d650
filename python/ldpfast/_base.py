"""The contract every protocol follows: parameters, report batches, aggregators.

* ``Params`` subclasses are frozen dataclasses: hashable, comparable, serializable to a
  canonical JSON dict, with a ``fingerprint`` (sha256 of that JSON).
* ``Reports`` subclasses are typed containers of equal-length numpy columns.
* ``Reports`` batches record the fingerprint of the parameters that made them
  (``params_fingerprint``; None for batches built by hand).
* ``Aggregator`` subclasses hold integral state only (counts), so ``merge`` is exact,
  associative and commutative. An empty aggregator is the merge identity; ``update`` is
  one template for every protocol: it checks the whole batch (type, dtypes, lengths,
  parameter fingerprint, values), builds the new state off to the side and commits it
  in one assignment, under a per-aggregator lock (safe from several threads, and a
  rejected or interrupted batch leaves no partial state); ``to_bytes``/``from_bytes``
  (also used by pickle) write a versioned, checksummed container.

Aggregator byte layout (format version 1, all integers little-endian)::

    magic      8 bytes  b"LDPFAGG\0"
    version    u16      FORMAT_VERSION
    hlen       u32      length of the header
    header     hlen     UTF-8 JSON {"fingerprint", "params", "protocol"} (sorted keys)
    count      u32      number of state arrays
    count x    u16 nlen, u64 size, name (nlen bytes, UTF-8), .npy image (size bytes)
    mac        32 bytes HMAC-SHA256 of everything before it; only when the header has
                        "mac": "hmac-sha256" (``to_bytes(key=...)``)
    crc32      u32      zlib.crc32 of everything before it

Every malformed input (truncated, corrupted, wrong protocol, unknown version, state that
does not fit the parameters or holds impossible values) raises
:class:`~ldpfast.errors.FormatError`, after time and memory proportional to its size.
The CRC-32 catches accidents (truncation, bit rot), not tampering: anyone can recompute
it. Bytes that cross a trust boundary should carry the keyed MAC.

Optional hooks a protocol may provide (the Arrow, wire, Dask and command-line layers use
them generically): ``Reports.from_columns`` (build a batch from named arrays, converting
dtypes), ``Reports.wire_fields`` (per-report bit widths, see :mod:`ldpfast.wire`),
``Aggregator._validate`` (checks a batch without touching the state; every server has
one) and
``Protocol.example`` (a small seeded example used by the contract tests).
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import hashlib
import hmac
import inspect
import io
import json
import struct
import threading
import zlib
from typing import (TYPE_CHECKING, Any, Callable, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple, Type,
                    TypeVar, cast)

import numpy as np

from ._memory import check_allocation
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


def _public_module(cls: type) -> str:
    """The import path users know for ``cls``'s module: ``ldpfast.ocms``, not
    ``ldpfast.protocols.ocms`` (both name the same module)."""
    return cls.__module__.replace("ldpfast.protocols.", "ldpfast.")


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
        cached = self.__dict__.get("_fingerprint")
        if cached is None:
            cached = hashlib.sha256(self.to_json().encode()).hexdigest()
            self.__dict__["_fingerprint"] = cached  # frozen dataclass: bypass __setattr__
            _KNOWN_PARAMS[cached] = self
            while len(_KNOWN_PARAMS) > 256:
                _KNOWN_PARAMS.popitem(last=False)
        return cached

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


#: Recently fingerprinted parameters, to name both sides when a batch's fingerprint does
#: not match a server's.
_KNOWN_PARAMS: "collections.OrderedDict[str, Params]" = collections.OrderedDict()


def _parse_params_json(text: str) -> Tuple[str, Dict[str, Any]]:
    try:
        doc = json.loads(text)
    except (ValueError, TypeError, RecursionError) as exc:
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
    ``repr`` names the protocol and the number of reports instead of printing arrays.

    ``params_fingerprint`` (not a column) is the fingerprint of the parameters the batch
    was made with: clients of registered protocols set it, Arrow/Parquet and the wire
    decoder keep it, and a server refuses a batch whose fingerprint is not its own
    (IncompatibleError). Batches built by hand have None, which every server of the
    protocol accepts (the values are still checked against its parameters).

    ``column_types`` declares each column's numpy dtype and number of dimensions as the
    constructor makes them; ``Aggregator.update`` checks them again, since a column may be
    reassigned after construction."""

    protocol: ClassVar[str] = ""
    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {}
    params_fingerprint: Optional[str] = None

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
        return (f"{_public_module(type(self)).replace('ldpfast.', '')}.{type(self).__name__}"
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

    def _check_columns(self) -> None:
        """Raise ReportError unless every column is a numpy array of its declared dtype and
        dimensions, all of one length (made C-contiguous here)."""
        lengths = {}
        for name, col in self.columns().items():
            if not isinstance(col, np.ndarray) or col.ndim == 0:
                raise ReportError(f"report column {name!r} must be a numpy array with one row per "
                                  f"report, got {type(col).__name__}")
            declared = self.column_types.get(name)
            if declared is not None and (col.dtype != np.dtype(declared[0]) or col.ndim != declared[1]):
                raise ReportError(
                    f"report column {name!r} must be a {declared[1]}-D {np.dtype(declared[0]).name} array, "
                    f"got a {col.ndim}-D {col.dtype} array (build batches with "
                    f"{type(self).__name__}(...), which converts and checks)")
            if not col.flags.c_contiguous:
                setattr(self, name, np.ascontiguousarray(col))
            lengths[name] = col.shape[0]
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


class _State(dict):
    """A committed aggregator state: name -> array (or other immutable value). Committed
    states are never modified in place (their arrays are made read-only); an update or
    merge builds a new one and commits it with a single attribute assignment. Caches
    derived from a state (e.g. decoded transforms) are stored as attributes of it, so a
    commit invalidates them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for value in self.values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False


F = TypeVar("F", bound=Callable[..., Any])


def _locked(method: F) -> F:
    """``method`` run under its aggregator's lock."""
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    call._ldpfast_locked = True  # type: ignore[attr-defined]
    return cast(F, call)


def _describe(obj: Any) -> str:
    """``obj`` for error messages, cut to a readable length."""
    text = repr(obj)
    return text if len(text) <= 300 else text[:297] + "..."


def _aggregator_name(obj: Any) -> str:
    cls = type(obj)
    protocol_id = getattr(obj, "protocol", "") if isinstance(obj, Aggregator) else ""
    where = f"{_public_module(cls)}.{cls.__qualname__}"
    return f"a {protocol_id!r} aggregator ({where})" if protocol_id else f"{where}"


class Aggregator:
    """Base class of server-side aggregators.

    ``update`` and ``merge`` are templates shared by every protocol; a protocol implements

    * ``_validate(reports)``: raise ReportError unless the batch fits the parameters
      (ranges, shapes); it reads only the parameters and the batch;
    * ``_ingest(reports)``: the new state (a mapping, built from copies: the committed
      state is never modified in place) with the batch added; it may raise ReportError too;
    * ``_merged(theirs)``: the new state with another aggregator's state added (default:
      elementwise sum);
    * ``_state()`` / ``_set_state(state)``: the canonical arrays written by ``to_bytes``
      (default: the committed state itself), ``_check_state`` for ``from_bytes``, and
      ``_state_layout(params)``: the shapes and dtypes of the state arrays, known from the
      parameters alone (checked against stored bytes before anything is allocated, and
      against the memory budget at construction).

    ``update`` checks the batch's type, its columns' dtypes and lengths and its parameter
    fingerprint, calls ``_validate`` and ``_ingest`` and commits the new state with one
    attribute assignment, so a rejected batch, an exception or a KeyboardInterrupt
    (raised between Python steps or out of a C++ call) leaves either the old state or the
    complete new one, never a partial one. Each aggregator has a lock: ``update``,
    ``merge``, ``to_bytes`` and every public method run under it, so one aggregator may be
    used from several Python threads (updates are serialized; the C++ kernels use several
    threads inside each call). Arrays of a batch must not be modified while it is being
    added.

    The contract (checked for every protocol by tests/test_contract.py): ``cls(params)``
    is empty and the merge identity; ``merge`` is exact, associative and commutative and
    changes only ``self``; equal states give equal bytes. Aggregators that keep reports
    instead of counts must store them in a canonical order (e.g. sorted), or merged bytes
    depend on the order."""

    protocol: ClassVar[str] = ""
    params_type: ClassVar[type] = Params
    #: The batch type ``update`` accepts (default: the registered protocol's Reports).
    reports_type: ClassVar[Optional[type]] = None
    #: True when ``_ingest`` itself checks every value before building the new state (e.g.
    #: in the C++ kernel) and calls ``_validate`` only to name a bad report: ``update``
    #: then skips the separate ``_validate`` pass (``validate`` still runs it).
    _ingest_validates: ClassVar[bool] = False

    _st: _State

    def __init__(self, params: Params):
        if not isinstance(params, self.params_type):
            raise IncompatibleError(
                f"params must be {self.params_type.__name__}, got {type(params).__name__}")
        self.params = params
        self._lock = threading.RLock()
        layout = self._state_layout(params)
        if layout is not None:
            check_allocation(_layout_nbytes(layout), f"the state of a {self.protocol!r} server "
                                                     f"with {_describe(params)}")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, value in list(vars(cls).items()):
            if (not name.startswith("_") and name not in ("update", "merge", "to_bytes")
                    and inspect.isfunction(value) and not getattr(value, "_ldpfast_locked", False)):
                setattr(cls, name, _locked(value))

    # -- to implement ---------------------------------------------------------------
    @classmethod
    def _state_layout(cls, params: Params) -> Optional[Dict[str, Tuple[Tuple[int, ...], str]]]:
        """``{name: (shape, dtype)}`` of the state arrays for ``params``, or None when
        the state size is not fixed by the parameters (e.g. kept reports)."""
        return None

    def _state(self) -> Mapping[str, np.ndarray]:
        """The integral state arrays (merge adds them elementwise)."""
        return self._st

    def _set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self._st = _State({name: np.array(value) for name, value in state.items()})

    def _validate(self, reports: "Reports") -> None:
        """Raise ReportError unless ``reports`` fits the parameters (no state access)."""

    def _ingest(self, reports: "Reports") -> Mapping[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} does not implement _ingest")

    def _merged(self, theirs: Mapping[str, Any]) -> Mapping[str, Any]:
        """The state with ``theirs`` (another aggregator's committed state) added."""
        mine = self._committed()
        return {name: _checked_sum(name, mine[name], theirs[name]) for name in mine}

    def _committed(self) -> Mapping[str, Any]:
        """The committed state (aggregators written before the template keep their
        arrays in their own attributes: their ``_state()``)."""
        try:
            return self._st
        except AttributeError:
            return self._state()

    def _commit(self, state: Mapping[str, Any]) -> None:
        if hasattr(self, "_st"):
            self._st = _State(state)  # the commit: one assignment
        else:
            self._set_state(dict(state))

    # -- contract -------------------------------------------------------------------
    def _accepted(self, reports: Any) -> "Reports":
        """A shallow snapshot of ``reports`` (columns reassigned later do not affect it),
        with its type, columns and parameter fingerprint checked."""
        expected = self.reports_type or _REGISTRY[self.protocol].reports
        if not isinstance(reports, expected):
            name = expected.__name__
            if name == "Reports":  # the protocol modules' short name: say which module
                name = f"{_public_module(expected)}.{name}"
            raise ReportError(f"reports must be {name}, got {type(reports).__name__}")
        batch = cast(Reports, copy.copy(reports))
        batch._check_columns()
        fingerprint = batch.params_fingerprint
        if fingerprint is not None and fingerprint != self.params.fingerprint:
            made_with = _KNOWN_PARAMS.get(fingerprint)
            origin = _describe(made_with) if made_with is not None else "unknown parameters"
            raise IncompatibleError(
                f"reports were made with other parameters than this server's: reports "
                f"{origin} (fingerprint {str(fingerprint)[:16]}), server {_describe(self.params)} "
                f"(fingerprint {self.params.fingerprint[:16]})")
        return batch

    def validate(self, reports: "Reports") -> None:
        """Raise as :meth:`update` would for ``reports``, without adding them (some checks
        that need the aggregation itself, e.g. PrivSketch's ordering matrices, run only in
        ``update``)."""
        self._validate(self._accepted(reports))

    def update(self: A, reports: "Reports") -> A:
        """Add a batch of reports; returns self. The batch is checked whole first (type,
        column dtypes and lengths, parameter fingerprint, values); a rejected or
        interrupted batch leaves the aggregator unchanged.

        Raises:
            ReportError: the batch is of another type or does not fit the parameters.
            IncompatibleError: the batch records other parameters (``params_fingerprint``).
        """
        batch = self._accepted(reports)
        if not self._ingest_validates:
            self._validate(batch)
        if len(batch) == 0:
            return self
        with self._lock:
            self._st = _State(self._ingest(batch))  # the commit: one assignment
        return self

    def merge(self: A, other: A) -> A:
        """Add ``other``'s reports into this aggregator (exact; ``other`` is unchanged).

        Raises:
            IncompatibleError: ``other`` is of another protocol, has other parameters or
                is this very aggregator (its reports would count twice; merge a copy,
                ``s.merge(copy.copy(s))``, if that is really meant).
        """
        if type(other) is not type(self):
            raise IncompatibleError(f"cannot merge {_aggregator_name(other)} into {_aggregator_name(self)}")
        if other.params != self.params:
            raise IncompatibleError(
                f"cannot merge aggregators with different parameters: {_describe(self.params)} "
                f"vs {_describe(other.params)}")
        if other is self:
            raise IncompatibleError(
                "cannot merge an aggregator into itself (its reports would count twice); "
                "merge a copy, s.merge(copy.copy(s)), if that is meant")
        with other._lock:
            theirs = other._committed()
        with self._lock:
            self._commit(self._merged(theirs))
        return self

    def to_bytes(self, key: Optional[bytes] = None) -> bytes:
        """Versioned container: magic, format version, protocol id, parameter JSON and
        fingerprint, the state arrays (.npy), and a CRC-32 of everything before it.

        The CRC-32 detects accidental corruption only: anyone can change the bytes and
        recompute it. With ``key`` (bytes, from the caller), an HMAC-SHA256 of the
        content is added, which :meth:`from_bytes` verifies when given the same key; use
        it for aggregators that cross a trust boundary."""
        with self._lock:
            state = dict(self._state())
        head = {"protocol": self.protocol, "params": json.loads(self.params.to_json())["params"],
                "fingerprint": self.params.fingerprint}
        if key is not None:
            head["mac"] = _MAC_NAME
        header = json.dumps(head, sort_keys=True, separators=(",", ":")).encode()
        buf = io.BytesIO()
        buf.write(FORMAT_MAGIC)
        buf.write(struct.pack("<HI", FORMAT_VERSION, len(header)))
        buf.write(header)
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
        if key is not None:
            body += hmac.new(_checked_key(key), body, hashlib.sha256).digest()
        return body + struct.pack("<I", zlib.crc32(body))

    @classmethod
    def from_bytes(cls: Type[A], blob: bytes, key: Optional[bytes] = None) -> A:
        """Inverse of :meth:`to_bytes`. On the base class ``Aggregator`` itself, returns an
        aggregator of whichever registered protocol the bytes hold.

        Sizes, shapes and dtypes are checked against the stored parameters before any
        array is allocated, and the state values are checked (e.g. counts consistent with
        the number of reports), so malformed input costs time and memory proportional to
        its own size. ``key``: required exactly when the bytes were written with one.

        Raises:
            FormatError: the bytes are truncated, corrupt, of another format version or
                protocol, hold state that does not fit their parameters, are
                authenticated and no or another key is given, or are not authenticated
                and a key is given.
        """
        header, arrays = _parse_container(blob, key, verify=True)
        if cls.protocol and header["protocol"] != cls.protocol:
            raise FormatError(f"bytes hold a {header['protocol']!r} aggregator, not {cls.protocol!r}")
        target: Type[A] = cls if cls.protocol else protocol_or_format_error(header["protocol"]).aggregator
        try:
            params = target.params_type.from_dict(header["params"])
        except Exception as exc:  # the stored values are untrusted: any rejection is a format error
            raise FormatError(f"stored parameters are invalid: {_describe(exc)}") from None
        if params.fingerprint != header["fingerprint"]:
            raise FormatError("parameter fingerprint does not match the stored parameters")
        images: Dict[str, Tuple[memoryview, Tuple[int, ...], np.dtype, bool, int]] = {}
        for name, image in arrays:
            if name in images:
                raise FormatError(f"state array {name!r} is stored twice")
            images[name] = (image, *_npy_header(name, image))
        try:
            layout = target._state_layout(params)
        except Exception as exc:
            raise FormatError(f"stored parameters are invalid: {_describe(exc)}") from None
        if layout is not None:
            _check_layout(layout, {name: (info[1], info[2]) for name, info in images.items()})
        state = {name: _native(_npy_array(name, *info)) for name, info in images.items()}
        try:
            agg = target(params)
        except ParameterError as exc:
            raise FormatError(f"the stored aggregator cannot be loaded: {exc}") from None
        agg._check_state(state)
        agg._set_state(state)
        return agg

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        """Raise FormatError unless ``state`` (read by ``from_bytes``) fits this aggregator.
        The default wants the names, shapes and dtypes of an empty aggregator's state;
        aggregators whose state size varies (e.g. kept reports) override it, and
        aggregators add checks of the values."""
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
        with self._lock:
            a = dict(self._state())
        with other._lock:
            b = dict(other._state())
        return (self.params == other.params and set(a) == set(b)
                and all(np.array_equal(a[k], b[k]) for k in a))

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        n = getattr(self, "n", None)
        extra = self._repr_extra()
        return (f"{_public_module(type(self)).replace('ldpfast.', '')}.{type(self).__name__}"
                f"(protocol={self.protocol!r}, n={n}, {params_summary(self.params)}"
                f"{', ' + extra if extra else ''})")

    def _repr_extra(self) -> str:
        """More state to show in ``repr`` (e.g. a mode); empty by default."""
        return ""

    @_locked  # several estimate calls on one state
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
        return (f"{_public_module(type(self)).replace('ldpfast.', '')}.{type(self).__name__}"
                f"(protocol={getattr(self.params, 'protocol', '?')!r}, {params_summary(self.params)}, "
                f"rng={rng!r})")


def _checked_sum(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` in ``a``'s dtype, refusing a sum that would wrap around."""
    total = np.add(a, b, dtype=a.dtype)
    if a.dtype.kind in "iu" and a.size:
        with np.errstate(over="ignore"):
            wrapped = (total < a) if a.dtype.kind == "u" else ((b > 0) & (total < a)) | ((b < 0) & (total > a))
        if wrapped.any():
            raise IncompatibleError(f"merging would overflow the {a.dtype} state array {name!r}")
    return total


def _exact_sum(counts: np.ndarray) -> int:
    """The exact sum of a uint64 array (no wrap-around: summed as two 32-bit halves)."""
    counts = np.asarray(counts, dtype=np.uint64).ravel()
    high = int(np.add.reduce(counts >> np.uint64(32), dtype=np.uint64))
    low = int(np.add.reduce(counts & np.uint64(0xFFFFFFFF), dtype=np.uint64))
    return (high << 32) + low


def _layout_nbytes(layout: Mapping[str, Tuple[Tuple[int, ...], str]]) -> int:
    total = 0
    for shape, dtype in layout.values():
        count = 1
        for dim in shape:
            count *= int(dim)
        total += count * np.dtype(dtype).itemsize
    return total


def _check_layout(layout: Mapping[str, Tuple[Tuple[int, ...], str]],
                  stored: Mapping[str, Tuple[Tuple[int, ...], np.dtype]]) -> None:
    if set(stored) != set(layout):
        raise FormatError(f"stored state arrays {sorted(stored)} do not match the parameters, "
                          f"which need {sorted(layout)}")
    for name, (shape, dtype) in layout.items():
        got_shape, got_dtype = stored[name]
        if tuple(got_shape) != tuple(int(s) for s in shape) or got_dtype.newbyteorder("=") != np.dtype(dtype):
            raise FormatError(f"state array {name!r} has shape {tuple(got_shape)} and dtype {got_dtype}; "
                              f"the parameters need {tuple(shape)} and {np.dtype(dtype)}")


_MAC_NAME = "hmac-sha256"
_MAC_SIZE = 32


def _checked_key(key: Any) -> bytes:
    if not isinstance(key, (bytes, bytearray, memoryview)) or len(key) == 0:
        raise ParameterError(f"key must be non-empty bytes, got {type(key).__name__}")
    return bytes(key)


_MAX_STATE_ARRAYS = 1024


def _native(array: np.ndarray) -> np.ndarray:
    """``array`` contiguous, in native byte order, with numpy's canonical dtype object
    (the C++ bindings compare dtypes by identity; ``np.load`` builds new dtype objects)."""
    dtype = array.dtype.newbyteorder("=")
    if dtype.kind in "biufc":
        dtype = np.dtype(dtype.char)
    array = np.ascontiguousarray(array, dtype=dtype)
    return array if array.dtype is dtype else array.view(dtype)


_NPY_KINDS = "biuf"


def _npy_header(name: str, image: memoryview) -> Tuple[Tuple[int, ...], np.dtype, bool, int]:
    """Shape, dtype, Fortran order and data offset of a .npy image, checked against the
    bytes present before anything is allocated (plain numbers only, no pickled objects)."""
    fmt = np.lib.format
    head = io.BytesIO(bytes(image[:min(len(image), 1 << 16)]))
    try:
        version = fmt.read_magic(head)
        reader = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = reader(head)
    except Exception as exc:  # numpy's header parser raises many types on malformed input
        raise FormatError(f"state array {name!r} is not a valid .npy image: {_describe(exc)}") from None
    if dtype.kind not in _NPY_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise FormatError(f"state array {name!r} has dtype {dtype}; only plain numbers are stored")
    if not isinstance(shape, tuple) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise FormatError(f"state array {name!r} declares an invalid shape {shape!r}")
    count = 1
    for dim in shape:
        count *= dim
    offset = head.tell()
    if len(image) - offset != count * dtype.itemsize:
        raise FormatError(f"state array {name!r} declares shape {shape} of {dtype} "
                          f"({count * dtype.itemsize} bytes) but holds {len(image) - offset}")
    return shape, dtype, bool(fortran), offset


def _npy_array(name: str, image: memoryview, shape: Tuple[int, ...], dtype: np.dtype, fortran: bool,
               offset: int) -> np.ndarray:
    """A writable copy of the array of a .npy image checked by :func:`_npy_header`."""
    count = (len(image) - offset) // dtype.itemsize if dtype.itemsize else 0
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
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FormatError(f"aggregator header is not valid JSON: {exc}") from None
    if (not isinstance(header, dict) or not isinstance(header.get("protocol"), str)
            or not isinstance(header.get("params"), dict)
            or not isinstance(header.get("fingerprint"), str)):
        raise FormatError("aggregator header must hold 'protocol', 'params' and 'fingerprint'")
    if header.get("mac", _MAC_NAME) != _MAC_NAME:
        raise FormatError(f"aggregator bytes use an unknown authentication {header.get('mac')!r}")
    return header


def _parse_container(blob: bytes, key: Optional[bytes] = None,
                     verify: bool = True) -> Tuple[Dict[str, Any], List[Tuple[str, memoryview]]]:
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
    if "mac" in header:
        if len(body) - cur.pos < _MAC_SIZE:
            raise FormatError("aggregator bytes are truncated (no authentication code)")
        mac = bytes(body[-_MAC_SIZE:])
        body = cur.data = body[:-_MAC_SIZE]
        if verify:
            if key is None:
                raise FormatError("aggregator bytes are authenticated (HMAC-SHA256): pass the key "
                                  "they were written with")
            if not hmac.compare_digest(hmac.new(_checked_key(key), body, hashlib.sha256).digest(), mac):
                raise FormatError("aggregator bytes fail authentication (HMAC-SHA256 mismatch: "
                                  "wrong key or modified bytes)")
    elif verify and key is not None:
        raise FormatError("aggregator bytes are not authenticated, but a key was given")
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
    ``{"protocol": str, "params": dict, "fingerprint": str}`` (plus ``"mac"`` when the
    bytes carry an authentication code, which this function does not verify).

    Raises:
        FormatError: as :meth:`Aggregator.from_bytes`.
    """
    return _parse_container(blob, verify=False)[0]


def load_aggregator(blob: bytes, key: Optional[bytes] = None) -> "Aggregator":
    """The aggregator of whichever registered protocol ``blob`` holds (see
    :meth:`Aggregator.from_bytes`)."""
    return Aggregator.from_bytes(blob, key=key)


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


def _stamping(perturb: Callable) -> Callable:
    """``perturb`` that records the client's parameter fingerprint on the batch it returns."""
    @functools.wraps(perturb)
    def stamped(self, *args, **kwargs):
        reports = perturb(self, *args, **kwargs)
        if isinstance(reports, Reports):
            reports.params_fingerprint = self.params.fingerprint
        return reports

    stamped._ldpfast_stamps = True  # type: ignore[attr-defined]
    return stamped


def register_protocol(protocol: Protocol) -> Protocol:
    """Called once by each protocol module at import. The client's ``perturb`` is wrapped
    so that every batch it makes carries its parameter fingerprint."""
    for cls in (protocol.params, protocol.reports, protocol.aggregator):
        if getattr(cls, "protocol", protocol.id) != protocol.id:
            raise ValueError(f"{cls.__name__}.protocol != {protocol.id!r}")
    perturb = getattr(protocol.client, "perturb", None)
    if callable(perturb) and not getattr(perturb, "_ldpfast_stamps", False):
        setattr(protocol.client, "perturb", _stamping(perturb))
    _REGISTRY[protocol.id] = protocol
    return protocol


def protocols() -> Dict[str, Protocol]:
    """Every registered protocol, importing all protocol modules first."""
    from . import protocols as _package

    _package.load_all()
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
