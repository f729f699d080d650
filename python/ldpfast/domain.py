"""Labels in, labels out: the values users hold (strings, categories, bytes) as the integer
values ``[0, d)`` every protocol works on, and back.

Three kinds of domain, attached to a protocol's parameters with ``params.with_domain(...)``
(the domain then is part of the parameter fingerprint, so a server refuses reports made
with another vocabulary):

* :class:`Domain`: a closed vocabulary, label ``i`` is value ``i``. Built from a list, a
  pandas ``Categorical`` or an Arrow dictionary array; decodes every value back.
* :class:`HashedDomain`: an open dictionary for the protocols whose query cost does not
  grow with ``d`` (OCMS, OLH, BLH, the CMS variants, Hashtogram, the heavy hitters): a
  label is the value :func:`label_hash` ``mod d`` (a fixed, versioned byte-level function a
  client in any language reproduces). Candidates are given as labels at query time.
* :class:`PrefixDomain`: a label's first ``width`` bytes packed into one integer, so the
  prefix-tree heavy-hitter protocols (HadaHeavy, TreeHist, TreeHist-CS, PEM) recover byte
  prefixes of the labels.

Every client's ``perturb`` then accepts labels (a list, a numpy string array, a pandas
``Series`` or ``Categorical``, an Arrow string or dictionary array; for set protocols a
list of label lists), and ``server.frequencies(["a", "b"])`` takes labels as candidates.
Integer arrays are still taken as value ids.

The label hash, version 1 (:data:`LABEL_HASH_VERSION`)::

    H(label) = first 8 bytes of SHA-256(b"ldpfast-label-v1:" + bytes(label)), big-endian
    value(label) = H(label) mod d

``bytes(label)`` is the UTF-8 encoding of a string as given (no Unicode normalization) or
a ``bytes`` label itself. In a shell: ``printf 'ldpfast-label-v1:%s' apple | sha256sum``;
the first 16 hex digits are ``H``. A change of the function gets a new version (and a new
parameter fingerprint).

Every domain refuses (ParameterError naming the label's index) a string with a lone
surrogate (it has no UTF-8 form) and a label ending in a NUL character: numpy string arrays
cannot hold one (numpy drops trailing NULs when the array is made), so such a label would be
one label in a list and another in an array.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, List, Optional, Set, Union

import numpy as np

from ._labels import (LABEL_HASH_PREFIX, LABEL_HASH_VERSION, _categorical, _encoding_nbytes, _factorized, _flat,
                      _first_refusal, _input_name, _label_bytes, _label_refusal, _no_missing, hash_labels, is_labels,
                      label_hash)
from .errors import DTypeError, FormatError, LdpfastError, ParameterError

__all__ = ["Domain", "HashedDomain", "PrefixDomain", "DomainRef", "label_hash", "hash_labels",
           "LABEL_HASH_VERSION", "LABEL_HASH_PREFIX", "domain_from_dict"]

#: Version of the vocabulary fingerprint's byte layout (:attr:`Domain.fingerprint`).
VOCABULARY_VERSION = 1
_VOCABULARY_TAG = b"ldpfast-vocabulary-v1:"


# --- the three domains ------------------------------------------------------------------------

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


class Domain(_DomainBase):
    """A closed vocabulary: label ``labels[i]`` is value ``i`` (so ``d >= len(labels)``).

    Args:
        labels: distinct labels, all ``str`` or all ``bytes`` (a list, a numpy array, a
            pandas Index or Series, an Arrow array).

    ``encode`` maps labels to ids (a label outside the vocabulary raises ParameterError
    naming it), ``decode`` ids to labels. The :attr:`fingerprint` (sha256 of the labels in
    order) goes into the parameter fingerprint. Pickles hold the labels only; the lookup
    table is rebuilt on first use.
    """

    kind = "vocabulary"
    decodes = True

    def __init__(self, labels: Any):
        cat = _categorical(labels)
        seq = list(cat[0]) if cat is not None else list(_flat(labels))
        if not seq:
            raise ParameterError("a Domain needs at least one label")
        kinds = {type(label) for label in seq}
        if not (kinds <= {str, np.str_} or kinds <= {bytes, np.bytes_}):
            raise DTypeError(f"Domain labels must be all str or all bytes, got {sorted(k.__name__ for k in kinds)}")
        text = isinstance(seq[0], str)
        if kinds - {str, bytes}:            # numpy scalars become plain str / bytes
            seq = [str(s) for s in seq] if text else [bytes(s) for s in seq]
        try:
            digest = _vocabulary_digest(text, [_label_bytes(label) for label in seq])
        except LdpfastError:
            raise _first_refusal(seq) from None
        self._labels = np.empty(len(seq), dtype=object)
        self._labels[:] = seq
        self._labels.flags.writeable = False
        self._text = text
        self._table: Optional[Dict[Any, int]] = None
        self._digest: Optional[str] = digest
        if len(self._lookup()) != len(seq):
            seen: Set[Any] = set()
            for label in self._labels.tolist():
                if label in seen:
                    raise ParameterError(f"Domain labels must be distinct, got {label!r} twice")
                seen.add(label)

    @classmethod
    def from_pandas(cls, values: Any) -> "Domain":
        """The categories of a pandas ``Categorical`` or category ``Series``, in order (so
        the categorical's codes are the value ids), or the distinct values of another
        Series or Index in order of appearance."""
        cat = _categorical(values)
        return cls(cat[0] if cat is not None else _factorized(values)[0])

    @classmethod
    def from_arrow(cls, values: Any) -> "Domain":
        """The dictionary of an Arrow dictionary array (so its indices are the value ids),
        or the distinct values of a string array in order of appearance."""
        cat = _categorical(values)
        if cat is None:
            raise DTypeError(f"from_arrow needs an Arrow string or dictionary array, got {type(values).__name__}")
        return cls(cat[0])

    # -- the vocabulary ----------------------------------------------------------------
    @property
    def labels(self) -> np.ndarray:
        """The labels (read-only object array); ``labels[i]`` is value ``i``."""
        return self._labels

    def __len__(self) -> int:
        return int(self._labels.size)

    def __contains__(self, label: object) -> bool:
        return label in self._lookup()

    def __repr__(self) -> str:
        shown = ", ".join(repr(s) for s in self._labels[:3])
        return f"Domain([{shown}{', ...' if len(self) > 3 else ''}], {len(self)} labels)"

    def _lookup(self) -> Dict[Any, int]:
        if self._table is None:
            self._table = dict(zip(self._labels.tolist(), range(len(self))))
        return self._table

    def bind(self, d: int) -> "Domain":
        if len(self) > d:
            raise ParameterError(f"the parameters' d must be >= the {len(self)} labels of the domain, got d={d}")
        return self

    def encode(self, values: Any) -> np.ndarray:
        """Value ids (int64) of ``values`` (labels; see the module docstring for the forms).
        One dict lookup per value; a categorical's categories are looked up once each (only
        those its codes use), and not at all when they are this vocabulary in order.

        Raises:
            ParameterError: a label is not in the vocabulary, or is missing (NaN/None).
        """
        cat = _categorical(values)
        if cat is None:
            seq = _flat(values)
            try:
                return np.fromiter(map(self._lookup().__getitem__, seq), dtype=np.int64, count=len(seq))
            except (KeyError, TypeError):
                table = self._lookup()
                index, bad = next((i, label) for i, label in enumerate(seq)
                                  if not isinstance(label, (str, bytes)) or label not in table)
                raise self._unknown(bad, f"labels[{index}]") from None
        categories, codes = cat
        _no_missing(codes)
        if len(categories) == len(self) and np.array_equal(np.asarray(categories, dtype=object), self._labels):
            return codes
        used = np.flatnonzero(np.bincount(codes, minlength=len(categories)))
        table = self._lookup()
        ids = np.full(len(categories), -1, dtype=np.int64)
        for code in used.tolist():
            found = table.get(categories[code])
            if found is None:
                raise self._unknown(categories[code], _input_name(code, codes))
            ids[code] = found
        return np.take(ids, codes)

    def _unknown(self, label: Any, name: str) -> LdpfastError:
        """The error of a label not in the vocabulary: why no domain takes it, if so."""
        try:
            _label_bytes(label)
        except LdpfastError:
            return _label_refusal(label, name)
        return ParameterError(f"{name} must be in the domain ({len(self)} labels), got {label!r:.80}")

    def decode(self, ids: Any) -> np.ndarray:
        """The labels of value ids (object array)."""
        idx = np.asarray(ids)
        if idx.size and (idx.dtype.kind not in "iu" or int(idx.min()) < 0 or int(idx.max()) >= len(self)):
            raise ParameterError(f"ids must be integers in [0, {len(self)}), got {idx!r:.80}")
        return self._labels[idx.astype(np.intp)]

    # -- identity ----------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """sha256 (hex) of ``b"ldpfast-vocabulary-v1:" + kind + count + offsets + bytes``:
        ``kind`` is ``b"s"`` (str labels, UTF-8) or ``b"b"`` (bytes), ``count`` the number
        of labels and ``offsets`` the ``count + 1`` byte offsets of the labels in their
        concatenation, all unsigned 64-bit little-endian."""
        if self._digest is None:
            self._digest = _vocabulary_digest(self._text, [_label_bytes(label) for label in self._labels.tolist()])
        return self._digest

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "version": VOCABULARY_VERSION, "size": len(self), "sha256": self.fingerprint}

    def __getstate__(self) -> Dict[str, Any]:
        return {"labels": self._labels, "text": self._text, "digest": self._digest}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self._labels, self._text, self._digest = state["labels"], state["text"], state["digest"]
        self._table = None


def _vocabulary_digest(text: bool, encoded: List[bytes]) -> str:
    """:attr:`Domain.fingerprint` of the labels' bytes ``encoded``."""
    offsets = np.zeros(len(encoded) + 1, dtype="<u8")
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    digest = hashlib.sha256(_VOCABULARY_TAG)
    digest.update(b"s" if text else b"b")
    digest.update(np.array([len(encoded)], dtype="<u8").tobytes())
    digest.update(offsets.tobytes())
    digest.update(b"".join(encoded))
    return digest.hexdigest()


