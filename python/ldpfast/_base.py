"""The contract every protocol follows: parameters, report batches, aggregators.

* ``Params`` subclasses are frozen dataclasses: hashable, comparable, serializable to a
  canonical JSON dict, with a ``fingerprint`` (sha256 of that JSON).
* ``Reports`` subclasses are typed containers of equal-length numpy columns.
* ``Aggregator`` subclasses hold integral state only (counts), so ``merge`` is exact,
  associative and commutative. An empty aggregator is the merge identity; ``update``
  validates a whole batch before touching the state; ``to_bytes``/``from_bytes`` (also
  used by pickle) write a versioned, checksummed container.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import struct
import zlib
from typing import Any, ClassVar, Dict, Mapping, Type, TypeVar

import numpy as np

from .errors import FormatError, IncompatibleError, ReportError

__all__ = ["Params", "Reports", "Aggregator", "Protocol", "register_protocol", "protocols",
           "FORMAT_MAGIC", "FORMAT_VERSION"]

FORMAT_MAGIC = b"LDPFAGG\x00"
FORMAT_VERSION = 1

P = TypeVar("P", bound="Params")
A = TypeVar("A", bound="Aggregator")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


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


class Reports:
    """Mixin for report batches: a dataclass whose fields are equal-length numpy columns."""

    protocol: ClassVar[str] = ""

    def columns(self) -> Dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def __len__(self) -> int:
        first = dataclasses.fields(self)[0].name
        return int(len(getattr(self, first)))

    def _check_lengths(self) -> None:
        lengths = {name: len(col) for name, col in self.columns().items()}
        if len(set(lengths.values())) > 1:
            raise ReportError(f"report columns must have equal lengths, got {lengths}")


class Aggregator:
    """Base class for server-side aggregators. Subclasses implement ``_state``,
    ``_set_state`` and ``_ingest``; ``update`` calls ``_validate`` first."""

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
            np.save(raw, np.ascontiguousarray(state[name]), allow_pickle=False)
            encoded = name.encode()
            buf.write(struct.pack("<HQ", len(encoded), raw.tell()))
            buf.write(encoded)
            buf.write(raw.getvalue())
        body = buf.getvalue()
        return body + struct.pack("<I", zlib.crc32(body))

    @classmethod
    def from_bytes(cls: Type[A], blob: bytes) -> A:
        blob = bytes(blob)
        if len(blob) < len(FORMAT_MAGIC) + 10 or not blob.startswith(FORMAT_MAGIC):
            raise FormatError("not an ldpfast aggregator (bad magic)")
        body, (crc,) = blob[:-4], struct.unpack("<I", blob[-4:])
        if zlib.crc32(body) != crc:
            raise FormatError("aggregator bytes are corrupt (checksum mismatch)")
        pos = len(FORMAT_MAGIC)
        version, header_len = struct.unpack_from("<HI", body, pos)
        pos += 6
        if version != FORMAT_VERSION:
            raise FormatError(f"unsupported aggregator format version {version} (this build reads {FORMAT_VERSION})")
        header = json.loads(body[pos:pos + header_len])
        pos += header_len
        if header["protocol"] != cls.protocol:
            raise FormatError(f"bytes hold a {header['protocol']!r} aggregator, not {cls.protocol!r}")
        params = cls.params_type.from_dict(header["params"])
        if params.fingerprint != header["fingerprint"]:
            raise FormatError("parameter fingerprint does not match the stored parameters")
        (count,) = struct.unpack_from("<I", body, pos)
        pos += 4
        state = {}
        for _ in range(count):
            name_len, size = struct.unpack_from("<HQ", body, pos)
            pos += 10
            name = body[pos:pos + name_len].decode()
            pos += name_len
            state[name] = np.load(io.BytesIO(body[pos:pos + size]), allow_pickle=False)
            pos += size
        agg = cls(params)
        agg._check_state(state)
        agg._set_state(state)
        return agg

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        """Raise FormatError unless ``state`` (read by ``from_bytes``) fits this aggregator.
        The default wants the names, shapes and dtypes of an empty aggregator's state;
        aggregators whose state size varies (e.g. kept reports) override it."""
        expected = self._state()
        if set(state) != set(expected) or any(
                state[k].shape != expected[k].shape or state[k].dtype != expected[k].dtype for k in state):
            raise FormatError("stored state does not match the parameters")

    def __reduce__(self):
        return (type(self).from_bytes, (self.to_bytes(),))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        a, b = self._state(), other._state()
        return self.params == other.params and all(np.array_equal(a[k], b[k]) for k in a)

    __hash__ = None  # mutable


@dataclasses.dataclass(frozen=True)
class Protocol:
    """The classes of one protocol, found by its id (used by the Dask, Parquet and
    command-line layers to handle any protocol generically)."""

    id: str
    params: type
    reports: type
    aggregator: type
    client: type


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
