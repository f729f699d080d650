"""Repeated collection: users whose values change over ``T`` rounds, each round collected
with a memoized (longitudinal) protocol, and what each user has spent.

Data (:class:`RoundsData`, values ``[T, n]`` in ``[0, d)``):

* :func:`churn_rounds`: round 0 from a Zipf-like distribution on ``[0, d)``; then each
  round every user keeps its value with probability ``1 - churn`` and otherwise redraws it
  from the same distribution (``churn = 0``: constant values, ``1``: independent rounds);
* :func:`click_rounds`: a real click-stream split by time: the bundled Kosarak prefix
  (one user's clicks per line, in click order), round ``t`` being the user's ``t``-th click
  (its last click once the stream ends), the ``d - 1`` most clicked pages kept and the others
  pooled into value ``d - 1``.

:func:`simulate_rounds` runs each protocol registered with a ``rounds`` hook (the memoized
ones: RAPPOR, L-GRR, L-OUE, L-OSUE, L-SUE, L-OLH, dBitFlip) over the rounds: every user keeps
one secret (seeded: simulation only) so its permanent responses persist, one server per
round estimates that round's frequencies, and the result holds per-round errors next to
the closed-form variance, and each user's cumulative privacy loss after each round:

* memoized: ``min(t eps_1, u_t eps_inf)``, with ``u_t`` the distinct values the user has
  reported in the first ``t`` rounds: every report spends at most ``eps_1`` (composition),
  and all reports of one value together at most that value's permanent response,
  ``eps_inf`` (for dBitFlip, whose responses depend on fewer states than values, an upper
  bound);
* re-randomized every round (fresh secrets, or any one-shot protocol at ``eps_1``):
  ``t eps_1``.

A round's reports are distributed alike in both settings (users draw their secrets
independently), so the per-round errors are the same: memoization changes what a user
spends over time, not the accuracy of a round.
"""

from __future__ import annotations

import dataclasses
import gzip
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from .._base import protocols
from .._random import KeySource, RngLike, new_secrets
from .._validate import check_int
from ..errors import ParameterError
from ..uncertainty import PlugIn

__all__ = ["RoundsData", "churn_rounds", "click_rounds", "RoundsResult", "simulate_rounds", "rounds_protocols",
           "plot_rounds"]

#: Quantiles of the users' cumulative loss reported per round.
QUANTILES = (0.5, 0.9, 1.0)


@dataclasses.dataclass(frozen=True)
class RoundsData:
    """Values of ``n`` users over ``T`` rounds (``values[t, i]`` in ``[0, d)``)."""

    values: np.ndarray
    d: int
    name: str

    @property
    def rounds(self) -> int:
        return int(self.values.shape[0])

    @property
    def n(self) -> int:
        return int(self.values.shape[1])

    def frequencies(self, t: int) -> np.ndarray:
        """True frequencies of round ``t`` over ``[0, d)``."""
        return np.bincount(self.values[t], minlength=self.d) / self.n

    def distinct_counts(self) -> np.ndarray:
        """``u[t, i]``: distinct values user ``i`` holds in rounds ``0..t``."""
        T, n = self.values.shape
        out = np.zeros((T, n), dtype=np.int64)
        seen = np.zeros((n, self.d), dtype=bool)
        count = np.zeros(n, dtype=np.int64)
        users = np.arange(n)
        for t in range(T):
            new = ~seen[users, self.values[t]]
            count += new
            seen[users, self.values[t]] = True
            out[t] = count
        return out


def _zipf_weights(d: int, exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, d + 1) ** exponent
    return np.asarray(weights / weights.sum(), dtype=np.float64)


def churn_rounds(n: int, d: int, rounds: int, churn: float, exponent: float = 1.1, rng: RngLike = 0) -> RoundsData:
    """Zipf(``exponent``) values on ``[0, d)`` that each user redraws with probability
    ``churn`` every round (see the module docstring). Seeded: simulation only."""
    n, d, rounds = check_int("n", n, 1), check_int("d", d, 2, 2**20), check_int("rounds", rounds, 1, 10_000)
    if not 0.0 <= churn <= 1.0:
        raise ParameterError(f"churn must be a probability in [0, 1], got {churn!r}")
    gen = KeySource(rng).generator()
    weights = _zipf_weights(d, exponent)
    values = np.empty((rounds, n), dtype=np.int64)
    values[0] = gen.choice(d, size=n, p=weights)
    for t in range(1, rounds):
        change = gen.random(n) < churn
        values[t] = np.where(change, gen.choice(d, size=n, p=weights), values[t - 1])
    return RoundsData(values, d, f"Zipf({exponent}) on [0, {d}), churn {churn:g} per round")


