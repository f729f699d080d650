"""Data sets: the bundled real set-valued files and loaders for user-supplied paths.

Set-valued data are held in CSR form (:class:`SetData`): user ``i`` holds
``items[offsets[i]:offsets[i+1]]`` (sorted, de-duplicated). See ``data/PROVENANCE.md``
for where each bundled file comes from.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from dataclasses import dataclass
from importlib import resources
from typing import Dict, Union

import numpy as np

from .errors import ParameterError

__all__ = ["SetData", "BUNDLED", "load_sets", "bundled_path", "zipf_sets"]

# name -> (file, sha256 of the .gz)
BUNDLED: Dict[str, tuple] = {
    "kosarak-prefix": ("kosarak_prefix36681.dat.gz",
                       "3f52d42d1e83a655d3345a99080e83713d9f72ed88dbd889ed2027a5dd2fa7f2"),
    "retail": ("retail.dat.gz", "d3008ee2115e51bdc0df8095872c4ea1fa1199011d834a8672fbe0fc9a43913a"),
    "bms-webview-1": ("BMS-WebView-1.dat.gz",
                      "7d834e7ba76de350d7bf16a6903669e41fe9893e89c466e832aacf9d98d1cd85"),
    "bms-webview-2": ("BMS-WebView-2.dat.gz",
                      "a443cdeeeb6ac4059767ec44923f12ae65b511839cd94600802ac18ea0273f86"),
}


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
        return np.bincount(self.items, minlength=self.d) / max(self.n, 1)

    @classmethod
    def from_lists(cls, sets, d: Union[int, None] = None, name: str = "") -> "SetData":
        cleaned = [np.unique(np.asarray(s, dtype=np.int64)) for s in sets]
        offsets = np.zeros(len(cleaned) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in cleaned], out=offsets[1:])
        items = np.concatenate(cleaned) if cleaned else np.zeros(0, dtype=np.int64)
        if items.size and items.min() < 0:
            raise ParameterError(f"items must be non-negative, got {int(items.min())}")
        top = int(items.max()) + 1 if items.size else 0
        if d is None:
            d = top
        elif d < top:
            raise ParameterError(f"d must exceed every item id ({top - 1}), got {d}")
        return cls(offsets=offsets, items=items, d=int(d), name=name)


def bundled_path(name: str) -> str:
    """Filesystem path of a bundled data file, after checking its sha256."""
    if name not in BUNDLED:
        raise ParameterError(f"name must be one of {sorted(BUNDLED)} or a file path, got {name!r}")
    filename, digest = BUNDLED[name]
    path = str(resources.files(__package__).joinpath("data", filename))
    with open(path, "rb") as fh:
        actual = hashlib.sha256(fh.read()).hexdigest()
    if actual != digest:
        raise ParameterError(f"bundled file {filename} is corrupt: sha256 {actual}, expected {digest}")
    return path


def load_sets(name_or_path: str, d: Union[int, None] = None) -> SetData:
    """Load set-valued data: a bundled name (see :data:`BUNDLED`) or a path to a file
    (optionally .gz) with one user per line of whitespace-separated integer ids.
    Each user's set is de-duplicated; empty lines are users with empty sets."""
    if name_or_path in BUNDLED:
        path, name = bundled_path(name_or_path), name_or_path
    elif os.path.exists(name_or_path):
        path, name = name_or_path, os.path.basename(name_or_path)
    else:
        raise ParameterError(
            f"name_or_path must be one of {sorted(BUNDLED)} or an existing file, got {name_or_path!r}")
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as fh:
        sets = [np.array(line.split(), dtype=np.int64) for line in fh]
    return SetData.from_lists(sets, d=d, name=name)


def zipf_sets(n: int, d: int, length: int = 100, a: float = 1.1, seed=None) -> SetData:
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
