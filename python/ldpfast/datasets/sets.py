"""Set-valued data (:class:`SetData`, CSR form: user ``i`` holds
``items[offsets[i]:offsets[i+1]]``, sorted and de-duplicated), the bundled real files (see
``data/PROVENANCE.md`` for where each comes from), the readers of user-supplied files, and
[PS]-style synthetic Zipf sets."""

from __future__ import annotations

import gzip
import hashlib
import os
from dataclasses import dataclass
from importlib import resources
from typing import Dict, Iterable, Iterator, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike

from .._random import RngLike
from ..errors import FormatError, ParameterError

__all__ = ["SetData", "BUNDLED", "bundled_path", "load_sets", "zipf_sets"]

# name -> (file, sha256 of the .gz)
BUNDLED: Dict[str, Tuple[str, str]] = {
    "kosarak-prefix": ("kosarak_prefix36681.dat.gz",
                       "3f52d42d1e83a655d3345a99080e83713d9f72ed88dbd889ed2027a5dd2fa7f2"),
    "retail": ("retail.dat.gz", "d3008ee2115e51bdc0df8095872c4ea1fa1199011d834a8672fbe0fc9a43913a"),
    "bms-webview-1": ("BMS-WebView-1.dat.gz",
                      "7d834e7ba76de350d7bf16a6903669e41fe9893e89c466e832aacf9d98d1cd85"),
    "bms-webview-2": ("BMS-WebView-2.dat.gz",
                      "a443cdeeeb6ac4059767ec44923f12ae65b511839cd94600802ac18ea0273f86"),
}


def _domain_size(ids: np.ndarray, d: Union[int, None], name: str, empty_size: int) -> int:
    """``d`` checked to cover the non-negative ``ids``; ``None`` means ``max(ids) + 1``."""
    if ids.size and ids.min() < 0:
        raise ParameterError(f"{name} must be non-negative, got {int(ids.min())}")
    top = int(ids.max()) + 1 if ids.size else empty_size
    if d is None:
        return top
    if d < top:
        raise ParameterError(f"d must exceed every one of the {name} ({top - 1}), got {d}")
    return int(d)


@dataclass(frozen=True)
class SetData:
    """Users holding sets of items from the domain ``[0, d)`` (CSR layout)."""

    offsets: np.ndarray  # int64, length n + 1
    items: np.ndarray    # int64, sorted and unique within each user
    d: int
    name: str = ""

    @property
    def n(self) -> int:
        return len(self.offsets) - 1

    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    def user(self, i: int) -> np.ndarray:
        return self.items[self.offsets[i]:self.offsets[i + 1]]

    def frequencies(self) -> np.ndarray:
        """f(x) = share of users holding x, for every x in [0, d)."""
        return np.bincount(np.asarray(self.items, dtype=np.intp), minlength=self.d) / max(self.n, 1)

    @classmethod
    def from_lists(cls, sets: Iterable[ArrayLike], d: Union[int, None] = None, name: str = "") -> "SetData":
        cleaned = [np.unique(np.asarray(s, dtype=np.int64)) for s in sets]
        offsets = np.zeros(len(cleaned) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in cleaned], out=offsets[1:])
        items = np.concatenate(cleaned) if cleaned else np.zeros(0, dtype=np.int64)
        d = _domain_size(items, d, "items", empty_size=0)
        return cls(offsets=offsets, items=items, d=d, name=name)


def bundled_path(name: str) -> str:
    """Filesystem path of a bundled data file, after checking its sha256."""
    if name not in BUNDLED:
        raise ParameterError(f"name must be one of {sorted(BUNDLED)} or a file path, got {name!r}")
    filename, digest = BUNDLED[name]
    path = str(resources.files("ldpfast").joinpath("data", filename))
    with open(path, "rb") as fh:
        actual = hashlib.sha256(fh.read()).hexdigest()
    if actual != digest:
        raise ParameterError(f"bundled file {filename} is corrupt: sha256 {actual}, expected {digest}")
    return path


