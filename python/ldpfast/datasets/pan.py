"""The single-valued data sets of [PAN] (CSF 2025) section 6, following the reference code
(github.com/mingen-pan/CountMeanSketch, ``evaluation/sketch_experiment.py``), and
:func:`load_dataset`, the command line's one entry point to every data set."""

from __future__ import annotations

import os
from typing import Optional, Sequence, Union

import numpy as np

from .._random import RngLike
from ..errors import FormatError, ParameterError
from .sets import BUNDLED, _int_tokens, _lines, _resolve, load_sets
from .values import ValueData, _candidates, _check_int, load_values, sets_to_values

__all__ = ["rhr_base", "zipf_probabilities", "pan_zipf", "sampled_zipf", "pan_gaussian", "KOSARAK_USERS",
           "mini_kosarak", "SYNTHETIC", "load_dataset"]


def rhr_base(epsilon: float) -> int:
    """``2^(b-1)`` with ``b = ceil(eps log2 e)``: the block count of R1's RHR. Values that
    are multiples of it share residue 0, so they collide in RHR with probability 1/2
    ([PAN] section 4.3)."""
    if not (isinstance(epsilon, (int, float, np.floating, np.integer)) and np.isfinite(epsilon)
            and epsilon > 0):
        raise ParameterError(f"epsilon must be finite and > 0, got {epsilon!r}")
    b = int(np.ceil(float(epsilon) * np.log2(np.e)))
    return 1 << (b - 1)  # b >= 1 since eps > 0


def zipf_probabilities(support: int = 100, exponent: float = 2.0) -> np.ndarray:
    """``p_r = r^-exponent / sum_s s^-exponent`` for ranks ``r = 1..support``."""
    support = _check_int("support", support, 1)
    if not np.isfinite(exponent) or exponent < 0:
        raise ParameterError(f"exponent must be finite and >= 0, got {exponent!r}")
    weights = np.arange(1, support + 1, dtype=np.float64) ** -float(exponent)
    probabilities: np.ndarray = weights / weights.sum()
    return probabilities


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
                 epsilon: Optional[float] = None, stride: Optional[int] = None, rng: RngLike = None) -> ValueData:
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
                 mean: Optional[float] = None, seed: int = 317, rng: RngLike = None) -> ValueData:
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
                 candidates: Union[int, Sequence[int], None] = None, rng: RngLike = None,
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
