"""Choosing a protocol for a deployment: :func:`recommend` (also ``ldpfast.recommend``, and
the table of ``ldpfast params``).

Every registered protocol with a deployment comparison (``Protocol.compare``) is configured
for the privacy level ``epsilon``, the dictionary size ``d`` and the number of users ``n``,
and weighed on three things: its closed-form **error** for the query, the **bits** each
user sends, and the **server's cost** (elementary steps and memory, from the
registration's cost model). The options within ``tolerance`` of the smallest error come
first, fewest bits first, so a protocol that is barely more accurate but sends a
hundred times more bits does not win.

Example::

    >>> import ldpfast
    >>> best = ldpfast.recommend(2.0, 100_000, 1_000_000, max_report_bits=64)[0]
    >>> best.protocol, best.bits
    ('pgr', 18)
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._params import Params
from ._registry import ComparisonRow, protocol
from ._registry import protocols as _registered
from .errors import ParameterError

__all__ = ["Option", "recommend", "QUERIES", "STEPS_PER_SECOND", "comparison_rows"]

#: What the deployment will ask: ``"all"`` (every value of ``[0, d)``, ranked by l2 over
#: the dictionary), ``"top-k"`` (the most frequent values, found by estimating every value:
#: ranked by the worst-case MSE of a value), ``"candidates"`` (a set of values known in
#: advance: ranked by the worst-case MSE; the server answers only those).
QUERIES = ("all", "top-k", "candidates")

#: Elementary server steps per second that ``server_budget`` and :attr:`Option.server_seconds`
#: assume: one core of the 2020s hashing (report, candidate) pairs in the OCMS scan
#: (bench/ocms_decode_throughput.py measures 1e9 to 3e9 per core); threads divide it.
STEPS_PER_SECOND = 1e9


@dataclasses.dataclass(frozen=True)
class Option:
    """One protocol configuration, as :func:`recommend` ranks it.

    Attributes:
        protocol: the registry id (``ldpfast simulate``, ``ldpfast audit`` and
            ``ldpfast._registry.protocol`` take it).
        name: the configuration (``"l-OCMS+RR"``: OCMS with the l-optimal hash range).
        m: hash range or randomized-response symbols.
        bits: bits each user sends.
        error: what the query is ranked by: ``l2`` for ``"all"``, ``mse`` otherwise.
        mse: worst-case MSE of one value's estimate over ``f <= f_star`` (fractions).
        l2: worst-case sum of the variances over the whole dictionary.
        server_ops: server steps to aggregate ``n`` reports and answer the query (NaN
            where the protocol states no cost model).
        server_seconds: ``server_ops`` at :data:`STEPS_PER_SECOND` (one core).
        state_bytes: the memory the server holds (NaN when unknown).
        fits: whether the option meets every constraint; ``why_not`` says which it misses.
        note: how the protocol is configured.
        params: the configuration as the protocol's Params, ready for its client and server
            (``ldpfast.protocol(option.protocol).Client(option.params)``); None where the
            protocol's ``compare`` hook gives none (the built-in ones all do).
    """

    protocol: str
    name: str
    m: int
    bits: int
    error: float
    mse: float
    l2: float
    server_ops: float
    server_seconds: float
    state_bytes: float
    fits: bool
    why_not: str
    note: str
    params: Optional[Params] = None

    def to_dict(self) -> Dict[str, Any]:
        """The fields, ``params`` in its :meth:`Params.to_json` form (what
        :func:`ldpfast._registry.params_from_json` reads back)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["params"] = None if self.params is None else json.loads(self.params.to_json())
        return out

    @property
    def code(self) -> Optional[str]:
        """The Python expression that builds :attr:`params`
        (``ldpfast.protocol('grr').Params(epsilon=2.0, d=100)``), or None without params."""
        if self.params is None:
            return None
        init = {f.name for f in dataclasses.fields(self.params) if f.init}
        args = ", ".join(f"{name}={value!r}" for name, value in self.params.to_dict().items() if name in init)
        return f"ldpfast.protocol({self.protocol!r}).Params({args})"