def click_rounds(rounds: int, d: int = 64, n: Optional[int] = None) -> RoundsData:
    """The bundled Kosarak click-streams split by time (module docstring): round ``t`` is a
    user's ``t``-th click, its last one after the stream ends; ``n``: the first ``n`` users."""
    from ..datasets import bundled_path

    rounds, d = check_int("rounds", rounds, 1, 10_000), check_int("d", d, 2, 2**16)
    with gzip.open(bundled_path("kosarak-prefix"), "rt") as fh:
        streams = [[int(v) for v in line.split()] for line in fh if line.strip()]
    if n is not None:
        streams = streams[:check_int("n", n, 1)]
    items, counts = np.unique(np.concatenate([np.asarray(s, dtype=np.int64) for s in streams]), return_counts=True)
    top = items[np.argsort(-counts, kind="stable")[:d - 1]]
    code = {int(item): i for i, item in enumerate(top)}
    values = np.full((rounds, len(streams)), d - 1, dtype=np.int64)
    for i, stream in enumerate(streams):
        for t in range(rounds):
            values[t, i] = code.get(stream[min(t, len(stream) - 1)], d - 1)
    return RoundsData(values, d, f"Kosarak clicks (bundled prefix, {len(streams):,} users) split by time, "
                                 f"top {d - 1} pages + other")


def rounds_protocols() -> List[str]:
    """The protocols with a ``rounds`` hook (memoized ones)."""
    return sorted(pid for pid, proto in protocols().items() if proto.rounds is not None)


