"""Data sets: the bundled real set-valued files, loaders for user-supplied paths, and
the synthetic and derived data sets of [PAN] section 6.

* Set-valued data are held in CSR form (:class:`SetData`): user ``i`` holds
  ``items[offsets[i]:offsets[i+1]]`` (sorted, de-duplicated). See ``data/PROVENANCE.md``
  for where each bundled file comes from.
* Single-valued data (one value per user, the setting of frequency oracles such as
  OCMS+RR, HE, RHR, OLH, GRR) are held in :class:`ValueData`, together with the values
  of interest ``X`` the paper evaluates on and the prior ``f*`` it gives MSE-OCMS.

Constructions of [PAN] (CSF 2025) section 6, following the reference code
(github.com/mingen-pan/CountMeanSketch, ``evaluation/sketch_experiment.py``):
:func:`pan_zipf` (deterministic, as the figures were made) and :func:`sampled_zipf`
(as the text describes), :func:`pan_gaussian` (seed 317, or the text's random mean) and
:func:`mini_kosarak` (with the SPMF separator tokens the reference code counts, or
items only).
"""

from __future__ import annotations

import gzip
import hashlib
import os
from dataclasses import dataclass
from importlib import resources
from typing import Dict, Iterator, Optional, Sequence, Union

import numpy as np

from .errors import FormatError, ParameterError

__all__ = ["SetData", "ValueData", "BUNDLED", "load_sets", "bundled_path", "zipf_sets", "load_values",
           "sets_to_values", "pan_zipf", "sampled_zipf", "zipf_probabilities", "rhr_base",
           "pan_gaussian", "mini_kosarak", "KOSARAK_USERS", "SYNTHETIC", "load_dataset"]

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
    def from_lists(cls, sets, d: Union[int, None] = None, name: str = "") -> "SetData":
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
    path = str(resources.files(__package__).joinpath("data", filename))
    with open(path, "rb") as fh:
        actual = hashlib.sha256(fh.read()).hexdigest()
    if actual != digest:
        raise ParameterError(f"bundled file {filename} is corrupt: sha256 {actual}, expected {digest}")
    return path


def _resolve(name_or_path: str) -> tuple:
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


# ----------------------------------------------------------------------------------
# Single-valued data
# ----------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class ValueData:
    """One value per user, in ``[0, d)``, plus what an experiment evaluates on.

    Attributes:
        values: int64 array of length ``n`` (user ``i`` holds ``values[i]``).
        d: dictionary size; every value is ``< d``.
        candidates: the values of interest ``X`` of [PAN] Eq. 19 (int64, distinct), on
            which worst-case MSE, l1 and l2 are measured.
        f_star: the prior ``f*`` (upper bound on ``max f`` over ``X``) that [PAN] gives
            MSE-OCMS+RR on this data set.
        name: short name; ``note``: one line saying what the data set measures.
    """

    values: np.ndarray
    d: int
    candidates: np.ndarray
    f_star: float = 1.0
    name: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        values = np.ascontiguousarray(self.values, dtype=np.int64)
        candidates = np.ascontiguousarray(self.candidates, dtype=np.int64)
        if not isinstance(self.d, (int, np.integer)) or self.d < 1:
            raise ParameterError(f"d must be a positive integer, got {self.d!r}")
        if values.ndim != 1:
            raise ParameterError(f"values must be one-dimensional, got shape {values.shape}")
        if values.size and (values.min() < 0 or values.max() >= self.d):
            raise ParameterError(
                f"values must lie in [0, d) = [0, {self.d}), got range "
                f"[{int(values.min())}, {int(values.max())}]")
        if candidates.size and (candidates.min() < 0 or candidates.max() >= self.d):
            raise ParameterError(f"candidates must lie in [0, d) = [0, {self.d})")
        if np.unique(candidates).size != candidates.size:
            raise ParameterError("candidates must be distinct")
        if not 0.0 <= float(self.f_star) <= 1.0:
            raise ParameterError(f"f_star must be in [0, 1], got {self.f_star!r}")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "candidates", candidates)
        object.__setattr__(self, "d", int(self.d))

    @property
    def n(self) -> int:
        """Number of users (reports)."""
        return int(self.values.size)

    def counts(self, x: Optional[np.ndarray] = None) -> np.ndarray:
        """Number of users holding each value of ``x`` (default: the candidates)."""
        x = self.candidates if x is None else np.asarray(x, dtype=np.int64)
        uniq, cnt = np.unique(self.values, return_counts=True)
        pos = np.searchsorted(uniq, x)
        found = pos < uniq.size
        found[found] = uniq[pos[found]] == x[found]
        out = np.zeros(x.shape, dtype=np.int64)
        out[found] = cnt[pos[found]]
        return out

    def frequencies(self, x: Optional[np.ndarray] = None) -> np.ndarray:
        """True frequencies ``f(x)`` (fractions of users) at ``x`` (default: candidates)."""
        return self.counts(x) / max(self.n, 1)

    def max_frequency(self) -> float:
        """``max_x f(x)`` over the whole domain."""
        if self.n == 0:
            return 0.0
        return float(np.unique(self.values, return_counts=True)[1].max() / self.n)

    def with_candidates(self, candidates: np.ndarray) -> "ValueData":
        """The same data evaluated on other values of interest."""
        return ValueData(self.values, self.d, candidates, self.f_star, self.name, self.note)


