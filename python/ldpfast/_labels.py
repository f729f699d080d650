"""Reading labels from what users have (lists, numpy string arrays, pandas Series and
Categoricals, Arrow string and dictionary arrays) and the versioned label hash of
:class:`ldpfast.HashedDomain` (see :mod:`ldpfast.domain`)."""

from __future__ import annotations

import hashlib
import math
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._memory import _length
from ._validate import check_int
from .errors import CollisionWarning, DTypeError, LdpfastError, ParameterError

#: Version of :func:`label_hash` (part of a :class:`HashedDomain`'s fingerprint).
LABEL_HASH_VERSION = 1
#: The bytes :func:`label_hash` puts before every label.
LABEL_HASH_PREFIX = b"ldpfast-label-v1:"
Label = Union[str, bytes]


def _label_bytes(label: Any, name: str = "label") -> bytes:
    """The bytes a label stands for (a str's UTF-8). Refused: other types, a str with a lone
    surrogate (it has no UTF-8 form) and a label ending in NUL (numpy string arrays drop
    trailing NULs, so the label would be another one when it comes in an array)."""
    if isinstance(label, str) and label[-1:] != "\0":
        try:
            return label.encode("utf-8")
        except UnicodeEncodeError:
            pass
    elif isinstance(label, bytes) and label[-1:] != b"\0":
        return label
    raise _label_refusal(label, name)


def _label_refusal(label: Any, name: str) -> LdpfastError:
    """The error of a label :func:`_label_bytes` does not take, naming it ``name``."""
    if not isinstance(label, (str, bytes)):
        return DTypeError(f"{name} must be str or bytes, got {type(label).__name__} {label!r:.60}")
    if (label.endswith("\0") if isinstance(label, str) else label.endswith(b"\0")):
        return ParameterError(f"{name} must not end in a NUL character (numpy string arrays drop trailing NULs), "
                              f"got {label!r:.60}")
    return ParameterError(f"{name} must be valid Unicode (a lone surrogate has no UTF-8 form), got {label!r:.60}")


def _first_refusal(uniques: Sequence[Any], inverse: Optional[np.ndarray] = None) -> LdpfastError:
    """The error of the first label :func:`_label_bytes` does not take (there is one), naming
    it by its first index in the input (``inverse``: the distinct label of each input value;
    None when ``uniques`` is the input)."""
    position = next(i for i, label in enumerate(uniques) if not _takes(label))
    return _label_refusal(uniques[position], _input_name(position, inverse))


def _takes(label: Any) -> bool:
    try:
        _label_bytes(label)
    except LdpfastError:
        return False
    return True


def _input_name(position: int, inverse: Optional[np.ndarray]) -> str:
    if inverse is None:
        return f"labels[{position}]"
    where = np.flatnonzero(inverse == position)
    return f"labels[{int(where[0])}]" if where.size else f"category {position} of the labels"


def label_hash(label: Label) -> int:
    """``H(label)``: the first 8 bytes of ``SHA-256(LABEL_HASH_PREFIX + bytes(label))`` as a
    big-endian integer (version 1; see the module docstring)."""
    return int.from_bytes(hashlib.sha256(LABEL_HASH_PREFIX + _label_bytes(label)).digest()[:8], "big")


def hash_labels(labels: Any, d: Optional[int] = None) -> np.ndarray:
    """:func:`label_hash` of every label (uint64), ``mod d`` when ``d`` (in ``[2, 2^64]``) is
    given. Repeated labels are hashed once."""
    if d is not None:
        d = check_int("d", d, 2, 2**64)
    uniques, inverse = _factorized(labels)
    try:
        hashed = np.fromiter(map(label_hash, uniques), dtype=np.uint64, count=len(uniques))
    except LdpfastError:
        raise _first_refusal(uniques, inverse) from None
    if d is not None and d < 2**64:
        hashed %= np.uint64(d)
    return np.take(hashed, inverse)


#: Version of the vocabulary fingerprint's byte layout (:attr:`Domain.fingerprint`).
VOCABULARY_VERSION = 1
_VOCABULARY_TAG = b"ldpfast-vocabulary-v1:"


#: A HashedDomain with ``d`` below this is refused unless collisions are allowed, and below
#: :data:`COLLISIONS_WARNED_BELOW` it warns (:func:`check_collisions`).
COLLISIONS_REFUSED_BELOW = 2**20
COLLISIONS_WARNED_BELOW = 2**40


def shared_value_probability(d: int, others: int) -> float:
    """Probability that a given label shares its value ``H mod d`` with at least one of
    ``others`` other distinct labels: ``1 - (1 - 1/d)^others`` (the hash taken as uniform)."""
    return -math.expm1(others * math.log1p(-1.0 / d))


def check_collisions(d: int, collisions: str) -> None:
    """The collision rule of :class:`ldpfast.HashedDomain` (``collisions="allow"`` skips it):
    refused (ParameterError) when a label shares its value with one of 1,000 others with
    probability above about 1e-3 (``d < 2^20``), a CollisionWarning when with one of 10^6
    others above about 1e-6 (``d < 2^40``)."""
    if collisions == "allow" or d >= COLLISIONS_WARNED_BELOW:
        return
    if d < COLLISIONS_REFUSED_BELOW:
        raise ParameterError(
            f"d={d} is too small for a HashedDomain: a label shares its value with one of 1,000 other labels with "
            f"probability {shared_value_probability(d, 1000):.2g} and is then estimated with their frequency; use "
            "Domain(labels) for a known vocabulary (with other=... for the rest), d >= 2^40, or collisions='allow'")
    warnings.warn(f"HashedDomain(d={d}): a label shares its value with one of 10^6 other labels with probability "
                  f"{shared_value_probability(d, 10**6):.2g} and is then estimated with their frequency (negligible "
                  "from d >= 2^40; collisions='allow' silences this)", CollisionWarning, stacklevel=3)


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