def _resolve(name_or_path: str) -> Tuple[str, str]:
    """(path, display name) of a bundled name or an existing file."""
    if name_or_path in BUNDLED:
        return bundled_path(name_or_path), name_or_path
    if os.path.exists(name_or_path):
        return name_or_path, os.path.basename(name_or_path)
    raise ParameterError(
        f"name_or_path must be one of {sorted(BUNDLED)} or an existing file, got {name_or_path!r}")


def _lines(path: str) -> Iterator[str]:
    """The lines of a text file (gzip-compressed if it ends in .gz); unreadable files and
    bytes that are not text raise FormatError naming the file."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as fh:
            yield from fh
    except (OSError, EOFError, UnicodeDecodeError) as exc:  # gzip.BadGzipFile is an OSError
        raise FormatError(f"cannot read {path!r} as a text file of integer ids: {exc}") from None


def _int_tokens(line: str, name: str, lineno: int) -> np.ndarray:
    """The whitespace-separated integer ids of one line (FormatError naming the line)."""
    try:
        return np.array([int(token) for token in line.split()], dtype=np.int64)
    except (ValueError, OverflowError):
        bad = next((t for t in line.split() if not t.lstrip("+-").isdigit()), line.strip())
        raise FormatError(f"{name} line {lineno}: ids must be integers, got {bad!r}") from None


def load_sets(name_or_path: str, d: Union[int, None] = None) -> SetData:
    """Load set-valued data: a bundled name (see :data:`BUNDLED`) or a path to a file
    (optionally .gz) with one user per line of whitespace-separated integer ids.
    Each user's set is de-duplicated; empty lines are users with empty sets.

    Raises:
        FormatError: the file cannot be read as text, or a token is not an integer.
    """
    path, name = _resolve(name_or_path)
    sets = [_int_tokens(line, name, lineno) for lineno, line in enumerate(_lines(path), start=1)]
    return SetData.from_lists(sets, d=d, name=name)


def zipf_sets(n: int, d: int, length: int = 100, a: float = 1.1, seed: RngLike = None) -> SetData:
    """Synthetic Zipf set-valued data in the style of [PS] (R2 ``simulations/data_generator.py``).

    Set lengths are ``int(N(1, 0.2) * length)``, shifted so the smallest is 1. Items are
    ``numpy.random.zipf(a)`` draws; the ``d`` most common values are relabelled ``0..d-1`` by
    rank (ties by value) and draws outside them are replaced by draws from the empirical
    distribution of the kept ones. The items are shuffled, cut into users and de-duplicated
    per user (so sets are shorter than their drawn length). Seeded for reproducibility
    (``seed``: int, SeedSequence or Generator; None = fresh). R2's "large_domain" mode
    (every label at least once) is not reproduced: labels that are never drawn stay absent.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ParameterError(f"n must be an int >= 1, got {n!r}")
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ParameterError(f"d must be an int >= 1, got {d!r}")
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
        raise ParameterError(f"length must be an int >= 1, got {length!r}")
    if not a > 1:
        raise ParameterError(f"a must be > 1, got {a!r}")
    gen = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    sizes = (gen.normal(1.0, 0.2, size=n) * length).astype(np.int64)
    sizes = sizes - sizes.min() + 1
    raw = gen.zipf(a, size=int(sizes.sum()))
    values, counts = np.unique(raw, return_counts=True)
    keep = np.lexsort((values, -counts))[:d]
    labels = np.full(values.size, -1, dtype=np.int64)
    labels[keep] = np.arange(keep.size)
    items = labels[np.searchsorted(values, raw)]
    missing = items < 0
    if missing.any():
        kept_items = items[~missing]
        items[missing] = kept_items[gen.integers(0, kept_items.size, size=int(missing.sum()))]
    gen.shuffle(items)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    # De-duplicate within each user: sort the keys user * d + item and drop repeats.
    keys = np.repeat(np.arange(n, dtype=np.int64), sizes) * d + items
    keys.sort()
    keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    user, items = np.divmod(keys, d)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(user, minlength=n), out=offsets[1:])
    return SetData(offsets=offsets, items=items, d=int(d), name=f"zipf(n={n}, d={d}, l={length}, a={a})")
