"""Statistics and privacy: the registered variance against the spread of simulated estimates,
and the empirical privacy audit at a few epsilons."""

from __future__ import annotations

import math
import warnings
from statistics import NormalDist
from typing import Any, Callable, List, Tuple, cast

import numpy as np

from .. import audit
from ..errors import PrivacyWarning
from ..protocols.sets._sets import as_sets
from ..protocols.multiattribute._kv import as_pairs
from ..uncertainty import PlugIn
from ._case import Case, CheckSkipped, register

#: Two-sided false-alarm probability of the variance check for a correct protocol.
VARIANCE_ALPHA = 1e-6
#: Probability that one audit bound exceeds a truly eps-LDP client's epsilon (Clopper-Pearson
#: is exact, so this is a bound, whatever the number of reports).
AUDIT_ALPHA = 1e-6


def student_t_quantile(p: float, dof: int) -> float:
    """The ``p`` quantile of Student's t with ``dof`` degrees of freedom, by the
    Cornish-Fisher expansion around the normal quantile (Abramowitz and Stegun 26.7.5; its
    error is below 1e-3 for dof >= 30 at p = 1 - 1e-7)."""
    z = NormalDist().inv_cdf(p)
    return (z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * dof**3))


def _tiled_inputs(case: Case, runs: int) -> Tuple[Any, np.ndarray]:
    """The example's inputs ``runs`` times over (one client call simulates every run: each
    report has its own randomness), and the count of each value (or item) in one copy."""
    tiled: Any
    if case.protocol.inputs == "numbers":  # real numbers: the estimates are of attribute means
        values = np.asarray(case.inputs, dtype=np.float64)
        return np.concatenate([values] * runs), np.zeros(0)
    if case.protocol.inputs == "sets":
        offsets, items = as_sets(case.inputs, case.domain)
        sizes = np.tile(np.diff(offsets), runs)
        tiled = (np.concatenate(([0], np.cumsum(sizes))).astype(np.int64), np.tile(items, runs))
        values = items
    elif case.protocol.inputs == "records":
        records = np.asarray(case.inputs)
        tiled = np.tile(records, (runs, 1))
        domains = cast(Any, case.params).domains
        if case.domain != sum(domains):   # the candidates are cells of a grid: no per-value counts
            return tiled, np.zeros(case.domain, dtype=np.int64)
        # counts per (attribute, value) cell, in the order of the default estimate (offsets)
        offsets = np.concatenate(([0], np.cumsum(domains)))[:-1]
        values = (records + offsets).ravel()
    elif case.protocol.inputs == "pairs":  # key-value sets: the keys are counted
        offsets, values, pair_values = as_pairs(case.inputs, case.domain)
        sizes = np.tile(np.diff(offsets), runs)
        tiled = (np.concatenate(([0], np.cumsum(sizes))).astype(np.int64), np.tile(values, runs),
                 np.tile(pair_values, runs))
    else:
        values = np.asarray(case.inputs)
        tiled = np.tile(values, runs)
    counts = np.bincount(values.astype(np.int64), minlength=case.domain)
    return tiled, counts


def _candidates(case: Case, counts: np.ndarray) -> np.ndarray:
    """Up to 32 candidates the default estimate answers for: the 16 most and 16 least
    frequent in the example (ties in label order)."""
    hook = case.protocol.default_candidates
    labels = None if hook is None else hook(case.server())
    if case.protocol.inputs == "numbers":   # every attribute the server estimates
        return np.asarray(labels)
    pool = np.arange(min(case.domain, 1 << 20)) if labels is None else np.asarray(labels)
    weight = np.zeros(pool.size) if labels is not None and pool.max(initial=0) >= counts.size else counts[pool]
    order = pool[np.argsort(-weight, kind="stable")]
    return np.unique(np.concatenate([order[:16], order[-16:]]))