@dataclasses.dataclass
class RoundsResult:
    """Per protocol and round: ``mse`` (mean over ``[0, d)`` of the squared error of the
    round's estimates), ``theory_mse`` (the registered closed-form variance at the round's
    true frequencies, averaged; NaN without one), and the users' cumulative loss
    ``loss[q]`` at the :data:`QUANTILES` (memoized) next to ``rerandomized`` (``t eps_1``);
    ``budgets``: each protocol's ``[eps_1, eps_inf]`` as configured (dBitFlip has no
    instantaneous noise: both are its epsilon)."""

    data: str
    n: int
    d: int
    rounds: int
    eps_1: float
    eps_inf: float
    seed: int
    mse: Dict[str, List[float]]
    theory_mse: Dict[str, List[float]]
    loss: Dict[str, Dict[str, List[float]]]
    rerandomized: Dict[str, List[float]]
    params: Dict[str, str]
    budgets: Dict[str, List[float]] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    def table(self, markdown: bool = False) -> str:
        """The last round's numbers per protocol."""
        head = ["protocol", "eps_1", "eps_inf", "MSE (last round)", "closed form", "loss median", "loss max",
                f"re-randomized ({self.rounds} rounds)"]
        rows = []
        for pid in self.mse:
            spent_1, spent_inf = self.budgets.get(pid, [self.eps_1, self.eps_inf])
            rows.append([pid, f"{spent_1:.4g}", f"{spent_inf:.4g}", f"{self.mse[pid][-1]:.3g}",
                         f"{self.theory_mse[pid][-1]:.3g}", f"{self.loss[pid]['0.5'][-1]:.3g}",
                         f"{self.loss[pid]['1.0'][-1]:.3g}", f"{self.rerandomized[pid][-1]:.3g}"])
        if markdown:
            lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
        widths = [max(len(h), *(len(r[j]) for r in rows)) for j, h in enumerate(head)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        return "\n".join([fmt.format(*head)] + [fmt.format(*r) for r in rows])


def simulate_rounds(names: Sequence[str], data: RoundsData, eps_1: float, eps_inf: Optional[float] = None,
                    seed: int = 0) -> RoundsResult:
    """Run the protocols ``names`` (see :func:`rounds_protocols`) over the rounds of
    ``data`` with one secret per user (module docstring). ``eps_inf`` defaults to
    ``2 eps_1``. Seeded: simulation only."""
    from .. import estimates

    eps_inf = 2.0 * eps_1 if eps_inf is None else eps_inf
    known = protocols()
    for name in names:
        if name not in known or known[name].rounds is None:
            raise ParameterError(f"protocol must be one of {rounds_protocols()} (memoized), got {name!r}")
    distinct = data.distinct_counts()
    t = np.arange(1, data.rounds + 1)[:, None]
    result = RoundsResult(data.name, data.n, data.d, data.rounds, float(eps_1), float(eps_inf), int(seed),
                          {}, {}, {}, {}, {})
    for k, name in enumerate(names):
        proto = known[name]
        hook = proto.rounds
        assert hook is not None
        params = hook(float(eps_inf), float(eps_1), data.d)
        result.params[name] = params.to_json()
        budgets: Any = params   # every Params with a rounds hook has epsilon (eps_1) and eps_inf
        spent_1, spent_inf = float(budgets.epsilon), float(budgets.eps_inf)
        secrets = new_secrets(data.n, rng=np.random.SeedSequence([seed, k]))
        client = proto.client(params, rng=np.random.SeedSequence([seed, k, 1]))
        mse, theory = [], []
        for r in range(data.rounds):
            server = proto.aggregator(params).update(client.perturb(data.values[r], secrets))
            f = data.frequencies(r)
            mse.append(float(np.mean((server.estimate() - f) ** 2)))
            model, _ = estimates._uncertainty_for(server, np.arange(data.d))
            theory.append(float(np.mean(model.variance(f))) if isinstance(model, PlugIn) else float("nan"))
        loss = np.minimum(t * spent_1, distinct * spent_inf)
        result.mse[name], result.theory_mse[name] = mse, theory
        result.loss[name] = {str(q): np.quantile(loss, q, axis=1).tolist() for q in QUANTILES}
        result.rerandomized[name] = (t[:, 0] * spent_1).tolist()
        result.budgets[name] = [spent_1, spent_inf]
    return result


def plot_rounds(result: RoundsResult, path: Optional[str] = None) -> Any:
    """Two panels: per-round MSE (measured, markers; closed form, dashed) and the users'
    cumulative loss (maximum solid, median dotted; one curve per distinct pair of budgets,
    which is all the loss depends on) against re-randomizing every round."""
    from .plots import _finish, _panels

    fig, axes = _panels(2)
    ax_err, ax_loss = axes[0]
    rounds = np.arange(1, result.rounds + 1)
    by_budgets: Dict[Any, List[str]] = {}
    for j, pid in enumerate(result.mse):
        colour = f"C{j}"
        ax_err.plot(rounds, result.mse[pid], "o", ms=3, color=colour, label=pid)
        ax_err.plot(rounds, result.theory_mse[pid], "--", color=colour, lw=1)
        spent_1, spent_inf = result.budgets.get(pid, [result.eps_1, result.eps_inf])
        by_budgets.setdefault((round(spent_1, 3), round(spent_inf, 3)), []).append(pid)
    for (spent_1, spent_inf), pids in by_budgets.items():
        colour = f"C{list(result.mse).index(pids[0])}"
        label = f"memoized, eps_1={spent_1:g}, eps_inf={spent_inf:g} ({', '.join(pids)})"
        ax_loss.plot(rounds, result.loss[pids[0]]["1.0"], "-", color=colour, label=f"{label}: max")
        ax_loss.plot(rounds, result.loss[pids[0]]["0.5"], ":", color=colour, label="median")
    first = next(iter(result.rerandomized.values()), None)
    if first is not None:
        ax_loss.plot(rounds, first, "k-", lw=2, label=f"re-randomized every round at eps_1={result.eps_1:g}")
    ax_err.set(xlabel="round", ylabel="MSE per value (closed form dashed)", yscale="log")
    ax_loss.set(xlabel="round", ylabel="cumulative privacy loss per user (epsilon)")
    ax_err.legend(fontsize=7)
    ax_loss.legend(fontsize=6)
    title = f"{result.data}: n={result.n:,}, d={result.d}, eps_1={result.eps_1:g}, eps_inf={result.eps_inf:g}"
    return _finish(fig, title, path)
