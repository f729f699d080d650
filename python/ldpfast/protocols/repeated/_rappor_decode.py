"""RAPPOR's server side beyond the counts: how values are hashed (the reference clients'
bytes) and the decoding of a candidate dictionary from per-cohort bit counts.

``t[c, j] = (y[c, j]/n_c - p*)/(q* - p*)`` estimates the fraction of cohort ``c``'s reports
whose Bloom filter sets bit ``j``, and ``t ~ X f`` with ``X`` the candidates' Bloom bits per
cohort (a sparse 0/1 matrix, :func:`design`), weighted by ``n_c``:

* ``"ls"``: weighted least squares over every candidate (unbiased when the dictionary
  holds every reported value; the default estimator up to 500 candidates);
* ``"lasso"``: the paper's analysis: a non-negative lasso selects candidates (each
  candidate's penalty is the Bonferroni-corrected noise level of its score at level
  ``alpha``), then least squares on the selection (C++ coordinate descent);
* ``"nnls"``: non-negative least squares;
* ``"em"``: EM of the composite likelihood of the bit counts (bits treated as independent
  Bernoulli draws of the mixture over candidates and an "other" component whose Bloom bits
  are uniform; C++, SQUAREM-accelerated).

Standard errors are sandwich estimates that account for the correlation of one report's
bits (through its value): ``Var = A^-1 B A^-1`` with ``A`` the weighted Gram matrix of the
fitted candidates and ``B`` built from each cohort's bit covariance under the fitted
frequencies (values outside the fit: uniform Bloom bits).
"""

from __future__ import annotations

import dataclasses
import math
from statistics import NormalDist
from typing import Any, List, Optional, Tuple

import numpy as np

from ... import _core
from ..._memory import check_allocation
from ...errors import ParameterError
from .._bitvec import row_bytes

__all__ = ["encode_values", "as_labels", "bloom_positions", "bloom_rows", "Decoded", "Design", "design", "Decoder",
           "METHODS", "MAX_LS", "ENCODING_CODE"]

#: Decoding methods of :meth:`Decoder.decode`.
METHODS = ("ls", "lasso", "nnls", "em")
#: The reference encodings' codes in the C++ kernels.
ENCODING_CODE = {"python": 0, "cpp": 1, "cpp-drbg": 2}
MAX_LS = 500          # candidates of a dense least-squares fit (and of its standard errors)


def encode_values(values: Any, name: str = "values") -> Tuple[np.ndarray, np.ndarray]:
    """Values as RAPPOR hashes them: ``(data uint8, offsets int64[n + 1])`` where value ``i``
    is ``data[offsets[i]:offsets[i+1]]``. Accepts ``bytes``, ``str`` (UTF-8), or
    non-negative integers (their decimal ASCII digits), alone or in a sequence or array."""
    if isinstance(values, (bytes, str, int, np.integer)):
        values = [values]
    arr = values if isinstance(values, np.ndarray) else None
    if arr is None and len(values) and isinstance(values[0], (int, np.integer)):
        arr = np.asarray(values)
    if arr is not None and arr.dtype.kind in "iu" and arr.ndim == 1:
        if arr.size and arr.dtype.kind == "i" and int(arr.min()) < 0:
            raise ParameterError(f"{name} must be non-negative integers, got {int(arr.min())}")
        return _decimal_digits(arr.astype(np.uint64))
    else:
        out: List[bytes] = []
        for i, v in enumerate(values):
            if isinstance(v, (bytes, bytearray)):
                out.append(bytes(v))
            elif isinstance(v, str):
                out.append(v.encode("utf-8"))
            elif isinstance(v, (int, np.integer)) and not isinstance(v, bool) and int(v) >= 0:
                out.append(str(int(v)).encode())
            else:
                raise ParameterError(f"{name} must be bytes, str or non-negative integers, got {v!r:.60} at {i}")
        items = out
    lengths = np.fromiter((len(v) for v in items), dtype=np.int64, count=len(items))
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.frombuffer(b"".join(items), dtype=np.uint8).copy()
    return data, offsets