def _check_int(name: str, value, low: int, high: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ParameterError(f"{name} must be {bound}, got {value}")
    return int(value)


def _top_values(values: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` most frequent values (ties broken by the smaller value), most frequent first."""
    uniq, cnt = np.unique(values, return_counts=True)
    order = np.lexsort((uniq, -cnt))
    return uniq[order[:k]]


def load_values(name_or_path: str, d: Optional[int] = None, *,
                candidates: Union[int, Sequence[int], None] = 100, f_star: float = 1.0) -> ValueData:
    """Load a file (optionally ``.gz``) with one user per line holding one integer value.

    Blank lines are skipped.

    Args:
        name_or_path: path of the file.
        d: dictionary size (default: largest value + 1).
        candidates: values of interest: an int ``k`` for the ``k`` most frequent values,
            a sequence of values, or None for the whole domain ``[0, d)``.
        f_star: prior for MSE-OCMS (1 = no prior knowledge).

    Raises:
        FormatError: a line holds more than one token, or a token is not an integer.
        ParameterError: a negative value, or ``d`` not above every value.
    """
    path, name = _resolve(name_or_path)
    values = []
    for lineno, line in enumerate(_lines(path), start=1):
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) != 1:
            raise FormatError(
                f"{name} line {lineno}: expected one value per line, got {len(tokens)} tokens "
                "(for set-valued files use load_sets and sets_to_values)")
        try:
            values.append(int(tokens[0]))
        except ValueError:
            raise FormatError(f"{name} line {lineno}: value must be an integer, got {tokens[0]!r}") from None
    arr = np.array(values, dtype=np.int64)
    d = _domain_size(arr, d, "values", empty_size=1)
    return ValueData(arr, d, _candidates(arr, d, candidates), f_star, name,
                     f"{name}: one value per user from a file")


def _candidates(values: np.ndarray, d: int, spec: Union[int, Sequence[int], None]) -> np.ndarray:
    if spec is None:
        return np.arange(d, dtype=np.int64)
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        return _top_values(values, _check_int("candidates", spec, 1))
    return np.asarray(spec, dtype=np.int64)


def sets_to_values(sets: SetData, mode: str = "entries", *, rng=None,
                   candidates: Union[int, Sequence[int], None] = 100) -> ValueData:
    """Turn set-valued data into single-valued data.

    Args:
        sets: the users' item sets.
        mode: ``"entries"``: every (user, item) entry becomes one report (n = number of
            entries; this is how [PAN] treats Kosarak: a user with k items would spend
            k*eps, so it measures estimation accuracy, not a per-user guarantee);
            ``"sample"``: each non-empty user reports one item drawn uniformly from the
            set (n = non-empty users; eps-LDP per user; frequencies are then of the
            sampled items).
        rng: seed or numpy Generator for ``"sample"`` (simulation only).
        candidates: as in :func:`load_values`.
    """
    if mode == "entries":
        values = sets.items.copy()
        note = f"{sets.name}: every (user, item) entry is one report"
    elif mode == "sample":
        sizes = sets.sizes()
        users = np.flatnonzero(sizes > 0)
        gen = np.random.default_rng(rng)
        picks = sets.offsets[users] + (gen.random(users.size) * sizes[users]).astype(np.int64)
        values = sets.items[picks]
        note = f"{sets.name}: one uniformly sampled item per user"
    else:
        raise ParameterError(f"mode must be 'entries' or 'sample', got {mode!r}")
    return ValueData(values, sets.d, _candidates(values, sets.d, candidates), 1.0, sets.name, note)


# ----------------------------------------------------------------------------------
# [PAN] section 6 data sets
# ----------------------------------------------------------------------------------

def rhr_base(epsilon: float) -> int:
    """``2^(b-1)`` with ``b = ceil(eps log2 e)``: the block count of R1's RHR. Values that
    are multiples of it share residue 0, so they collide in RHR with probability 1/2
    ([PAN] section 4.3)."""
    if not (isinstance(epsilon, (int, float, np.floating, np.integer)) and np.isfinite(epsilon)
            and epsilon > 0):
        raise ParameterError(f"epsilon must be finite and > 0, got {epsilon!r}")
    b = int(np.ceil(float(epsilon) * np.log2(np.e)))
    return 2 ** (b - 1)


def zipf_probabilities(support: int = 100, exponent: float = 2.0) -> np.ndarray:
    """``p_r = r^-exponent / sum_s s^-exponent`` for ranks ``r = 1..support``."""
    support = _check_int("support", support, 1)
    if not np.isfinite(exponent) or exponent < 0:
        raise ParameterError(f"exponent must be finite and >= 0, got {exponent!r}")
    weights = np.arange(1, support + 1, dtype=np.float64) ** -float(exponent)
    return weights / weights.sum()


def _zipf_values(epsilon: Optional[float], stride: Optional[int], support: int, d: int) -> np.ndarray:
    if stride is None:
        stride = 1 if epsilon is None else rhr_base(epsilon)
    stride = _check_int("stride", stride, 1)
    values = np.arange(support, dtype=np.int64) * stride
    if values[-1] >= d:
        raise ParameterError(f"d must exceed the largest Zipf value {int(values[-1])} "
                             f"(support {support} x stride {stride}), got {d}")
    return values


def pan_zipf(epsilon: Optional[float] = None, *, d: int = 1_000_000, n: int = 10_000,
             support: int = 100, exponent: float = 2.0, stride: Optional[int] = None) -> ValueData:
    """The Zipf data set of [PAN] section 6.1 as the reference code R1 builds it.

    Deterministic: rank ``r`` gets ``max(1, round(n p_r))`` users, ranks filled in order
    and the last one truncated so the total is exactly ``n`` (so with the defaults only
    96 of the 100 ranks are present: 6116, 1529, 680, 382, ... users). Rank ``r`` holds
    the value ``(r-1) * stride``; the default stride is :func:`rhr_base` of ``epsilon``
    (1 when ``epsilon`` is None) so that every value shares residue 0 in RHR, which is
    why the data set depends on eps. Values of interest: the ``support`` rank values;
    ``f* = 1``.

    Args:
        epsilon: privacy parameter the values are aligned for (RHR residues).
        d: dictionary size. [PAN]'s reference code (R1), which made the figures, uses
            1,000,000; the paper's text says 100,000 (an erratum).
        n: number of users; support, exponent: ``p_r ~ r^-exponent`` over ``r = 1..support``.
        stride: explicit spacing of the values (overrides ``epsilon``).
    """
    n = _check_int("n", n, 1)
    d = _check_int("d", d, 1)
    values = _zipf_values(epsilon, stride, support, d)
    counts = np.maximum(1, np.round(n * zipf_probabilities(support, exponent))).astype(np.int64)
    filled = np.minimum(np.cumsum(counts), n)
    counts = np.diff(np.concatenate(([0], filled)))
    return ValueData(np.repeat(values, counts), d, values, 1.0, "zipf",
                     f"deterministic Zipf(r^-{exponent:g}) over {support} values, n={n}, d={d} "
                     "(PAN 6.1 / R1)")


def sampled_zipf(n: int = 10_000, *, d: int = 100_000, support: int = 100, exponent: float = 2.0,
                 epsilon: Optional[float] = None, stride: Optional[int] = None, rng=None) -> ValueData:
    """Zipf data sampled i.i.d. as the text of [PAN] section 6.1 describes: ``n`` users,
    each holding rank ``r`` with probability ``p_r ~ r^-exponent``. Values as in
    :func:`pan_zipf`; the default ``d`` is the text's 100,000. ``rng``: seed or numpy
    Generator (simulation only)."""
    n = _check_int("n", n, 1)
    d = _check_int("d", d, 1)
    values = _zipf_values(epsilon, stride, support, d)
    ranks = np.random.default_rng(rng).choice(support, size=n, p=zipf_probabilities(support, exponent))
    return ValueData(values[ranks], d, values, 1.0, "zipf-sampled",
                     f"sampled Zipf(r^-{exponent:g}) over {support} values, n={n}, d={d}")


def pan_gaussian(variant: str = "r1", *, n: int = 10_000, d: int = 10_000, sd: float = 50.0,
                 mean: Optional[float] = None, seed: int = 317, rng=None) -> ValueData:
    """The Gaussian data set of [PAN] section 6.2. Values of interest: all of ``[0, d)``;
    ``f* = 0`` (the paper's prior for MSE-OCMS).

    Variants:
        ``"r1"`` (what the figures were made with): numpy's legacy
        ``RandomState(seed).normal(1000, sd, n)`` with ``seed = 317``, floored and clipped
        at 0 (values 811..1193, largest count 105 at 1000, so ``max f = 0.0105``).
        ``"paper"`` (the text): the mean is an integer drawn uniformly from [1000, 9000]
        (or ``mean``), draws are rounded and clipped to ``[0, d-1]``; ``rng`` is a seed or
        numpy Generator (simulation only).
    """
    n = _check_int("n", n, 1)
    d = _check_int("d", d, 1)
    if not np.isfinite(sd) or sd <= 0:
        raise ParameterError(f"sd must be finite and > 0, got {sd!r}")
    if variant == "r1":
        center = 1000.0 if mean is None else float(mean)
        draws = np.random.RandomState(_check_int("seed", seed, 0)).normal(center, sd, n)
        values = np.floor(np.maximum(draws, 0.0))
        note = f"R1 Gaussian: RandomState({seed}).normal({center:g}, {sd:g}, {n}), floored, clipped at 0"
    elif variant == "paper":
        gen = np.random.default_rng(rng)
        center = float(gen.integers(1000, 9001)) if mean is None else float(mean)
        values = np.round(gen.normal(center, sd, n))
        note = f"Gaussian N({center:g}, {sd:g}^2), n={n}, rounded, clipped to [0, {d - 1}]"
    else:
        raise ParameterError(f"variant must be 'r1' or 'paper', got {variant!r}")
    values = np.clip(values, 0, d - 1).astype(np.int64)
    return ValueData(values, d, np.arange(d, dtype=np.int64), 0.0, f"gaussian-{variant}", note)


#: Users in the full FIMI Kosarak (990,002 lines).
KOSARAK_USERS = 990_002


def mini_kosarak(source: str = "kosarak-prefix", *, mode: str = "faithful",
                 scale: Optional[float] = None, d: int = 26_000, n_interest: int = 1000) -> ValueData:
    """[PAN] section 6.3's "mini Kosarak", built the way R1 builds it, from a Kosarak file.

    R1 reads SPMF's sequence version of Kosarak (``item -1 item -1 ... -2`` per user) and
    counts every token, so besides the items it counts the separators ``-1`` (one per
    click) and ``-2`` (one per user). Each token value keeps ``round(count/scale)``
    copies of ``value + 2`` (R1: ``scale = 100``); ``d = 26000`` and ``X = {0..999}``
    are R1's constants. Here the counts come from a FIMI file (one user per line), which
    holds the same clicks: item counts are token counts, ``#(-1)`` = number of tokens,
    ``#(-2)`` = number of lines.

    Args:
        source: a bundled name or path of a FIMI Kosarak file (default: the bundled
            prefix of the first 36,681 users; the SPMF file R1 reads is not available).
        mode: ``"faithful"`` with the separators (value 1 is the ``-1`` separator, about
            47% of all entries: the "value above 0.4" of the paper; value 0 is ``-2``);
            ``"clean"``: items only (values 0 and 1 absent; item ``i`` is still value
            ``i + 2`` so the same ``X`` covers the same items).
        scale: divide each count by this (rounding half to even, as R1's Python
            ``round``). Default ``100 * users / 990002``: the per-user density of R1's
            ``/100`` on the full file, i.e. 100 on the full Kosarak and 3.705 on the
            prefix (about 167k entries in faithful mode, like the paper's "over 170,000").
        d: dictionary size (R1: 26,000); n_interest: ``X = {0, ..., n_interest-1}``.

    Raises:
        ParameterError: bad mode/scale, or an item id + 2 not below ``d``.
    """
    if mode not in ("faithful", "clean"):
        raise ParameterError(f"mode must be 'faithful' or 'clean', got {mode!r}")
    path, name = _resolve(source)
    tokens = []
    n_lines = 0
    for line in _lines(path):
        n_lines += 1
        tokens.append(_int_tokens(line, name, n_lines))
    items = np.concatenate(tokens) if tokens else np.zeros(0, dtype=np.int64)
    if items.size and items.min() < 0:
        raise ParameterError(f"{name}: item ids must be non-negative, got {int(items.min())}")
    if scale is None:
        scale = 100.0 * n_lines / KOSARAK_USERS
    if not np.isfinite(scale) or scale <= 0:
        raise ParameterError(f"scale must be finite and > 0, got {scale!r}")
    ids, counts = np.unique(items, return_counts=True)
    if mode == "faithful":
        ids = np.concatenate(([-2, -1], ids))
        counts = np.concatenate(([n_lines, items.size], counts))
    copies = np.round(counts / float(scale)).astype(np.int64)
    keep = copies > 0
    shifted = ids[keep] + 2
    if shifted.size and shifted.max() >= d:
        raise ParameterError(f"d must exceed the largest shifted item id {int(shifted.max())}, got {d}")
    values = np.repeat(shifted, copies[keep])
    n_interest = _check_int("n_interest", n_interest, 1, d)
    return ValueData(values, d, np.arange(n_interest, dtype=np.int64), 1.0, f"mini-kosarak-{mode}",
                     f"mini-Kosarak ({mode}) from {name}: round(count/{scale:.4g}) copies of "
                     f"token+2{' incl. separators -1 -> 1 and -2 -> 0' if mode == 'faithful' else ''}")


#: Names of the built-in single-valued data sets accepted by :func:`load_dataset`.
SYNTHETIC = ("zipf", "zipf-sampled", "gaussian", "gaussian-paper", "mini-kosarak",
             "mini-kosarak-clean")


def load_dataset(name: str, *, epsilon: Optional[float] = None, n: Optional[int] = None,
                 d: Optional[int] = None, values: str = "entries",
                 candidates: Union[int, Sequence[int], None] = None, rng=None,
                 kosarak: str = "kosarak-prefix") -> ValueData:
    """One entry point for the command line: a built-in data set, a bundled set-valued
    file, or a path.

    Args:
        name: one of :data:`SYNTHETIC`, a bundled name (:data:`BUNDLED`, turned into
            values with :func:`sets_to_values` and ``values``), or a path to a file with
            one value per line (:func:`load_values`) or, if ``values`` is ``"entries"``
            or ``"sample"`` and a line holds several ids, one set per line.
        epsilon: aligns the Zipf values for RHR (see :func:`pan_zipf`).
        n, d: sizes for the synthetic sets (defaults: the paper's); ``d`` also bounds
            file values.
        values: ``"entries"`` or ``"sample"`` for set-valued sources.
        candidates: override the values of interest: an int ``k`` (``k`` most frequent)
            or a sequence; default: the data set's own (Zipf: its 100 values,
            Gaussian: ``[0, d)``, mini-Kosarak: ``{0..999}``, files: the 100 most frequent).
        rng: seed or Generator for sampled variants (simulation only).
        kosarak: the Kosarak file mini-Kosarak is built from (bundled prefix or a path).
    """
    kwargs = {} if n is None else {"n": n}
    if d is not None:
        kwargs["d"] = d
    if name == "zipf":
        data = pan_zipf(epsilon, **kwargs)
    elif name == "zipf-sampled":
        data = sampled_zipf(epsilon=epsilon, rng=rng, **kwargs)
    elif name == "gaussian":
        data = pan_gaussian("r1", **kwargs)
    elif name == "gaussian-paper":
        data = pan_gaussian("paper", rng=rng, **kwargs)
    elif name in ("mini-kosarak", "mini-kosarak-clean"):
        data = mini_kosarak(kosarak, mode="clean" if name.endswith("clean") else "faithful",
                            **({"d": d} if d is not None else {}))
    elif name in BUNDLED:
        data = sets_to_values(load_sets(name, d=d), values, rng=rng)
    elif os.path.exists(name):
        try:
            data = load_values(name, d=d)
        except FormatError:
            data = sets_to_values(load_sets(name, d=d), values, rng=rng)
    else:
        raise ParameterError(f"data must be one of {list(SYNTHETIC) + sorted(BUNDLED)} "
                             f"or an existing file, got {name!r}")
    if candidates is not None:
        data = data.with_candidates(_candidates(data.values, data.d, candidates))
    return data
