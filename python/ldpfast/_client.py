"""The base class of every protocol's client (the user side)."""

from __future__ import annotations

import functools
from typing import Any, Callable, ClassVar, Optional

from ._labels import is_labels
from ._params import params_summary
from ._random import KeySource, RngLike
from ._registry import _REGISTRY, _declare_base
from ._reports import Reports
from ._validate import check_threads
from .errors import DTypeError, ParameterError


def _stamping(perturb: Callable[..., Any]) -> Callable[..., Any]:
    """``perturb`` that takes labels through the parameters' domain (``params.label_domain``)
    and records the client's parameter fingerprint on the batch it returns."""
    @functools.wraps(perturb)
    def stamped(self: "ClientBase", *args: Any, **kwargs: Any) -> Any:
        if args:
            args = (self._value_ids(args[0]),) + args[1:]
        reports = perturb(self, *args, **kwargs)
        if isinstance(reports, Reports):
            reports.params_fingerprint = self.params.fingerprint
        return reports

    stamped._ldpfast_stamps = True  # type: ignore[attr-defined]
    return stamped


class ClientBase:
    """Base of every protocol's Client.

    * The constructor ``Client(params, rng=None, threads=0)`` checks that ``params`` are
      the parameters of the protocol the class is registered for (or ``params_type``),
      and keeps the randomness as a :class:`ldpfast._random.KeySource`: ``rng=None``
      draws a fresh key from the operating system for every batch (the only setting for
      real clients); a seed makes the output reproducible, **for simulation only**.
      ``self._keys.key()`` is the key of the next batch.
    * ``perturb`` (defined by each subclass) returns batches that carry the parameter
      fingerprint (``Reports.params_fingerprint``), so a server refuses reports made
      with other parameters.
    * ``repr`` names the protocol, the parameters and whether the randomness is seeded.
    """

    #: The Params class accepted (default: the registered protocol's).
    params_type: ClassVar[Optional[type]] = None
    params: Any
    threads: int
    _keys: KeySource
    #: ``perturb(values, ...) -> Reports``, defined by each protocol's client (declared here
    #: for type checkers: code that holds a ``type[ClientBase]`` may call it).
    perturb: Callable[..., Reports]
    #: True for clients that take strings themselves (RAPPOR hashes them into its Bloom
    #: filter): labels without a domain are then theirs, not an error.
    takes_labels: ClassVar[bool] = False

    def __init__(self, params: Any, rng: RngLike = None, threads: int = 0):
        expected = self._expected_params()
        if not isinstance(params, expected):
            raise ParameterError(f"params must be {expected.__name__}, got {type(params).__name__}")
        self.params = params
        self.threads = check_threads(threads)
        self._keys = KeySource(rng)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        perturb = cls.__dict__.get("perturb")
        if callable(perturb) and not getattr(perturb, "_ldpfast_stamps", False):
            cls.perturb = _stamping(perturb)

    @classmethod
    def _expected_params(cls) -> type:
        if cls.params_type is not None:
            return cls.params_type
        for klass in cls.__mro__:
            for proto in _REGISTRY.values():
                if proto.client is klass:
                    return proto.params
        raise TypeError(f"{cls.__name__} is not registered (register_protocol) and sets no params_type")

    def _value_ids(self, values: Any) -> Any:
        """Client inputs with labels turned into value ids by ``params.label_domain``."""
        domain = getattr(self.params, "label_domain", None)
        kind = self._input_kind()
        if kind == "pairs":  # key-value sets: the protocol's client encodes label keys itself
            return values
        sets = kind == "sets"
        if domain is not None:
            return domain.encode_sets(values) if sets else domain.encode_inputs(values)
        if self.takes_labels:
            return values
        if (not sets and is_labels(values)) or (sets and isinstance(values, list) and values
                                                  and is_labels(values[0])):
            raise DTypeError("values are labels (strings or categories) and these parameters have no domain: "
                             "attach one, e.g. params.with_domain(ldpfast.Domain(labels)) for a known vocabulary "
                             "or ldpfast.HashedDomain() for an open one (see ldpfast.domain)")
        return values

    @classmethod
    def _input_kind(cls) -> str:
        """The registration's ``inputs`` (``"values"`` or ``"sets"``)."""
        for klass in cls.__mro__:
            for proto in _REGISTRY.values():
                if proto.client is klass:
                    return proto.inputs
        return "values"

    @property
    def seeded(self) -> bool:
        """True when this client is a reproducible simulator (seeded), not a private client."""
        return self._keys.seeded

    def __repr__(self) -> str:
        keys = getattr(self, "_keys", None)
        rng = "seeded (simulation only)" if keys is not None and keys.seeded else "os-entropy"
        return (f"{type(self).__module__.replace('ldpfast.', '')}.{type(self).__name__}"
                f"(protocol={getattr(self.params, 'protocol', '?')!r}, {params_summary(self.params)}, "
                f"rng={rng!r})")


_declare_base("client", ClientBase)