def _encoding_nbytes(values: Any, per_label: int) -> int:
    """An upper bound on the memory encoding ``values`` takes beside them: ``per_label``
    bytes per label (the domain's own work), and where the labels are stored in an array
    rather than as Python objects, the str or bytes object each becomes when read (at most
    96 bytes of header and list slot, and the stored bytes: numpy 'U' / 'S' items once,
    pandas and Arrow storage 4 times, UTF-8 text needing up to 4 bytes a character)."""
    count = _length(values)
    if isinstance(values, (list, tuple, str, bytes)) or str(getattr(values, "dtype", "")) == "object":
        return per_label * count
    stored = int(getattr(values, "nbytes", 0))
    return (per_label + 96) * count + (stored if isinstance(values, np.ndarray) else 4 * stored)


# --- reading labels from what users have ------------------------------------------------------

def _module(obj: Any) -> str:
    return type(obj).__module__.split(".")[0]


def _categorical(values: Any) -> Optional[Tuple[List[Any], np.ndarray]]:
    """``(categories, codes)`` of a pandas Categorical / category Series or an Arrow
    dictionary array (codes -1 where missing), else None. The categories are read in bulk
    (element by element, a pandas string Index of a million costs seconds)."""
    module = _module(values)
    if module == "pandas":
        cat = None
        if hasattr(values, "codes") and hasattr(values, "categories"):        # Categorical, CategoricalIndex
            cat = values
        elif str(getattr(values, "dtype", "")) == "category":               # Series of category dtype
            cat = values.cat
        if cat is not None:
            return cat.categories.to_numpy(dtype=object).tolist(), np.asarray(cat.codes, dtype=np.int64)
        return None
    if module == "pyarrow":
        import pyarrow as pa

        if isinstance(values, pa.ChunkedArray):
            if not pa.types.is_dictionary(values.type):
                values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
            else:
                values = values.unify_dictionaries().combine_chunks() if values.num_chunks else \
                    pa.array([], type=values.type)
        if not pa.types.is_dictionary(values.type):
            if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)
                    or pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
                return None
            values = values.dictionary_encode()
        codes = values.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        return values.dictionary.to_numpy(zero_copy_only=False).tolist(), codes
    return None


def _flat(values: Any) -> Sequence[Any]:
    """A 1-D sequence of labels from a list, tuple, numpy array, pandas Series or Index, or
    a single str/bytes."""
    if isinstance(values, (str, bytes)):
        return [values]
    if _module(values) == "pandas":
        values = values.to_numpy(dtype=object)
    if isinstance(values, np.ndarray):
        arr: np.ndarray = values.reshape(1) if values.ndim == 0 else values
        if arr.ndim != 1:
            raise ParameterError(f"labels must be 1-D, got shape {arr.shape}")
        if arr.dtype.kind not in "USO":   # 'S' items come back without trailing NUL bytes (numpy)
            raise DTypeError(f"labels must be strings or bytes, got dtype {arr.dtype}")
        return list(arr.tolist())
    if isinstance(values, (list, tuple)):
        return values
    try:
        return list(values)
    except TypeError:
        raise DTypeError(f"labels must be a list, a numpy array, a pandas Series or an Arrow array of str or bytes, "
                         f"got {type(values).__name__} {values!r:.60}") from None


def _no_missing(codes: np.ndarray) -> None:
    if codes.size and int(codes.min()) < 0:
        raise ParameterError(f"labels must not be missing (NaN/None), got one at index {int(np.argmin(codes))}")


def _factorized(values: Any) -> Tuple[List[Any], np.ndarray]:
    """``(distinct labels, index of each value's label)``: repeated labels are looked up
    or hashed once."""
    cat = _categorical(values)
    if cat is not None:
        categories, codes = cat
        _no_missing(codes)
        return categories, codes
    seq = _flat(values)
    first: Dict[Any, int] = {}
    setdefault = first.setdefault
    try:
        inverse = np.fromiter((setdefault(label, len(first)) for label in seq), dtype=np.int64, count=len(seq))
    except TypeError:
        bad = next(label for label in seq if not isinstance(label, (str, bytes)))
        raise DTypeError(f"labels must be str or bytes, got {type(bad).__name__} {bad!r:.60}") from None
    return list(first), inverse


def is_labels(values: Any) -> bool:
    """True when ``values`` holds labels (strings, bytes, categories), not value ids."""
    if isinstance(values, (str, bytes)):
        return True
    if _categorical_like(values):
        return True
    if isinstance(values, np.ndarray):
        return values.dtype.kind in "US" or (values.dtype.kind == "O" and _first_is_label(values))
    if _module(values) == "pandas":
        kind = getattr(getattr(values, "dtype", None), "kind", "")
        return kind in "USO" and (kind != "O" or _first_is_label(values))
    if _module(values) == "pyarrow":
        return _categorical(values) is not None
    if isinstance(values, (list, tuple)):
        return _first_is_label(values)
    return False


def _categorical_like(values: Any) -> bool:
    return _module(values) == "pandas" and (str(getattr(values, "dtype", "")) == "category"
                                            or hasattr(values, "categories"))


def _first_is_label(values: Any) -> bool:
    for value in values:
        return isinstance(value, (str, bytes))
    return False
