"""The protocols the simulation harness runs, one table per kind of input.

* :data:`ALGORITHMS`: frequency oracles on single-valued data (:class:`Algorithm`), each with
  the closed forms the runner sets next to its measurements ([PAN] Eq. 8/20/22, Thm 3.10);
* :data:`SET_ALGORITHMS`: set-valued protocols ([PS] section 4, :class:`SetAlgorithm`);
* :data:`HEAVY_ALGORITHMS`: heavy-hitter protocols ([WW] section 5, :class:`HeavyAlgorithm`);
* :data:`RECORD_ALGORITHMS`: record protocols (several attributes per user, :class:`RecordAlgorithm`);
* :data:`KINDS`: the tables by kind (``numbers``: the mean protocols; ``records``: the record
  protocols), and :data:`PAN_ALGORITHMS` /
  :data:`PAN_METRIC_ALGORITHMS`: the algorithms of [PAN] section 6.

The tables are not written here: each protocol's registration declares its entries
(``Protocol.simulations``, see :mod:`ldpfast._registry`), and each table is a live view of
them, so a new protocol module adds its rows (and ``ldpfast simulate --protocol`` names).
"""

from __future__ import annotations

import dataclasses
import importlib
from types import ModuleType
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Type, TypeVar, Union

import numpy as np

from .._base import Params, protocols
from ..datasets import RecordData, SetData, ValueData
from ..errors import ParameterError
from .numeric import MeanAlgorithm

__all__ = ["Algorithm", "ALGORITHMS", "available_algorithms", "get_algorithm", "entry_name", "SetAlgorithm",
           "SET_ALGORITHMS", "HeavyAlgorithm", "HEAVY_ALGORITHMS", "MEAN_ALGORITHMS", "RecordAlgorithm",
           "RECORD_ALGORITHMS", "KINDS", "algorithm_kind",
           "PAN_ALGORITHMS", "PAN_METRIC_ALGORITHMS"]


def _mod(name: str) -> ModuleType:
    return importlib.import_module(f"ldpfast.{name}")


def _module_available(module: str) -> bool:
    """True when ``ldpfast.<module>`` is part of this build."""
    try:
        _mod(module)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("ldpfast"):
            return False
        raise
    return True


def _draw(gen: np.random.Generator) -> int:
    return int(gen.integers(0, 2**63))


#: A simulation entry: the three kinds declare ``name``, ``module`` and ``available()``.
E = TypeVar("E", bound="Union[Algorithm, SetAlgorithm, HeavyAlgorithm, MeanAlgorithm, RecordAlgorithm]")


class _RegistryTable(Mapping[str, E]):
    """The simulation entries of one kind (``Algorithm``, ``SetAlgorithm`` or
    ``HeavyAlgorithm``) that the registered protocols declare (``Protocol.simulations``), by
    name, in registration order. A live view: a protocol registered later appears too."""

    def __init__(self, kind: Type[E]) -> None:
        self._kind = kind
        self._seen: Tuple[int, ...] = ()
        self._entries: Dict[str, E] = {}

    def _current(self) -> Dict[str, E]:
        known = protocols()
        seen = tuple(id(proto) for proto in known.values())
        if seen != self._seen:
            entries: Dict[str, E] = {}
            for proto in known.values():
                for entry in proto.simulations() if proto.simulations else ():
                    if isinstance(entry, self._kind):
                        if entry.name in entries:
                            raise ValueError(f"simulation entry {entry.name!r} is declared twice ({proto.id!r})")
                        entries[entry.name] = entry
            self._entries, self._seen = entries, seen
        return self._entries

    def __getitem__(self, name: str) -> E:
        return self._current()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return f"<{self._kind.__name__} table: {', '.join(self._current())}>"


# ----------------------------------------------------------------------------------
# Frequency oracles on single-valued data ([PAN] section 6)
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
        return _module_available(self.module)

    def classes(self, params: Params) -> Tuple[type, type]:
        """(Client, Server) classes registered for ``type(params)``."""
        if self.client is not None and self.server is not None:
            return self.client, self.server
        for proto in protocols().values():
            if proto.params is type(params):
                return proto.client, proto.aggregator
        raise ParameterError(f"no protocol is registered for {type(params).__name__}")


ALGORITHMS: Mapping[str, Algorithm] = _RegistryTable(Algorithm)


def get_algorithm(name: str) -> Algorithm:
    """The :class:`Algorithm` called ``name`` (or the first entry of the protocol with that
    id, see :func:`entry_name`); raises ParameterError listing the names."""
    name = entry_name(name)
    if name not in ALGORITHMS:
        raise ParameterError(f"protocol must be one of {sorted(ALGORITHMS)}, got {name!r}")
    return _usable(ALGORITHMS[name])


