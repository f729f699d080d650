"""The protocol registry: one :class:`Protocol` registration per protocol.

A protocol module (``ldpfast/protocols/<name>.py``) defines its Params, Reports, Client and
Server classes and calls :func:`register_protocol` once per protocol it implements. Every
generic layer reads the registration, never a table keyed by protocol id: the byte
container and :func:`params_from_json` (the classes), :mod:`ldpfast.wire` (``wire_fields``),
Arrow, Parquet and Dask (the Reports class), :mod:`ldpfast.estimates` (``variance``,
``default_candidates``), :mod:`ldpfast.audit` (``audit``), :mod:`ldpfast.experiments` and
``ldpfast simulate`` (``simulations``), ``ldpfast params`` (``compare``),
:mod:`ldpfast.estimation` (``channel``: IBU and maximum-likelihood estimates), and the contract
and golden-file tests (``example``, ``inputs``, ``extremes``).

Where protocols come from (:func:`protocols` loads them all): the modules of
:mod:`ldpfast.protocols`, and the entry points of the group ``ldpfast.protocols``, through
which another package ships a protocol (``[project.entry-points."ldpfast.protocols"]``,
``name = "package.module"``: loading the module registers its protocols). The registry
names them and imports nothing above itself; the aggregator and client base classes, which
sit above it, declare themselves here (:func:`_declare_base`) for the registration checks.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import warnings
from importlib import metadata
from typing import TYPE_CHECKING, Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Type, Union

from ._params import Params, _parse_params_json, _with_stored_domain
from ._reports import Reports
from .errors import FormatError, ParameterError

if TYPE_CHECKING:
    from .uncertainty import Uncertainty

__all__ = ["Protocol", "AuditHooks", "ComparisonRow", "WireField", "bits_for", "register_protocol", "protocols",
           "protocol", "aliases", "params_from_json", "INPUT_KINDS"]

#: What a protocol's client perturbs: one integer value per user, one set of distinct
#: integers per user (a list of lists, or ``(offsets, items)`` arrays), one real number per
#: user (``float64[n]``, or ``float64[n, k]`` for k numeric attributes), one record of
#: several attributes per user (``int64[n, k]``, attribute ``j`` in ``[0, domains[j])``), or
#: one set of (key, value) pairs per user (``(offsets, keys, values)`` arrays: distinct keys
#: of ``[0, d)``, values in ``[-1, 1]``).
INPUT_KINDS = ("values", "sets", "numbers", "records", "pairs")

#: ``f -> Var(fhat)`` per candidate, for true frequencies ``f`` (broadcasting).
VarianceFn = Callable[[Any], Any]


class WireField(NamedTuple):
    """One field of a report in the compact wire encoding (:mod:`ldpfast.wire`; the
    ``wire_fields`` hook returns them): ``column`` sent in ``bits`` bits. With a ``codebook`` the
    value must be one of its entries and the index is sent. ``dtype`` is the column's
    numpy dtype after decoding (default: the codebook's, else uint64). ``shape``: the
    per-report shape of a multi-dimensional column (e.g. ``(K, M)`` for a sketch); every
    entry is sent in ``bits`` bits, in C order."""

    column: str
    bits: int
    codebook: Optional[Tuple[int, ...]] = None
    dtype: Optional[str] = None
    shape: Tuple[int, ...] = ()


def bits_for(size: int) -> int:
    """``ceil(log2 size)``: the bits needed for a value in ``[0, size)`` (0 when size is 1)."""
    size = int(size)
    if size < 1:
        raise ParameterError(f"size must be >= 1, got {size}")
    return (size - 1).bit_length()


@dataclasses.dataclass(frozen=True)
class AuditHooks:
    """What :mod:`ldpfast.audit` needs to audit a protocol's client.

    Attributes:
        params: ``(epsilon, **changes) -> Params``: a small configuration to audit (small
            domains keep the distinguishing events frequent; privacy does not depend on size).
        plan: ``params -> ldpfast.audit.Plan``: two neighbouring inputs and the two events,
            each "the report supports x0 and not x1" (and the reverse), fixed before sampling.
        effective_epsilon: ``params -> float``: the epsilon implied by the integer flip
            thresholds the client's samplers use (e.g. :func:`ldpfast._validate.rr_effective_epsilon`).
        permanent_epsilon: memoized (longitudinal) protocols only: ``params -> float``, the
            effective ``eps_inf`` of the permanent response, which ``audit(...,
            budget="permanent")`` audits with the same plan on ``client.permanent(...)``
            (``params.eps_inf`` is the claim).
    """

    params: Callable[..., Params]
    plan: Callable[[Any], Any]
    effective_epsilon: Callable[[Any], float]
    permanent_epsilon: Optional[Callable[[Any], float]] = None


#: ``(n, q) -> float``: a server's work or memory for ``n`` reports and ``q`` candidates.
CostFn = Callable[[int, int], float]


@dataclasses.dataclass(frozen=True)
class ComparisonRow:
    """One row of ``ldpfast params`` and :func:`ldpfast.recommend` (a protocol configured
    for a deployment): ``name``, ``m`` (hash range or RR symbols), ``bits`` per report,
    ``variance(f)`` (closed-form ``Var(fhat)`` at true frequency ``f``, affine in ``f``),
    ``l2`` (worst case over distributions on the whole dictionary) and a ``note``.

    The server's cost, where the protocol states it: ``server_ops(n, q)``, the elementary
    steps to aggregate ``n`` reports and estimate ``q`` candidates (one step: a counter
    update, a hashed (report, candidate) pair, a butterfly of a transform), and
    ``state_bytes(n, q)``, the memory the server holds.

    ``build()``: the configuration's parameters, the protocol's Params (it raises
    ParameterError where the class cannot express the configuration)."""

    name: str
    m: int
    bits: int
    variance: VarianceFn
    l2: float
    note: str = ""
    server_ops: Optional[CostFn] = None
    state_bytes: Optional[CostFn] = None
    build: Optional[Callable[[], Params]] = None


@dataclasses.dataclass(frozen=True)
class Protocol:
    """The single registration of one protocol: its classes and every hook the generic
    layers use. Only the five classes are required; a hook left out means the protocol
    lacks that feature, and the layer that needs it says so by name.

    Attributes:
        id: the protocol id (``Params.protocol``, stored in bytes, Arrow metadata, JSON).
        params, reports, aggregator, client: the classes (the client derives from
            :class:`ldpfast._base.ClientBase`; the aggregator from :class:`~ldpfast._base.Aggregator`).
        example: ``() -> (params, inputs)``: small parameters and client inputs (what
            ``client(params, rng=seed).perturb`` accepts), a few thousand reports. Required
            for protocols shipped with ldpfast: the contract tests run every check on it,
            and ``tests/golden/make_golden.py`` writes the protocol's golden file from it.
        inputs: ``"values"`` (one integer per user) or ``"sets"`` (a set of items per user).
        wire_fields: ``params -> [(column, bits[, codebook[, dtype[, shape]]])]``: one
            report's fields in the compact wire encoding (:mod:`ldpfast.wire`). A
            ``Reports.wire_fields`` classmethod, when the class defines one, is used instead.
        variance: ``(server, candidates) -> model``: how :mod:`ldpfast.estimates` gets the
            standard errors, intervals and tests of the default estimator, and the quantity
            they are about: an :class:`ldpfast.uncertainty.Uncertainty` (e.g. a
            :class:`~ldpfast.uncertainty.PlugIn` closed form with its ``target``), or
            ``(f -> Var(fhat) or None, note)`` for an unbiased estimator of the true
            frequency (``note`` names the formula, or says why there is none).
        default_candidates: ``server -> labels or None``: what ``server.estimate()``
            answers for when that is not the whole domain ``[0, d)`` (e.g. the tracked
            candidates; None: the whole domain).
        simulations: ``() -> entries``: the protocol's entries of :mod:`ldpfast.experiments`
            (``Algorithm``, ``SetAlgorithm`` or ``HeavyAlgorithm``), whose names are the
            ``ldpfast simulate --protocol`` names; built on first use.
        audit: the :class:`AuditHooks` of ``ldpfast audit``, or None (not auditable).
        compare: ``(epsilon, d, n, f_star, modes, field) -> [ComparisonRow]``: the
            protocol configured for a dictionary of size ``d`` and ``n`` users, with its
            closed-form errors, for ``ldpfast params`` (``modes`` and ``field`` are the
            command's OCMS options); an empty list where it does not apply to ``d``.
        channel: ``(server, candidates or None, **options) -> ldpfast.estimation.Channel``: the
            report channel of the aggregated state over ``candidates`` (None: the whole
            domain), for the IBU and maximum-likelihood estimates
            (``server.frequencies(method="ibu" | "mle")``); it raises ParameterError for
            candidates or a state it cannot serve.
        extremes: ``params -> [params]``: the (example's) parameters moved to the ends of the
            ranges its Params accept (smallest and largest epsilon and domain, and any other
            parameter whose end needs its own case; a domain whose server state grows with it
            at a size a test affords). Required for protocols shipped with ldpfast:
            ``check_protocol`` perturbs, aggregates and estimates at each and needs finite
            estimates (``protocols._registration.edges`` makes the hook).
        rounds: memoized (longitudinal) protocols: ``(eps_inf, eps_1, d) -> Params``, the
            protocol configured for repeated collection on ``[0, d)`` with a permanent
            response spending ``eps_inf`` and reports spending ``eps_1``
            (:mod:`ldpfast.experiments.rounds`, ``ldpfast simulate --rounds``).
    """

    id: str
    params: type
    reports: Type[Reports]
    aggregator: type
    client: type
    example: Optional[Callable[[], Tuple[Params, Any]]] = None
    inputs: str = "values"
    wire_fields: Optional[Callable[[Any], Sequence[Tuple[Any, ...]]]] = None
    variance: Optional[Callable[[Any, Any], Union["Uncertainty", Tuple[Optional[VarianceFn], str]]]] = None
    default_candidates: Optional[Callable[[Any], Any]] = None
    simulations: Optional[Callable[[], Sequence[Any]]] = None
    audit: Optional[AuditHooks] = None
    compare: Optional[Callable[..., Sequence[ComparisonRow]]] = None
    channel: Optional[Callable[[Any, Any], Any]] = None
    rounds: Optional[Callable[[float, float, int], Params]] = None
    extremes: Optional[Callable[[Any], Sequence[Params]]] = None

    @property
    def module(self) -> str:
        """The module that registered the protocol (where its classes live)."""
        return self.params.__module__

    # The classes under the names a user writes (``ldpfast.protocol("olh").Params(epsilon=2, d=10)``).
    @property
    def Params(self) -> type:
        """The parameters class (:attr:`params`)."""
        return self.params

    @property
    def Client(self) -> type:
        """The client class (:attr:`client`)."""
        return self.client

    @property
    def Server(self) -> type:
        """The server (aggregator) class (:attr:`aggregator`)."""
        return self.aggregator

    @property
    def Reports(self) -> Type[Reports]:
        """The reports class (:attr:`reports`)."""
        return self.reports

    @property
    def builtin(self) -> bool:
        """True for the protocols shipped in :mod:`ldpfast.protocols`."""
        return self.module.startswith("ldpfast.protocols.")


_REGISTRY: Dict[str, Protocol] = {}

#: The package of the built-in protocol modules, by name (it sits above this module).
BUILTIN_PACKAGE = "ldpfast.protocols"
#: The entry-point group of protocols shipped by other packages.
ENTRY_POINT_GROUP = "ldpfast.protocols"

#: The base classes the aggregator and client of a registration must derive from, declared
#: by their own modules (:func:`_declare_base`).
_BASES: Dict[str, type] = {}
_entry_points_read_for: Optional[Tuple[str, ...]] = None


def _declare_base(role: str, cls: type) -> None:
    """Declare ``cls`` as the base class of a registration's ``role`` ("aggregator" or
    "client"); called once by :mod:`ldpfast._aggregator` and :mod:`ldpfast._client`."""
    _BASES[role] = cls


def register_protocol(protocol: Protocol) -> Protocol:
    """Register ``protocol`` (called once per protocol by its module, at import).

    Raises:
        TypeError: a class is not of the expected base class, or ``inputs`` is not one
            of ``INPUT_KINDS``.
        ValueError: a class names another protocol id, or another module already
            registered this id.
    """
    for cls, base, name in ((protocol.params, Params, "Params"), (protocol.reports, Reports, "Reports"),
                            (protocol.aggregator, _BASES.get("aggregator"), "Aggregator"),
                            (protocol.client, _BASES.get("client"), "ClientBase")):
        if not (isinstance(cls, type) and base is not None and issubclass(cls, base)):
            raise TypeError(f"protocol {protocol.id!r}: {getattr(cls, '__name__', cls)!r} must be a subclass of "
                            f"ldpfast._base.{name}")
        declared = getattr(cls, "protocol", protocol.id)
        if declared != protocol.id:
            raise ValueError(f"{cls.__name__}.protocol is {declared!r}, registered as {protocol.id!r}")
    if protocol.inputs not in INPUT_KINDS:
        raise TypeError(f"protocol {protocol.id!r}: inputs must be one of {INPUT_KINDS}, got {protocol.inputs!r}")
    known = _REGISTRY.get(protocol.id)
    if known is not None and known.module != protocol.module:
        raise ValueError(f"protocol id {protocol.id!r} is already registered by {known.module}")
    _REGISTRY[protocol.id] = protocol
    return protocol


def _entry_points() -> List[Any]:
    """The entry points of :data:`ENTRY_POINT_GROUP` on the current ``sys.path``."""
    if sys.version_info >= (3, 10):
        return list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    return list(metadata.entry_points().get(ENTRY_POINT_GROUP, ()))  # Python 3.9: a dict of groups


def _load_plugins() -> None:
    """Import the modules the entry points name (once per ``sys.path``). A plug-in that
    fails to load is skipped with a warning: it must not take the other protocols down."""
    global _entry_points_read_for
    path = tuple(sys.path)
    if path == _entry_points_read_for:
        return
    _entry_points_read_for = path
    for entry in _entry_points():
        try:
            entry.load()
        except Exception as exc:  # a third party's import error of any kind
            warnings.warn(f"ldpfast: the protocol plug-in {entry.name!r} ({entry.value}) failed to load: "
                          f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=3)


def _load_all() -> None:
    importlib.import_module(BUILTIN_PACKAGE).load_all()
    _load_plugins()


def protocols() -> Dict[str, Protocol]:
    """Every registered protocol: the built-in ones and those of installed plug-ins (entry
    point group ``ldpfast.protocols``), importing their modules first."""
    _load_all()
    return dict(_REGISTRY)


def protocol(protocol_id: str) -> Protocol:
    """The registered protocol with id ``protocol_id``, or with that alias (:func:`aliases`):
    every command and library function that takes a protocol name accepts both.

    Raises:
        ParameterError: no such protocol in this build (the message lists the known ids
            and aliases).
    """
    found = _REGISTRY.get(protocol_id)
    if found is not None:
        return found
    known = protocols()
    if protocol_id in known:
        return known[protocol_id]
    alias = aliases().get(protocol_id) if isinstance(protocol_id, str) else None
    if alias is None:
        others = ", ".join(f"{a} ({pid})" for a, pid in sorted(aliases().items()))
        raise ParameterError(f"protocol must be one of {sorted(known)} or an alias ({others}), got {protocol_id!r}")
    return known[alias]


_ALIASES: Dict[Tuple[int, ...], Dict[str, str]] = {}


def aliases() -> Dict[str, str]:
    """``{alias: protocol id}``: the ``ldpfast simulate`` names of the protocols' simulation
    entries (``Protocol.simulations``) that are not their protocol's id, such as
    ``ocms-mse`` and ``ocms-l`` (OCMS+RR in its two modes), ``cms-he`` (``cmshe``) or
    ``treehist`` (HadaHeavy with B = 2). Each names exactly one protocol.

    Raises:
        ValueError: a simulation entry is named after another protocol's id, or two
            protocols declare the same name.
    """
    known = protocols()
    seen = tuple(id(proto) for proto in known.values())
    cached = _ALIASES.get(seen)
    if cached is None:
        cached = {}
        for pid, proto in known.items():
            for entry in proto.simulations() if proto.simulations else ():
                name = entry.name
                if name == pid:
                    continue
                if name in known or cached.get(name, pid) != pid:
                    raise ValueError(f"simulation entry {name!r} of {pid!r} names another protocol")
                cached[name] = pid
        _ALIASES.clear()
        _ALIASES[seen] = cached
    return dict(cached)


def protocol_or_format_error(protocol_id: str) -> Protocol:
    try:
        return protocol(protocol_id)
    except ParameterError as exc:
        raise FormatError(f"serialized data names an unknown protocol: {exc}") from None


def params_from_json(text: str) -> Params:
    """Parameters of any registered protocol from the JSON written by ``Params.to_json()``.

    Raises:
        FormatError: malformed JSON or an unknown protocol id.
        ParameterError: the stored values are rejected by the protocol's validation.
    """
    protocol_id, data = _parse_params_json(text)
    params_type: Type[Params] = protocol_or_format_error(protocol_id).params
    return _with_stored_domain(params_type.from_dict(data), text)
