"""Result types of the simulation harness: one cell per (algorithm, eps) with the measured
errors and their closed forms, the cells of a run with JSON round trips (``to_dict`` /
``from_dict``) and text or markdown tables."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar, Dict, Generic, List, Mapping, Optional, Tuple, Type, TypeVar

import numpy as np

from ..errors import ParameterError

__all__ = ["CellResult", "SimulationResult", "SetCellResult", "SetSimulationResult", "HeavyCellResult",
           "HeavySimulationResult"]


@dataclasses.dataclass
class _Cell:
    """What every cell holds: which algorithm, at which eps, over how many runs of how many users."""

    algorithm: str
    label: str
    epsilon: float
    runs: int
    n: int


@dataclasses.dataclass
class CellResult(_Cell):
    """Measured and closed-form errors of one algorithm at one eps.

    ``worst_mse`` is [PAN] Eq. 19; ``l1``/``l2`` are means over runs with standard
    errors ``l1_se``/``l2_se``. ``theory_mse`` is the largest closed-form variance over
    ``X`` (Eq. 20 with the actual frequencies), ``appendix_k`` = ``theory_mse`` x
    :func:`appendix_k_factor`; ``theory_l2`` is Eq. 22 with ``|X|`` values and
    ``theory_l1 = sqrt(|X| theory_l2)`` (an upper bound). ``exact_l2`` is
    ``sum_x Var(x)`` for the actual frequencies. ``params`` is the first run's
    parameter dict.
    """

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
        if self.theory_mse is None or self.appendix_k is None:
            return None
        return self.theory_mse <= self.worst_mse <= self.appendix_k


C = TypeVar("C", bound=_Cell)


class _CellLookup(Generic[C]):
    """The (algorithm, epsilon) cells of a simulation result, looked up by name."""

    cells: List[C]

    def cell(self, algorithm: str, epsilon: float) -> C:
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
class SimulationResult(_CellLookup[CellResult]):
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
        out: Dict[str, object] = json.loads(json.dumps(dataclasses.asdict(self), default=_json_default))
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SimulationResult":
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


def _json_default(obj: object) -> object:
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


class _Tables(_CellLookup[C]):
    """JSON and tables shared by the set-valued and heavy-hitter results (dataclasses);
    ``METRICS`` maps a metric to (cell attribute, title, format, closed-form attribute)."""

    # declared for type checkers: the subclasses are dataclasses and set the class attributes
    __dataclass_fields__: ClassVar[Dict[str, "dataclasses.Field[Any]"]]
    METRICS: ClassVar[Dict[str, Tuple[str, str, str, Optional[str]]]] = {}
    CELL: ClassVar[type] = object
    kind: ClassVar[str]
    dataset: str

    def to_dict(self) -> Dict[str, object]:
        """JSON-ready dict (inverse: :meth:`from_dict`)."""
        out = dataclasses.asdict(self)
        out["kind"] = self.kind
        json_ready: Dict[str, object] = json.loads(json.dumps(out, default=_json_default))
        return json_ready

    @classmethod
    def from_dict(cls: Type[_T], data: Mapping[str, Any]) -> _T:
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in fields}
        kwargs["cells"] = [cls.CELL(**c) for c in data["cells"]]
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


_T = TypeVar("_T", bound="_Tables[Any]")


@dataclasses.dataclass
class SetCellResult(_Cell):
    """One set-valued protocol at one eps: ``mse`` (mean over runs of the whole-domain MSE,
    :func:`ldpfast.metrics.mse`; None for top-k-only protocols) with standard error
    ``mse_se``; ``var`` and ``ncr`` ([PS] Var over ``C_e ∩ C_t`` on the count scale and NCR,
    top-``k``, means over runs; runs whose top-k sets are disjoint are left out of ``var``);
    ``theory_mse``: the closed form where the estimator is unbiased on the data."""

    k: int
    mse: Optional[float]
    mse_se: Optional[float]
    var: float
    ncr: float
    ncr_se: float
    seconds: float
    theory_mse: Optional[float] = None


@dataclasses.dataclass
class SetSimulationResult(_Tables[SetCellResult]):
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
class HeavyCellResult(_Cell):
    """One heavy-hitter protocol at one eps, means over runs. A true heavy hitter has count
    ``c(x) >= tau`` (the protocol's own threshold); ``recall``: share of them output;
    ``precision``: share of outputs with ``c(x) >= tau - 2 Delta`` (the guarantee's lower end,
    [WW] Thm 5.1); ``max_error``: ``max |chat(x) - c(x)|`` over the true heavy hitters (counts;
    runs without any are left out; None when no run has one), to compare with the protocol's ``delta`` (Delta);
    ``max_error_worst``: its largest value over the runs."""

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
class HeavySimulationResult(_Tables[HeavyCellResult]):
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

