"""The simulation runs: every protocol of a table run many times per eps on a data set,
with the measured errors set next to their closed forms.

Every run redraws every random choice; run ``t`` of algorithm ``a`` at ``eps`` uses a seed
derived from ``(seed, a, data set, eps, t)``, so any cell can be re-run alone and results do
not depend on the order or on the number of threads. Seeded = simulation only.
"""

from __future__ import annotations

import math
import time
import zlib
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, TypeVar, Union

import numpy as np

from .. import _progress, metrics
from .._base import Params, protocol
from .._validate import check_epsilon
from ..datasets import SetData, ValueData
from ..errors import ParameterError
from ..theory import ocms as _theory
from .algorithms import (HEAVY_ALGORITHMS, SET_ALGORITHMS, Algorithm, HeavyAlgorithm, SetAlgorithm,
                         _draw, _get, get_algorithm)
from .progress import ProgressBar
from .results import (CellResult, HeavyCellResult, HeavySimulationResult, SetCellResult,
                      SetSimulationResult, SimulationResult)

__all__ = ["DataSource", "appendix_k_factor", "run_once", "simulate", "simulate_sets", "simulate_heavy"]

DataSource = Union[ValueData, Callable[[float], ValueData]]


def _check_eps(epsilon: float) -> float:
    return check_epsilon(epsilon)


def appendix_k_factor(size: int, runs: int) -> float:
    """[PAN] Theorem K.1: with probability >= 0.95 the Eq. 19 estimator stays below
    ``[1 + (2/t)(sqrt(t log(20|X|)) + log(20|X|))] V`` when every value's MSE is at most
    ``V`` (``t`` runs). Returns the factor (1.7034 for ``|X| = t = 100``); same as
    :func:`ldpfast.theory.worst_case_mse_upper_factor`."""
    return _theory.worst_case_mse_upper_factor(size, runs)


def _progress_bar(progress: Union[bool, ProgressBar], steps: int) -> ProgressBar:
    """``progress`` itself when it is a bar, else a new one (drawn when ``progress`` is true)."""
    return progress if isinstance(progress, ProgressBar) else ProgressBar(steps, enabled=bool(progress))


_A = TypeVar("_A", Algorithm, SetAlgorithm, HeavyAlgorithm)


def _checked(algorithms: Sequence[Union[str, _A]], getter: Callable[[str], _A], epsilons: Iterable[float],
             runs: int) -> Tuple[List[_A], List[float]]:
    algs = [getter(a) if isinstance(a, str) else a for a in algorithms]
    checked = [_check_eps(e) for e in epsilons]
    _check_int_arg("runs", runs)
    if not algs or not checked:
        raise ParameterError("need at least one algorithm and one epsilon")
    return algs, checked


def _se(values: np.ndarray) -> float:
    return float(np.std(values, ddof=1) / math.sqrt(values.size)) if values.size > 1 else float("nan")


