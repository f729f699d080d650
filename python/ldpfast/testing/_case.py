"""The example every check works on: a protocol's registered example perturbed once by a
seeded client, cut into batches, and the servers built from them."""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple, Type, TypeVar, cast

import numpy as np

from .._base import Aggregator, Params, Protocol, Reports
from ..audit import DEFAULT_REPORTS
from ..errors import PrivacyWarning

#: The seed of every simulated client and every random choice of the checks.
SEED = 20261121


class CheckSkipped(Exception):
    """Raised by a check that does not apply to the protocol (e.g. no wire encoding); the
    message says what the protocol lacks."""


#: Every check, in order: (group, name, function of the case).
CHECKS: List[Tuple[str, str, Callable[["Case"], None]]] = []
CheckFn = TypeVar("CheckFn", bound=Callable[["Case"], None])


def register(group: str) -> Callable[[CheckFn], CheckFn]:
    """Add the decorated function to :data:`CHECKS` under its name, in ``group``."""
    def add(fn: CheckFn) -> CheckFn:
        CHECKS.append((group, fn.__name__, fn))
        return fn
    return add


@dataclasses.dataclass(frozen=True)
class Options:
    """What the checks may be tuned with (:func:`ldpfast.testing.protocol_checks`)."""

    seed: int = SEED
    variance_runs: int = 100
    audit_epsilons: Tuple[float, ...] = (0.5, 1.0, 4.0)
    audit_reports: int = DEFAULT_REPORTS


class Case:
    """A protocol's example: ``params``, the client ``inputs``, the ``reports`` a seeded
    client made of them, ``make_server`` (default: the registered aggregator class), and
    helpers to cut and aggregate them."""

    def __init__(self, protocol: Protocol, example: Callable[[], Tuple[Params, Any]],
                 make_server: Optional[Callable[[Params], Aggregator]], options: Options):
        self.protocol = protocol
        self.options = options
        #: The registered aggregator class (``from_bytes`` of this protocol).
        self.aggregator: Type[Aggregator] = cast(Type[Aggregator], protocol.aggregator)
        self.params, self.inputs = example()
        with warnings.catch_warnings():  # clients that are not eps-LDP warn (PrivacyWarning): simulated on purpose
            warnings.simplefilter("ignore", PrivacyWarning)
            self.reports: Reports = protocol.client(self.params, rng=options.seed).perturb(self.inputs)
        self.make_server: Callable[[Params], Aggregator] = make_server or protocol.aggregator
        n = len(self.reports)
        cuts = [0, n // 5, n // 2, n]
        self.parts = [slice_reports(self.reports, cuts[i], cuts[i + 1]) for i in range(3)]

    @property
    def id(self) -> str:
        return str(self.protocol.id)

    def server(self, *batches: Reports, params: Optional[Params] = None) -> Aggregator:
        """A new server (of ``params``, default the example's) with ``batches`` added."""
        agg = self.make_server(self.params if params is None else params)
        for batch in batches:
            assert agg.update(batch) is agg, f"{type(agg).__name__}.update must return the aggregator"
        return agg

    def other_params(self) -> Optional[Params]:
        """The example's parameters at 1.5 times its epsilon (None without an epsilon)."""
        params: Any = self.params
        if "epsilon" not in {f.name for f in dataclasses.fields(params)}:
            return None
        return cast(Params, dataclasses.replace(params, epsilon=params.epsilon * 1.5))

    @property
    def domain(self) -> int:
        """The size ``d`` of the protocol's domain."""
        return int(getattr(self.params, "d"))  # noqa: B009

    def estimate(self, agg: Aggregator) -> np.ndarray:
        """``agg.estimate()``, or of the first 64 values when the estimate needs candidates."""
        method = agg.estimate
        first = next(iter(inspect.signature(method).parameters.values()), None)
        if first is not None and first.default is inspect.Parameter.empty:
            return np.asarray(method(np.arange(min(self.domain, 64))))
        return np.asarray(method())

    def client(self, seed: int) -> Any:
        """A client of the example's parameters seeded with ``seed``, PrivacyWarning silenced."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            return self.protocol.client(self.params, rng=seed)


def slice_reports(reports: Reports, start: int, stop: int) -> Reports:
    """Reports ``start:stop`` of a batch, as a batch built by hand (no fingerprint)."""
    return type(reports).from_columns({k: v[start:stop] for k, v in reports.columns().items()})


def tiled(reports: Reports, times: int) -> Reports:
    """``reports`` repeated ``times`` times (a larger batch of the same kind)."""
    return type(reports).from_columns({k: np.concatenate([v] * times) for k, v in reports.columns().items()})


def batches(reports: Reports, parts: int) -> List[Reports]:
    """``reports`` cut into ``parts`` consecutive batches."""
    n = len(reports)
    cuts = [n * i // parts for i in range(parts + 1)]
    return [slice_reports(reports, cuts[i], cuts[i + 1]) for i in range(parts)]


def state_arrays(agg: Aggregator) -> Dict[str, np.ndarray]:
    """The state arrays ``to_bytes`` writes."""
    return {name: np.asarray(value) for name, value in agg._state().items()}