class HashedDomain(_DomainBase):
    """An open dictionary: a label is the value ``label_hash(label) mod d``, for protocols
    whose queries do not enumerate ``[0, d)`` (OCMS, OLH, BLH, the CMS variants, Hashtogram,
    HadaHeavy, TreeHist-CS, PEM), with ``d`` as large as the protocol allows (OCMS/OLH with
    the default field: up to ``2^64 - 60``; HadaHeavy: ``2^64``).

    Two of ``k`` labels share a value with probability about ``k^2 / (2 d)``: negligible for
    ``d`` near ``2^64``, not for small ``d``. ``decode`` is impossible (a hash is not
    inverted): give the labels you want estimated as candidates.

    Args:
        d: the protocol's domain size, in ``[2, 2^64]`` (at ``2^64`` a label's value is
            ``label_hash(label)`` itself); None (default) takes it from the parameters it is
            attached to (``params.with_domain(HashedDomain())``).
    """

    kind = "hashed"

    def __init__(self, d: Optional[int] = None):
        if d is not None and (isinstance(d, bool) or not isinstance(d, int) or not 2 <= d <= 2**64):
            raise ParameterError(f"d must be an integer in [2, 2^64], got {d!r}")
        self.d = d

    def bind(self, d: int) -> "HashedDomain":
        if self.d is not None and self.d != d:
            raise ParameterError(f"this HashedDomain is for d={self.d}, the parameters have d={d}")
        return HashedDomain(d)

    @property
    def collision_probability(self) -> float:
        """Probability that two given distinct labels share a value (``1/d``, up to the
        rounding of ``mod d``)."""
        return 1.0 / self._bound()

    def _bound(self) -> int:
        if self.d is None:
            raise ParameterError("this HashedDomain is not attached to parameters: use params.with_domain(...)")
        return self.d

    def encode(self, values: Any) -> np.ndarray:
        """``label_hash(label) mod d`` of each label (uint64)."""
        return hash_labels(values, self._bound())

    def _encode_nbytes(self, values: Any) -> int:
        # measured: at most 109 bytes a label on Python 3.11, 133 on 3.9 with numpy 1.22 (the table
        # of distinct labels, the ids, the hashes)
        return _encoding_nbytes(values, 160)

    def decode(self, ids: Any) -> np.ndarray:
        raise ParameterError("a HashedDomain cannot turn values back into labels (a hash is not inverted): "
                             "pass the labels of interest as candidates")

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "version": LABEL_HASH_VERSION, "d": self.d}

    def __repr__(self) -> str:
        return f"HashedDomain(d={self.d})"


