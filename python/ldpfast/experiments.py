"""Simulation harness: run frequency oracles on a data set over an eps grid, many runs,
and measure the errors [PAN] (Pan, CSF 2025) section 6 reports.

Metrics over the values of interest ``X`` (true frequencies ``f``, estimates ``fhat_t``
of run ``t = 1..T``):

* worst-case MSE, [PAN] Eq. 19: ``max_{x in X} (1/T) sum_t (fhat_t(x) - f(x))^2``
  (an upward-biased estimator of ``max_x MSE(x)``; [PAN] Appendix K bounds it, see
  :func:`appendix_k_factor`);
* ``l1 = mean_t sum_{x in X} |fhat_t(x) - f(x)|`` and ``l2 = mean_t sum_{x in X} (fhat_t(x) - f(x))^2``.

Closed forms next to the measurements (:mod:`ldpfast.theory`): the variance of each
estimate at the true frequencies, whose maximum over ``X`` is the closed-form worst-case
MSE: [PAN] Eq. 8/20 for OCMS+RR with its integer ``m`` (HE: ``m = 2``; OLH: ``m = g``),
CMS+HE with the variance of its per-run hash family ([PAN] Thm 3.10), RHR with the share of
users in each residue class, HRR and GRR; l2 is [PAN] Eq. 22 with ``|X|`` in place of ``d``
and l1 its Cauchy-Schwarz bound ``sqrt(|X| l2)``, as the reference code R1 plots them.

Every run redraws every random choice; run ``t`` of algorithm ``a`` at ``eps`` uses a seed
derived from ``(seed, a, data set, eps, t)``, so any cell can be re-run alone and results do
not depend on the order or on the number of threads. Seeded = simulation only.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import sys
import time
import zlib
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, TextIO, Union

import numpy as np

from ._base import Params, protocols
from .datasets import SetData, ValueData
from ._validate import check_epsilon
from .errors import ParameterError
from .theory import hadamard as _theory_h
from .theory import ocms as _theory

__all__ = ["Algorithm", "ALGORITHMS", "available_algorithms", "get_algorithm",
           "appendix_k_factor",
           "worst_case_mse", "l1_loss", "l2_loss", "CellResult", "SimulationResult",
           "simulate", "run_once", "SetAlgorithm", "SET_ALGORITHMS", "HeavyAlgorithm", "HEAVY_ALGORITHMS",
           "KINDS", "algorithm_kind", "SetCellResult", "SetSimulationResult", "HeavyCellResult",
           "HeavySimulationResult", "simulate_sets", "simulate_heavy", "plot_kind_results", "ProgressBar", "plot_results", "require_matplotlib", "DataSource",
           "PAN_DATASETS", "PAN_ALGORITHMS", "PAN_METRIC_ALGORITHMS", "reproduce_pan", "pan_checks",
           "pan_report"]

DataSource = Union[ValueData, Callable[[float], ValueData]]


def _check_eps(epsilon: float) -> float:
    return check_epsilon(epsilon)


def appendix_k_factor(size: int, runs: int) -> float:
    """[PAN] Theorem K.1: with probability >= 0.95 the Eq. 19 estimator stays below
    ``[1 + (2/t)(sqrt(t log(20|X|)) + log(20|X|))] V`` when every value's MSE is at most
    ``V`` (``t`` runs). Returns the factor (1.7034 for ``|X| = t = 100``); same as
    :func:`ldpfast.theory.worst_case_mse_upper_factor`."""
    return _theory.worst_case_mse_upper_factor(size, runs)


# ----------------------------------------------------------------------------------
# Metrics ([PAN] section 6)
# ----------------------------------------------------------------------------------

def worst_case_mse(estimates: np.ndarray, truth: np.ndarray) -> float:
    """[PAN] Eq. 19 from a ``(runs, |X|)`` array of estimates and the true frequencies."""
    err = np.asarray(estimates, dtype=np.float64) - np.asarray(truth, dtype=np.float64)
    return float(np.max(np.mean(err * err, axis=0)))


def l1_loss(estimates: np.ndarray, truth: np.ndarray) -> float:
    """Mean over runs of ``sum_{x in X} |fhat(x) - f(x)|``."""
    return float(np.mean(np.sum(np.abs(np.atleast_2d(estimates) - truth), axis=1)))


def l2_loss(estimates: np.ndarray, truth: np.ndarray) -> float:
    """Mean over runs of ``sum_{x in X} (fhat(x) - f(x))^2``."""
    err = np.atleast_2d(estimates) - truth
    return float(np.mean(np.sum(err * err, axis=1)))


# ----------------------------------------------------------------------------------
# Algorithms
# ----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Algorithm:
    """How the harness builds one protocol for a data set.

    Attributes:
        name: command-line id (``ocms-mse``).
        label: name in tables and plots (``MSE-OCMS+RR``).
        module: the ``ldpfast`` submodule that implements it.
        make_params: ``(epsilon, data, generator) -> Params``; called once per run, so
            parameters that hold random choices (CMS+HE's hash family) are redrawn.
        variance: closed-form ``(params, data, f) -> Var(fhat)`` at the candidates'
            true frequencies ``f`` (array), or None.
        l2: closed-form worst-case l2 ``(params, n, size) -> float``, or None.
        summary: one line for ``ldpfast simulate --list``.
        client, server: explicit classes for protocols outside the registry (default:
            the classes registered for the parameter type).
        server_candidates: construct the server with ``candidates=data.candidates``
            (servers that count a candidate set instead of the whole dictionary).
    """

    name: str
    label: str
    module: str
    make_params: Callable[[float, ValueData, np.random.Generator], Params]
    variance: Optional[Callable[[Params, ValueData, np.ndarray], np.ndarray]] = None
    l2: Optional[Callable[[Params, int, int], float]] = None
    summary: str = ""
    client: Optional[type] = None
    server: Optional[type] = None
    server_candidates: bool = False

    def available(self) -> bool:
        """True when the implementing module is part of this build."""
        try:
            importlib.import_module(f"ldpfast.{self.module}")
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("ldpfast"):
                return False
            raise
        return True

    def classes(self, params: Params):
        """(Client, Server) classes registered for ``type(params)``."""
        if self.client is not None and self.server is not None:
            return self.client, self.server
        for proto in protocols().values():
            if proto.params is type(params):
                return proto.client, proto.aggregator
        raise ParameterError(f"no protocol is registered for {type(params).__name__}")


def _mod(name: str):
    return importlib.import_module(f"ldpfast.{name}")


def _ocms_variance(params, data, f):
    return _theory.ocms_variance(params, n=data.n, f=f)  # Eq. 8/20 for its field and m


def _ocms_l2(params, n, size):
    return _theory.ocms_l2(params.epsilon, size, n, params.m)  # Eq. 22 with |X| for d


def _he_variance(params, data, f):
    return _theory.he_variance(params.epsilon, data.n, f)  # CMS+RR with m = 2


def _he_l2(params, n, size):
    return _theory.ocms_l2(params.epsilon, size, n, 2)


def _cmshe_variance(params, data, f):
    # The family is redrawn every run, so its bias adds PAN Thm 3.10's term to the MSE.
    others = float(np.sum(data.frequencies(np.unique(data.values)) ** 2)) - f * f
    return _theory_h.cmshe_variance(params.epsilon, data.n, f, m=params.m, k=params.k, sum_sq_other=others)


def _rhr_variance(params, data, f):
    base = params.base
    residues = np.bincount(data.values % base, minlength=base) / data.n
    share = residues[data.candidates % base]  # users sharing x mod base (x included)
    return _theory_h.rhr_variance(params.epsilon, data.n, f, residue_fraction=share)


def _olh_variance(params, data, f):
    return _theory.ocms_variance(params.epsilon, params.g, data.n, f)  # CMS+RR with m = g


def _olh_l2(params, n, size):
    return _theory.ocms_l2(params.epsilon, size, n, params.g)


def _hrr_variance(params, data, f):
    return _theory_h.hrr_variance(params.epsilon, data.n, f)


def _grr_variance(params, data, f):
    return _theory.grr_variance(params.epsilon, params.d, data.n, f)


def _grr_l2(params, n, size):
    worst = _theory.grr_variance(params.epsilon, params.d, n, np.array([0.0, 1.0]))
    return float((size - 1) * worst[0] + worst[1])


def _hadamard(name: str):
    return getattr(_mod("hadamard"), name)


def _rhr_original_variance(params, data, f):
    high = params.B
    locations = np.bincount(data.values // high, minlength=params.D // high) / data.n
    return params.variance(data.n, f, location_fraction=locations[data.candidates // high])


def _own_variance(params, data, f):
    return params.variance(data.n, f)  # the protocol's closed form (ldpfast.theory)


def _own_l2(params, n, size):
    # Var is affine in f and sum_x f(x) <= 1 over the values of interest.
    at_zero, at_one = params.variance(n, 0.0), params.variance(n, 1.0)
    return float(size * at_zero + max(0.0, at_one - at_zero))


def _rappor_cms(variant: str):
    return lambda eps, data, gen: _mod("rappor_cms").Params.optimal(
        epsilon=eps, d=data.d, variant=variant, tau=0.1)


ALGORITHMS: Dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("ocms-mse", "MSE-OCMS+RR", "ocms",
              lambda eps, data, gen: _mod("ocms").Params.optimal(
                  epsilon=eps, d=data.d, mode="mse", f_star=data.f_star),
              _ocms_variance, _ocms_l2,
              "OCMS+RR, m minimizing the worst-case MSE for the data's f* (PAN Thm 3.6)"),
    Algorithm("ocms-l", "l-OCMS+RR", "ocms",
              lambda eps, data, gen: _mod("ocms").Params.optimal(epsilon=eps, d=data.d, mode="l"),
              _ocms_variance, _ocms_l2, "OCMS+RR, m minimizing l1/l2 (PAN Thm 3.8)"),
    Algorithm("he", "HE", "hadamard",
              lambda eps, data, gen: _hadamard("HEParams")(epsilon=eps, d=data.d),
              _he_variance, _he_l2, "Hadamard Encoding = CMS+RR with m = 2 (PAN section 6, R1)"),
    Algorithm("cms-he", "CMS+HE", "hadamard",
              lambda eps, data, gen: _hadamard("CMSHEParams")(
                  epsilon=eps, d=data.d, hash_seed=int(gen.integers(0, 2**63))),
              _cmshe_variance, None,
              "Apple's CMS with HE, k = 2048, m = 1024, family redrawn per run (PAN section 6)"),
    Algorithm("rhr", "RHR", "hadamard",
              lambda eps, data, gen: _hadamard("RHRParams")(epsilon=eps, d=data.d),
              _rhr_variance, None, "Recursive Hadamard Response, R1's layout (PAN section 6)"),
    Algorithm("cms-he-apple", "CMS+HE (Apple layout)", "hadamard_variants",
              lambda eps, data, gen: _mod("hadamard_variants").AppleCMSHEParams(
                  epsilon=eps, d=data.d, hash_seed=int(gen.integers(0, 2**63))),
              _cmshe_variance, None, "Apple's HCMS: Hadamard size m = 1024, column h_j(x) (pure-LDP layout)"),
    Algorithm("rhr-original", "RHR (original)", "hadamard_variants",
              lambda eps, data, gen: _mod("hadamard_variants").RHROriginalParams(epsilon=eps, d=data.d),
              _rhr_original_variance, None,
              "Recursive Hadamard Response, Chen et al.'s layout (location x // B), random rows"),
    Algorithm("olh", "OLH", "hadamard",
              lambda eps, data, gen: _hadamard("OLHParams")(epsilon=eps, d=data.d),
              _olh_variance, _olh_l2, "Optimal Local Hashing, g = round(e^eps)+1, pairwise hash"),
    Algorithm("hrr", "HRR", "hadamard",
              lambda eps, data, gen: _hadamard("HRRParams")(epsilon=eps, d=data.d),
              _hrr_variance, None, "Hadamard randomized response (WW Fact 2.1)"),
    Algorithm("hadaoracle", "HadaOracle", "hadaoracle",
              lambda eps, data, gen: _mod("hadaoracle").Params.create(
                  epsilon=eps, d=data.d, n=data.n, beta=0.05, hash_seed=int(gen.integers(0, 2**63))),
              None, None, "WW sketch: k subsets x HRR on [m], median query (beta = 0.05 defaults)"),
    Algorithm("cms-srp", "CMS+sRP", "rappor_cms", _rappor_cms("symmetric"), _own_variance, _own_l2,
              "CMS with symmetric RAPPOR, m within 10% of its m -> inf error (PAN App. G)",
              server_candidates=True),
    Algorithm("cms-arp", "CMS+aRP", "rappor_cms", _rappor_cms("asymmetric"), _own_variance, _own_l2,
              "CMS with asymmetric RAPPOR, m within 10% of its m -> inf error (PAN App. G)",
              server_candidates=True),
    Algorithm("ss", "SS", "subset_selection",
              lambda eps, data, gen: _mod("subset_selection").Params(epsilon=eps, d=data.d),
              _own_variance, _own_l2, "Subset Selection, k ~ d/(e^eps+1) (O(d) work per user)"),
    Algorithm("hashtogram", "Hashtogram", "hashtogram",
              lambda eps, data, gen: _mod("hashtogram").Params.create(
                  epsilon=eps, d=data.d, n=data.n, beta=0.05, hash_seed=int(gen.integers(0, 2**63))),
              None, None, "Bassily et al.'s Count-Sketch oracle: R groups, T ~ sqrt(n), median (WW Table 1)"),
    Algorithm("grr", "GRR", "grr",
              lambda eps, data, gen: _mod("grr").Params(epsilon=eps, d=data.d),
              _grr_variance, _grr_l2, "k-ary randomized response on the whole dictionary (d counters)"),
)}


def get_algorithm(name: str) -> Algorithm:
    """The :class:`Algorithm` called ``name``; raises ParameterError listing the names."""
    if name not in ALGORITHMS:
        raise ParameterError(f"protocol must be one of {sorted(ALGORITHMS)}, got {name!r}")
    alg = ALGORITHMS[name]
    if not alg.available():
        raise ParameterError(f"protocol {name!r} needs ldpfast.{alg.module}, which this build lacks")
    return alg


def available_algorithms() -> List[Algorithm]:
    """The algorithms whose implementation is part of this build."""
    return [a for a in ALGORITHMS.values() if a.available()]


# ----------------------------------------------------------------------------------
# Progress bar
# ----------------------------------------------------------------------------------

class ProgressBar:
    """A one-line progress bar on stderr (redrawn at most 10 times per second)."""

    def __init__(self, total: int, enabled: bool = True, stream: Optional[TextIO] = None,
                 width: int = 30):
        self.total, self.done, self.width = max(int(total), 1), 0, width
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.start = time.monotonic()
        self._last = 0.0
        self.label = ""

    def advance(self, steps: int = 1, label: str = "") -> None:
        self.done += steps
        self.label = label or self.label
        now = time.monotonic()
        if self.enabled and (now - self._last >= 0.1 or self.done >= self.total):
            self._last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        frac = min(self.done / self.total, 1.0)
        filled = int(frac * self.width)
        elapsed = now - self.start
        eta = elapsed / frac - elapsed if frac > 0 else float("nan")
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
                          f"{elapsed:6.1f}s eta {eta:6.1f}s {self.label[:40]:<40}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


# ----------------------------------------------------------------------------------
# Simulation
# ----------------------------------------------------------------------------------

@dataclasses.dataclass
class CellResult:
    """Measured and closed-form errors of one algorithm at one eps.

    ``worst_mse`` is [PAN] Eq. 19; ``l1``/``l2`` are means over runs with standard
    errors ``l1_se``/``l2_se``. ``theory_mse`` is the largest closed-form variance over
    ``X`` (Eq. 20 with the actual frequencies), ``appendix_k`` = ``theory_mse`` x
    :func:`appendix_k_factor`; ``theory_l2`` is Eq. 22 with ``|X|`` values and
    ``theory_l1 = sqrt(|X| theory_l2)`` (an upper bound). ``exact_l2`` is
    ``sum_x Var(x)`` for the actual frequencies. ``params`` is the first run's
    parameter dict.
    """

    algorithm: str
    label: str
    epsilon: float
    runs: int
    n: int
    worst_mse: float
    l1: float
    l2: float
    l1_se: float
    l2_se: float
    seconds: float
    params: Dict[str, object]
    theory_mse: Optional[float] = None
    appendix_k: Optional[float] = None
    theory_l1: Optional[float] = None
    theory_l2: Optional[float] = None
    exact_l2: Optional[float] = None

    @property
    def within_band(self) -> Optional[bool]:
        """closed form <= measured worst-case MSE <= Appendix K bound (None without theory)."""
        if self.theory_mse is None:
            return None
        return self.theory_mse <= self.worst_mse <= self.appendix_k


class _CellLookup:
    """The (algorithm, epsilon) cells of a simulation result, looked up by name."""

    cells: list

    def cell(self, algorithm: str, epsilon: float) -> Any:
        for c in self.cells:
            if c.algorithm == algorithm and c.epsilon == epsilon:
                return c
        raise KeyError((algorithm, epsilon))

    @property
    def algorithms(self) -> List[str]:
        return list(dict.fromkeys(c.algorithm for c in self.cells))

    @property
    def epsilons(self) -> List[float]:
        return sorted({c.epsilon for c in self.cells})


@dataclasses.dataclass
class SimulationResult(_CellLookup):
    """All cells of one data set (see :func:`simulate`)."""

    dataset: str
    note: str
    n: int
    d: int
    n_candidates: int
    runs: int
    seed: int
    cells: List[CellResult]

    def to_dict(self) -> Dict[str, object]:
        """JSON-ready dict (inverse: :meth:`from_dict`)."""
        out = dataclasses.asdict(self)
        return json.loads(json.dumps(out, default=_json_default))

    @classmethod
    def from_dict(cls, data: Dict[str, object]) -> "SimulationResult":
        """Rebuild a result saved with :meth:`to_dict` (e.g. to re-render tables and plots)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in fields}
        kwargs["cells"] = [CellResult(**c) for c in data["cells"]]
        return cls(**kwargs)

    def table(self, metric: str = "all", markdown: bool = False) -> str:
        """Text (or markdown) table for ``metric`` in ``mse``, ``l1``, ``l2`` (``all``: the
        three): one row per algorithm with the measured values per eps, followed by rows
        with its closed form and, for the MSE, its Appendix K bound where they exist."""
        if metric == "all":
            return "\n\n".join(self.table(m, markdown) for m in ("mse", "l1", "l2"))
        if metric not in ("mse", "l1", "l2"):
            raise ParameterError(f"metric must be 'mse', 'l1', 'l2' or 'all', got {metric!r}")
        value = {"mse": "worst_mse", "l1": "l1", "l2": "l2"}[metric]
        theory = {"mse": "theory_mse", "l1": "theory_l1", "l2": "theory_l2"}[metric]
        header = ["algorithm"] + [f"eps={e:g}" for e in self.epsilons]
        rows = []
        for name in self.algorithms:
            cells = [self.cell(name, e) for e in self.epsilons]
            rows.append([cells[0].label] + [f"{getattr(c, value):.4e}" for c in cells])
            extra = [("closed form", theory)] + ([("App. K bound", "appendix_k")] if metric == "mse" else [])
            for label, attr in extra:
                if all(getattr(c, attr) is not None for c in cells):
                    rows.append([f"{cells[0].label} {label}" if markdown else f"  {label}"]
                                + [f"{getattr(c, attr):.4e}" for c in cells])
        title = {"mse": "worst-case MSE (PAN Eq. 19)", "l1": "l1 loss", "l2": "l2 loss"}[metric]
        return _format_table(f"{self.dataset}: {title}", header, rows, markdown)


