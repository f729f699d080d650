"""The aggregator byte container: writing helpers and the checked parser.

Layout (format version 1, all integers little-endian)::

    magic      8 bytes  b"LDPFAGG\\0"
    version    u16      FORMAT_VERSION
    hlen       u32      length of the header
    header     hlen     UTF-8 JSON {"fingerprint", "params", "protocol"} (sorted keys)
    count      u32      number of state arrays
    count x    u16 nlen, u64 size, name (nlen bytes, UTF-8), .npy image (size bytes)
    mac        32 bytes HMAC-SHA256 of everything before it; only when the header has
                        "mac": "hmac-sha256" (``to_bytes(key=...)``)
    crc32      u32      zlib.crc32 of everything before it

Every malformed input raises :class:`~ldpfast.errors.FormatError` after time and memory
proportional to its size.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import io
import json
import struct
import zlib
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .errors import FormatError, ParameterError

FORMAT_MAGIC = b"LDPFAGG\x00"
FORMAT_VERSION = 1


def _describe(obj: Any) -> str:
    """``obj`` for error messages, cut to a readable length."""
    text = repr(obj)
    return text if len(text) <= 300 else text[:297] + "..."


def _layout_nbytes(layout: Mapping[str, Tuple[Tuple[int, ...], str]]) -> int:
    total = 0
    for shape, dtype in layout.values():
        count = 1
        for dim in shape:
            count *= int(dim)
        total += count * _itemsize(dtype)
    return total


@functools.lru_cache(maxsize=64)
def _itemsize(dtype: Any) -> int:
    """Bytes per value of ``dtype`` (a layout's dtype name; every server construction asks)."""
    return int(np.dtype(dtype).itemsize)


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


def write_container(head: Dict[str, Any], state: Mapping[str, Any], key: Optional[bytes] = None) -> bytes:
    """The container of ``head`` (protocol, fingerprint, params, domain) and the ``state``
    arrays, with an HMAC-SHA256 when ``key`` is given (see the layout above). The arrays'
    bytes are copied once, into the result (a state may be as large as the memory allows)."""
    if key is not None:
        head = {**head, "mac": _MAC_NAME}
    header = json.dumps(head, sort_keys=True, separators=(",", ":")).encode()
    parts: List[Any] = [FORMAT_MAGIC + struct.pack("<HI", FORMAT_VERSION, len(header)) + header,
                        struct.pack("<I", len(state))]
    for name in sorted(state):
        array = np.asarray(state[name])
        array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
        npy_header = io.BytesIO()  # what np.save writes before the data
        try:
            np.lib.format.write_array_header_1_0(npy_header, np.lib.format.header_data_from_array_1_0(array))
        except ValueError:  # a header over 64 KiB (a shape of thousands of dimensions)
            npy_header = io.BytesIO()
            np.lib.format.write_array_header_2_0(npy_header, np.lib.format.header_data_from_array_1_0(array))
        encoded = name.encode()
        parts += [struct.pack("<HQ", len(encoded), npy_header.tell() + array.nbytes) + encoded,
                  npy_header.getvalue(), array.data.cast("B") if array.nbytes else b""]
    if key is not None:
        mac = hmac.new(_checked_key(key), digestmod=hashlib.sha256)
        for part in parts:
            mac.update(part)
        parts.append(mac.digest())
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
    parts.append(struct.pack("<I", crc))
    return b"".join(parts)


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
    view = memoryview(blob).cast("B")  # no copies of large states while parsing
    if bytes(view[:len(FORMAT_MAGIC)]) != FORMAT_MAGIC:
        raise FormatError("not an ldpfast aggregator (bad magic)")
    if len(view) < len(FORMAT_MAGIC) + 4:
        raise FormatError("aggregator bytes are truncated (no checksum)")
    body, (crc,) = view[:-4], struct.unpack("<I", view[-4:])
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