class PrefixDomain(_DomainBase):
    """Labels as their first ``width`` bytes, packed big-endian into one integer (shorter
    labels padded with zero bytes): value ``sum(b[i] 256^(width-1-i))``, so the prefix-tree
    heavy-hitter protocols (HadaHeavy, TreeHist, TreeHist-CS, PEM) search byte prefixes and
    :meth:`decode` gives them back as ``bytes`` (trailing zero bytes removed: a prefix that
    ends in a zero byte of the label comes back without it; labels ending in one are refused).

    Args:
        width: bytes kept per label; None (default) takes the most that fit the
            parameters' ``d`` (``256^width <= d``: 8 for ``d = 2^64``, 7 for PEM's
            ``d <= 2^64 - 59``).
    """

    kind = "prefix"
    decodes = True

    def __init__(self, width: Optional[int] = None):
        if width is not None and (isinstance(width, bool) or not isinstance(width, int) or not 1 <= width <= 8):
            raise ParameterError(f"width must be an integer in [1, 8], got {width!r}")
        self.width = width

    def bind(self, d: int) -> "PrefixDomain":
        fits = min(8, (int(d).bit_length() - 1) // 8)
        if fits < 1:
            raise ParameterError(f"a PrefixDomain needs d >= 256 (one byte), got d={d}")
        if self.width is not None and self.width > fits:
            raise ParameterError(f"width={self.width} bytes needs d >= 256^{self.width}, got d={d}")
        return PrefixDomain(self.width if self.width is not None else fits)

    def _width(self) -> int:
        if self.width is None:
            raise ParameterError("this PrefixDomain is not attached to parameters: use params.with_domain(...)")
        return self.width

    def encode(self, values: Any) -> np.ndarray:
        """The first ``width`` bytes of each label as an integer (uint64)."""
        width = self._width()
        uniques, inverse = _factorized(values)
        pad = bytes(8 - width)
        try:
            packed = b"".join(pad + _label_bytes(label)[:width].ljust(width, b"\0") for label in uniques)
        except LdpfastError:
            raise _first_refusal(uniques, inverse) from None
        return np.take(np.frombuffer(packed, dtype=">u8").astype(np.uint64), inverse)

    def _encode_nbytes(self, values: Any) -> int:
        # measured: at most 155 bytes a label (the table of distinct labels, the packed prefixes, the ids)
        return _encoding_nbytes(values, 192)

    def decode(self, ids: Any) -> np.ndarray:
        """The byte prefixes (``bytes``, trailing zero bytes removed) of value ids."""
        width = self._width()
        idx = np.asarray(ids)
        if idx.size and (idx.dtype.kind not in "iu" or int(idx.min()) < 0):
            raise ParameterError(f"ids must be non-negative integers, got {idx!r:.80}")
        raw = idx.astype(">u8").tobytes()
        out = np.empty(idx.size, dtype=object)
        out[:] = [raw[8 * i + 8 - width:8 * i + 8].rstrip(b"\0") for i in range(idx.size)]
        return out.reshape(idx.shape)

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "version": 1, "width": self.width}

    def __repr__(self) -> str:
        return f"PrefixDomain(width={self.width})"