def _decimal_digits(values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The decimal ASCII digits of unsigned integers, back to back, and their offsets."""
    ten = np.uint64(10)
    digits = np.ones(values.size, dtype=np.int64)
    rest = values // ten
    while rest.any():
        digits += rest > 0
        rest //= ten
    offsets = np.zeros(values.size + 1, dtype=np.int64)
    np.cumsum(digits, out=offsets[1:])
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    position, rest, left = offsets[1:] - 1, values.copy(), digits.copy()
    while True:
        live = left > 0
        if not live.any():
            break
        data[position[live]] = (48 + rest[live] % ten).astype(np.uint8)
        rest //= ten
        position -= 1
        left -= 1
    return data, offsets


def as_labels(candidates: Any) -> np.ndarray:
    """Candidates as an array of labels (unsigned integers, or strings/bytes as objects)."""
    if isinstance(candidates, (bytes, str, int, np.integer)):
        candidates = [candidates]
    arr = np.asarray(candidates)
    if arr.dtype.kind in "iu":
        if arr.ndim != 1 or (arr.size and arr.dtype.kind == "i" and int(arr.min()) < 0):
            raise ParameterError("candidates must be a 1-D sequence of non-negative integers, strings or bytes")
        return arr.astype(np.uint64)
    if arr.ndim != 1:
        raise ParameterError(f"candidates must be 1-D, got shape {arr.shape}")
    return arr


def bloom_positions(p: Any, data: np.ndarray, offsets: np.ndarray, cohort: np.ndarray,
                     threads: int = 0) -> np.ndarray:
    return _core.rappor_bloom_positions(ENCODING_CODE[p.encoding], p.k, p.h, data, offsets, cohort, threads)


def bloom_rows(p: Any, data: np.ndarray, offsets: np.ndarray, cohort: np.ndarray, threads: int) -> np.ndarray:
    """The Bloom filters as bit rows (``uint8[n, ceil(k/8)]``)."""
    positions = bloom_positions(p, data, offsets, cohort, threads).astype(np.int64)
    dense = np.zeros((positions.shape[0], 8 * row_bytes(p.k)), dtype=np.uint8)
    dense[np.arange(positions.shape[0])[:, None], positions] = 1
    return np.packbits(dense, axis=1, bitorder="little")


@dataclasses.dataclass(frozen=True, eq=False)
class Decoded:
    """A decode of a candidate dictionary (``RAPPORServer.decode``).

    Attributes:
        candidates: the candidates (labels as given).
        values: estimated frequencies (fractions of ``n``); 0 for candidates not selected.
        std: standard errors (sandwich, see the module docstring) of the fitted candidates
            (for ``"lasso"``/``"nnls"`` given the selection); NaN where no standard error
            exists: a candidate left out of the fit (or beyond the 500 largest for ``"em"``)
            is 0 by selection, not an estimate with a sampling distribution. ``upper``
            bounds it instead.
        selected: which candidates the fit kept (all for ``"ls"``; positive ones otherwise).
        method: ``"ls"``, ``"lasso"``, ``"nnls"`` or ``"em"``.
        n: reports aggregated.
        iterations: passes (lasso/nnls) or EM iterations; 0 for ``"ls"``.
        other: the mass not explained by the candidates (EM's "other" component; else
            ``1 - sum(values)``).
        note: what was done.
        upper: for every candidate, fitted or not, a one-sided upper confidence bound of its
            frequency at level ``1 - alpha`` (pointwise, normal approximation) from its own
            Bloom bits alone, so it holds whatever the selection and whatever else was
            reported (:meth:`Decoder.upper_bounds`); conservative where other values share
            the candidate's bits.
    """

    candidates: np.ndarray
    values: np.ndarray
    std: np.ndarray
    selected: np.ndarray
    method: str
    n: int
    iterations: int
    other: float
    note: str
    upper: np.ndarray

    def p_values(self) -> np.ndarray:
        """One-sided p-values of ``H0: f = 0`` (``P(Z > value/std)``; NaN without a std)."""
        z = self.values / self.std
        return np.array([0.5 * math.erfc(v / math.sqrt(2.0)) if np.isfinite(v) else math.nan for v in z])

    def significant(self, alpha: float = 0.05) -> np.ndarray:
        """Candidates whose p-value is below ``alpha / len(candidates)`` (Bonferroni), as the
        paper reports decoded strings."""
        if not 0.0 < alpha < 1.0:
            raise ParameterError(f"alpha must be in (0, 1), got {alpha!r}")
        with np.errstate(invalid="ignore"):
            return np.asarray(self.p_values() < alpha / max(1, len(self.candidates)))


@dataclasses.dataclass
class Design:
    """The candidates' Bloom bits: a sparse 0/1 matrix of ``m k`` rows (cohort ``c``, bit
    ``j`` is row ``c k + j``) in compressed-column form."""

    col_ptr: np.ndarray
    rows: np.ndarray
    n_rows: int

    def dense(self, columns: np.ndarray) -> np.ndarray:
        """The ``columns`` as a dense float matrix; the fits and standard errors that use it
        hold up to four matrices of its size at once (checked against the memory budget)."""
        check_allocation(32 * self.n_rows * columns.size, f"a dense least-squares fit of {columns.size} candidates "
                                                           f"over {self.n_rows} cohort bits")
        out = np.zeros((self.n_rows, columns.size), dtype=np.float64)
        for j, i in enumerate(columns):
            out[self.rows[self.col_ptr[i]:self.col_ptr[i + 1]], j] = 1.0
        return out


def design(p: Any, labels: np.ndarray) -> Design:
    data, offsets = encode_values(labels, "candidates")
    C = offsets.size - 1
    # per (candidate, cohort) pair: its indices, offsets and cohort (48 bytes), its value's
    # bytes gathered (9 per byte) and per hash its position, row, sort key and mask (40)
    per_pair = 48 + 9 * data.size / max(C, 1) + 40 * p.h
    check_allocation(int(C * p.m * per_pair), f"the Bloom bits of {C} candidates in {p.m} cohorts")
    reps = np.repeat(np.arange(C), p.m)
    lengths = np.diff(offsets)[reps]
    starts = offsets[:-1][reps]
    pair_offsets = np.zeros(C * p.m + 1, dtype=np.int64)
    np.cumsum(lengths, out=pair_offsets[1:])
    gather = np.repeat(starts - pair_offsets[:-1], lengths) + np.arange(int(pair_offsets[-1]))
    cohorts = np.tile(np.arange(p.m, dtype=np.uint32), C)
    positions = bloom_positions(p, data[gather], pair_offsets, cohorts).astype(np.int64)
    rows = (cohorts.astype(np.int64)[:, None] * p.k + positions).reshape(C, p.m * p.h)
    rows.sort(axis=1)
    keep = np.ones(rows.shape, dtype=bool)
    keep[:, 1:] = rows[:, 1:] != rows[:, :-1]   # a repeated position sets one bit
    col_ptr = np.zeros(C + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=col_ptr[1:])
    return Design(col_ptr, rows[keep].astype(np.int32), p.m * p.k)


def auto_method(size: int) -> str:
    """The default decode of a dictionary of ``size``: least squares up to 500, else lasso."""
    return "ls" if size <= MAX_LS else "lasso"


class Decoder:
    """Decodes one server state: ``counts[c, j]`` reports of cohort ``c`` with bit ``j`` set
    and ``cohort_reports[c]`` (see the module docstring)."""

    def __init__(self, params: Any, counts: np.ndarray, cohort_reports: np.ndarray):
        self.params = params
        self.counts = np.asarray(counts)
        self.cohort_reports = np.asarray(cohort_reports)
        self.n = int(self.cohort_reports.sum(dtype=np.uint64))

    def _targets(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(t, weight, pi) per row ``c k + j``: the estimated fraction of cohort ``c``'s
        reports whose Bloom filter sets bit ``j``, its weight ``n_c``, and the observed
        one-rate ``y/n_c``."""
        p = self.params
        counts = self.counts.astype(np.float64)
        n_c = self.cohort_reports.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(n_c[:, None] > 0, counts / n_c[:, None], 0.0)
        t = (rate - p.p_star) / (p.q_star - p.p_star)
        t[n_c == 0] = 0.0
        weight = np.repeat(n_c, p.k)
        return t.ravel(), weight, rate.ravel()

    def decode(self, labels: np.ndarray, method: str, alpha: float, tol: float, max_iter: int) -> Decoded:
        """Decode the dictionary ``labels`` with ``method`` (module docstring)."""
        p = self.params
        design_ = design(p, labels)
        C = labels.size
        t, weight, rate = self._targets()
        gap = p.q_star - p.p_star
        values = np.zeros(C)
        iterations = 0
        other = math.nan
        if method == "ls":
            if C > MAX_LS:
                raise ParameterError(f"method='ls' fits at most {MAX_LS} candidates densely, got {C}: use "
                                     "method='lasso' or 'em'")
            selected = np.arange(C)
            note = "weighted least squares over every candidate"
        elif method in ("lasso", "nnls"):
            penalty = np.zeros(C)
            if method == "lasso":
                # The noise level of candidate i's score sum_r n_c (t_r - x_r f) at the truth:
                # Var = sum_r n_c pi_r (1 - pi_r) / gap^2 over its rows (bits independent).
                noise = np.add.reduceat(np.append(weight * rate * (1 - rate), 0.0)[design_.rows], design_.col_ptr[:-1])
                noise[np.diff(design_.col_ptr) == 0] = 0.0
                z = NormalDist().inv_cdf(1.0 - alpha / (2.0 * C))
                penalty = z * np.sqrt(noise) / abs(gap)
            beta = np.zeros(C)
            iterations = _core.sparse_nn_lasso(design_.col_ptr, design_.rows, design_.n_rows, t, weight, penalty,
                                               float(tol), int(max_iter), beta)
            selected = np.flatnonzero(beta > 0)
            if selected.size > MAX_LS:
                order = np.argsort(-beta[selected], kind="stable")
                selected = np.sort(selected[order[:MAX_LS]])
            note = (f"non-negative lasso (Bonferroni penalty, alpha={alpha}) selected {selected.size}, then least "
                    "squares" if method == "lasso" else f"non-negative least squares kept {selected.size}, refit")
        else:
            f = np.full(C, 1.0 / (C + 1))
            other_rate = 1.0 - (1.0 - 1.0 / p.k) ** p.h
            trials = np.repeat(self.cohort_reports.astype(np.float64), p.k)
            y = self.counts.astype(np.float64).ravel()
            iterations, other = _core.sparse_bit_em(design_.col_ptr, design_.rows, design_.n_rows, y, trials, p.q_star,
                                                    p.p_star, other_rate, 1.0 / (C + 1), float(tol), int(max_iter), f)
            values = f
            order = np.argsort(-f, kind="stable")[:MAX_LS]
            selected = np.sort(order[f[order] > 0.5 / self.n])
            std = np.full(C, np.nan)
            if selected.size:
                std[selected] = np.sqrt(self._em_variance(design_, selected, f, other, other_rate))
            return Decoded(candidates=labels, values=values, std=std, selected=_mask(C, selected), method=method,
                           n=self.n, iterations=int(iterations), other=float(other),
                           note=f"EM of the bit counts' composite likelihood, {iterations} iterations; "
                                f"standard errors for the {selected.size} largest",
                           upper=self.upper_bounds(design_, t, rate, alpha))
        values, std = self._least_squares(design_, selected, t, weight, C)
        if selected.size < C:
            note += f"; the {C - selected.size} others have no standard error (0 by selection): see upper"
        return Decoded(candidates=labels, values=values, std=std, selected=_mask(C, selected), method=method,
                       n=self.n, iterations=int(iterations), other=float(1.0 - values.sum()), note=note,
                       upper=self.upper_bounds(design_, t, rate, alpha))

    def upper_bounds(self, design: Design, t: np.ndarray, rate: np.ndarray, alpha: float) -> np.ndarray:
        """One-sided upper confidence bounds at level ``1 - alpha`` of every candidate's
        frequency, ``min(1, max(0, s + z sigma))``. ``s = sum_c (n_c/n) mean_j t[c, j]`` over
        the candidate's ``h_c`` distinct bits ``j`` in cohort ``c``: a report of the candidate
        sets all of them and any other report only adds, so ``E[s] >= f`` whatever the
        other values (given the reports' values and cohorts). ``sigma^2 = sum_c (n_c/n)^2
        sum_j pi (1 - pi)/(h_c n_c gap^2)`` at the observed one-rates ``pi`` bounds
        ``Var(s)``: a report's ``h_c`` bits add at most ``h_c`` times their variances
        (Cauchy-Schwarz), and mixing values within a cohort lowers the sum of the reports'
        bit variances below ``n_c pi (1 - pi)`` (concavity)."""
        p = self.params
        C = design.col_ptr.size - 1
        check_allocation(96 * design.rows.size, f"the upper bounds of {C} candidates' {design.rows.size} Bloom bits")
        per_column = np.diff(design.col_ptr)
        column = np.repeat(np.arange(C), per_column)
        cohort = design.rows.astype(np.int64) // p.k
        key = column * p.m + cohort                      # non-decreasing: rows are sorted per column
        starts = np.flatnonzero(np.diff(key, prepend=-1))
        runs = np.diff(np.append(starts, key.size))
        h_c = np.repeat(runs, runs)                      # the candidate's distinct bits in the entry's cohort
        n_c = self.cohort_reports.astype(np.float64)[cohort]
        rows = design.rows.astype(np.int64)
        share = n_c / (self.n * h_c)
        centre = np.bincount(column, weights=share * t[rows], minlength=C)
        gap = p.q_star - p.p_star
        spread = np.bincount(column, weights=share * rate[rows] * (1.0 - rate[rows]) / self.n, minlength=C)
        bound: np.ndarray = centre + NormalDist().inv_cdf(1.0 - alpha) * np.sqrt(spread) / abs(gap)
        return np.clip(bound, 0.0, 1.0, out=bound)

    def _least_squares(self, design: Design, selected: np.ndarray, t: np.ndarray, weight: np.ndarray,
                       C: int) -> Tuple[np.ndarray, np.ndarray]:
        values, std = np.zeros(C), np.full(C, np.nan)
        if selected.size == 0:
            return values, std
        X = design.dense(selected)
        gram = X.T @ (weight[:, None] * X)
        try:
            inverse = np.linalg.inv(gram)
        except np.linalg.LinAlgError:
            raise ParameterError("the candidates' Bloom bits are linearly dependent (least squares has no unique "
                                 "solution): use fewer candidates, more cohorts or bits, or method='lasso'") from None
        beta = inverse @ (X.T @ (weight * t))
        values[selected] = beta
        p = self.params
        other_rate = 1.0 - (1.0 - 1.0 / p.k) ** p.h   # mass outside the fit: uniform Bloom bits
        std[selected] = np.sqrt(self._sandwich(X, inverse, weight, np.clip(beta, 0.0, 1.0), X, other_rate))
        return values, std

    def _sandwich(self, X: np.ndarray, bread: np.ndarray, weight: np.ndarray, f: np.ndarray, bloom: np.ndarray,
                  other_rate: float) -> np.ndarray:
        """Diagonal of ``bread X^T W Cov(t) W X bread``: per cohort, ``Cov(t_c)`` is the bit
        covariance of one report under frequencies ``f`` over the columns of ``bloom`` (their
        Bloom bits) and ``1 - sum f`` of values with independent bits at ``other_rate``,
        divided by ``n_c gap^2``."""
        p = self.params
        k, gap = p.k, p.q_star - p.p_star
        n_c = self.cohort_reports.astype(np.float64)
        rest = max(0.0, 1.0 - float(f.sum()))
        Z = X @ bread                      # rows x fitted: the estimator's weights are W Z
        out = np.zeros(X.shape[1])
        for c in range(p.m):
            if n_c[c] == 0:
                continue
            rows = slice(c * k, (c + 1) * k)
            B = bloom[rows]                # k x columns: the fitted candidates' Bloom bits
            mean = B @ f + rest * other_rate
            second = (B * f) @ B.T + rest * other_rate ** 2
            cov_bloom = second - np.outer(mean, mean)
            pi = p.p_star + gap * mean
            cov_bits = gap ** 2 * cov_bloom
            np.fill_diagonal(cov_bits, pi * (1.0 - pi))
            Zc = Z[rows] * weight[rows][:, None]
            out += np.einsum("ij,ik,kj->j", Zc, cov_bits, Zc) / (n_c[c] * gap ** 2)
        return np.maximum(out, 0.0)

    def _em_variance(self, design: Design, selected: np.ndarray, f: np.ndarray, other: float,
                     other_rate: float) -> np.ndarray:
        """Sandwich variance of the EM (composite-likelihood) estimate on ``selected``: its
        score is a weighted least-squares score with design ``x - other_rate`` and weights
        ``n_c gap^2 / (pi (1 - pi))`` at the fitted ``pi``."""
        p = self.params
        gap = p.q_star - p.p_star
        B = design.dense(selected)
        pi = p.p_star + gap * (B @ f[selected] + other * other_rate)
        pi = np.clip(pi, 1e-12, 1 - 1e-12)
        weight = np.repeat(self.cohort_reports.astype(np.float64), p.k) * gap ** 2 / (pi * (1.0 - pi))
        Xt = B - other_rate
        try:
            bread = np.linalg.inv(Xt.T @ (weight[:, None] * Xt))
        except np.linalg.LinAlgError:
            return np.full(selected.size, np.nan)
        return self._sandwich(Xt, bread, weight, f[selected], B, other_rate)

    def default_variance(self, dictionary: np.ndarray, wanted: np.ndarray) -> Tuple[Optional[Any], str]:
        """The variance of :meth:`decode`'s ``"ls"`` fit of ``dictionary`` at the entries
        ``wanted``, as a function of their frequencies, or None with the reason."""
        if auto_method(dictionary.size) != "ls":
            return None, ("no closed-form variance: beyond 500 candidates the default decode selects (lasso); "
                          "server.decode() gives the selected candidates' sandwich standard errors and every "
                          "candidate's upper bound (Decoded.upper)")
        p = self.params
        X = design(p, dictionary).dense(np.arange(dictionary.size))
        _, weight, _ = self._targets()
        try:
            bread = np.linalg.inv(X.T @ (weight[:, None] * X))
        except np.linalg.LinAlgError:
            return None, "no variance: the dictionary's Bloom bits are linearly dependent"

        def variance(f: Any) -> Any:
            full = np.zeros(dictionary.size)
            full[wanted] = np.asarray(f, dtype=np.float64)
            return self._sandwich(X, bread, weight, full, X, 1.0 - (1.0 - 1.0 / p.k) ** p.h)[wanted]
        return variance, ("sandwich variance of the least-squares decode at the plug-in f = clip(estimate, 0, 1) "
                          "(each cohort's bit covariance under f)")


def _mask(C: int, selected: np.ndarray) -> np.ndarray:
    out = np.zeros(C, dtype=bool)
    out[selected] = True
    return out
