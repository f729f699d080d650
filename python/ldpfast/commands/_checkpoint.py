"""The checkpoint file of ``ldpfast aggregate`` (layout: :mod:`ldpfast.commands.aggregate`),
read back by ``ldpfast estimate``, and how two parameter sets differ, for error messages."""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any, Dict, List, Tuple

from .._base import Aggregator, Params
from ..errors import FormatError

CHECKPOINT_MAGIC = b"LDPFCKP\x00"
CHECKPOINT_VERSION = 1


def encode_checkpoint(agg: Aggregator, done: List[Dict[str, Any]]) -> bytes:
    header = json.dumps({"protocol": agg.protocol, "fingerprint": agg.params.fingerprint,
                         "done": done}, sort_keys=True, separators=(",", ":")).encode()
    blob = agg.to_bytes()
    body = b"".join([CHECKPOINT_MAGIC, struct.pack("<HI", CHECKPOINT_VERSION, len(header)), header,
                     struct.pack("<Q", len(blob)), blob])
    return body + struct.pack("<I", zlib.crc32(body))


def decode_checkpoint(data: bytes) -> Tuple[Aggregator, List[Dict[str, Any]]]:
    """The aggregator and finished-file list of a checkpoint (FormatError if invalid)."""
    fixed = len(CHECKPOINT_MAGIC) + 6
    if not data.startswith(CHECKPOINT_MAGIC) or len(data) < fixed + 12:
        raise FormatError("not an ldpfast aggregate checkpoint (bad magic or truncated)")
    body, (crc,) = data[:-4], struct.unpack("<I", data[-4:])
    if zlib.crc32(body) != crc:
        raise FormatError("checkpoint is corrupt (checksum mismatch)")
    version, hlen = struct.unpack_from("<HI", body, len(CHECKPOINT_MAGIC))
    if version != CHECKPOINT_VERSION:
        raise FormatError(f"unsupported checkpoint version {version} (this build reads {CHECKPOINT_VERSION})")
    if fixed + hlen + 8 > len(body):
        raise FormatError("checkpoint is truncated (header)")
    try:
        header = json.loads(body[fixed:fixed + hlen])
    except ValueError as exc:
        raise FormatError(f"checkpoint header is not valid JSON: {exc}") from None
    (alen,) = struct.unpack_from("<Q", body, fixed + hlen)
    start = fixed + hlen + 8
    if start + alen != len(body):
        raise FormatError("checkpoint is truncated or has trailing bytes (aggregator)")
    agg = Aggregator.from_bytes(body[start:])
    done = header.get("done") if isinstance(header, dict) else None
    if (not isinstance(done, list) or header.get("protocol") != agg.protocol
            or header.get("fingerprint") != agg.params.fingerprint
            or not all(isinstance(e, dict) and isinstance(e.get("name"), str)
                       and isinstance(e.get("size"), int) and isinstance(e.get("sha256"), str)
                       for e in done)):
        raise FormatError("checkpoint header does not match its aggregator")
    return agg, done


def differences(found: Params, expected: Params) -> str:
    """The parameters (label domain included) in which ``found`` differs from ``expected``,
    as ``name found (expected E)``."""
    a, b = json.loads(found.to_json()), json.loads(expected.to_json())
    if a["protocol"] != b["protocol"]:
        return f"protocol {a['protocol']!r} (expected {b['protocol']!r})"
    a["params"]["domain"], b["params"]["domain"] = a.get("domain"), b.get("domain")
    return ", ".join(f"{name} {a['params'].get(name)!r:.80} (expected {b['params'].get(name)!r:.80})"
                     for name in sorted(set(a["params"]) | set(b["params"]))
                     if a["params"].get(name) != b["params"].get(name))