@register("statistics")
def variance_matches_simulation(case: Case) -> None:
    """The standard errors of ``frequencies()`` (the registered closed form, ``Protocol.variance``)
    match the spread of the estimates over independent simulated runs of the example.

    ``R`` runs (``variance_runs``, default 100) of the example, on up to 32 candidates ``c``:
    with ``fbar_c`` the mean estimate over runs (the plug-in the closed forms are evaluated
    at) and ``V_c`` the registered variance there (averaged over the runs' own hooks), the
    per-run statistic ``U_r = mean_c (fhat_rc - fbar_c)^2 / V_c * R/(R-1)`` has mean 1 when the
    closed form is right, whatever the correlation between candidates. The runs are
    independent, so ``T = (mean U - 1) / (s_U / sqrt(R))`` is Student's t with ``R - 1``
    degrees of freedom by the central limit theorem; the check fails when ``|T|`` exceeds its
    ``1 - VARIANCE_ALPHA/2`` quantile (5.2 at R = 100). ``U_r`` is skewed like a chi-square
    with ``C`` degrees of freedom over ``C``; at this level that skewness at most doubles the
    tail probability (Edgeworth), so a correct protocol fails with probability below 2e-6.
    With ``C = 32`` and ``R = 100`` the check resolves a closed form off by about 15%."""
    if case.protocol.variance is None:
        raise CheckSkipped(f"protocol {case.id!r} registers no closed-form variance (Protocol.variance)")
    runs = case.options.variance_runs
    if runs < 30:
        raise ValueError(f"variance_runs must be >= 30 (the t approximation), got {runs}")
    tiled, counts = _tiled_inputs(case, runs)
    reports = case.client(case.options.seed + 3).perturb(tiled)
    per_run = len(reports) // runs
    assert per_run * runs == len(reports), "the client must send one report per input"
    candidates = _candidates(case, counts)
    columns = reports.columns()
    values: List[np.ndarray] = []
    closed_forms: List[Callable[[Any], Any]] = []
    for r in range(runs):
        run = type(reports).from_columns({k: v[r * per_run:(r + 1) * per_run] for k, v in columns.items()})
        est = case.server(run).frequencies(candidates)
        if not isinstance(est.uncertainty, PlugIn):  # medians and minima have no closed form
            raise CheckSkipped(f"no closed-form variance for this estimate: {est.note}")
        values.append(np.asarray(est.values, dtype=np.float64))
        closed_forms.append(est.uncertainty.variance)
    fhat = np.array(values)
    plug_in = np.clip(fhat.mean(axis=0), 0.0, 1.0)
    variance = np.mean([np.broadcast_to(np.asarray(v(plug_in), dtype=np.float64), plug_in.shape)
                        for v in closed_forms], axis=0)
    assert np.all(np.isfinite(variance)) and np.all(variance > 0), f"registered variances {variance}"
    u = ((fhat - fhat.mean(axis=0)) ** 2 / variance).mean(axis=1) * runs / (runs - 1)
    t = (u.mean() - 1.0) / (u.std(ddof=1) / math.sqrt(runs))
    limit = student_t_quantile(1 - VARIANCE_ALPHA / 2, runs - 1)
    assert abs(t) < limit, (
        f"the spread of {runs} simulated estimates is {u.mean():.3f} times the registered variance "
        f"(t = {t:.1f}, limit {limit:.1f}; per-candidate ratios {np.round(fhat.var(axis=0, ddof=1) / variance, 2)})")


@register("privacy")
def privacy_audit_passes(case: Case) -> None:
    """The empirical audit (:mod:`ldpfast.audit`, ``audit_reports`` reports per input) of the
    registered audit plan at each of ``audit_epsilons``: the lower bound ``eps_lb`` on the
    privacy loss, at confidence ``1 - AUDIT_ALPHA``, and the effective epsilon of the
    samplers' thresholds are at most the claimed epsilon. A client that says it is not
    eps-LDP (a PrivacyWarning when built) is not audited here."""
    if case.protocol.audit is None:
        raise CheckSkipped(f"protocol {case.id!r} registers no audit plan (Protocol.audit)")
    for i, eps in enumerate(case.options.audit_epsilons):
        params = audit.default_params(case.id, eps)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PrivacyWarning)
            case.protocol.client(params, rng=0)
        declared = [w for w in caught if issubclass(w.category, PrivacyWarning)]
        if declared:
            raise CheckSkipped(f"the client says it is not eps-LDP: {declared[0].message}")
        result = audit.audit(params, case.options.audit_reports, rng=case.options.seed + 10 + i,
                             confidence=1.0 - AUDIT_ALPHA)
        assert result.effective_epsilon <= eps, f"effective epsilon {result.effective_epsilon} > {eps}"
        assert result.eps_lb <= eps, f"the audit shows a privacy loss above eps = {eps}: {result}"
