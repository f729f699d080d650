"""Report channels: what IBU and MLE estimation (:mod:`ldpfast.estimation.solve`) need to
know about a protocol, read from its aggregated state.

A protocol's reports are a random function of each user's value; aggregated, the server
state holds (or lets us compute) **observed cell weights** ``y_j`` whose expectation is
linear in the frequency vector ``f``: ``E[y] = n A f`` for a channel matrix ``A`` with ``J``
cells (rows) and one column per candidate value, plus, when the candidates are not the
whole domain, one **rest** column holding the mass of every other value. Every column of
``A`` sums to the same ``column_sum`` over the cells (1 for a categorical report; ``K`` for
``K`` binary support indicators), so the multiplicative update
``f <- f * A^T (y / (A f)) / sum(y)`` is the EM algorithm of the log-likelihood
``sum_j y_j log (A f)_j``, and its fixed points are that likelihood's maximisers on the
simplex.

``A`` is never built: a :class:`Channel` carries ``forward(f) = A f`` and
``adjoint(w) = A^T w``, each ``O(J + K)`` (or ``O(state)``) per call. Protocols register a
``channel`` hook (:class:`ldpfast._base.Protocol`) ``(server, candidates) -> Channel``,
usually built with one of the constructors below:

* :func:`symbol_channel`: one reported symbol per user, ``P(y = x) = p`` and
  ``P(y = v) = q`` for each ``v != x`` (GRR). The state (the histogram) is sufficient:
  this is the full likelihood.
* :func:`report_channel`: one cell per kept report, whose likelihood under each
  candidate is one of two values (the candidate's hash matches the report or not):
  the full likelihood of per-user-hash reports (OLH, OCMS in report-keeping mode).
* :func:`support_channel`: per candidate ``v``, the number of reports that "support" ``v``,
  with ``P(report supports v | x = v) = s1`` and ``P(... | x != v) = s0`` (Subset
  Selection, unary encodings, RAPPOR bits, OLH/OCMS match counts). The likelihood used is
  the **composite** one that treats those counts as independent binomials: exact for
  unary encodings (independent bits), an approximation for the others, whose indicators
  are weakly dependent within a report.

Both have separable likelihoods, solved exactly by :func:`ldpfast.estimation.solve.mle`
(one-dimensional dual search). Hadamard-family channels (``hadamard_channel``) and
other structured channels provide only ``forward``/``adjoint``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Optional

import numpy as np

from ..errors import ParameterError, ReportError

__all__ = ["Channel", "Separable", "symbol_channel", "support_channel", "report_channel", "hadamard_channel",
           "LIKELIHOODS"]

#: What a channel's log-likelihood is: the full likelihood of the reports, a composite
#: likelihood (product of per-candidate marginals), or an approximation (stated in ``note``).
LIKELIHOODS = ("full", "composite", "approximate")

Operator = Callable[[np.ndarray], np.ndarray]


@dataclasses.dataclass(frozen=True)
class Separable:
    """A log-likelihood ``sum_x [ y1_x log(a_x + b f_x) + y0_x log(1 - a_x - b f_x) ]`` over
    the columns (``y0 = None``: no second term), the form of the symbol and support
    channels; :func:`ldpfast.estimation.solve.mle` maximises it exactly. ``free_rest``: the
    last column (the rest) does not appear in the likelihood and takes the slack
    ``1 - sum(f)``."""

    y1: np.ndarray
    y0: Optional[np.ndarray]
    a: np.ndarray
    b: float
    free_rest: bool = False


@dataclasses.dataclass(frozen=True)
class Channel:
    """The implicit channel ``A`` (``J`` cells x ``columns``) of an aggregated state.

    Attributes:
        observed: the observed cell weights ``y`` (float64, length ``J``, non-negative).
        forward: ``f (columns,) -> A f (J,)``.
        adjoint: ``w (J,) -> A^T w (columns,)``.
        columns: number of columns: the candidates, plus one when ``rest``.
        n: the number of reports aggregated.
        rest: the last column is the mass of every value outside the candidates.
        column_sum: every column of ``A`` sums to this over the cells; None when the cells
            are the observed reports themselves (each column is then a probability
            distribution over all possible reports, of which only the observed are cells).
        likelihood: ``"full"``, ``"composite"`` or ``"approximate"`` (:data:`LIKELIHOODS`).
        note: what the cells are and what the likelihood assumes.
        separable: the likelihood in :class:`Separable` form when it has one (exact MLE).
        information: ``f -> diag`` of the expected Fisher information per report in the
            simplex's tangent directions, when it is diagonal (else None: dense, small
            ``columns`` only).
    """

    observed: np.ndarray
    forward: Operator
    adjoint: Operator
    columns: int
    n: int
    rest: bool
    column_sum: Optional[float]
    likelihood: str
    note: str
    separable: Optional[Separable] = None
    information: Optional[Operator] = None

    def __post_init__(self) -> None:
        if self.likelihood not in LIKELIHOODS:
            raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {self.likelihood!r}")
        if self.n <= 0:
            raise ReportError("cannot estimate frequencies from zero reports")
        if self.columns < 1 + int(self.rest):
            raise ParameterError("candidates must not be empty")

    def dense(self) -> np.ndarray:
        """``A`` as a dense ``J x columns`` matrix (tests and small references only)."""
        eye = np.eye(self.columns)
        return np.stack([self.forward(eye[:, i]) for i in range(self.columns)], axis=1)


def _float_counts(counts: np.ndarray, name: str) -> np.ndarray:
    y = np.asarray(counts, dtype=np.float64)
    if y.ndim != 1 or (y.size and (not np.isfinite(y).all() or y.min() < 0)):
        raise ParameterError(f"{name} must be a 1-D array of non-negative counts")
    return y


def symbol_channel(counts: np.ndarray, n: int, p: float, q: float, d: int) -> Channel:
    """The channel of one reported symbol per user (GRR on ``[0, d)``): the report is the
    true value with probability ``p`` and each other value with probability ``q``
    (``p + (d - 1) q = 1``).

    Args:
        counts: the number of reports of each candidate (``K`` values). When ``K < d`` a
            rest cell (the ``n - sum(counts)`` other reports) and a rest column are added.
        n: the number of reports.
        p, q: the keep and per-other-symbol probabilities.
        d: the domain size.
    """
    c = _float_counts(counts, "counts")
    k = c.size
    rest = k < d
    if not math.isclose(p + (d - 1) * q, 1.0, rel_tol=1e-9):
        raise ParameterError(f"p + (d - 1) q must be 1, got p={p!r}, q={q!r}, d={d}")
    gap = p - q
    others = (d - k) * q            # P(report outside the candidates | x a candidate)
    stay = 1.0 - k * q              # P(report outside | x outside) = p + (d - k - 1) q
    observed = np.append(c, max(float(n) - float(c.sum()), 0.0)) if rest else c

    def forward(f: np.ndarray) -> np.ndarray:
        inside = f[:k]
        total = float(f.sum())
        out = q * total + gap * inside
        if not rest:
            return np.asarray(out)
        return np.append(out, others * float(inside.sum()) + stay * float(f[k]))

    def adjoint(w: np.ndarray) -> np.ndarray:
        inside = w[:k]
        base = q * float(inside.sum())
        out = base + gap * inside
        if not rest:
            return np.asarray(out)
        return np.append(out + others * float(w[k]), base + stay * float(w[k]))

    a = np.full(k + int(rest), q)
    if rest:
        a[k] = others               # the rest cell: others + (stay - others) f_rest, and stay - others = p - q
    separable = Separable(y1=observed, y0=None, a=a, b=gap)

    def information(f: np.ndarray) -> np.ndarray:
        # E[y_x] = n pi_x: per report, (p - q)^2 / pi_x along each column (tangent space)
        return np.asarray(gap * gap / np.maximum(a + gap * f, 1e-300))

    return Channel(observed, forward, adjoint, k + int(rest), int(n), rest, 1.0, "full",
                   f"one reported symbol per user (k-ary RR, p={p:.6g}, q={q:.6g}); the histogram is sufficient",
                   separable, information)


def support_channel(support: np.ndarray, n: int, s1: float, s0: float, rest: bool,
                    what: str = "support") -> Channel:
    """The composite channel of per-candidate support counts: ``support[v]`` of the ``n``
    reports support candidate ``v``, each with probability ``s1`` when the user holds
    ``v`` and ``s0`` otherwise. Cells ``(v, supported)`` and ``(v, not supported)``; every
    column sums to ``K``. ``rest``: the candidates are not the whole domain (a rest
    column, which no cell distinguishes, takes the slack)."""
    c = _float_counts(support, "support")
    k = c.size
    if not 0.0 <= s0 < s1 <= 1.0:
        raise ParameterError(f"support probabilities must satisfy 0 <= s0 < s1 <= 1, got s0={s0!r}, s1={s1!r}")
    if k and c.max() > n:
        raise ParameterError(f"support counts must not exceed n={n}, got {c.max()}")
    gap = s1 - s0
    observed = np.concatenate([c, float(n) - c])

    def forward(f: np.ndarray) -> np.ndarray:
        total = float(f.sum())
        hit = s0 * total + gap * f[:k]
        return np.concatenate([hit, total - hit])

    def adjoint(w: np.ndarray) -> np.ndarray:
        w1, w0 = w[:k], w[k:]
        base = s0 * float(w1.sum()) + (1.0 - s0) * float(w0.sum())
        out = base + gap * (w1 - w0)
        return np.append(out, base) if rest else np.asarray(out)

    a = np.full(k, s0)
    separable = Separable(y1=c, y0=float(n) - c, a=a, b=gap, free_rest=rest)

    def information(f: np.ndarray) -> np.ndarray:
        pi = np.clip(s0 + gap * f[:k], 1e-300, 1.0 - 1e-16)
        out = gap * gap / (pi * (1.0 - pi))
        return np.append(out, 0.0) if rest else np.asarray(out)

    return Channel(observed, forward, adjoint, k + int(rest), int(n), rest, float(k), "composite",
                   f"per-candidate {what} counts as independent binomials (s1={s1:.6g}, s0={s0:.6g})",
                   separable, information)


def hadamard_channel(z: np.ndarray, group_sizes: np.ndarray, columns: np.ndarray, keep: float,
                     rest_profile: Optional[np.ndarray] = None, fwht: Optional[Operator] = None) -> Channel:
    """The channel of Hadamard randomized response in ``G`` groups of equal width ``D``
    (HRR, HE, CMS+HE): a user in group ``g`` (``group_sizes[g]`` users) draws a row
    ``r ~ U[0, D)`` and reports ``b = H[r, columns[g, x]] s`` with ``s = -1`` with
    probability ``1 - keep``. The state keeps ``z[g, r]``, the sum of the bits of row ``r``,
    but not the number of reports per row: the cells ``(g, r, +-1)`` hold the pseudo-counts
    ``(n_g/D +- z[g, r])/2`` (clipped at 0), whose expectations are exactly ``n A f``;
    the likelihood is therefore approximate (exact when every row count equals ``n_g/D``).

    Args:
        z: ``(G, D)`` row sums of the bits.
        group_sizes: ``(G,)`` reports per group.
        columns: ``(G, K)`` Hadamard column of each candidate in each group.
        keep: probability that the bit is not flipped (``e^eps/(e^eps + 1)``).
        rest_profile: ``(G, D)`` distribution over columns of a value outside the
            candidates (None: the candidates are the whole domain).
        fwht: in-place unnormalized Walsh-Hadamard transform of the rows of a float64
            ``(G, D)`` array (default: ``ldpfast.kernels.fwht``).
    """
    if fwht is None:
        from ..kernels import fwht as _fwht

        def fwht(a: np.ndarray) -> np.ndarray:
            _fwht(a)
            return a
    zz = np.asarray(z, dtype=np.float64)
    groups, width = zz.shape
    sizes = np.asarray(group_sizes, dtype=np.float64).reshape(groups, 1)
    cols = np.asarray(columns, dtype=np.int64)
    k = cols.shape[1]
    n = int(sizes.sum())
    rest = rest_profile is not None
    contrast = 2.0 * keep - 1.0
    weight = sizes / (max(n, 1) * 2.0 * width)         # P(group g, row r) / 2, per cell
    flat = (cols + np.arange(groups).reshape(groups, 1) * width).ravel()
    plus = np.maximum((sizes / width + zz) / 2.0, 0.0)
    minus = np.maximum((sizes / width - zz) / 2.0, 0.0)
    observed = np.concatenate([plus.ravel(), minus.ravel()])
    profile = None if rest_profile is None else np.asarray(rest_profile, dtype=np.float64).reshape(groups, width)

    def forward(f: np.ndarray) -> np.ndarray:
        total = float(f.sum())
        spread = np.bincount(flat, weights=np.tile(f[:k], groups), minlength=groups * width).reshape(groups, width)
        u = fwht(np.ascontiguousarray(spread if profile is None else spread + f[k] * profile))
        return np.concatenate([(weight * (total + contrast * u)).ravel(), (weight * (total - contrast * u)).ravel()])

    def adjoint(w: np.ndarray) -> np.ndarray:
        wp, wm = w[:groups * width].reshape(groups, width), w[groups * width:].reshape(groups, width)
        base = float((weight * (wp + wm)).sum())
        t = fwht(np.ascontiguousarray(weight * (wp - wm)))
        out = base + contrast * t.ravel()[flat].reshape(groups, k).sum(axis=0)
        if profile is None:
            return np.asarray(out)
        return np.append(out, base + contrast * float((t * profile).sum()))

    return Channel(observed, forward, adjoint, k + int(rest), n, rest, 1.0, "approximate",
                   f"Hadamard rows of {groups} group(s) x {width}: per-row report counts set to their expectation "
                   "n_g/D (the state keeps only the rows' bit sums)")


def report_channel(indptr: np.ndarray, reports: np.ndarray, n: int, hit: float, miss: float,
                   rest_value: Optional[float]) -> Channel:
    """The full likelihood of ``n`` kept reports over ``K`` candidates: report ``i`` has
    probability ``hit`` under candidate ``x`` when ``i`` is among
    ``reports[indptr[x]:indptr[x+1]]`` (the reports whose hash of ``x`` matches), ``miss``
    otherwise, and ``rest_value`` under a value outside the candidates (None: the
    candidates are the whole domain). These are the reports' probabilities given their
    public hash functions; the hash draw itself does not depend on the value, so it
    cancels from the EM update. Each step costs ``O(n + number of matches)``."""
    starts = np.asarray(indptr, dtype=np.int64)
    rows = np.asarray(reports, dtype=np.int64)
    k = starts.size - 1
    lengths = np.diff(starts)
    nonempty = lengths > 0
    rest = rest_value is not None
    gap = hit - miss
    observed = np.ones(int(n))

    def forward(f: np.ndarray) -> np.ndarray:
        inside = f[:k]
        matched = np.bincount(rows, weights=np.repeat(inside, lengths), minlength=int(n))
        out = miss * float(inside.sum()) + gap * matched
        return np.asarray(out + rest_value * float(f[k]) if rest_value is not None else out)

    def adjoint(w: np.ndarray) -> np.ndarray:
        sums = np.zeros(k)
        if rows.size:
            sums[nonempty] = np.add.reduceat(w[rows], starts[:-1][nonempty])
        out = miss * float(w.sum()) + gap * sums
        return np.append(out, rest_value * float(w.sum())) if rest_value is not None else np.asarray(out)

    return Channel(observed, forward, adjoint, k + int(rest), int(n), rest, None, "full",
                   f"each kept report's probability under each candidate ({hit:.6g} if its hash of the candidate "
                   f"matches, else {miss:.6g})")
