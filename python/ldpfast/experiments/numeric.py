"""Simulations of the mean protocols (``ldpfast simulate --protocol pm,hm,...``): the error
of the estimated mean over runs against the closed form at the data.

For data ``x_1..x_n`` in ``bounds`` (clipped) and a mechanism with ``Var(y | t)``, the mean
of ``t`` has ``Var = mean_i Var(y | t_i) / n`` (the closed form at the data); in the user's
units it is ``((hi - lo)/2)^2`` times that. Each cell runs ``runs`` independent collections
and reports the measured mean squared error, the closed form and their ratio; the ratio's
standard error is ``sqrt(2/runs)`` (a mean of ``runs`` squared normals).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .._base import Params, protocols
from .._random import KeySource
from ..errors import ParameterError

__all__ = ["MeanAlgorithm", "MeanCell", "MeanSimulationResult", "simulate_means", "mean_algorithm", "plot_means",
           "closed_form_mse"]


@dataclasses.dataclass(frozen=True)
class MeanAlgorithm:
    """A mean protocol for the harness: ``make_params(epsilon, bounds) -> Params`` of a
    protocol that estimates the mean of one number per user."""

    name: str
    label: str
    make_params: Callable[[float, Tuple[float, float]], Params]
    module: str = "protocols.numeric"
    summary: str = ""
    #: The client takes ``float64[n, 1]`` (a multi-attribute protocol with one attribute).
    matrix: bool = False

    def available(self) -> bool:
        return True


@dataclasses.dataclass(frozen=True)
class MeanCell:
    """One protocol at one epsilon: measured MSE of the mean, closed form, ratio."""

    protocol: str
    epsilon: float
    mse: float
    closed_form: float

    @property
    def ratio(self) -> float:
        return self.mse / self.closed_form


@dataclasses.dataclass
class MeanSimulationResult:
    """Cells of :func:`simulate_means`, with the data's name, size, bounds and true mean."""

    data: str
    n: int
    bounds: Tuple[float, float]
    true_mean: float
    runs: int
    seed: int
    cells: List[MeanCell]

    @property
    def epsilons(self) -> List[float]:
        return sorted({c.epsilon for c in self.cells})

    @property
    def algorithms(self) -> List[str]:
        return list(dict.fromkeys(c.protocol for c in self.cells))

    def to_dict(self) -> Dict[str, Any]:
        out = dataclasses.asdict(self)
        for cell, row in zip(self.cells, out["cells"]):
            row["ratio"] = cell.ratio
        return out

    def table(self, metric: str = "all", markdown: bool = False) -> str:
        head = ["protocol", "eps", "MSE of the mean", "closed form", "ratio"]
        rows = [[c.protocol, f"{c.epsilon:g}", f"{c.mse:.4g}", f"{c.closed_form:.4g}", f"{c.ratio:.3f}"]
                for c in self.cells]
        if markdown:
            lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
        width = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
        return "\n".join("  ".join(str(x).ljust(w) for x, w in zip(r, width)) for r in [head] + rows)


def mean_algorithm(name: str) -> MeanAlgorithm:
    """The registered :class:`MeanAlgorithm` called ``name`` (ParameterError listing them)."""
    found = {entry.name: entry for proto in protocols().values() for entry in
             (proto.simulations() if proto.simulations else ()) if isinstance(entry, MeanAlgorithm)}
    if name not in found:
        raise ParameterError(f"protocol must be one of {sorted(found)}, got {name!r}")
    return found[name]


def closed_form_mse(params: Any, values: np.ndarray) -> float:
    """``Var`` of the estimated mean, in the user's units, at the data (clipped)."""
    lo, hi = params.bounds
    t = np.clip((values - lo) / (hi - lo), 0.0, 1.0) * 2.0 - 1.0
    return float(np.mean(params.mechanism.variance(t, params.steps)) / values.size * ((hi - lo) / 2.0) ** 2)


def simulate_means(names: Sequence[str], data: Any, epsilons: Sequence[float], runs: int,
                   seed: int = 0) -> MeanSimulationResult:
    """Run each named mean protocol ``runs`` times at each epsilon on ``data`` (a
    :class:`ldpfast.datasets.numeric.NumericData`); seeded, so reproducible (simulation only)."""
    lo, hi = data.bounds
    truth = float(np.clip(data.values, lo, hi).mean())
    gen = KeySource(seed).generator()
    known = protocols()
    cells = []
    for name in names:
        alg = mean_algorithm(name)
        for eps in epsilons:
            params = alg.make_params(eps, data.bounds)
            proto = known[params.protocol]
            errors = []
            for _ in range(runs):
                client = proto.client(params, rng=int(gen.integers(2**63)))
                values = data.values[:, None] if alg.matrix else data.values
                server = proto.aggregator(params).update(client.perturb(values))
                estimate = server.mean()
                errors.append((float(np.ravel(estimate)[0]) - truth) ** 2)
            cells.append(MeanCell(name, float(eps), float(np.mean(errors)), closed_form_mse(params, data.values)))
    return MeanSimulationResult(data.name, int(data.values.size), (float(lo), float(hi)), truth, runs, seed, cells)



def plot_means(result: MeanSimulationResult, path: Optional[str] = None) -> Any:
    """PNG of the measured MSE of the mean against eps per protocol (markers) beside its
    closed form (dashed line); returns the Figure. Raises ParameterError without matplotlib."""
    from .plots import require_matplotlib

    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for index, name in enumerate(result.algorithms):
        cells = sorted((c for c in result.cells if c.protocol == name), key=lambda c: c.epsilon)
        eps = [c.epsilon for c in cells]
        ax.plot(eps, [c.mse for c in cells], marker="osv^D<>ph*"[index % 10], linestyle="", color=f"C{index}",
                label=f"{name} measured")
        ax.plot(eps, [c.closed_form for c in cells], "--", color=f"C{index}", alpha=0.7, label=f"{name} closed form")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(result.epsilons, [f"{e:g}" for e in result.epsilons])
    ax.minorticks_off()
    ax.set_xlabel("privacy parameter eps")
    ax.set_ylabel("MSE of the mean")
    ax.set_title(f"{result.data}: n = {result.n:,}, bounds {result.bounds}, {result.runs} runs", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110)
    return fig
