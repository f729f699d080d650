"""Conformance checks for protocols: :func:`check_protocol` runs on any registered protocol,
built in or shipped by another package, every check ldpfast's own protocols pass.

* **contract**: the shared ``update`` template; an empty server is the merge identity;
  ``merge`` is exact, associative and commutative and changes only its left side, and refuses
  other parameters and other protocols; byte, pickle and copy round trips; parameters through
  JSON; standard errors or a note saying why there are none; Arrow/Parquet and wire round trips.
* **extremes**: at the ends of every parameter range (``Protocol.extremes``) the client, the
  server, its bytes and its estimates work, and the estimates are finite.
* **bytes**: corrupted, truncated, resealed and structurally absurd bytes raise FormatError in
  bounded time and memory; impossible state values and the keyed MAC's refusals.
* **batches**: a batch is added whole or refused, the state unchanged, whatever its columns
  hold or were reassigned to; batches made with other parameters are refused (fingerprint).
* **concurrency**: threads updating, merging and reading lose nothing; Ctrl-C (SIGINT) during
  ``update`` leaves the old state or the whole batch.
* **statistics**: the registered closed-form variance matches the spread of simulated estimates.
* **privacy**: the empirical audit at a few epsilons stays below the claimed epsilon.

Each check runs on the protocol's registered example (``Protocol.example``: small parameters
and client inputs), perturbed by a seeded client, so a run is reproducible. A check that does
not apply (no wire encoding, no closed-form variance, pyarrow missing, not the main thread)
is skipped with the reason. The tolerances of the statistical checks are derived in their
docstrings; a correct protocol fails one with probability below 1e-5.

Use it in any test framework (this module does not import pytest)::

    from ldpfast.testing import check_protocol

    def test_my_protocol():
        check_protocol("my-protocol")    # raises ProtocolCheckError listing every failure

or one test per check, e.g. with pytest::

    @pytest.mark.parametrize("check", protocol_checks("my-protocol"), ids=str)
    def test_conformance(check):
        try:
            check()
        except CheckSkipped as exc:
            pytest.skip(str(exc))
"""

from __future__ import annotations

import dataclasses
import functools
import time
import traceback
import types
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .._base import Aggregator, Params, Protocol, protocol as _registered, protocols as _all_protocols
from ..errors import ParameterError
from . import _contract, _extremes, _fuzz, _concurrency, _statistics  # noqa: F401  (each registers its checks, in this order)
from ._case import CHECKS, SEED, Case, CheckSkipped, Options

__all__ = ["check_protocol", "protocol_checks", "Check", "CheckResult", "CheckSkipped", "ProtocolCheckError",
           "CHECK_NAMES", "CHECK_GROUPS", "GROUPS", "SEED"]

#: Each check's group, by check name, in the order the checks run.
CHECK_GROUPS: Dict[str, str] = {name: group for group, name, _ in CHECKS}
#: The checks' names, in the order they run.
CHECK_NAMES: Tuple[str, ...] = tuple(CHECK_GROUPS)
#: The groups of checks (``include``/``exclude`` take these or check names).
GROUPS: Tuple[str, ...] = tuple(dict.fromkeys(CHECK_GROUPS.values()))


class _LazyCase:
    """Builds the example case on first use, once for all the checks of a protocol."""

    def __init__(self, build: Callable[[], Case]):
        self._build = build
        self._case: Optional[Case] = None

    def get(self) -> Case:
        if self._case is None:
            self._case = self._build()
        return self._case


@dataclasses.dataclass(frozen=True)
class Check:
    """One check of one protocol; calling it runs it (AssertionError on failure,
    :class:`CheckSkipped` when it does not apply). ``str(check)`` is ``"protocol::name"``."""

    protocol: str
    name: str
    group: str
    doc: str
    _run: Callable[[Case], None] = dataclasses.field(repr=False)
    _case: _LazyCase = dataclasses.field(repr=False)

    def __call__(self) -> None:
        self._run(self._case.get())

    def __str__(self) -> str:
        return f"{self.protocol}::{self.name}"


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """``outcome`` is ``"passed"``, ``"skipped"`` or ``"failed"``; ``detail`` the reason of a
    skip or the error of a failure."""

    protocol: str
    name: str
    outcome: str
    detail: str
    seconds: float


class ProtocolCheckError(AssertionError):
    """Raised by :func:`check_protocol` when checks fail; ``results`` holds every result."""

    def __init__(self, results: Sequence[CheckResult]):
        self.results = list(results)
        failed = [r for r in self.results if r.outcome == "failed"]
        super().__init__(f"{len(failed)} of {len(self.results)} protocol checks failed:\n"
                         + "\n".join(f"- {r.protocol}::{r.name}: {r.detail}" for r in failed))


