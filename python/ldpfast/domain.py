"""Labels in, labels out: the values users hold (strings, categories, bytes) as the integer
values ``[0, d)`` every protocol works on, and back.

Three kinds of domain, attached to a protocol's parameters with ``params.with_domain(...)``
(the domain then is part of the parameter fingerprint, so a server refuses reports made
with another vocabulary):

* :class:`Domain`: a closed vocabulary, label ``i`` is value ``i``. Built from a list, a
  pandas ``Categorical`` or an Arrow dictionary array; decodes every value back. With
  ``other="<other>"`` every label outside it is counted in one more value.
* :class:`HashedDomain`: an open dictionary for the protocols whose query cost does not
  grow with ``d`` (OCMS, OLH, BLH, the CMS variants, Hashtogram, the heavy hitters): a
  label is the value :func:`label_hash` ``mod d`` (a fixed, versioned byte-level function a
  client in any language reproduces). Candidates are given as labels at query time. Labels
  sharing a value make ``d < 2^20`` refused and ``d < 2^40`` warned (see the class).
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

from typing import Any, Dict, List, Optional, Sequence, Set, Union

import numpy as np

from ._domain_base import _DomainBase
from ._labels import (LABEL_HASH_PREFIX, LABEL_HASH_VERSION, _categorical, _encoding_nbytes, _factorized, _flat,
                      _first_refusal, _input_name, _label_bytes, _label_refusal, _no_missing, _vocabulary_digest,
                      check_collisions, hash_labels, label_hash, shared_value_probability, VOCABULARY_VERSION)
from ._validate import check_int
from .errors import DTypeError, FormatError, LdpfastError, ParameterError

__all__ = ["Domain", "HashedDomain", "PrefixDomain", "DomainRef", "label_hash", "hash_labels",
           "LABEL_HASH_VERSION", "LABEL_HASH_PREFIX", "domain_from_dict"]

# --- the three domains ------------------------------------------------------------------------

class Domain(_DomainBase):
    """A closed vocabulary: label ``labels[i]`` is value ``i`` (so ``d >= len(labels)``).

    Args:
        labels: distinct labels, all ``str`` or all ``bytes`` (a list, a numpy array, a
            pandas Index or Series, an Arrow array).
        other: None (default): a label outside the vocabulary is refused. A label (of the
            labels' type, not one of them): the "other" bucket, one more value after the
            labels (``Domain(["a", "b"], other="<other>")`` has values ``a=0, b=1,
            <other>=2``): every label outside the vocabulary is counted there, estimated
            and decoded as ``other`` like any value.

    ``encode`` maps labels to ids (a label outside the vocabulary raises ParameterError
    naming it, unless there is an "other" bucket), ``decode`` ids to labels. The
    :attr:`fingerprint` (sha256 of the labels in order, the "other" label last) and whether
    there is an "other" bucket go into the parameter fingerprint. Pickles hold the labels
    only; the lookup table is rebuilt on first use.
    """

    kind = "vocabulary"
    decodes = True

    def __init__(self, labels: Any, other: Optional[Union[str, bytes]] = None):
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
        self._other = other is not None
        if other is not None:
            seq.append(_other_label(other, text, seq))
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
    def from_pandas(cls, values: Any, other: Optional[Union[str, bytes]] = None) -> "Domain":
        """The categories of a pandas ``Categorical`` or category ``Series``, in order (so
        the categorical's codes are the value ids), or the distinct values of another
        Series or Index in order of appearance; ``other`` as in :class:`Domain`."""
        cat = _categorical(values)
        return cls(cat[0] if cat is not None else _factorized(values)[0], other=other)

    @classmethod
    def from_arrow(cls, values: Any, other: Optional[Union[str, bytes]] = None) -> "Domain":
        """The dictionary of an Arrow dictionary array (so its indices are the value ids),
        or the distinct values of a string array in order of appearance; ``other`` as in
        :class:`Domain`."""
        cat = _categorical(values)
        if cat is None:
            raise DTypeError(f"from_arrow needs an Arrow string or dictionary array, got {type(values).__name__}")
        return cls(cat[0], other=other)

    # -- the vocabulary ----------------------------------------------------------------
    @property
    def labels(self) -> np.ndarray:
        """The labels (read-only object array); ``labels[i]`` is value ``i`` (the "other"
        label last, when there is one)."""
        return self._labels

    @property
    def other(self) -> Optional[Union[str, bytes]]:
        """The label of the "other" bucket (its value is ``len(self) - 1``), or None."""
        return self._labels[-1] if self._other else None

    def __len__(self) -> int:
        return int(self._labels.size)

    def __contains__(self, label: object) -> bool:
        return label in self._lookup()

    def __repr__(self) -> str:
        shown = ", ".join(repr(s) for s in self._labels[:3])
        other = f", other={self.other!r}" if self._other else ""
        return f"Domain([{shown}{', ...' if len(self) > 3 else ''}], {len(self)} labels{other})"

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
            if self._other:
                return self._encode_open(seq)
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
                found = self._outside(categories[code], _input_name(code, codes))
            ids[code] = found
        return np.take(ids, codes)

    def _encode_open(self, seq: Sequence[Any]) -> np.ndarray:
        """:meth:`encode` with an "other" bucket: one dict lookup per label, and a check of
        each label outside the vocabulary (counted as "other" only if a domain takes it)."""
        get = self._lookup().get
        try:
            ids = np.fromiter((get(label, -1) for label in seq), dtype=np.int64, count=len(seq))
        except TypeError:   # an unhashable value
            index, bad = next((i, label) for i, label in enumerate(seq) if not isinstance(label, (str, bytes)))
            raise _label_refusal(bad, f"labels[{index}]") from None
        outside = np.flatnonzero(ids < 0)
        for index in outside.tolist():
            self._outside(seq[index], f"labels[{index}]")
        ids[outside] = len(self) - 1
        return ids

    def _outside(self, label: Any, name: str) -> int:
        """The value of a label outside the vocabulary: the "other" bucket's, if there is
        one and the label is a valid label of the vocabulary's type; else the error."""
        if not self._other:
            raise self._unknown(label, name)
        if not isinstance(label, str if self._text else bytes):
            raise DTypeError(f"{name} must be {'str' if self._text else 'bytes'} like the domain's labels, got "
                             f"{type(label).__name__} {label!r:.60}")
        _label_bytes(label, name)
        return len(self) - 1

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
        info = {"kind": self.kind, "version": VOCABULARY_VERSION, "size": len(self), "sha256": self.fingerprint}
        return {**info, "other": True} if self._other else info

    def __getstate__(self) -> Dict[str, Any]:
        return {"labels": self._labels, "text": self._text, "digest": self._digest, "other": self._other}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self._labels, self._text, self._digest = state["labels"], state["text"], state["digest"]
        self._other = state.get("other", False)
        self._table = None


def _other_label(other: Any, text: bool, labels: List[Any]) -> Union[str, bytes]:
    """``other`` checked: a label of the vocabulary's type that is not one of ``labels``."""
    kind = str if text else bytes
    if not isinstance(other, kind):
        raise DTypeError(f"other must be {kind.__name__} like the labels, got {type(other).__name__} {other!r:.60}")
    _label_bytes(other, "other")
    if other in set(labels):
        raise ParameterError(f"other must not be one of the labels (it names the labels outside them), "
                             f"got {other!r:.60}")
    return str(other) if isinstance(other, str) else bytes(other)   # numpy scalars as plain str / bytes


class HashedDomain(_DomainBase):
    """An open dictionary: a label is the value ``label_hash(label) mod d``, for protocols
    whose queries do not enumerate ``[0, d)`` (OCMS, OLH, BLH, the CMS variants, Hashtogram,
    HadaHeavy, TreeHist-CS, PEM), with ``d`` as large as the protocol allows (OCMS/OLH with
    the default field: up to ``2^64 - 60``; HadaHeavy: ``2^64``).

    Collisions: a label shares its value with at least one of ``k`` other distinct labels
    with probability ``1 - (1 - 1/d)^k`` (about ``k/d``; two given labels: ``1/d``), and is
    then estimated with their frequency added. The rule: ``d < 2^20`` is refused (with
    1,000 other labels the probability is above about 1e-3), ``d < 2^40`` warns
    (:class:`~ldpfast.errors.CollisionWarning`: with 10^6 others above about 1e-6); from
    ``2^40`` (OCMS/OLH's default fields, HadaHeavy's ``2^64``) it is negligible.
    ``decode`` is impossible (a hash is not inverted): give the labels you want estimated
    as candidates.

    Args:
        d: the protocol's domain size, in ``[2, 2^64]`` (at ``2^64`` a label's value is
            ``label_hash(label)`` itself); None (default) takes it from the parameters it is
            attached to (``params.with_domain(HashedDomain())``).
        collisions: ``"warn"`` (default: the rule above) or ``"allow"`` (no refusal, no
            warning: the caller accepts the collisions). Not part of the fingerprint.
    """

    kind = "hashed"
    collisions = "warn"     # what objects pickled before the option existed had

    def __init__(self, d: Optional[int] = None, collisions: str = "warn"):
        if d is not None and (isinstance(d, bool) or not isinstance(d, int) or not 2 <= d <= 2**64):
            raise ParameterError(f"d must be an integer in [2, 2^64], got {d!r}")
        if collisions not in ("warn", "allow"):
            raise ParameterError(f"collisions must be 'warn' or 'allow', got {collisions!r}")
        if d is not None:
            check_collisions(d, collisions)
        self.d, self.collisions = d, collisions

    def bind(self, d: int) -> "HashedDomain":
        if self.d is not None and self.d != d:
            raise ParameterError(f"this HashedDomain is for d={self.d}, the parameters have d={d}")
        return self if self.d == d else HashedDomain(d, self.collisions)

    @property
    def collision_probability(self) -> float:
        """Probability that two given distinct labels share a value (``1/d``, up to the
        rounding of ``mod d``)."""
        return 1.0 / self._bound()

    def shared_value_probability(self, others: int) -> float:
        """Probability that a given label shares its value with at least one of ``others``
        other distinct labels: ``1 - (1 - 1/d)^others``."""
        return shared_value_probability(self._bound(), check_int("others", others, 0, 2**64))

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
                and isinstance(info.get("size"), int) and info.get("other", True) is True \
                and set(info) - {"other"} == {"kind", "version", "size", "sha256"}:
            return DomainRef(info)
        if kind == "hashed" and version == LABEL_HASH_VERSION and set(info) == {"kind", "version", "d"}:
            return HashedDomain(info["d"], collisions="allow")  # the data exist: read, not judged again
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