def _check_int_arg(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _run_seed(seed: int, algorithm: str, dataset: str, epsilon: float, run: int) -> np.random.SeedSequence:
    key = (zlib.crc32(algorithm.encode()), zlib.crc32(dataset.encode()),
           int(round(epsilon * 1_000_000)), run)
    return np.random.SeedSequence(seed, spawn_key=key)


def _params_dict(params: Params) -> Dict[str, object]:
    """The parameters without long tuples (e.g. hash coefficients)."""
    return {k: v for k, v in params.to_dict().items() if not isinstance(v, (list, tuple)) or len(v) <= 8}


def run_once(algorithm: Algorithm, epsilon: float, data: ValueData,
             seed: Union[int, np.random.SeedSequence]) -> Tuple[Params, np.ndarray]:
    """One simulated deployment: build parameters, perturb every user's value with a
    seeded client, aggregate, and estimate the frequencies of ``data.candidates``.
    Returns ``(params, estimates)``."""
    gen = np.random.default_rng(seed)
    params = algorithm.make_params(epsilon, data, gen)
    client_cls, server_cls = algorithm.classes(params)
    reports = client_cls(params, rng=gen).perturb(data.values)
    server = server_cls(params, candidates=data.candidates) if algorithm.server_candidates else server_cls(params)
    server.update(reports)
    with _progress.suppressed():    # the simulation's own bar counts the runs
        return params, np.asarray(server.estimate(data.candidates), dtype=np.float64)


def simulate(algorithms: Sequence[Union[str, Algorithm]], data: DataSource,
             epsilons: Iterable[float], runs: int = 100, *, seed: int = 0,
             progress: Union[bool, ProgressBar] = False) -> SimulationResult:
    """Run each algorithm ``runs`` times at each eps and measure [PAN]'s metrics.

    Args:
        algorithms: names (see :data:`ALGORITHMS`) or :class:`Algorithm` objects.
        data: a :class:`ValueData`, or a function ``eps -> ValueData`` for data sets that
            depend on eps (:func:`ldpfast.datasets.pan_zipf`).
        epsilons: privacy parameters; runs: independent runs per (algorithm, eps).
        seed: master seed (simulation only: reports are reproducible from it).
        progress: True for a stderr progress bar, or a :class:`ProgressBar` to advance.

    Returns:
        :class:`SimulationResult` with one :class:`CellResult` per (algorithm, eps).
    Raises:
        ParameterError: unknown or unavailable algorithm, runs < 1, bad eps.
    """
    algs, epsilons = _checked(algorithms, get_algorithm, epsilons, runs)
    bar = _progress_bar(progress, len(algs) * len(epsilons) * runs)
    cells: List[CellResult] = []
    first = None
    for eps in epsilons:
        dataset = data(eps) if callable(data) else data
        first = first or dataset
        truth = dataset.frequencies()
        for alg in algs:
            start = time.perf_counter()
            sq_sum = np.zeros(truth.size)
            l1s, l2s = np.empty(runs), np.empty(runs)
            params_seen: Optional[Params] = None
            for t in range(runs):
                params, est = run_once(alg, eps, dataset, _run_seed(seed, alg.name, dataset.name, eps, t))
                if params_seen is None:
                    params_seen = params
                err = est - truth
                sq = err * err
                sq_sum += sq
                l1s[t], l2s[t] = np.abs(err).sum(), sq.sum()
                bar.advance(1, f"{dataset.name} {alg.name} eps={eps:g}")
            assert params_seen is not None  # runs >= 1 (_checked)
            cell = CellResult(
                algorithm=alg.name, label=alg.label, epsilon=eps, runs=runs, n=dataset.n,
                worst_mse=float(np.max(sq_sum / runs)), l1=float(l1s.mean()), l2=float(l2s.mean()),
                l1_se=_se(l1s), l2_se=_se(l2s), seconds=time.perf_counter() - start,
                params=_params_dict(params_seen))
            _add_theory(cell, alg, params_seen, dataset, truth, runs)
            cells.append(cell)
    if not isinstance(progress, ProgressBar):
        bar.close()
    assert first is not None  # epsilons is not empty (_checked)
    return SimulationResult(dataset=first.name, note=first.note, n=first.n, d=first.d,
                            n_candidates=int(first.candidates.size), runs=runs, seed=seed,
                            cells=cells)


def _add_theory(cell: CellResult, alg: Algorithm, params: Params, data: ValueData,
                truth: np.ndarray, runs: int) -> None:
    size = int(data.candidates.size)
    if alg.variance is not None:
        var = np.asarray(alg.variance(params, data, truth), dtype=np.float64)
        cell.theory_mse = float(np.max(var))
        cell.appendix_k = cell.theory_mse * appendix_k_factor(size, runs)
        cell.exact_l2 = float(np.sum(var))
    if alg.l2 is not None:
        cell.theory_l2 = float(alg.l2(params, data.n, size))
        cell.theory_l1 = math.sqrt(size * cell.theory_l2)



def simulate_sets(algorithms: Sequence[Union[str, SetAlgorithm]], sets: SetData, epsilons: Iterable[float],
                  runs: int = 10, *, k: int = 50, seed: int = 0,
                  progress: Union[bool, ProgressBar] = False) -> SetSimulationResult:
    """Run each set-valued protocol ``runs`` times at each eps on ``sets`` and measure
    [PS]'s metrics against the true frequencies ``f(x)`` = share of users holding ``x``.
    ``k`` (capped at ``d``): the top-k of Var and NCR. Seeds as :func:`simulate`."""
    algs, epsilons = _checked(algorithms, lambda a: _get(SET_ALGORITHMS, a), epsilons, runs)
    if not isinstance(sets, SetData) or sets.n < 1:
        raise ParameterError(f"sets must be a SetData with at least one user, got {sets!r}")
    k = min(_check_int_arg("k", k), sets.d)
    truth = sets.frequencies()
    bar = _progress_bar(progress, len(algs) * len(epsilons) * runs)
    cells = []
    for eps in epsilons:
        for alg in algs:
            start = time.perf_counter()
            mse, var, ncr = np.empty(runs), np.empty(runs), np.empty(runs)
            for t in range(runs):
                gen = np.random.default_rng(_run_seed(seed, alg.name, sets.name, eps, t))
                est = alg.run(eps, sets, gen, k)
                mse[t] = metrics.mse(est, truth)
                var[t] = metrics.var_topk(est, truth, sets.n, k)
                ncr[t] = metrics.ncr(est, truth, k)
                bar.advance(1, f"{alg.name} eps={eps:g}")
            seen = var[~np.isnan(var)]
            cells.append(SetCellResult(
                algorithm=alg.name, label=alg.label, epsilon=eps, runs=runs, n=sets.n, k=k,
                mse=float(mse.mean()) if alg.whole_domain else None,
                mse_se=_se(mse) if alg.whole_domain else None,
                var=float(seen.mean()) if seen.size else float("nan"), ncr=float(ncr.mean()), ncr_se=_se(ncr),
                seconds=time.perf_counter() - start,
                theory_mse=alg.theory_mse(eps, sets) if alg.theory_mse is not None else None))
    if not isinstance(progress, ProgressBar):
        bar.close()
    return SetSimulationResult(dataset=sets.name, n=sets.n, d=sets.d, k=k, runs=runs, seed=seed, cells=cells)


def simulate_heavy(algorithms: Sequence[Union[str, HeavyAlgorithm]], data: DataSource,
                   epsilons: Iterable[float], runs: int = 5, *, beta: float = 0.05, seed: int = 0,
                   progress: Union[bool, ProgressBar] = False) -> HeavySimulationResult:
    """Run each heavy-hitter protocol ``runs`` times at each eps on ``data`` (a
    :class:`ValueData` or ``eps -> ValueData``) with failure probability ``beta``, and
    measure recall, precision and the largest error over the true heavy hitters
    (:class:`HeavyCellResult`). Seeds as :func:`simulate`."""
    algs, epsilons = _checked(algorithms, lambda a: _get(HEAVY_ALGORITHMS, a), epsilons, runs)
    if not 0 < beta < 1:
        raise ParameterError(f"beta must be in (0, 1), got {beta!r}")
    bar = _progress_bar(progress, len(algs) * len(epsilons) * runs)
    cells, first = [], None
    for eps in epsilons:
        dataset = data(eps) if callable(data) else data
        first = first or dataset
        items, counts = np.unique(dataset.values, return_counts=True)
        values = np.asarray(dataset.values, dtype=np.uint64)
        for alg in algs:
            start = time.perf_counter()
            rows = []
            for t in range(runs):
                gen = np.random.default_rng(_run_seed(seed, alg.name, dataset.name, eps, t))
                params: Any = alg.make_params(eps, dataset, beta, gen)  # a heavy-hitter protocol's (tau, delta)
                proto = protocol(params.protocol)
                server = proto.aggregator(params).update(proto.client(params, rng=_draw(gen)).perturb(values))
                found = np.asarray(server.heavy_hitters().items, dtype=np.int64)
                is_heavy = counts >= params.tau
                heavy = items[is_heavy]
                pos = np.searchsorted(items, found).clip(0, items.size - 1)
                true_out = np.where(items[pos] == found, counts[pos], 0)  # c(x) of each output
                error = (np.abs(np.asarray(server.estimate(heavy.astype(np.uint64), counts=True))
                                - counts[is_heavy]).max() if heavy.size else np.nan)
                rows.append((heavy.size, found.size,
                             np.isin(heavy, found).mean() if heavy.size else np.nan,
                             (true_out >= params.tau - 2 * params.delta).mean() if found.size else np.nan,
                             float(error), params.delta, params.tau))
                bar.advance(1, f"{dataset.name} {alg.name} eps={eps:g}")
            r = np.array(rows, dtype=np.float64)
            recall, precision, error = (r[:, j][~np.isnan(r[:, j])] for j in (2, 3, 4))
            cells.append(HeavyCellResult(
                algorithm=alg.name, label=alg.label, epsilon=eps, runs=runs, n=dataset.n,
                heavy=float(r[:, 0].mean()), outputs=float(r[:, 1].mean()),
                recall=float(recall.mean()) if recall.size else None,
                precision=float(precision.mean()) if precision.size else None,
                max_error=float(error.mean()) if error.size else None,
                max_error_worst=float(error.max()) if error.size else None,
                delta=float(r[:, 5].mean()), tau=float(r[:, 6].mean()), seconds=time.perf_counter() - start))
    if not isinstance(progress, ProgressBar):
        bar.close()
    assert first is not None  # epsilons is not empty (_checked)
    return HeavySimulationResult(dataset=first.name, n=first.n, d=first.d, beta=beta, runs=runs, seed=seed,
                                 cells=cells)

