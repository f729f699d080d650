"""Extreme parameters: the protocol built, perturbed, aggregated and estimated at the ends
of the ranges its parameters accept (``Protocol.extremes``)."""

from __future__ import annotations

import inspect
import warnings
from typing import Any, List

import numpy as np

from .._base import Params
from ..errors import PrivacyWarning
from ._case import Case, CheckSkipped, register

#: Users per extreme case: a value (or an item) at each end of the domain and one between.
USERS = 6


def _inputs(case: Case, params: Params) -> Any:
    """Client inputs over ``[0, d)`` that reach both ends of the domain (the example's
    inputs where the parameters have no ``d``)."""
    if case.protocol.inputs == "numbers":   # both bounds and their middle, every attribute alike
        lo, hi = getattr(params, "bounds", (0.0, 1.0))
        reals = np.array([lo, hi, (lo + hi) / 2] * (USERS // 3), dtype=np.float64)
        columns = getattr(params, "attributes", 1)
        return reals if np.ndim(case.inputs) == 1 else np.repeat(reals[:, None], columns, axis=1)
    if case.protocol.inputs == "records":  # each attribute at both ends of its domain and between
        domains = np.array(params.domains, dtype=np.int64)  # type: ignore[attr-defined]
        return np.tile(np.stack([np.zeros_like(domains), domains - 1, domains // 2]), (USERS // 3, 1))
    d = getattr(params, "d", None)
    if d is None:
        return case.inputs
    ends = [0, d - 1, d // 2] * (USERS // 3)
    if case.protocol.inputs == "sets":
        return [sorted({value, (value + 1) % d}) for value in ends]
    if case.protocol.inputs == "pairs":  # key-value sets: values at both ends of [-1, 1] too
        return [{value: -1.0, (value + 1) % d: 1.0} for value in ends]
    return np.array(ends, dtype=np.uint64)


def _estimate(case: Case, agg: Any, params: Params) -> np.ndarray:
    """The estimates of the server's default candidates (``Protocol.default_candidates``)
    or of the first values of the domain."""
    d = getattr(params, "d", None)
    if case.protocol.default_candidates is None and "candidates" in inspect.signature(agg.estimate).parameters:
        return np.asarray(agg.estimate(np.arange(min(d or 16, 16), dtype=np.uint64)))
    return np.asarray(agg.estimate())


@register("extremes")
def extreme_parameters_give_finite_estimates(case: Case) -> None:
    """At each of the protocol's extreme parameters (``Protocol.extremes``: smallest and
    largest epsilon, domain and so on), a seeded client perturbs values at both ends of the
    domain, a server adds them and gives finite estimates, the same after a byte round trip."""
    if case.protocol.extremes is None:
        raise CheckSkipped(f"protocol {case.id!r} registers no extreme parameters (Protocol.extremes)")
    cases: List[Params] = list(case.protocol.extremes(case.params))
    assert cases, "Protocol.extremes returned no parameters"
    for params in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            reports = case.protocol.client(params, rng=case.options.seed).perturb(_inputs(case, params))
        agg = case.aggregator(params)  # the registered server: a make_server option may not fit these params
        agg.update(reports)
        estimates = _estimate(case, agg, params)
        assert estimates.size and np.isfinite(estimates).all(), f"{params}: estimates {estimates[:8]}"
        restored = _estimate(case, case.aggregator.from_bytes(agg.to_bytes()), params)
        np.testing.assert_array_equal(restored, estimates, err_msg=f"{params}: after a byte round trip")
