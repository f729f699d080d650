"""Per-protocol examples shared by the fuzz tests: the contract test's cases (each
registered protocol's ``Protocol.example``, tests/test_contract.py), built once per session."""

from __future__ import annotations

import functools
import io
import json
import struct
import warnings
import zlib

import numpy as np
import pytest

import _toy_protocol  # noqa: F401  (registers "toy-count")
from ldpfast._base import FORMAT_MAGIC, FORMAT_VERSION, protocols
from test_contract import SEED, _slice, contract_cases


def case_ids():
    """Every contract case id (the toy protocol's included)."""
    return list(contract_cases())


def case_params():
    """``case_ids()`` as fixture parameters, each named by its id."""
    return [pytest.param(cid, id=cid) for cid in case_ids()]


@functools.lru_cache(maxsize=None)
def example(case_id):
    """(protocol, params, reports, make_server) for a case id."""
    pid, make, zero = contract_cases()[case_id]
    proto = protocols()[pid]
    params, values = make()
    with warnings.catch_warnings():  # PrivSketch clients warn that they are not eps-LDP
        warnings.simplefilter("ignore")
        reports = proto.client(params, rng=SEED).perturb(values)
    return proto, params, reports, (zero or proto.aggregator)


def tiled(reports, times):
    """``reports`` repeated ``times`` times (a larger batch of the same kind)."""
    return type(reports).from_columns({k: np.concatenate([v] * times) for k, v in reports.columns().items()})


def batches(reports, parts):
    """``reports`` cut into ``parts`` consecutive batches (hand-built: no fingerprint)."""
    n = len(reports)
    cuts = [n * i // parts for i in range(parts + 1)]
    return [_slice(reports, cuts[i], cuts[i + 1]) for i in range(parts)]


def seal(header: dict, arrays: dict, raw_header: bytes = None) -> bytes:
    """Aggregator bytes (format version 1) with the given header and state arrays, and a
    valid CRC: what a writer that follows the layout but lies about the content makes."""
    head = raw_header if raw_header is not None else json.dumps(header, sort_keys=True,
                                                                  separators=(",", ":")).encode()
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


def header_of(params) -> dict:
    return {"protocol": params.protocol, "params": json.loads(params.to_json())["params"],
            "fingerprint": params.fingerprint}


def reseal(blob: bytes) -> bytes:
    """``blob`` with its CRC-32 recomputed."""
    body = blob[:-4]
    return body + struct.pack("<I", zlib.crc32(body))
