"""Figures of simulation results (matplotlib is the optional extra ``ldpfast[plot]``,
imported only when a figure is drawn)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Union

import numpy as np

from ..errors import ParameterError
from .results import HeavySimulationResult, SetSimulationResult, SimulationResult

if TYPE_CHECKING:   # an annotation only: records imports the runner, which imports the tables
    from .records import RecordSimulationResult

__all__ = ["require_matplotlib", "plot_results", "plot_kind_results"]

_NEEDS_MATPLOTLIB = "plotting needs matplotlib: install it with pip install 'ldpfast[plot]' (or pass --no-plot)"


def require_matplotlib() -> Any:
    """Import pyplot with the Agg backend; ParameterError naming the extra if missing."""
    try:
        import matplotlib
    except ImportError:
        raise ParameterError(_NEEDS_MATPLOTLIB) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _panels(count: int) -> Any:
    """A figure with ``count`` panels in a row, built without pyplot; ParameterError without matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ParameterError(_NEEDS_MATPLOTLIB) from None
    fig = Figure(figsize=(5.2 * count, 4.2))
    return fig, fig.subplots(1, count, squeeze=False)


def _finish(fig: Any, title: str, path: Optional[str]) -> Any:
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def plot_results(result: SimulationResult, path: Optional[str] = None,
                 metrics: Sequence[str] = ("mse", "l1", "l2"),
                 metric_algorithms: Optional[Mapping[str, Sequence[str]]] = None) -> Any:
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
    fig, axes = _panels(len(metrics))
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
    return _finish(fig, f"{result.dataset}: n={result.n}, d={result.d}, |X|={result.n_candidates}, "
                        f"{result.runs} runs", path)



def plot_kind_results(result: Union[SetSimulationResult, HeavySimulationResult, RecordSimulationResult],
                      path: Optional[str] = None) -> Any:
    """PNG with one panel per metric of a set-valued, heavy-hitter or record result (closed forms
    dashed); returns the Figure. Raises ParameterError without matplotlib."""
    metrics = list(result.METRICS.items())
    fig, axes = _panels(len(metrics))
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
    return _finish(fig, f"{result.dataset}: n={result.n}, d={result.d}, {result.runs} runs", path)

