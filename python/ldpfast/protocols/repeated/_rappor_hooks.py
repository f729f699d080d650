"""RAPPOR's registration hooks beside its protocol (:mod:`ldpfast.protocols.repeated.rappor`): the
report channel for IBU/MLE estimation (:mod:`ldpfast.estimation`), the audit plan, the wire
fields, and the parameters that spend given budgets (``RAPPORParams.from_budgets``)."""

from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Sequence, Tuple

import numpy as np

from ..._base import WireField, bits_for
from ..._validate import check_values
from ...errors import ParameterError, ReportError
from .._bitvec import row_bytes
from .._memo import solve_threshold
from ._rappor_decode import as_labels, bloom_positions, design, encode_values


def channel(server: Any, candidates: Any) -> Any:
    """The IBU/MLE channel (:mod:`ldpfast.estimation`) of the per-cohort bit counts. Cells
    ``(c, j, 1)`` and ``(c, j, 0)`` for every cohort with reports: bit ``j`` of a report in
    cohort ``c`` is 1 with probability ``q*`` when the value's Bloom filter in ``c`` sets it
    and ``p*`` otherwise (PRR then IRR), so ``A[(c, j, 1), x] = (n_c/n)(p* + (q* - p*)
    X[c j, x])`` with ``X`` the Bloom bits (:func:`design`), and every column sums to ``k``.
    The bits of one report are independent given its value, but the counts are not sufficient
    for the mixture over values: this is the composite likelihood (counts as independent
    binomials), as ``decode(method="em")``.
    A rest column (values outside the candidates, always present for string values) has
    independent Bloom bits set with probability ``1 - (1 - 1/k)^h``."""
    from ...estimation import Channel

    p = server.params
    if p.d:
        labels = np.arange(p.d, dtype=np.uint64) if candidates is None else \
            check_values(candidates, p.d, "candidates", "values in", distinct=True).astype(np.uint64)
        rest = labels.size < p.d
    else:
        if candidates is None:
            raise ParameterError("RAPPOR with string values (d=0) needs candidates for IBU/MLE")
        labels, rest = as_labels(candidates), True
        if np.unique(labels).size != labels.size:
            raise ParameterError("candidates must be distinct values")
    if labels.size == 0:
        raise ParameterError("candidates must not be empty")
    n = server.n
    if n == 0:
        raise ReportError("cannot estimate frequencies from zero reports")
    bloom = design(p, labels)
    n_c = server._st["reports"].astype(np.float64)
    live = np.flatnonzero(n_c > 0)                         # cohorts without reports have no cells
    rows = (live[:, None] * p.k + np.arange(p.k)).ravel()  # design rows c k + j of the live cohorts
    where = np.full(p.m * p.k, -1, dtype=np.int64)
    where[rows] = np.arange(rows.size)
    weight = np.repeat(n_c[live] / n, p.k)                 # P(cohort c) per cell row
    col = np.repeat(np.arange(labels.size), np.diff(bloom.col_ptr))
    hits = where[bloom.rows]                               # each Bloom bit's cell row (-1: empty cohort)
    keep = hits >= 0
    col, hits = col[keep], hits[keep]
    counts = server._st["counts"][live].astype(np.float64).ravel()
    observed = np.concatenate([counts, np.repeat(n_c[live], p.k) - counts])
    k = labels.size
    p_star, gap = p.p_star, p.q_star - p.p_star
    other = 1.0 - (1.0 - 1.0 / p.k) ** p.h

    def forward(f: np.ndarray) -> np.ndarray:
        mass = np.bincount(hits, weights=f[col], minlength=rows.size) + (other * float(f[k]) if rest else 0.0)
        one = weight * (p_star * float(f.sum()) + gap * mass)
        return np.concatenate([one, weight * float(f.sum()) - one])

    def adjoint(w: np.ndarray) -> np.ndarray:
        w1, w0 = w[:rows.size], w[rows.size:]
        base = float(np.dot(weight, p_star * w1 + (1.0 - p_star) * w0))
        contrast = weight * (w1 - w0)
        out = base + gap * np.bincount(col, weights=contrast[hits], minlength=k)
        return np.append(out, base + gap * other * float(contrast.sum())) if rest else out

    rest_note = f"; the rest column's Bloom bits are independent at {other:.6g}" if rest else ""
    return Channel(observed, forward, adjoint, k + int(rest), n, rest, float(p.k), "composite",
                   f"per-cohort RAPPOR bit counts as independent binomials (composite likelihood; q*={p.q_star:.6g}, "
                   f"p*={p_star:.6g}){rest_note}")


def audit_plan(params: Any) -> Any:
    from ...audit import Plan, value_inputs

    # two values whose Bloom bits (one hash, cohort 0) differ
    bits = [int(bloom_positions(params, *encode_values([v]), np.zeros(1, np.uint32))[0, 0]) for v in range(16)]
    x1 = next(v for v in range(1, 16) if bits[v] != bits[0])

    def events(reports: Any) -> Tuple[np.ndarray, np.ndarray]:
        b0 = (reports.bits[:, bits[0] // 8] >> (bits[0] % 8)) & 1
        b1 = (reports.bits[:, bits[x1] // 8] >> (bits[x1] % 8)) & 1
        return (b0 == 1) & (b1 == 0), (b1 == 1) & (b0 == 0)
    return Plan(value_inputs(0, x1), events, ("Bloom bit of x0 = 1, of x1 = 0", "Bloom bit of x1 = 1, of x0 = 0"))


def wire_fields(params: Any) -> Sequence[WireField]:
    """The cohort, then the k bits as whole bytes (the spare bits of the last byte are 0)."""
    return [WireField("cohort", bits_for(params.m), None, "uint32"),
            WireField("bits", 8, None, "uint8", (row_bytes(params.k),))]


def prr_and_irr(params_type: Any, eps_inf: float, eps_1: float, fields: Mapping[str, Any]) -> Any:
    """``RAPPORParams.from_budgets``: ``f`` in 128ths, then the dyadic ``p = 1 - q``, each the
    smallest setting whose exact budget (``eps_inf``, then ``eps_1``) is at most the one asked."""
    fixed = sorted(set(fields) & {"p", "q", "f"})
    if fixed:
        raise ParameterError(f"from_budgets sets p, q and f from eps_inf and eps_1, got "
                             f"{fixed[0]}={fields[fixed[0]]!r}")
    if eps_1 > eps_inf:
        raise ParameterError(f"eps_1 (one report) must be <= eps_inf (the permanent response), got "
                             f"eps_1={eps_1!r} > eps_inf={eps_inf!r}")
    base: Dict[str, Any] = dict(fields)

    def build(f128: int, step: int) -> Any:   # IRR p = step / 2^53 (step 0: no IRR noise)
        return params_type(**base, p=step / 2.0**53, q=1.0 - step / 2.0**53, f=f128 / 128)

    if build(127, 0).eps_inf > eps_inf:
        h = build(127, 0).h
        raise ParameterError(f"eps_inf (the permanent response's epsilon) must be at least 2 h ln(129/127) = "
                             f"{2 * h * math.log(129 / 127):.6g} (f = 127/128, the noisiest PRR that still gives "
                             f"finite estimates), got {eps_inf!r}")
    f128 = solve_threshold(lambda t: build(t, 0).eps_inf, eps_inf, 1, 127, "eps_inf")
    step = solve_threshold(lambda t: build(f128, t).eps_1, eps_1, 1, 2**52 - 1, "eps_1")
    return build(f128, step)
