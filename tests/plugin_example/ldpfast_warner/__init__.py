"""Warner's randomized response (Warner 1965), an ldpfast protocol shipped by another package.

A user holding a bit ``x`` reports it with probability ``p = e^eps / (1 + e^eps)`` and flips
it otherwise, so ``p / (1 - p) = e^eps``: eps-LDP. With ``C`` reports of 1 among ``n`` and
``lam = (1 - p) + f (2p - 1)`` the probability of reporting 1 when a share ``f`` of users hold
1, ``fhat(1) = (C/n - (1 - p)) / (2p - 1)`` is unbiased with
``Var = lam (1 - lam) / (n (2p - 1)^2)``, and ``fhat(0) = 1 - fhat(1)`` has the same variance
(its ``lam`` is ``1 - lam``).

The package's ``pyproject.toml`` declares the entry point ``warner-rr = "ldpfast_warner"`` in
the group ``ldpfast.protocols``: importing this module registers the protocol.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Dict, Mapping, Optional, Tuple

import numpy as np

from ldpfast._base import Aggregator, AuditHooks, ClientBase, Params, Protocol, Reports, register_protocol
from ldpfast.errors import FormatError, ParameterError, ReportError

PROTOCOL_ID = "warner-rr"


@dataclasses.dataclass(frozen=True)
class WarnerParams(Params):
    """Randomized response on one bit at privacy level ``epsilon``; the domain is ``{0, 1}``."""

    protocol: ClassVar[str] = PROTOCOL_ID
    epsilon: float

    def __post_init__(self) -> None:
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, (int, float)) \
                or not 2.0**-20 <= self.epsilon <= 20.0:  # 2p - 1 > 0 in doubles: finite estimates
            raise ParameterError(f"epsilon must be a number in [2^-20, 20], got {self.epsilon!r}")

    @property
    def d(self) -> int:
        return 2

    @property
    def p(self) -> float:
        """Probability of reporting the true bit."""
        return 1.0 / (1.0 + math.exp(-self.epsilon))

    def variance(self, n: int, f: Any) -> Any:
        lam = (1.0 - self.p) + np.asarray(f) * (2.0 * self.p - 1.0)
        return lam * (1.0 - lam) / (n * (2.0 * self.p - 1.0) ** 2)


@dataclasses.dataclass
class WarnerReports(Reports):
    """One reported bit ``y`` per user."""

    protocol: ClassVar[str] = PROTOCOL_ID
    column_types: ClassVar[Mapping[str, Tuple[str, int]]] = {"y": ("uint8", 1)}
    y: np.ndarray

    def __post_init__(self) -> None:
        y = np.asarray(self.y)
        if y.ndim != 1 or y.dtype.kind not in "iub":
            raise ReportError(f"y must be a 1-D array of bits, got {y.dtype} of shape {y.shape}")
        self.y = y.astype(np.uint8)
        self._check_columns()


class WarnerClient(ClientBase):
    """``WarnerClient(params, rng=None)``; ``rng=None`` draws from the operating system."""

    def perturb(self, values: Any) -> WarnerReports:
        x = np.asarray(values)
        if x.ndim != 1 or x.dtype.kind not in "iub" or (x.size and not set(np.unique(x).tolist()) <= {0, 1}):
            raise ParameterError(f"values must be a 1-D array of bits (0 or 1), got {x!r:.80}")
        flip = self._keys.generator().random(x.size) >= self.params.p
        return WarnerReports(y=(x.astype(np.uint8) ^ flip.astype(np.uint8)))


class WarnerServer(Aggregator):
    """The number of reported zeros and ones; ``estimate`` debiases them."""

    protocol: ClassVar[str] = PROTOCOL_ID
    params_type: ClassVar[type] = WarnerParams
    params: WarnerParams

    def __init__(self, params: WarnerParams):
        super().__init__(params)
        self._set_state({"counts": np.zeros(2, dtype=np.int64)})

    @classmethod
    def _state_layout(cls, params: Params) -> Optional[Dict[str, Tuple[Tuple[int, ...], str]]]:
        return {"counts": ((2,), "int64")}

    def _validate(self, reports: WarnerReports) -> None:
        if len(reports) and int(reports.y.max()) > 1:
            raise ReportError(f"y must be 0 or 1, got {int(reports.y.max())}")

    def _ingest(self, reports: WarnerReports) -> Dict[str, np.ndarray]:
        return {"counts": self._st["counts"] + np.bincount(reports.y, minlength=2)}

    def _check_state(self, state: Dict[str, np.ndarray]) -> None:
        super()._check_state(state)
        if np.any(state["counts"] < 0):
            raise FormatError("stored counts must be non-negative")

    @property
    def n(self) -> int:
        return int(self._st["counts"].sum())

    def estimate(self, candidates: Any = None, counts: bool = False) -> np.ndarray:
        """Unbiased estimates of the shares of 0 and 1 (``candidates``: a subset of them)."""
        if self.n == 0:
            raise ReportError("no reports aggregated yet")
        p = self.params.p
        one = (self._st["counts"][1] / self.n - (1.0 - p)) / (2.0 * p - 1.0)
        fhat = np.array([1.0 - one, one])
        fhat = fhat if candidates is None else fhat[np.asarray(candidates, dtype=np.intp)]
        return fhat * self.n if counts else fhat


def _example() -> Tuple[WarnerParams, np.ndarray]:
    return WarnerParams(epsilon=1.0), (np.random.default_rng(7).random(3000) < 0.3).astype(np.uint8)


def _variance(server: WarnerServer, candidates: Any) -> Tuple[Any, str]:
    return (lambda f: server.params.variance(server.n, f)), "lam (1 - lam) / (n (2p - 1)^2), WarnerParams.variance"


def _audit_plan(params: WarnerParams) -> Any:
    from ldpfast.audit import Plan, value_inputs

    return Plan(value_inputs(0, 1), lambda reports: (reports.y == 0, reports.y == 1), ("y = x0", "y = x1"))


register_protocol(Protocol(
    PROTOCOL_ID, WarnerParams, WarnerReports, WarnerServer, WarnerClient,
    example=_example, wire_fields=lambda params: [("y", 1)], variance=_variance,
    extremes=lambda params: [WarnerParams(epsilon=2.0**-20), WarnerParams(epsilon=20.0)],
    # numpy's float draw: p / (1 - p) = e^eps up to double rounding
    audit=AuditHooks(params=lambda eps, **changes: WarnerParams(epsilon=eps, **changes), plan=_audit_plan,
                     effective_epsilon=lambda params: float(params.epsilon)),
))
