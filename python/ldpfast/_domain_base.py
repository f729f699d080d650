"""What every label domain of :mod:`ldpfast.domain` offers (their common base class)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict

import numpy as np

from ._labels import _encoding_nbytes, is_labels
from .errors import LdpfastError


class _DomainBase:
    """What every domain offers: ``kind``, ``encode``, ``decode``, ``to_dict`` (the form
    stored with the parameters) and ``bind(params)`` (the domain made for ``params.d``)."""

    kind = ""
    #: True when :meth:`decode` turns values back into labels.
    decodes = False

    def encode(self, values: Any) -> np.ndarray:   # pragma: no cover - every domain overrides it
        raise NotImplementedError

    def decode(self, ids: Any) -> np.ndarray:      # pragma: no cover
        raise NotImplementedError

    def to_dict(self) -> Dict[str, Any]:           # pragma: no cover
        raise NotImplementedError

    def bind(self, d: int) -> "_DomainBase":
        return self

    def _encode_nbytes(self, values: Any) -> int:
        """An upper bound on the memory :meth:`encode` takes beside ``values`` (checked
        against the memory budget before label candidates are encoded)."""
        return _encoding_nbytes(values, 32)     # measured: at most 17 bytes a label (the ids, a list copy)

    def encode_inputs(self, values: Any) -> Any:
        """Client inputs as value ids: labels encoded, integer arrays unchanged."""
        return self.encode(values) if is_labels(values) else values

    def encode_sets(self, sets: Any) -> Any:
        """Set-protocol inputs as ``(offsets, items)`` ids: per-user label lists encoded
        (repeats within a user dropped); other forms unchanged."""
        if isinstance(sets, tuple) and len(sets) == 2 and isinstance(sets[0], np.ndarray):
            offsets, items = sets
            return (offsets, self.encode(items)) if is_labels(items) else sets
        if isinstance(sets, (list, tuple)) and any(is_labels(s) for s in sets[:1]):
            lengths = np.fromiter((len(s) for s in sets), dtype=np.int64, count=len(sets))
            flat = [label for user in sets for label in user]
            try:
                items = self.encode(flat).astype(np.int64)
            except LdpfastError:
                raise self._first_user_refused(sets) from None
            users = np.repeat(np.arange(len(sets)), lengths)
            order = np.lexsort((items, users))
            users, items = users[order], items[order]
            keep = np.ones(items.size, dtype=bool)
            keep[1:] = (users[1:] != users[:-1]) | (items[1:] != items[:-1])
            offsets = np.zeros(len(sets) + 1, dtype=np.int64)
            np.cumsum(np.bincount(users[keep], minlength=len(sets)), out=offsets[1:])
            return offsets, items[keep].astype(np.uint64)
        return sets

    def _first_user_refused(self, sets: Any) -> LdpfastError:
        """The error of the first user whose labels :meth:`encode` refuses, naming the user
        (the label's index is then within that user's labels)."""
        for user, labels in enumerate(sets):
            try:
                self.encode(labels)
            except LdpfastError as exc:
                return type(exc)(f"user {user}: {exc}")
        raise AssertionError("encode refused all users' labels together, but no user's alone")

    @property
    def fingerprint(self) -> str:
        """sha256 (hex) of :meth:`to_dict`'s canonical JSON."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _DomainBase):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(self.fingerprint)
