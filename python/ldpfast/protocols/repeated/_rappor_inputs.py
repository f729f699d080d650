"""The checks of what a RAPPOR client is given (:mod:`ldpfast.protocols.repeated.rappor`): the users'
secrets, integer values of a dictionary ``[0, d)`` and injected IRR words.

Secrets are HMAC keys (RFC 2104): a key longer than a block (64 bytes) is hashed and a
shorter one zero-padded, so ``b"a"`` and ``b"a\\0"`` are one key and an all-zero key is the
empty key. A secret anyone can compute (empty, all zero) makes that user's permanent
response computable by anyone, and two users with one key share their permanent responses:
both are refused, as is anything that is not bytes.
"""

from __future__ import annotations

import hashlib
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..._memory import check_allocation
from ..._validate import check_values
from ...errors import ParameterError
from .._bitvec import row_bytes

__all__ = ["secret_rows", "check_dictionary_values", "irr_rows"]

_HMAC_BLOCK = 64


def secret_rows(secrets: Any, n: int, drbg: bool) -> np.ndarray:
    """``secrets`` (``n`` bytes, or a ``uint8[n, L]`` array) as the C++ client's key rows:
    zero-padded to one width (the cpp-drbg encoding, whose keys are not HMAC keys, needs
    equal lengths). ParameterError for a non-bytes, empty, all-zero or repeated secret."""
    if isinstance(secrets, np.ndarray):
        arr = secrets
        if arr.dtype != np.uint8 or arr.ndim != 2 or arr.shape[0] != n or arr.shape[1] < 1:
            raise ParameterError(f"secrets must be {n} byte strings or a uint8 array of shape ({n}, L), got "
                                 f"{arr.dtype} of shape {arr.shape}")
        arr = np.ascontiguousarray(arr)
    else:
        arr = _pad(_keys(secrets, n, drbg))
    check_allocation(3 * arr.nbytes + 48 * n, f"checking {n} secrets of {arr.shape[1]} bytes for repeats")
    fingerprint, zero = _fingerprints(arr)
    blank = np.flatnonzero(zero)
    if blank.size:
        raise ParameterError(f"secrets[{int(blank[0])}] is empty or all zero bytes (HMAC pads keys with zeros): "
                             "anyone can compute that user's permanent responses")
    repeat = _first_repeat(arr, fingerprint)
    if repeat is not None:
        raise ParameterError(f"secrets[{repeat[0]}] and secrets[{repeat[1]}] are one key (HMAC pads keys with "
                             "zeros): two users would share their permanent responses; one secret per user, and "
                             "one user's several reports in separate calls")
    return arr


def _keys(secrets: Any, n: int, drbg: bool) -> Sequence[bytes]:
    if isinstance(secrets, (bytes, bytearray, str)):
        raise ParameterError(f"secrets must be a sequence of {n} byte strings (one per value), got one "
                             f"{type(secrets).__name__}")
    keys = _listed(secrets, "secrets", n)
    if len(keys) != n:
        raise ParameterError(f"secrets must have one entry per value ({n}), got {len(keys)}")
    for i, key in enumerate(keys):
        if not isinstance(key, (bytes, bytearray)):
            raise ParameterError(f"secrets[{i}] must be bytes, got {type(key).__name__} {key!r:.40}")
    if drbg:
        lengths = {len(key) for key in keys}
        if len(lengths) > 1:
            raise ParameterError(f"secrets must all have one length in the cpp-drbg encoding, got lengths "
                                 f"{sorted(lengths)[:4]}")
        return [bytes(key) for key in keys]
    return [hashlib.sha256(key).digest() if len(key) > _HMAC_BLOCK else bytes(key) for key in keys]


def _listed(items: Any, name: str, n: int) -> List[Any]:
    try:
        return list(items)
    except TypeError:
        raise ParameterError(f"{name} must be a sequence of {n} entries (one per value), got "
                             f"{type(items).__name__} {items!r:.40}") from None