def _protocols_of(subject: Union[str, Protocol, types.ModuleType]) -> List[Protocol]:
    if isinstance(subject, Protocol):
        return [subject]
    if isinstance(subject, str):
        return [_registered(subject)]
    if isinstance(subject, types.ModuleType):
        found = [proto for _, proto in sorted(_all_protocols().items()) if proto.module == subject.__name__]
        if not found:
            raise ParameterError(f"module {subject.__name__!r} registers no protocol (register_protocol)")
        return found
    raise ParameterError(f"protocol must be a protocol id, a Protocol or a module, got {subject!r}")


def _selected(group: str, name: str, include: Optional[Iterable[str]], exclude: Iterable[str]) -> bool:
    chosen = include is None or group in include or name in include
    return chosen and group not in exclude and name not in exclude


def protocol_checks(protocol: Union[str, Protocol, types.ModuleType], *,
                    example: Optional[Callable[[], Tuple[Params, Any]]] = None,
                    make_server: Optional[Callable[[Params], Aggregator]] = None,
                    include: Optional[Iterable[str]] = None, exclude: Iterable[str] = (), seed: int = SEED,
                    variance_runs: int = 100, audit_epsilons: Sequence[float] = (0.5, 1.0, 4.0),
                    audit_reports: Optional[int] = None) -> List[Check]:
    """The checks of ``protocol`` (a protocol id, a :class:`ldpfast._base.Protocol`, or a
    module: every protocol it registers), not yet run.

    Args:
        example: ``() -> (params, inputs)`` instead of the registered ``Protocol.example``.
        make_server: ``params -> empty server`` (e.g. a server option), instead of the
            registered aggregator class.
        include, exclude: groups (:data:`GROUPS`) or check names (:data:`CHECK_NAMES`) to run
            (default all) and to leave out.
        seed: of the simulated clients and the checks' random choices.
        variance_runs: simulated runs of the statistics check (at least 30).
        audit_epsilons, audit_reports: the privacy audit's epsilons and reports per input
            (default :data:`ldpfast.audit.DEFAULT_REPORTS`).

    Raises:
        ParameterError: an unknown protocol, a module that registers none, or a protocol
            without an example (``Protocol.example``) when ``example`` is not given.
    """
    include = None if include is None else set(include)
    exclude = set(exclude)
    unknown = sorted((set(include or ()) | exclude) - set(GROUPS) - set(CHECK_NAMES))
    if unknown:
        raise ParameterError(f"include/exclude must name groups {list(GROUPS)} or checks, got {unknown}")
    options = Options(seed=seed, variance_runs=variance_runs, audit_epsilons=tuple(audit_epsilons),
                      **({} if audit_reports is None else {"audit_reports": audit_reports}))
    checks: List[Check] = []
    for proto in _protocols_of(protocol):
        make = example or proto.example
        if make is None:
            raise ParameterError(f"protocol {proto.id!r} registers no example (Protocol.example): pass example=")
        case = _LazyCase(functools.partial(Case, proto, make, make_server, options))
        checks += [Check(proto.id, name, group, (fn.__doc__ or "").split("\n\n")[0].strip(), fn, case)
                   for group, name, fn in CHECKS if _selected(group, name, include, exclude)]
    return checks


def check_protocol(protocol: Union[str, Protocol, types.ModuleType], **options: Any) -> List[CheckResult]:
    """Run every check of ``protocol`` (see :func:`protocol_checks` for ``protocol`` and the
    options) and return the results; raise :class:`ProtocolCheckError`, listing every
    failure, if any check fails.

    Example::

        results = check_protocol("grr", exclude=["privacy"])
        print([r.name for r in results if r.outcome == "skipped"])
    """
    results = []
    for check in protocol_checks(protocol, **options):
        start = time.perf_counter()
        try:
            check()
        except CheckSkipped as exc:
            outcome, detail = "skipped", str(exc)
        except Exception as exc:  # a failed assertion, or any error the protocol raised
            outcome, detail = "failed", "".join(traceback.format_exception_only(type(exc), exc)).strip()
        else:
            outcome, detail = "passed", ""
        results.append(CheckResult(check.protocol, check.name, outcome, detail, time.perf_counter() - start))
    if any(r.outcome == "failed" for r in results):
        raise ProtocolCheckError(results)
    return results
