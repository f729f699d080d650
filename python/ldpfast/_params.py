"""Protocol parameters: frozen dataclasses with a canonical JSON form and a fingerprint
(see :mod:`ldpfast._base` for the whole contract)."""

from __future__ import annotations

import collections
import copy
import dataclasses
import hashlib
import json
from typing import Any, ClassVar, Dict, Mapping, Optional, Tuple, Type, TypeVar

import numpy as np

from .domain import AnyDomain, check_domain, domain_from_dict
from .errors import FormatError, LdpfastError, ParameterError

P = TypeVar("P", bound="Params")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def _short(value: Any) -> str:
    """``repr`` of a parameter value, long sequences cut to their first items."""
    if isinstance(value, (tuple, list, np.ndarray)) and len(value) > 6:
        return f"({', '.join(repr(_jsonable(v)) for v in list(value[:3]))}, ... {len(value)} items)"
    return repr(_jsonable(value) if isinstance(value, np.generic) else value)


def params_summary(params: Any) -> str:
    """``"epsilon=2.0, d=1000, m=4"``: every field of a Params dataclass, long ones cut."""
    if not dataclasses.is_dataclass(params):
        return repr(params)
    fields = [f"{f.name}={_short(getattr(params, f.name))}" for f in dataclasses.fields(params) if f.repr]
    domain = params.__dict__.get("_domain")
    return ", ".join(fields + ([f"domain={domain!r}"] if domain is not None else []))