def _pad(keys: Sequence[bytes]) -> np.ndarray:
    width = max([len(key) for key in keys] + [1])
    check_allocation(len(keys) * width, f"{len(keys)} secrets of {width} bytes")
    arr = np.zeros((len(keys), width), dtype=np.uint8)
    for i, key in enumerate(keys):
        arr[i, :len(key)] = np.frombuffer(key, dtype=np.uint8)
    return arr


def _fingerprints(rows: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """A 64-bit fingerprint of each row (a polynomial hash over its 8-byte words, wrapping
    mod 2^64) and which rows are all zero."""
    words = np.zeros((rows.shape[0], -(-rows.shape[1] // 8) * 8), dtype=np.uint8)
    words[:, :rows.shape[1]] = rows
    fingerprint = np.zeros(rows.shape[0], dtype=np.uint64)
    blank = np.ones(rows.shape[0], dtype=bool)
    with np.errstate(over="ignore"):
        for column in words.view(np.uint64).T:
            fingerprint = fingerprint * np.uint64(0x9E3779B97F4A7C15) + column
            fingerprint ^= fingerprint >> np.uint64(29)
            blank &= column == 0
    return fingerprint, blank


def _first_repeat(rows: np.ndarray, fingerprint: np.ndarray) -> Optional[Tuple[int, int]]:
    """The indices of two equal rows (the lower first), or None: only rows whose
    fingerprint repeats are compared byte for byte."""
    ordered = np.sort(fingerprint)
    if not np.any(ordered[1:] == ordered[:-1]):
        return None
    order = np.argsort(fingerprint, kind="stable")
    tied = np.zeros(order.size, dtype=bool)
    tied[1:] = fingerprint[order[1:]] == fingerprint[order[:-1]]
    tied[:-1] |= tied[1:]
    suspects = np.sort(order[tied])
    records = np.ascontiguousarray(rows[suspects]).view(np.dtype((np.void, rows.shape[1]))).ravel()
    within = np.argsort(records, kind="stable")
    same = np.flatnonzero(records[within[1:]] == records[within[:-1]])
    if not same.size:
        return None
    first, second = sorted((int(suspects[within[same[0]]]), int(suspects[within[same[0] + 1]])))
    return first, second


def check_dictionary_values(values: Any, d: int) -> None:
    """Integer values must lie in the dictionary ``[0, d)``, Python integers of any size
    included (strings and bytes are the deployment's own words: not checked)."""
    if isinstance(values, (int, np.integer, bytes, str)):
        values = [values]
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError, UnicodeError, OverflowError):   # mixed str/bytes: no integers to check
        arr = np.asarray(list(values), dtype=object)
    if arr.dtype.kind in "iu":
        check_values(arr.ravel(), d)
    elif arr.dtype == object:
        for i, value in enumerate(arr.ravel()):
            if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and not 0 <= int(value) < d:
                raise ParameterError(f"values must be integers in [0, {d}), got {int(value)} at index {i}")


def irr_rows(irr_words: Any, n: int, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """Injected IRR words ``(p_words, q_words)``: ``n`` integers each in ``[0, 2^k)`` (bit
    ``j`` = ``1 << j``), as bit rows ``uint8[n, ceil(k/8)]``."""
    if not isinstance(irr_words, (tuple, list)) or len(irr_words) != 2:
        raise ParameterError(f"irr_words must be a pair (p_words, q_words), got {type(irr_words).__name__}")
    width = row_bytes(k)
    check_allocation(2 * n * (width + 8), f"the injected IRR words of {n} reports")
    rows = []
    for name, words in zip(("p_words", "q_words"), irr_words):
        ints = _listed(words, f"irr_words' {name}", n)
        if len(ints) != n:
            raise ParameterError(f"irr_words' {name} must have one word per value ({n}), got {len(ints)}")
        for i, word in enumerate(ints):
            if isinstance(word, bool) or not isinstance(word, (int, np.integer)) or not 0 <= int(word) < 1 << k:
                raise ParameterError(f"irr_words' {name}[{i}] must be an integer in [0, 2^{k}), got {word!r:.40}")
        data = b"".join(int(word).to_bytes(width, "little") for word in ints)
        rows.append(np.frombuffer(data, dtype=np.uint8).reshape(n, width))
    return rows[0], rows[1]