def comparison_rows(epsilon: float, d: int, n: int, f_star: float = 1.0, modes: Sequence[str] = ("mse", "l"),
                    field: str = "paper") -> List[Tuple[str, ComparisonRow]]:
    """``(protocol id, row)`` for every configuration of every registered protocol's
    ``compare`` hook, OCMS+RR first.

    Raises:
        ParameterError: invalid eps, d, n or f*.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ParameterError(f"n must be a positive integer, got {n!r}")
    if isinstance(d, bool) or not isinstance(d, int) or d < 2:
        raise ParameterError(f"d must be an integer >= 2, got {d!r}")
    if not (isinstance(f_star, (int, float)) and math.isfinite(f_star) and 0.0 <= f_star <= 1.0):
        raise ParameterError(f"f_star must be in [0, 1], got {f_star!r}")
    known = _registered()
    order = sorted((pid for pid, proto in known.items() if proto.compare is not None),
                   key=lambda pid: (pid != "ocms", pid))
    rows = []
    for pid in order:
        hook = known[pid].compare
        assert hook is not None
        rows += [(pid, row) for row in hook(epsilon, d, n, f_star, modes=tuple(modes), field=field)]
    return rows


def worst_mse(row: ComparisonRow, f_star: float) -> float:
    """The largest ``Var(fhat)`` over ``f in [0, f*]``: every variance here is affine in
    ``f``, so it is at an end."""
    return float(max(row.variance(0.0), row.variance(f_star)))


def _positive(name: str, value: Any, integer: bool = False) -> Any:
    if value is None:
        return None
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or not value > 0 or (not integer and not math.isfinite(value)):
        kind = "a positive integer" if integer else "a positive number"
        raise ParameterError(f"{name} must be {kind} or None, got {value!r}")
    return value


def recommend(epsilon: float, d: int, n: int, *, max_report_bits: Optional[int] = None, query: str = "all",
              candidates: Optional[int] = None, server_budget: Optional[float] = None, f_star: float = 1.0,
              tolerance: float = 0.1, protocols: Optional[Sequence[str]] = None, field: str = "paper",
              steps_per_second: float = STEPS_PER_SECOND) -> List[Option]:
    """Protocol configurations for ``n`` users holding values in ``[0, d)`` at privacy
    level ``epsilon``, best first.

    Args:
        epsilon, d, n: the deployment.
        max_report_bits: the most bits a user may send (None: no limit).
        query: one of :data:`QUERIES`.
        candidates: ``query="candidates"``: how many values will be estimated.
        server_budget: the most seconds of server work (one core at
            ``steps_per_second``) to aggregate the reports and answer the query (None: no
            limit). Protocols without a cost model do not fit a budget.
        f_star: the largest frequency of interest (the MSE is the worst case over
            ``f <= f_star``; 1: no prior).
        tolerance: options whose error is within ``1 + tolerance`` of the smallest come
            first, ordered by bits per report, then server cost.
        protocols: only these protocols (ids or aliases; None: all).
        field: OCMS's field, as ``ldpfast params --field``.
        steps_per_second: the server speed the budget and ``server_seconds`` assume.

    Returns:
        Every configuration as an :class:`Option`: first those that fit the constraints
        (within ``tolerance`` of the best error by bits and cost, then the others by
        error), then those that do not (``why_not`` says why), by error. A configuration
        a protocol cannot take at these parameters is left out (CMS+RAPPOR's variants at
        large ``epsilon``, where no ``m <= 65536`` comes within 1% of their limit; PGR for
        ``d >= 2^32``).

    Raises:
        ParameterError: an argument out of range.
    """
    if query not in QUERIES:
        raise ParameterError(f"query must be one of {QUERIES}, got {query!r}")
    if query == "candidates":
        if _positive("candidates", candidates, integer=True) is None:
            raise ParameterError("candidates must be given (how many values) for query='candidates'")
    elif candidates is not None:
        raise ParameterError(f"candidates is for query='candidates', got query={query!r}")
    _positive("max_report_bits", max_report_bits, integer=True)
    _positive("server_budget", server_budget)
    _positive("steps_per_second", steps_per_second)
    if not (isinstance(tolerance, (int, float)) and math.isfinite(tolerance) and tolerance >= 0):
        raise ParameterError(f"tolerance must be a number >= 0, got {tolerance!r}")
    wanted = None if protocols is None else {protocol(name).id for name in protocols}
    q = candidates if query == "candidates" and candidates is not None else d
    options = []
    for pid, row in comparison_rows(epsilon, d, n, f_star, field=field):
        if wanted is not None and pid not in wanted:
            continue
        mse, l2 = worst_mse(row, f_star), float(row.l2)
        ops = float(row.server_ops(n, q)) if row.server_ops is not None else math.nan
        state = float(row.state_bytes(n, q)) if row.state_bytes is not None else math.nan
        seconds = ops / steps_per_second
        misses = []
        if max_report_bits is not None and row.bits > max_report_bits:
            misses.append(f"{row.bits} bits > max_report_bits={max_report_bits}")
        if server_budget is not None and not seconds <= server_budget:
            misses.append("server cost unknown (no cost model) > server_budget" if math.isnan(seconds)
                          else f"{seconds:.3g} s of server work > server_budget={server_budget:g} s")
        params = None
        if row.build is not None:
            try:
                params = row.build()
            except ParameterError as exc:   # the theory row has no Params here (e.g. d beyond its range)
                misses.append(f"not buildable: {exc}")
        options.append(Option(pid, row.name, int(row.m), int(row.bits), l2 if query == "all" else mse, mse, l2,
                              ops, seconds, state, not misses, "; ".join(misses), row.note, params))
    fitting = [o for o in options if o.fits]
    best = min((o.error for o in fitting), default=math.inf)

    def rank(o: Option) -> Tuple[Any, ...]:
        close = o.fits and o.error <= best * (1 + tolerance)
        cost = o.server_ops if not math.isnan(o.server_ops) else math.inf
        return (not o.fits, not close, o.bits if close else 0, cost if close else 0, o.error)
    return sorted(options, key=rank)