def _json_default(obj):
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


def _format_table(title: str, header: List[str], rows: List[List[str]], markdown: bool) -> str:
    if markdown:
        lines = [f"**{title}**", "", "| " + " | ".join(header) + " |",
                 "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    return "\n".join([title, fmt.format(*header)] + [fmt.format(*r) for r in rows])


def _run_seed(seed: int, algorithm: str, dataset: str, epsilon: float, run: int) -> np.random.SeedSequence:
    key = (zlib.crc32(algorithm.encode()), zlib.crc32(dataset.encode()),
           int(round(epsilon * 1_000_000)), run)
    return np.random.SeedSequence(seed, spawn_key=key)


def _params_dict(params: Params) -> Dict[str, object]:
    """The parameters without long tuples (e.g. hash coefficients)."""
    return {k: v for k, v in params.to_dict().items() if not isinstance(v, (list, tuple)) or len(v) <= 8}


def run_once(algorithm: Algorithm, epsilon: float, data: ValueData,
             seed: Union[int, np.random.SeedSequence]) -> tuple:
    """One simulated deployment: build parameters, perturb every user's value with a
    seeded client, aggregate, and estimate the frequencies of ``data.candidates``.
    Returns ``(params, estimates)``."""
    gen = np.random.default_rng(seed)
    params = algorithm.make_params(epsilon, data, gen)
    client_cls, server_cls = algorithm.classes(params)
    reports = client_cls(params, rng=gen).perturb(data.values)
    server = server_cls(params, candidates=data.candidates) if algorithm.server_candidates else server_cls(params)
    server.update(reports)
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
    algs = [get_algorithm(a) if isinstance(a, str) else a for a in algorithms]
    epsilons = [_check_eps(e) for e in epsilons]
    if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or runs < 1:
        raise ParameterError(f"runs must be a positive integer, got {runs!r}")
    if not algs or not epsilons:
        raise ParameterError("need at least one algorithm and one epsilon")
    bar = progress if isinstance(progress, ProgressBar) else ProgressBar(
        len(algs) * len(epsilons) * runs, enabled=bool(progress))
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
            params_seen = None
            for t in range(runs):
                params, est = run_once(alg, eps, dataset, _run_seed(seed, alg.name, dataset.name, eps, t))
                if params_seen is None:
                    params_seen = params
                err = est - truth
                sq = err * err
                sq_sum += sq
                l1s[t], l2s[t] = np.abs(err).sum(), sq.sum()
                bar.advance(1, f"{dataset.name} {alg.name} eps={eps:g}")
            cell = CellResult(
                algorithm=alg.name, label=alg.label, epsilon=eps, runs=runs, n=dataset.n,
                worst_mse=float(np.max(sq_sum / runs)), l1=float(l1s.mean()), l2=float(l2s.mean()),
                l1_se=float(l1s.std(ddof=1) / math.sqrt(runs)) if runs > 1 else float("nan"),
                l2_se=float(l2s.std(ddof=1) / math.sqrt(runs)) if runs > 1 else float("nan"),
                seconds=time.perf_counter() - start, params=_params_dict(params_seen))
            _add_theory(cell, alg, params_seen, dataset, truth, runs)
            cells.append(cell)
    if not isinstance(progress, ProgressBar):
        bar.close()
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


# ----------------------------------------------------------------------------------
# Set-valued protocols ([PS] section 4) and heavy hitters ([WW] section 5)
# ----------------------------------------------------------------------------------

def _available(module: str) -> bool:
    return Algorithm("", "", module, lambda *a: None).available()  # type: ignore[arg-type]


def _draw(gen: np.random.Generator) -> int:
    return int(gen.integers(0, 2**63))


def _sketch_run(params_name: str, client_name: str, server_name: str, module: str = "privsketch",
                **estimate: Any):
    """Run a K x M sketch protocol ([PS] defaults K = 4, M = 128) on set data and
    estimate the whole domain."""
    def run(eps: float, sets: SetData, gen: np.random.Generator, k: int) -> np.ndarray:
        import warnings

        mod = _mod(module)
        params = getattr(mod, params_name).create(epsilon=eps, d=sets.d, seed=_draw(gen))
        with warnings.catch_warnings():  # PrivSketch's ordering matrix: simulated on purpose
            warnings.simplefilter("ignore", _mod("privsketch").PrivacyWarning)
            reports = getattr(mod, client_name)(params, rng=_draw(gen)).perturb(sets)
        return np.asarray(getattr(mod, server_name)(params).update(reports).estimate(**estimate), dtype=np.float64)
    return run


def _ps_olh_run(eps: float, sets: SetData, gen: np.random.Generator, k: int) -> np.ndarray:
    ps = _mod("privsketch")
    params = ps.PSOLHParams(epsilon=eps, d=sets.d, pad_len=ps.padding_length(sets))
    server = ps.PSOLHServer(params).update(ps.PSOLHClient(params, rng=_draw(gen)).perturb(sets))
    return np.asarray(server.estimate(), dtype=np.float64)


def _ps_olh_theory(eps: float, sets: SetData) -> Optional[float]:
    """Mean of PS-OLH's variance over the domain; it is the MSE only when no set is longer
    than the padding (P90 of the set sizes), when the estimate is unbiased."""
    ps = _mod("privsketch")
    params = ps.PSOLHParams(epsilon=eps, d=sets.d, pad_len=ps.padding_length(sets))
    if sets.n == 0 or int(sets.sizes().max()) > params.pad_len:
        return None
    from .theory import privsketch as _theory_ps

    var = _theory_ps.ps_olh_variance(eps, sets.n, sets.frequencies(), pad_len=params.pad_len, g=params.g)
    return float(np.mean(var))


def _svim_run(eps: float, sets: SetData, gen: np.random.Generator, k: int) -> np.ndarray:
    result = _mod("privsketch").svim(sets, eps, k=k, rng=_draw(gen))
    est = np.zeros(sets.d)
    est[np.asarray(result.top, dtype=np.intp)] = result.estimates
    return est


@dataclasses.dataclass(frozen=True)
class SetAlgorithm:
    """How the harness runs one set-valued protocol on a :class:`~ldpfast.datasets.SetData`.

    ``run(epsilon, sets, generator, k)`` returns frequency estimates for the whole domain
    (``whole_domain=False``: only the ``k`` items the protocol reports, zeros elsewhere, so
    only the top-k metrics apply). ``theory_mse(epsilon, sets)``: the closed-form MSE over the
    domain where the estimator is unbiased on these sets, else None."""

    name: str
    label: str
    module: str
    run: Callable[[float, SetData, np.random.Generator, int], np.ndarray]
    summary: str = ""
    theory_mse: Optional[Callable[[float, SetData], Optional[float]]] = None
    whole_domain: bool = True

    def available(self) -> bool:
        return _available(self.module)


SET_ALGORITHMS: Dict[str, SetAlgorithm] = {a.name: a for a in (
    SetAlgorithm("privsketch", "PrivSketch", "privsketch", _sketch_run("Params", "Client", "Server"),
                 "PrivSketch, K=4, M=128, R2 estimator (NOT eps-LDP: its ordering matrix leaks, PS reproduction only)"),
    SetAlgorithm("privsketch-nosmp", "PrivSketch-noSmp", "privsketch",
                 _sketch_run("NoSmpParams", "NoSmpClient", "NoSmpServer"),
                 "PrivSketch without sampling: every cell with eps/(KM) (NOT eps-LDP, as PrivSketch)"),
    SetAlgorithm("privsketch-ldp", "PrivSketch-LDP", "privsketch",
                 _sketch_run("SafeParams", "SafeClient", "SafeServer", estimator="mean-corrected"),
                 "LDP-safe PrivSketch: no ordering matrix, one sampled cell, fill-corrected count-mean"),
    SetAlgorithm("multi-pcms-mean", "Multi-PCMS-Mean", "privsketch",
                 _sketch_run("MultiPCMSMeanParams", "MultiPCMSMeanClient", "MultiPCMSMeanServer"),
                 "one sketch row per user, eps/M per cell, count-mean decoding (PS baseline)"),
    SetAlgorithm("multi-pcms-min", "Multi-PCMS-Min", "privsketch",
                 _sketch_run("MultiPCMSMinParams", "MultiPCMSMinClient", "MultiPCMSMinServer"),
                 "whole sketch per user, eps/(KM) per cell, count-min decoding (PS baseline)"),
    SetAlgorithm("ps-olh", "PS-OLH", "privsketch", _ps_olh_run,
                 "padding-and-sampling OLH, padding = P90 of the set sizes (Wang et al. 2018)",
                 theory_mse=_ps_olh_theory),
    SetAlgorithm("npcms", "nPCMS", "npcms", _sketch_run("Params", "Client", "Server", module="npcms"),
                 "L = 78 Apple CMS reports per user with eps/L each (R2's n x CMS baseline)"),
    SetAlgorithm("svim", "SVIM", "privsketch", _svim_run,
                 "SVIM frequent items: three user groups, top-k only (Wang, Li, Jha 2018)", whole_domain=False),
)}


def _heavy_params(module: str, factory: str):
    return lambda eps, data, beta, gen: getattr(_mod(module).Params, factory)(
        eps, data.d, data.n, beta, hash_seed=_draw(gen))


@dataclasses.dataclass(frozen=True)
class HeavyAlgorithm:
    """How the harness runs one heavy-hitter protocol on a :class:`ValueData`:
    ``make_params(epsilon, data, beta, generator)`` gives parameters with ``delta`` and
    ``tau`` (counts); the module's Client/Server run it and ``Server.heavy_hitters()``
    searches the prefix tree."""

    name: str
    label: str
    module: str
    make_params: Callable[[float, ValueData, float, np.random.Generator], Params]
    summary: str = ""

    def available(self) -> bool:
        return _available(self.module)


HEAVY_ALGORITHMS: Dict[str, HeavyAlgorithm] = {a.name: a for a in (
    HeavyAlgorithm("hadaheavy", "HadaHeavy", "hadaheavy", _heavy_params("hadaheavy", "create"),
                   "WW HadaHeavy: prefix search over B-ary symbols, HadaOracle per level"),
    HeavyAlgorithm("treehist", "TreeHist", "hadaheavy", _heavy_params("hadaheavy", "treehist"),
                   "TreeHist as HadaHeavy with B = 2 (binary prefixes, HadaOracle levels)"),
    HeavyAlgorithm("treehist-cs", "TreeHist-CS", "treehist_cs", _heavy_params("treehist_cs", "create"),
                   "Bassily et al.'s TreeHist with Count-Sketch (Hashtogram) level oracles"),
)}

#: The kinds of protocol ``ldpfast simulate`` runs, and their tables.
KINDS = {"values": ALGORITHMS, "sets": SET_ALGORITHMS, "heavy": HEAVY_ALGORITHMS}


def algorithm_kind(name: str) -> str:
    """``"values"``, ``"sets"`` or ``"heavy"``: which table ``name`` is in (ParameterError
    listing every name when none)."""
    for kind, table in KINDS.items():
        if name in table:
            return kind
    names = sorted(n for table in KINDS.values() for n in table)
    raise ParameterError(f"protocol must be one of {names}, got {name!r}")


def _get(table: Dict[str, Any], name: str):
    kind = algorithm_kind(name)
    if KINDS[kind] is not table:
        raise ParameterError(f"protocol {name!r} is a {kind} protocol, not one of {sorted(table)}")
    alg = table[name]
    if not alg.available():
        raise ParameterError(f"protocol {name!r} needs ldpfast.{alg.module}, which this build lacks")
    return alg


class _Tables(_CellLookup):
    """JSON and tables shared by the set-valued and heavy-hitter results;
    ``METRICS`` maps a metric to (cell attribute, title, format, closed-form attribute)."""

    METRICS: Dict[str, tuple] = {}
    CELL: type = object
    cells: list
    dataset: str

    def to_dict(self) -> Dict[str, object]:
        """JSON-ready dict (inverse: :meth:`from_dict`)."""
        out = dataclasses.asdict(self)  # type: ignore[call-overload]
        out["kind"] = self.kind  # type: ignore[attr-defined]
        return json.loads(json.dumps(out, default=_json_default))

    @classmethod
    def from_dict(cls, data: Dict[str, object]):
        fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        kwargs = {k: v for k, v in data.items() if k in fields}
        kwargs["cells"] = [cls.CELL(**c) for c in data["cells"]]  # type: ignore[union-attr]
        return cls(**kwargs)

    def table(self, metric: str = "all", markdown: bool = False) -> str:
        """Text (or markdown) table per metric (``all``: every metric): one row per
        algorithm with the measured values per eps, plus its closed form where there is one."""
        if metric == "all":
            return "\n\n".join(self.table(m, markdown) for m in self.METRICS)
        if metric not in self.METRICS:
            raise ParameterError(f"metric must be one of {list(self.METRICS)} or 'all', got {metric!r}")
        attr, title, fmt, theory = self.METRICS[metric]
        header = ["algorithm"] + [f"eps={e:g}" for e in self.epsilons]
        rows = []
        for name in self.algorithms:
            cells = [self.cell(name, e) for e in self.epsilons]
            values = [getattr(c, attr) for c in cells]
            rows.append([cells[0].label] + ["-" if v is None else format(v, fmt) for v in values])
            if theory and all(getattr(c, theory) is not None for c in cells):
                what = "Delta (its guarantee)" if theory == "delta" else "closed form"
                rows.append([f"{cells[0].label} {what}" if markdown else f"  {what}"]
                            + [format(getattr(c, theory), fmt) for c in cells])
        return _format_table(f"{self.dataset}: {title}", header, rows, markdown)


@dataclasses.dataclass
class SetCellResult:
    """One set-valued protocol at one eps: ``mse`` (mean over runs of the whole-domain MSE,
    :func:`ldpfast.metrics.mse`; None for top-k-only protocols) with standard error
    ``mse_se``; ``var`` and ``ncr`` ([PS] Var over ``C_e ∩ C_t`` on the count scale and NCR,
    top-``k``, means over runs; runs whose top-k sets are disjoint are left out of ``var``);
    ``theory_mse``: the closed form where the estimator is unbiased on the data."""

    algorithm: str
    label: str
    epsilon: float
    runs: int
    n: int
    k: int
    mse: Optional[float]
    mse_se: Optional[float]
    var: float
    ncr: float
    ncr_se: float
    seconds: float
    theory_mse: Optional[float] = None


@dataclasses.dataclass
class SetSimulationResult(_Tables):
    """All cells of a set-valued simulation (see :func:`simulate_sets`)."""

    dataset: str
    n: int
    d: int
    k: int
    runs: int
    seed: int
    cells: List[SetCellResult]
    kind = "sets"
    CELL = SetCellResult
    METRICS = {"mse": ("mse", "MSE over the whole domain (frequency scale, PS Fig. 4)", ".4e", "theory_mse"),
               "var": ("var", "Var over the top-k (count scale, PS Fig. 5)", ".4e", None),
               "ncr": ("ncr", "NCR of the top-k (PS Fig. 5)", ".3f", None)}


@dataclasses.dataclass
class HeavyCellResult:
    """One heavy-hitter protocol at one eps, means over runs. A true heavy hitter has count
    ``c(x) >= tau`` (the protocol's own threshold); ``recall``: share of them output;
    ``precision``: share of outputs with ``c(x) >= tau - 2 Delta`` (the guarantee's lower end,
    [WW] Thm 5.1); ``max_error``: ``max |chat(x) - c(x)|`` over the true heavy hitters (counts;
    runs without any are left out; None when no run has one), to compare with the protocol's ``delta`` (Delta);
    ``max_error_worst``: its largest value over the runs."""

    algorithm: str
    label: str
    epsilon: float
    runs: int
    n: int
    heavy: float
    outputs: float
    recall: Optional[float]
    precision: Optional[float]
    max_error: Optional[float]
    max_error_worst: Optional[float]
    delta: float
    tau: float
    seconds: float


@dataclasses.dataclass
class HeavySimulationResult(_Tables):
    """All cells of a heavy-hitter simulation (see :func:`simulate_heavy`)."""

    dataset: str
    n: int
    d: int
    beta: float
    runs: int
    seed: int
    cells: List[HeavyCellResult]
    kind = "heavy"
    CELL = HeavyCellResult
    METRICS = {"recall": ("recall", "recall (share of c(x) >= tau found)", ".3f", None),
               "precision": ("precision", "precision (share of outputs with c(x) >= tau - 2 Delta)", ".3f", None),
               "error": ("max_error", "max |error| over the true heavy hitters (counts)", ".1f", "delta")}


def _checked(algorithms, getter, epsilons, runs):
    algs = [getter(a) if isinstance(a, str) else a for a in algorithms]
    epsilons = [_check_eps(e) for e in epsilons]
    if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or runs < 1:
        raise ParameterError(f"runs must be a positive integer, got {runs!r}")
    if not algs or not epsilons:
        raise ParameterError("need at least one algorithm and one epsilon")
    return algs, epsilons


def _se(values: np.ndarray) -> float:
    return float(np.std(values, ddof=1) / math.sqrt(values.size)) if values.size > 1 else float("nan")


def simulate_sets(algorithms: Sequence[Union[str, SetAlgorithm]], sets: SetData, epsilons: Iterable[float],
                  runs: int = 10, *, k: int = 50, seed: int = 0,
                  progress: Union[bool, ProgressBar] = False) -> SetSimulationResult:
    """Run each set-valued protocol ``runs`` times at each eps on ``sets`` and measure
    [PS]'s metrics against the true frequencies ``f(x)`` = share of users holding ``x``.
    ``k`` (capped at ``d``): the top-k of Var and NCR. Seeds as :func:`simulate`."""
    from . import metrics

    algs, epsilons = _checked(algorithms, lambda a: _get(SET_ALGORITHMS, a), epsilons, runs)
    if not isinstance(sets, SetData) or sets.n < 1:
        raise ParameterError(f"sets must be a SetData with at least one user, got {sets!r}")
    k = min(_check_int_arg("k", k), sets.d)
    truth = sets.frequencies()
    bar = progress if isinstance(progress, ProgressBar) else ProgressBar(
        len(algs) * len(epsilons) * runs, enabled=bool(progress))
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


def _check_int_arg(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


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
    bar = progress if isinstance(progress, ProgressBar) else ProgressBar(
        len(algs) * len(epsilons) * runs, enabled=bool(progress))
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
                params = alg.make_params(eps, dataset, beta, gen)
                mod = _mod(alg.module)
                server = mod.Server(params).update(mod.Client(params, rng=_draw(gen)).perturb(values))
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
    return HeavySimulationResult(dataset=first.name, n=first.n, d=first.d, beta=beta, runs=runs, seed=seed,
                                 cells=cells)


def plot_kind_results(result: Union[SetSimulationResult, HeavySimulationResult], path: Optional[str] = None) -> Any:
    """PNG with one panel per metric of a set-valued or heavy-hitter result (closed forms
    dashed); returns the Figure. Raises ParameterError without matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ParameterError("plotting needs matplotlib: install it with pip install 'ldpfast[plot]' "
                             "(or pass --no-plot)") from None
    metrics = list(result.METRICS.items())
    fig = Figure(figsize=(5.2 * len(metrics), 4.2))
    axes = fig.subplots(1, len(metrics), squeeze=False)
    eps = result.epsilons
    for ax, (metric, (attr, title, _fmt, theory)) in zip(axes[0], metrics):
        for index, name in enumerate(result.algorithms):
            cells = [result.cell(name, e) for e in eps]
            values = [getattr(c, attr) for c in cells]
            if all(v is None for v in values):
                continue
            ax.plot(eps, [np.nan if v is None else v for v in values], marker="osv^D<>ph*"[index % 10],
                    color=f"C{index}", label=cells[0].label)
            if theory and all(getattr(c, theory) is not None for c in cells):
                ax.plot(eps, [getattr(c, theory) for c in cells], "--", color=f"C{index}", alpha=0.6,
                        label=f"{cells[0].label} {'Delta' if theory == 'delta' else 'closed form'}")
        if metric in ("mse", "var", "error"):
            ax.set_yscale("log")
        ax.set_xlabel("privacy parameter eps")
        ax.set_title(title, fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{result.dataset}: n={result.n}, d={result.d}, {result.runs} runs", fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


# ----------------------------------------------------------------------------------
# Plotting (matplotlib is the optional extra ``ldpfast[plot]``)
# ----------------------------------------------------------------------------------

def require_matplotlib():
    """Import pyplot with the Agg backend; ParameterError naming the extra if missing."""
    try:
        import matplotlib
    except ImportError:
        raise ParameterError(
            "plotting needs matplotlib: install it with pip install 'ldpfast[plot]' "
            "(or pass --no-plot)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_results(result: SimulationResult, path: Optional[str] = None,
                 metrics: Sequence[str] = ("mse", "l1", "l2"),
                 metric_algorithms: Optional[Dict[str, Sequence[str]]] = None) -> Any:
    """Write a PNG with one panel per metric (log scale): measured values with markers and
    closed forms dashed (one colour per algorithm across panels); on the worst-case MSE
    panel, the band between the closed form and the Appendix K bound of the first
    algorithm drawn (as [PAN] plots it for OCMS). ``metric_algorithms`` restricts the
    algorithms per metric (as [PAN] shows MSE-OCMS only for MSE and l-OCMS only for l1/l2).

    Returns the ``matplotlib.figure.Figure`` (shown inline by notebooks); with ``path``
    it is also written there as a PNG. The figure is built without pyplot, so it neither
    changes the backend nor stays registered in pyplot's figure list.

    Raises:
        ParameterError: matplotlib is missing.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ParameterError("plotting needs matplotlib: install it with pip install 'ldpfast[plot]' "
                             "(or pass --no-plot)") from None
    fig = Figure(figsize=(5.2 * len(metrics), 4.2))
    axes = fig.subplots(1, len(metrics), squeeze=False)
    eps = result.epsilons
    markers = "osv^D<>ph*"
    for ax, metric in zip(axes[0], metrics):
        wanted = metric_algorithms.get(metric, result.algorithms) if metric_algorithms else result.algorithms
        names = [n for n in result.algorithms if n in wanted]
        value = {"mse": "worst_mse", "l1": "l1", "l2": "l2"}[metric]
        theory = {"mse": "theory_mse", "l1": "theory_l1", "l2": "theory_l2"}[metric]
        for rank, name in enumerate(names):
            index = result.algorithms.index(name)
            color, marker = f"C{index}", markers[index % len(markers)]
            cells = [result.cell(name, e) for e in eps]
            label = cells[0].label
            ax.plot(eps, [getattr(c, value) for c in cells], marker=marker, color=color, label=label)
            if all(getattr(c, theory) is not None for c in cells):
                ax.plot(eps, [getattr(c, theory) for c in cells], "--", color=color, alpha=0.6,
                        label=f"{label} closed form")
                if metric == "mse" and rank == 0:
                    ax.fill_between(eps, [c.theory_mse for c in cells], [c.appendix_k for c in cells],
                                    color=color, alpha=0.15, label=f"{label}: closed form to App. K bound")
        ax.set_yscale("log")
        ax.set_xlabel("privacy parameter eps")
        ax.set_ylabel({"mse": "worst-case MSE (Eq. 19)", "l1": "l1 loss", "l2": "l2 loss"}[metric])
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{result.dataset}: n={result.n}, d={result.d}, |X|={result.n_candidates}, "
                 f"{result.runs} runs", fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


# ----------------------------------------------------------------------------------
# [PAN] section 6 reproduction (Figs. 2-4)
# ----------------------------------------------------------------------------------

#: Algorithms of [PAN] section 6.
PAN_ALGORITHMS = ("ocms-mse", "ocms-l", "he", "cms-he", "rhr")
#: Which algorithms [PAN] shows for each metric (MSE-OCMS for MSE, l-OCMS for l1/l2).
PAN_METRIC_ALGORITHMS = {"mse": ("ocms-mse", "he", "cms-he", "rhr"),
                         "l1": ("ocms-l", "he", "cms-he", "rhr"),
                         "l2": ("ocms-l", "he", "cms-he", "rhr")}
#: Where [PAN] section 6 says RHR performs the worst: every metric on Zipf (Fig. 2), the
#: worst-case MSE on mini-Kosarak (Fig. 4).
PAN_RHR_WORST_CLAIMS = {"zipf": ("mse", "l1", "l2"), "kosarak": ("mse",)}
#: name -> (figure, description) of [PAN]'s data sets.
PAN_DATASETS = {
    "zipf": ("Fig. 2", "deterministic Zipf 1/r^2 (R1), n = 10,000, d = 1,000,000, X = the 100 values "
                       "(multiples of RHR's 2^(b-1), so all share RHR residue 0), f* = 1"),
    "gaussian": ("Fig. 3", "R1 Gaussian: RandomState(317).normal(1000, 50, 10000), floored; d = 10,000, "
                           "X = [0, 10000), f* = 0"),
    "kosarak": ("Fig. 4", "mini-Kosarak (faithful: SPMF separators counted, values token+2); d = 26,000, "
                          "X = {0..999}, f* = 1"),
}


def pan_dataset(name: str, kosarak_source: str = "kosarak-prefix", n: Optional[int] = None) -> DataSource:
    """The data source of one [PAN] experiment (see :data:`PAN_DATASETS`); ``n`` shrinks
    the synthetic Zipf and Gaussian sets (default: the paper's 10,000 users)."""
    from . import datasets

    sizes = {} if n is None else {"n": n}
    if name == "zipf":
        return lambda eps: datasets.pan_zipf(eps, **sizes)
    if name == "gaussian":
        return datasets.pan_gaussian("r1", **sizes)
    if name == "kosarak":
        return datasets.mini_kosarak(kosarak_source, mode="faithful")
    raise ParameterError(f"dataset must be one of {sorted(PAN_DATASETS)}, got {name!r}")


def reproduce_pan(datasets: Sequence[str] = ("zipf", "gaussian", "kosarak"),
                  algorithms: Sequence[str] = PAN_ALGORITHMS,
                  epsilons: Sequence[float] = (1, 2, 3, 4, 5), runs: int = 100, *, seed: int = 0,
                  kosarak_source: str = "kosarak-prefix", n: Optional[int] = None,
                  progress: Union[bool, ProgressBar] = False) -> Dict[str, SimulationResult]:
    """Run [PAN] section 6 (Figs. 2-4): each algorithm ``runs`` times per eps on each data
    set. Returns ``{dataset: SimulationResult}``; see :func:`pan_checks` and
    :func:`pan_report`. Algorithms missing from this build raise ParameterError.
    ``progress``: True for a stderr progress bar, or a :class:`ProgressBar` to advance
    (one step per run, data sets, eps and algorithms in that nesting order). ``n``: users of
    the synthetic data sets (default the paper's 10,000; smaller for smoke tests)."""
    algs = [get_algorithm(a) for a in algorithms]
    sources = {name: pan_dataset(name, kosarak_source, n) for name in datasets}
    bar = progress if isinstance(progress, ProgressBar) else ProgressBar(
        len(sources) * len(algs) * len(epsilons) * runs, enabled=bool(progress))
    results = {name: simulate(algs, source, epsilons, runs, seed=seed, progress=bar)
               for name, source in sources.items()}
    bar.close()
    return results


def _metric_value(cell: CellResult, metric: str) -> float:
    return {"mse": cell.worst_mse, "l1": cell.l1, "l2": cell.l2}[metric]


def pan_checks(results: Dict[str, SimulationResult]) -> Dict[str, object]:
    """The three claims of [PAN] section 6, checked on measured results.

    Returns a dict with:
      ``leads``: list of ``(dataset, metric, eps, leader, value, best_other, other_value)``
      for every cell, where the leader is MSE-OCMS for MSE and l-OCMS for l1/l2 and the
      others are HE, CMS+HE, RHR (when present);
      ``he_vs_cms``: list of ``(dataset, metric, eps, he, cms_he, ratio, z, predicted_ratio,
      z_predicted)``: ``z`` is ``cms_he - he`` over its standard error (l1/l2; None for the
      max-based MSE); ``predicted_ratio`` the closed forms' CMS+HE / HE ratio (MSE: of the
      largest variances, l2: of ``sum_x Var``; None for l1) and ``z_predicted`` the measured
      minus the predicted difference over the standard error (l2 only);
      ``band``: list of ``(dataset, label, eps, closed_form, measured, bound, inside)`` for
      every cell with a closed form (closed form <= Eq. 19 estimate <= Appendix K bound);
      the paper's claim is about the MSE-OCMS+RR cells;
      ``l1_bound``: ``(dataset, label, eps, l1, bound, below)`` for cells with the l1 bound;
      ``l2_exact``: ``(dataset, label, eps, l2, expected, z)`` with ``expected = sum_x Var``
      at the true frequencies and ``z`` the deviation in standard errors;
      ``rhr_worst``: ``(dataset, metric, eps, rhr, worst_label, worst, rhr_theory, worst_theory)``
      for every cell of :data:`PAN_RHR_WORST_CLAIMS`, ``worst`` the largest value among the
      metric's algorithms (closed forms for the MSE only, None otherwise).
    """
    leads, pairs, band = [], [], []
    for name, res in results.items():
        for eps in res.epsilons:
            for metric, algs in PAN_METRIC_ALGORITHMS.items():
                present = [a for a in algs if a in res.algorithms]
                if not present or present[0] != algs[0] or len(present) < 2:
                    continue
                leader = res.cell(algs[0], eps)
                others = [res.cell(a, eps) for a in present[1:]]
                best = min(others, key=lambda c: _metric_value(c, metric))
                leads.append((name, metric, eps, leader.label, _metric_value(leader, metric),
                              best.label, _metric_value(best, metric)))
            if "he" in res.algorithms and "cms-he" in res.algorithms:
                he, cms = res.cell("he", eps), res.cell("cms-he", eps)
                for metric in ("mse", "l1", "l2"):
                    a, b = _metric_value(he, metric), _metric_value(cms, metric)
                    z = predicted = z_predicted = None
                    if metric == "mse" and he.theory_mse and cms.theory_mse:
                        predicted = cms.theory_mse / he.theory_mse
                    if metric != "mse":
                        se = math.hypot(getattr(he, f"{metric}_se"), getattr(cms, f"{metric}_se"))
                        z = (b - a) / se if se > 0 else None
                        if metric == "l2" and he.exact_l2 and cms.exact_l2 and se > 0:
                            predicted = cms.exact_l2 / he.exact_l2
                            z_predicted = ((b - a) - (cms.exact_l2 - he.exact_l2)) / se
                    pairs.append((name, metric, eps, a, b, b / a, z, predicted, z_predicted))
            for alg in res.algorithms:
                c = res.cell(alg, eps)
                if c.theory_mse is not None:
                    band.append((name, c.label, eps, c.theory_mse, c.worst_mse, c.appendix_k,
                                 bool(c.within_band)))
    l1_bound, l2_exact = [], []
    for name, res in results.items():
        for c in res.cells:
            if c.theory_l1 is not None:
                l1_bound.append((name, c.label, c.epsilon, c.l1, c.theory_l1, c.l1 <= c.theory_l1))
            if c.exact_l2 is not None and c.l2_se > 0:
                l2_exact.append((name, c.label, c.epsilon, c.l2, c.exact_l2, (c.l2 - c.exact_l2) / c.l2_se))
    rhr_worst = []
    for name, metrics in PAN_RHR_WORST_CLAIMS.items():
        res = results.get(name)
        if res is None or "rhr" not in res.algorithms:
            continue
        for eps in res.epsilons:
            for metric in metrics:
                cells = [res.cell(a, eps) for a in PAN_METRIC_ALGORITHMS[metric] if a in res.algorithms]
                worst = max(cells, key=lambda c: _metric_value(c, metric))
                rhr = res.cell("rhr", eps)
                theory = (rhr.theory_mse, worst.theory_mse) if metric == "mse" else (None, None)
                rhr_worst.append((name, metric, eps, _metric_value(rhr, metric), worst.label,
                                  _metric_value(worst, metric), *theory))
    return {"leads": leads, "he_vs_cms": pairs, "band": band, "l1_bound": l1_bound, "l2_exact": l2_exact,
            "rhr_worst": rhr_worst}


def pan_report(results: Dict[str, SimulationResult], checks: Dict[str, object], command: str,
               environment: str = "", plots: Optional[Dict[str, str]] = None) -> str:
    """Markdown report of a reproduction: the command, the measured tables per data set,
    and the answers to the three checks."""
    lines = ["# Reproduction of Pan (CSF 2025), section 6 (Figs. 2-4)", "",
             "Produced by:", "", "```bash", command, "```", ""]
    if environment:
        lines += [environment, ""]
    lines += ["Metrics over the values of interest X: worst-case MSE = Eq. 19 (max over X of the mean "
              "squared error over runs), l1 and l2 = mean over runs of the summed absolute / squared "
              "errors. Closed forms (`ldpfast.theory`): the largest variance over X at the true frequencies "
              "(OCMS+RR: Eq. 8/20 with the chosen integer m; HE: m = 2; CMS+HE: with its per-run family's "
              "bias, Thm 3.10; RHR: with the share of users in each residue class) for the MSE; Eq. 22 with "
              "|X| in place of d for l2 and its Cauchy-Schwarz bound sqrt(|X| l2) for l1 (an upper bound), "
              "as the reference code plots them. App. K bound = closed form x "
              "[1 + (2/t)(sqrt(t log(20|X|)) + log(20|X|))] (1.70 for |X| = 100, 1.83 for 1,000, 1.94 for "
              "10,000 at t = 100 runs). The paper shows MSE-OCMS+RR only for the MSE and l-OCMS+RR only "
              "for l1/l2; both are listed for every metric here.", ""]
    for name, res in results.items():
        fig, desc = PAN_DATASETS.get(name, ("", res.note))
        lines += [f"## {name} ({fig})", "", f"{desc}. n = {res.n:,} users, {res.runs} runs per eps, "
                  f"seed {res.seed}. Construction: {res.note}.", ""]
        ms = {}
        for c in res.cells:
            if c.algorithm.startswith("ocms"):
                ms.setdefault(c.label, []).append(f"{c.params.get('m', '?')}")
        if ms:
            lines += ["m per eps: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in ms.items()), ""]
        lines += [res.table("all", markdown=True), ""]
        secs = sum(c.seconds for c in res.cells)
        lines += [f"Time for this data set: {secs:.0f} s "
                  + "(" + ", ".join(f"{a}: {sum(c.seconds for c in res.cells if c.algorithm == a):.0f} s"
                                    for a in res.algorithms) + ").", ""]
        if plots and name in plots:
            lines += [f"![{name}]({plots[name]})", ""]
    lines += ["## How this differs from the paper's runs", "",
              "- **mini-Kosarak** is rebuilt with the reference code's construction (every token of SPMF's "
              "sequence file counted, separators included, `round(count/scale)` copies of `token + 2`, "
              "d = 26,000, X = {0..999}) from the bundled Kosarak prefix (the first 36,681 of 990,002 users; "
              "the full file is not available here). The scale is `100 * 36,681 / 990,002 = 3.705`, the same "
              "per-user density as the paper's `/100` on the full file, giving 168,130 entries (paper: "
              "\"over 170,000\"). Value 1 is the `-1` click separator (frequency 0.47: the \"value above "
              "0.4\" of the paper, which hurts RHR's MSE for every value sharing its residue), value 0 the "
              "`-2` user separator (0.058); the other values are page ids + 2. Rounding removes items with "
              "fewer than 2 clicks in the prefix instead of fewer than 51 in the full file, so the tail of "
              "pages differs; with `--kosarak kosarak.dat` (the full FIMI file) the construction is the paper's.",
              "- **Full Kosarak**: the bundled prefix is 3.7% of Kosarak (36,681 / 990,002 users), so Fig. 4 "
              "here is built from a 3.7% prefix at the paper's per-user density, not from the whole data set. "
              "The full file is accepted: download `kosarak.dat` from the FIMI repository "
              "(http://fimi.uantwerpen.be/data/kosarak.dat, one user per line) and pass "
              "`ldpfast reproduce --kosarak kosarak.dat` (in Python: `ldpfast.datasets.mini_kosarak(\"kosarak.dat\")`); "
              "the scale is then the paper's 100.",
              "- **Zipf** is the reference code's deterministic data with d = 1,000,000 (the paper's text says "
              "100,000 and \"sampled\"), **Gaussian** its seed-317 data (floored, mean 1000; the text says a "
              "random mean in [1000, 9000] and rounding).",
              "- OCMS draws `a0, a1` from the whole field `2^64 - 59` and estimates with `m'` ([PAN] Alg. 1-2); "
              "the reference code uses another 64-bit prime, `a0, a1` in `[1, p-1]` and plain `m`: identical "
              "to double precision at this field size. RR is decoded with the exact inverse "
              "`(e+m-2)/(e-1)` (the reference code inverts the matrix numerically; the paper's printed "
              "`(e+m-1)/(e-1)` is an erratum).",
              "- CMS+HE redraws its 2,048 hash functions every run, as the reference code does, so its closed "
              "form includes the family's bias term ([PAN] Thm 3.10). RHR's closed form uses the share of "
              "users in each residue class. The paper plots closed forms only for OCMS.",
              "- The randomness is ldpfast's seeded ChaCha20 (simulation seeds), so individual numbers differ "
              "from the paper's plots while their distribution does not.", ""]
    lines += ["## Checks", ""]
    leads = checks["leads"]
    won = [r for r in leads if r[4] < r[6]]
    lines += [f"**1. Does OCMS+RR lead in each metric?** {len(won)}/{len(leads)} (data set, metric, eps) "
              "cells: MSE-OCMS has the lowest worst-case MSE and l-OCMS the lowest l1 / l2 among "
              "HE, CMS+HE, RHR."]
    lost = [r for r in leads if r[4] >= r[6]]
    if lost:
        lines += ["", "Cells where it does not lead:", "",
                  "| data set | metric | eps | OCMS | best other | value |", "|---|---|---|---|---|---|"]
        lines += [f"| {r[0]} | {r[1]} | {r[2]:g} | {r[4]:.4e} | {r[5]} | {r[6]:.4e} |" for r in lost]
    pairs = checks["he_vs_cms"]
    if pairs:
        ratios = [p[5] for p in pairs]
        zs = [abs(p[6]) for p in pairs if p[6] is not None]
        zp = [abs(p[8]) for p in pairs if p[8] is not None]
        preds = [p[7] for p in pairs if p[7] is not None and p[1] == "l2"]
        lines += ["", f"**2. Are HE and CMS+HE equal?** CMS+HE / HE ratio over all {len(pairs)} "
                  f"(data set, metric, eps) cells: {min(ratios):.3f} .. {max(ratios):.3f}."]
        if zs:
            lines[-1] += (f" For l1/l2 the difference is within 3 standard errors in {sum(z < 3 for z in zs)}/"
                          f"{len(zs)} cells (largest {max(zs):.2f}).")
        if zp:
            lines[-1] += (f" The closed forms predict CMS+HE's l2 to be {min(preds):.3f} .. {max(preds):.3f} "
                          "times HE's (the per-run hash family's bias, [PAN] Thm 3.10, and the m/(m-1) "
                          "factor), which is largest when one value dominates; the measured l2 difference "
                          f"differs from that prediction by at most {max(zp):.2f} standard errors "
                          f"({sum(z < 3 for z in zp)}/{len(zp)} within 3).")
        lines += ["", "| data set | metric | eps | HE | CMS+HE | ratio | z | predicted ratio | z vs prediction |",
                  "|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {p[0]} | {p[1]} | {p[2]:g} | {p[3]:.4e} | {p[4]:.4e} | {p[5]:.3f} | "
                  f"{'' if p[6] is None else f'{p[6]:+.2f}'} | {'' if p[7] is None else f'{p[7]:.3f}'} | "
                  f"{'' if p[8] is None else f'{p[8]:+.2f}'} |" for p in pairs]
    band = checks["band"]
    ocms_band = [b for b in band if b[1] == "MSE-OCMS+RR"]
    if ocms_band:
        inside = [b for b in ocms_band if b[6]]
        others = [b for b in band if b[1] != "MSE-OCMS+RR"]
        lines += ["", f"**3. Does every measured worst-case MSE sit between the closed form and the "
                  f"Appendix K bound?** {len(inside)}/{len(ocms_band)} MSE-OCMS+RR cells"
                  + (f"; {sum(b[6] for b in others)}/{len(others)} cells of the other algorithms with a "
                     "closed form." if others else "."), "",
                  "| data set | eps | closed form | measured | App. K bound | inside |", "|---|---|---|---|---|---|"]
        lines += [f"| {b[0]} | {b[2]:g} | {b[3]:.4e} | {b[4]:.4e} | {b[5]:.4e} | {'yes' if b[6] else 'NO'} |"
                  for b in ocms_band]
        outside = [b for b in others if not b[6]]
        if outside:
            lines += ["", "Cells of the other algorithms outside their band:", "",
                      "| data set | algorithm | eps | closed form | measured | App. K bound |",
                      "|---|---|---|---|---|---|"]
            lines += [f"| {b[0]} | {b[1]} | {b[2]:g} | {b[3]:.4e} | {b[4]:.4e} | {b[5]:.4e} |" for b in outside]
            above = [b for b in outside if b[4] > b[5]]
            lines += ["", f"{len(outside) - len(above)} of these are below the closed form and {len(above)} above "
                      "the bound. Eq. 19 overshoots the largest variance only when many values share it "
                      "(MSE-OCMS+RR's m makes Var(f=0) = Var(f=1)); when one value's variance dominates (e.g. "
                      "l-OCMS+RR's larger m on the most frequent value), the maximum is that one value's "
                      "mean of 100 squared errors, which falls below its expectation about half the time."]
    rhr_rows = checks.get("rhr_worst", [])
    if rhr_rows:
        not_worst = [r for r in rhr_rows if r[4] != "RHR"]
        lines += ["", f"**4. Is RHR the worst where the paper says so** (every metric on Zipf, Fig. 2; the "
                  f"worst-case MSE on mini-Kosarak, Fig. 4)? In {len(rhr_rows) - len(not_worst)}/{len(rhr_rows)} "
                  "cells."]
        if not_worst:
            lines += ["", "Cells where another algorithm is worse than RHR (closed forms: the largest variance "
                      "over X, MSE only):", "",
                      "| data set | metric | eps | RHR | worst | its value | RHR closed form | worst's closed form |",
                      "|---|---|---|---|---|---|---|---|"]
            lines += [f"| {r[0]} | {r[1]} | {r[2]:g} | {r[3]:.4e} | {r[4]} | {r[5]:.4e} | "
                      f"{'' if r[6] is None else f'{r[6]:.4e}'} | {'' if r[7] is None else f'{r[7]:.4e}'} |"
                      for r in not_worst]
            flipped = [r for r in not_worst if r[1] == "mse" and r[6] is not None and r[7] is not None
                       and r[6] > r[7]]
            if flipped:
                lines += ["", f"In {len(flipped)} of these MSE cells the closed forms still rank RHR worst: Eq. 19 "
                          "is a maximum over X of 100-run means, which overshoots the largest variance most when "
                          "many values share it (HE, CMS+HE: every value has about the same variance) and least "
                          "when one value dominates (RHR: the values sharing the residue of the 0.47-frequency "
                          "separator), so at these eps the measured ranking is within that selection bias."]
    l1_rows, l2_rows = checks.get("l1_bound", []), checks.get("l2_exact", [])
    if l1_rows or l2_rows:
        lines += ["", "**Further checks.**"]
        if l1_rows:
            lines[-1] += (f" The measured l1 is below its Cauchy-Schwarz bound sqrt(|X| l2) ([PAN] Thm 3.8, "
                          f"\"expected to be below it\") in {sum(r[5] for r in l1_rows)}/{len(l1_rows)} cells.")
        if l2_rows:
            big = max(l2_rows, key=lambda r: abs(r[5]))
            lines[-1] += (f" The measured l2 (mean of 100 runs) is within 3 standard errors of its exact "
                          f"expectation sum_x Var(x) at the true frequencies in "
                          f"{sum(abs(r[5]) < 3 for r in l2_rows)}/{len(l2_rows)} cells (largest deviation "
                          f"{big[5]:+.2f} SE: {big[0]}, {big[1]}, eps {big[2]:g}); this checks every "
                          "implementation and closed form at once, since each estimator is unbiased.")
    return "\n".join(lines) + "\n"
