"""Reading labels from what users have (lists, numpy string arrays, pandas Series and
Categoricals, Arrow string and dictionary arrays) and the versioned label hash of
:class:`ldpfast.HashedDomain` (see :mod:`ldpfast.domain`)."""

from __future__ import annotations

import hashlib
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .errors import DTypeError, ParameterError

#: Version of :func:`label_hash` (part of a :class:`HashedDomain`'s fingerprint).
LABEL_HASH_VERSION = 1
#: The bytes :func:`label_hash` puts before every label.
LABEL_HASH_PREFIX = b"ldpfast-label-v1:"
Label = Union[str, bytes]


def _label_bytes(label: Any) -> bytes:
    if isinstance(label, str):
        return label.encode("utf-8")
    if isinstance(label, bytes):
        return label
    raise DTypeError(f"labels must be str or bytes, got {type(label).__name__} {label!r:.60}")


def label_hash(label: Label) -> int:
    """``H(label)``: the first 8 bytes of ``SHA-256(LABEL_HASH_PREFIX + bytes(label))`` as a
    big-endian integer (version 1; see the module docstring)."""
    return int.from_bytes(hashlib.sha256(LABEL_HASH_PREFIX + _label_bytes(label)).digest()[:8], "big")


def hash_labels(labels: Any, d: Optional[int] = None) -> np.ndarray:
    """:func:`label_hash` of every label (uint64), ``mod d`` when ``d`` is given. Repeated
    labels are hashed once."""
    uniques, inverse = _factorized(labels)
    hashed = np.fromiter(map(label_hash, uniques), dtype=np.uint64, count=len(uniques))
    if d is not None:
        hashed %= np.uint64(d)
    return np.take(hashed, inverse)


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
    return list(values)


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
