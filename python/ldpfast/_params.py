"""Protocol parameters: frozen dataclasses with a canonical JSON form and a fingerprint
(see :mod:`ldpfast._base` for the whole contract)."""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
from typing import Any, ClassVar, Dict, Mapping, Tuple, Type, TypeVar

import numpy as np

from .errors import FormatError

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
    return ", ".join(f"{f.name}={_short(getattr(params, f.name))}" for f in dataclasses.fields(params)
                     if f.repr)


class Params:
    """Mixin for frozen dataclass parameter objects. Subclasses set ``protocol``."""

    protocol: ClassVar[str] = ""

    def to_dict(self) -> Dict[str, Any]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls: Type[P], data: Mapping[str, Any]) -> P:
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name in data:
                value = data[f.name]
                kwargs[f.name] = tuple(value) if isinstance(value, list) else value
        return cls(**kwargs)

    def to_json(self) -> str:
        return json.dumps({"protocol": self.protocol, "params": self.to_dict()}, sort_keys=True,
                          separators=(",", ":"))

    @property
    def fingerprint(self) -> str:
        """sha256 (hex) of the canonical JSON form: equal parameters, equal fingerprint."""
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
        return cls.from_dict(data)


#: Recently fingerprinted parameters, to name both sides when a batch's fingerprint does
#: not match a server's.
_KNOWN_PARAMS: "collections.OrderedDict[str, Params]" = collections.OrderedDict()


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