class DomainRef(_DomainBase):
    """A vocabulary known only by its fingerprint: what parameters read back from JSON,
    bytes or Parquet hold. It keeps the fingerprint (so reports and servers still match);
    attach the :class:`Domain` itself with ``params.with_domain(domain)`` (checked against
    the fingerprint) to encode or decode labels."""

    kind = "vocabulary"

    def __init__(self, info: Dict[str, Any]):
        self._info = dict(info)

    def bind(self, d: int) -> "DomainRef":
        return self

    def _missing(self) -> ParameterError:
        return ParameterError(f"these parameters know their vocabulary only by its fingerprint "
                              f"({self._info.get('size')} labels, sha256 {str(self._info.get('sha256'))[:16]}...): "
                              "attach it with params.with_domain(ldpfast.Domain(labels))")

    def encode(self, values: Any) -> np.ndarray:
        raise self._missing()

    def decode(self, ids: Any) -> np.ndarray:
        raise self._missing()

    def to_dict(self) -> Dict[str, Any]:
        return dict(self._info)

    def __repr__(self) -> str:
        return f"DomainRef(size={self._info.get('size')}, sha256={str(self._info.get('sha256'))[:16]!r})"


AnyDomain = Union[Domain, HashedDomain, PrefixDomain, DomainRef]


def domain_from_dict(info: Any) -> AnyDomain:
    """The domain of a stored ``to_dict()`` form (a vocabulary comes back as a
    :class:`DomainRef`).

    Raises:
        FormatError: not a domain form this version of ldpfast knows.
    """
    if not isinstance(info, dict) or not isinstance(info.get("kind"), str):
        raise FormatError(f"a stored domain must be an object with a 'kind', got {info!r:.80}")
    kind, version = info["kind"], info.get("version")
    try:
        if kind == "vocabulary" and version == VOCABULARY_VERSION and isinstance(info.get("sha256"), str) \
                and isinstance(info.get("size"), int) and set(info) == {"kind", "version", "size", "sha256"}:
            return DomainRef(info)
        if kind == "hashed" and version == LABEL_HASH_VERSION and set(info) == {"kind", "version", "d"}:
            return HashedDomain(info["d"])
        if kind == "prefix" and version == 1 and set(info) == {"kind", "version", "width"}:
            return PrefixDomain(info["width"])
    except ParameterError as exc:
        raise FormatError(f"stored domain is invalid: {exc}") from None
    raise FormatError(f"stored domain {info!r:.120} is not one this version of ldpfast reads")


def check_domain(domain: Any) -> _DomainBase:
    """``domain`` if it is one of the domains of this module (ParameterError otherwise)."""
    if not isinstance(domain, _DomainBase):
        raise ParameterError(f"domain must be an ldpfast Domain, HashedDomain or PrefixDomain, got "
                             f"{type(domain).__name__}")
    return domain