class Params:
    """Mixin for frozen dataclass parameter objects. Subclasses set ``protocol``."""

    protocol: ClassVar[str] = ""
    # set by the dataclass decorator on each subclass
    __dataclass_fields__: ClassVar[Dict[str, dataclasses.Field[Any]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The dataclass decorator runs after this and adds __eq__ only where the class body
        # has none, so placing the domain-aware one here keeps it (the field-only __hash__
        # it adds stays consistent: equal parameters have equal fields).
        cls.__eq__ = Params.__eq__  # type: ignore[method-assign]  # deliberately replaces the dataclass one

    def __eq__(self, other: object) -> bool:
        """Equal fields and the same label domain (compared by its stored form, so a
        :class:`~ldpfast.Domain` equals the ``DomainRef`` read back from its fingerprint):
        parameters with other vocabularies of the same size are not equal."""
        if type(other) is not type(self):
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared()[0])

    def _compared(self) -> Tuple[Tuple[Any, ...], Optional[Dict[str, Any]]]:
        domain = self.label_domain
        return (tuple(getattr(self, f.name) for f in dataclasses.fields(self) if f.compare),
                None if domain is None else domain.to_dict())

    def to_dict(self) -> Dict[str, Any]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls: Type[P], data: Mapping[str, Any]) -> P:
        """Parameters from their :meth:`to_dict` form (e.g. a parameter file).

        Raises:
            ParameterError: a field is missing, unexpected or of the wrong type, or a value
                is out of range (one line naming the protocol and the fields).
        """
        fields = dataclasses.fields(cls)
        names = {f.name for f in fields}
        missing = [f.name for f in fields if f.init and f.name not in data
                   and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        unexpected = sorted(str(key) for key in data if key not in names)
        if missing or unexpected:
            problems = [f"missing {missing}"] if missing else []
            problems += [f"unexpected {unexpected}"] if unexpected else []
            raise ParameterError(f"{cls.protocol or cls.__name__} parameters must have the fields "
                                 f"{[f.name for f in fields if f.init]}: {', '.join(problems)}")
        kwargs = {name: tuple(value) if isinstance(value, list) else value for name, value in data.items()}
        try:
            return cls(**kwargs)
        except LdpfastError:
            raise
        except (TypeError, ValueError, ArithmeticError) as exc:  # a value of the wrong type met a computation
            given = ", ".join(f"{name}={_short(value)}" for name, value in kwargs.items())
            raise ParameterError(f"{cls.protocol or cls.__name__} parameters have a value of the wrong type "
                                 f"({given}): {exc}") from None

    def to_json(self) -> str:
        doc: Dict[str, Any] = {"protocol": self.protocol, "params": self.to_dict()}
        if self.label_domain is not None:
            doc["domain"] = self.label_domain.to_dict()
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))

    # -- the domain: labels in, labels out (ldpfast.domain) ---------------------------------
    @property
    def label_domain(self) -> Optional[AnyDomain]:
        """The :mod:`ldpfast.domain` these parameters map labels with, or None (integer
        values only). Part of :attr:`fingerprint`; set with :meth:`with_domain`."""
        return self.__dict__.get("_domain")

    def with_domain(self: P, domain: Any) -> P:
        """These parameters with ``domain`` attached (a :class:`ldpfast.Domain`,
        :class:`~ldpfast.HashedDomain` or :class:`~ldpfast.PrefixDomain`; None removes it):
        clients then perturb labels, servers take labels as candidates and estimates carry
        them, and the fingerprint covers the domain, so client and server must agree on it.
        Parameters read back from JSON, bytes or Parquet know a vocabulary by its
        fingerprint only: attaching the same :class:`~ldpfast.Domain` restores it.

        Raises:
            ParameterError: not a domain, one that does not fit ``d`` (a vocabulary larger
                than ``d``), or a vocabulary other than the one these parameters record.
        """
        if domain is not None:
            d = getattr(self, "d", None)
            if not isinstance(d, int):
                raise ParameterError(f"{type(self).__name__} has no integer domain size d to attach a domain to")
            domain = check_domain(domain).bind(d)
            known = self.label_domain
            if known is not None and known.kind == domain.kind == "vocabulary" and known.to_dict() != domain.to_dict():
                raise ParameterError(f"domain must be the vocabulary these parameters were made with "
                                     f"({known!r}), got {domain!r}")
        out = copy.copy(self)
        out.__dict__.pop("_fingerprint", None)
        if domain is None:
            out.__dict__.pop("_domain", None)
        else:
            out.__dict__["_domain"] = domain
        return out

    @property
    def fingerprint(self) -> str:
        """sha256 (hex) of the canonical JSON form (with the domain, if any): equal
        parameters, equal fingerprint."""
        cached = self.__dict__.get("_fingerprint")
        if cached is None:
            cached = hashlib.sha256(self.to_json().encode()).hexdigest()
            self.__dict__["_fingerprint"] = cached  # frozen dataclass: bypass __setattr__
            _KNOWN_PARAMS[cached] = self
            while len(_KNOWN_PARAMS) > 256:
                _KNOWN_PARAMS.popitem(last=False)
        return cached

    @classmethod
    def from_json(cls: Type[P], text: str) -> P:
        """Inverse of :meth:`to_json`; the stored protocol id must be this class's.

        Raises:
            FormatError: the text is not the JSON written by ``to_json`` or names
                another protocol.
        """
        protocol_id, data = _parse_params_json(text)
        if protocol_id != cls.protocol:
            raise FormatError(f"params JSON is for protocol {protocol_id!r}, not {cls.protocol!r}")
        return _with_stored_domain(cls.from_dict(data), text)


#: Recently fingerprinted parameters, to name both sides when a batch's fingerprint does
#: not match a server's.
_KNOWN_PARAMS: "collections.OrderedDict[str, Params]" = collections.OrderedDict()


def _with_stored_domain(params: P, text: str) -> P:
    """``params`` with the domain recorded in its JSON ``text`` (``Params.to_json``), if any."""
    stored = json.loads(text).get("domain")
    return params if stored is None else params.with_domain(domain_from_dict(stored))


def _parse_params_json(text: str) -> Tuple[str, Dict[str, Any]]:
    try:
        doc = json.loads(text)
    except (ValueError, TypeError, RecursionError) as exc:
        raise FormatError(f"params JSON is not valid JSON: {exc}") from None
    if (not isinstance(doc, dict) or not isinstance(doc.get("protocol"), str)
            or not isinstance(doc.get("params"), dict)):
        raise FormatError('params JSON must be an object {"protocol": str, "params": {...}} '
                          "as written by Params.to_json()")
    return doc["protocol"], doc["params"]
