"""Simulations of the record protocols (several categorical attributes per user,
:mod:`ldpfast.protocols.multiattribute`): each protocol run many times per eps on a
:class:`~ldpfast.datasets.RecordData`, its errors measured as total variation distances.

Metrics, means over runs: ``tv1``, the mean over attributes of the total variation distance
``(1/2) sum_v |fhat(v) - f(v)|`` between an attribute's estimated and true frequencies; ``tv2``,
the same over every 2-way marginal, for the protocols that answer marginals (CALM, the full
joint; None for the others). Seeds as :func:`ldpfast.experiments.simulate`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Iterable, List, Optional, Sequence, Union

import numpy as np

from .._base import protocol
from .._validate import check_epsilon
from ..datasets import RecordData
from ..errors import ParameterError
from .algorithms import RECORD_ALGORITHMS, RecordAlgorithm, _get
from .progress import ProgressBar
from .results import _Cell, _Tables
from .runner import _check_int_arg, _progress_bar, _run_seed, _se

__all__ = ["RecordCellResult", "RecordSimulationResult", "simulate_records"]


@dataclasses.dataclass
class RecordCellResult(_Cell):
    """One record protocol at one eps: ``tv1`` (with standard error ``tv1_se``) and ``tv2``
    (None when the protocol answers no marginal), means over runs (module doc)."""

    tv1: float
    tv1_se: float
    tv2: Optional[float]
    seconds: float


@dataclasses.dataclass
class RecordSimulationResult(_Tables[RecordCellResult]):
    """All cells of a record simulation (see :func:`simulate_records`); ``d``: the attributes."""

    dataset: str
    n: int
    d: int
    runs: int
    seed: int
    cells: List[RecordCellResult]
    kind = "records"
    CELL = RecordCellResult
    METRICS = {"tv1": ("tv1", "mean TV distance of the attributes' frequencies", ".4f", None),
               "tv2": ("tv2", "mean TV distance of the 2-way marginals", ".4f", None)}


def _tv(estimate: np.ndarray, truth: np.ndarray) -> float:
    return 0.5 * float(np.abs(np.asarray(estimate) - truth).sum())


def simulate_records(algorithms: Sequence[Union[str, RecordAlgorithm]], data: RecordData, epsilons: Iterable[float],
                     runs: int = 5, *, seed: int = 0,
                     progress: Union[bool, ProgressBar] = False) -> RecordSimulationResult:
    """Run each record protocol ``runs`` times at each eps on ``data`` and measure ``tv1``
    and ``tv2`` (module doc)."""
    algs = [_get(RECORD_ALGORITHMS, a) if isinstance(a, str) else a for a in algorithms]
    checked = [check_epsilon(e) for e in epsilons]
    _check_int_arg("runs", runs)
    if not algs or not checked:
        raise ParameterError("algorithms and epsilons must not be empty")
    if not isinstance(data, RecordData) or data.n < 1:
        raise ParameterError(f"data must be a RecordData with at least one user, got {data!r}")
    singles = [data.marginal([a]) for a in range(len(data.domains))]
    pairs = {key: data.marginal(key) for key in data.marginals(2)} if len(data.domains) > 1 else {}
    bar = _progress_bar(progress, len(algs) * len(checked) * runs)
    cells = []
    for eps in checked:
        for alg in algs:
            start = time.perf_counter()
            tv1, tv2 = np.empty(runs), np.empty(runs)
            for t in range(runs):
                gen = np.random.default_rng(_run_seed(seed, alg.name, data.name, eps, t))
                params: Any = alg.make_params(eps, data)
                registered = protocol(params.protocol)
                server: Any = registered.aggregator(params).update(
                    registered.client(params, rng=gen).perturb(data.records))
                tv1[t] = np.mean([_tv(server.marginal([a]).estimate, f) for a, f in enumerate(singles)])
                tv2[t] = (np.mean([_tv(server.marginal(list(k)).estimate, f) for k, f in pairs.items()])
                          if alg.marginals and pairs else np.nan)
                bar.advance(1, f"{alg.name} eps={eps:g}")
            cells.append(RecordCellResult(algorithm=alg.name, label=alg.label, epsilon=eps, runs=runs, n=data.n,
                                          tv1=float(tv1.mean()), tv1_se=_se(tv1),
                                          tv2=None if np.isnan(tv2).all() else float(tv2.mean()),
                                          seconds=time.perf_counter() - start))
    if not isinstance(progress, ProgressBar):
        bar.close()
    return RecordSimulationResult(dataset=data.name, n=data.n, d=len(data.domains), runs=runs, seed=seed,
                                  cells=cells)