def entry_name(name: str) -> str:
    """The simulation entry ``name`` stands for: an entry's own name (``ocms-l``,
    ``treehist``; these are the protocols' aliases, :func:`ldpfast._registry.aliases`), or
    for a registry id the protocol's first entry (``ocms`` -> ``ocms-mse``, ``cmshe`` ->
    ``cms-he``). Other names are returned unchanged (the tables then refuse them)."""
    if any(name in table for table in KINDS.values()):
        return name
    proto = protocols().get(name)
    if proto is None:
        return name
    entries = proto.simulations() if proto.simulations else ()
    if not entries:
        raise ParameterError(f"protocol {name!r} has no simulation entry (ldpfast simulate --list names "
                             "the ones it runs)")
    return str(entries[0].name)


def _usable(alg: E) -> E:
    """``alg`` itself, or ParameterError when its module is not part of this build."""
    if not alg.available():
        raise ParameterError(f"protocol {alg.name!r} needs ldpfast.{alg.module}, which this build lacks")
    return alg


def available_algorithms() -> List[Algorithm]:
    """The algorithms whose implementation is part of this build."""
    return [a for a in ALGORITHMS.values() if a.available()]


# ----------------------------------------------------------------------------------
# Set-valued protocols ([PS] section 4) and heavy hitters ([WW] section 5)
# ----------------------------------------------------------------------------------

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
        return _module_available(self.module)


SET_ALGORITHMS: Mapping[str, SetAlgorithm] = _RegistryTable(SetAlgorithm)


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
        return _module_available(self.module)


HEAVY_ALGORITHMS: Mapping[str, HeavyAlgorithm] = _RegistryTable(HeavyAlgorithm)

#: Mean protocols on numeric data (:mod:`ldpfast.experiments.numeric`).
MEAN_ALGORITHMS: Mapping[str, MeanAlgorithm] = _RegistryTable(MeanAlgorithm)


@dataclasses.dataclass(frozen=True)
class RecordAlgorithm:
    """How the harness runs one record protocol on a :class:`~ldpfast.datasets.RecordData`:
    ``make_params(epsilon, data)``; the registered Client and Server run it
    (:func:`ldpfast.experiments.simulate_records`). ``marginals``: the server answers k-way
    marginals (``server.marginal``), not only the attributes' frequencies."""

    name: str
    label: str
    module: str
    make_params: Callable[[float, RecordData], Params]
    summary: str = ""
    marginals: bool = False

    def available(self) -> bool:
        return _module_available(self.module)


RECORD_ALGORITHMS: Mapping[str, RecordAlgorithm] = _RegistryTable(RecordAlgorithm)

#: The kinds of protocol ``ldpfast simulate`` runs, and their tables.
KINDS: Dict[str, Mapping[str, Union[Algorithm, SetAlgorithm, HeavyAlgorithm, MeanAlgorithm, RecordAlgorithm]]] = {
    "values": ALGORITHMS, "sets": SET_ALGORITHMS, "heavy": HEAVY_ALGORITHMS, "numbers": MEAN_ALGORITHMS,
    "records": RECORD_ALGORITHMS}


def algorithm_kind(name: str) -> str:
    """``"values"``, ``"sets"``, ``"heavy"`` or ``"records"``: which table ``name`` (or the entry of a
    registry id, :func:`entry_name`) is in (ParameterError listing every name when none)."""
    name = entry_name(name)
    for kind, table in KINDS.items():
        if name in table:
            return kind
    names = sorted(n for table in KINDS.values() for n in table)
    ids = sorted(pid for pid, proto in protocols().items() if proto.simulations and pid not in names)
    raise ParameterError(f"protocol must be one of {names} or a protocol id ({', '.join(ids)}), got {name!r}")


def _get(table: Mapping[str, E], name: str) -> E:
    name = entry_name(name)
    kind = algorithm_kind(name)
    if KINDS[kind] is not table:
        raise ParameterError(f"protocol {name!r} is a {kind} protocol, not one of {sorted(table)}")
    return _usable(table[name])


#: Algorithms of [PAN] section 6.
PAN_ALGORITHMS = ("ocms-mse", "ocms-l", "he", "cms-he", "rhr")
#: Which algorithms [PAN] shows for each metric (MSE-OCMS for MSE, l-OCMS for l1/l2).
PAN_METRIC_ALGORITHMS = {"mse": ("ocms-mse", "he", "cms-he", "rhr"),
                         "l1": ("ocms-l", "he", "cms-he", "rhr"),
                         "l2": ("ocms-l", "he", "cms-he", "rhr")}
