"""``simulate --data FILE`` with labels: a text file (optionally ``.gz``) of one label per
line (one value per user) or of whitespace-separated labels per line (one set per user),
read as integer ids numbered in order of first appearance. Files of integer ids keep their
meaning (:mod:`ldpfast.datasets`)."""

from __future__ import annotations

import gzip
import os
from typing import TYPE_CHECKING, List, Optional, Tuple, Union

import numpy as np

from ..errors import ParameterError, StorageError

if TYPE_CHECKING:
    from ..datasets import SetData, ValueData


def _tokens(path: str) -> Optional[List[List[str]]]:
    """The whitespace-separated tokens of each line of ``path``, or None when ``path`` is not
    a file or every token is an integer (a file of value ids)."""
    if not os.path.isfile(path):
        return None
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            lines = [line.split() for line in handle]
    except UnicodeDecodeError as exc:
        raise ParameterError(f"--data {path} must be UTF-8 text (labels) or integer ids: {exc}") from None
    except OSError as exc:
        raise StorageError(f"cannot read --data {path}: {exc.strerror or exc}") from None
    for tokens in lines:
        for token in tokens:
            try:
                int(token)
            except ValueError:
                return lines
    return None


def _ids(lines: List[List[str]], d: Optional[int], path: str) -> Tuple[List[List[int]], int]:
    """Each line's labels as ids (in order of first appearance) and the domain size."""
    table: dict[str, int] = {}
    ids = [[table.setdefault(token, len(table)) for token in tokens] for tokens in lines]
    if d is not None and d < len(table):
        raise ParameterError(f"--d must be >= the {len(table):,} distinct labels of --data {path}, got {d}")
    return ids, len(table) if d is None else d


def label_values(path: str, d: Optional[int], candidates: Union[None, str, int, List[int]]) -> Optional[ValueData]:
    """The ValueData of a file of one label per line (None for files of integer ids). The
    values of interest: ``candidates`` as ``simulate --candidates`` (default: the 100 most
    frequent, as for files of ids)."""
    from ..datasets import ValueData

    lines = _tokens(path)
    if lines is None:
        return None
    lines = [tokens for tokens in lines if tokens]
    if any(len(tokens) > 1 for tokens in lines):
        raise ParameterError(f"--data {path} holds several labels on a line (one set per user): set-valued "
                             "protocols take it; frequency oracles take one label per line")
    ids, size = _ids(lines, d, path)
    values = np.array([line[0] for line in ids], dtype=np.int64)
    name = os.path.basename(path)
    if isinstance(candidates, str):     # "all"
        chosen = np.arange(size, dtype=np.int64)
    elif isinstance(candidates, list):
        chosen = np.asarray(candidates, dtype=np.int64)
    else:
        top = 100 if candidates is None else candidates
        if top < 1:
            raise ParameterError(f"--candidates K must be >= 1, got {top}")
        distinct, counts = np.unique(values, return_counts=True)
        chosen = distinct[np.lexsort((distinct, -counts))][:top]
    return ValueData(values, size, chosen, name=name,
                     note=f"{name}: one label per user from a file ({np.unique(values).size:,} distinct labels "
                          "as ids in order of first appearance)")


def label_sets(path: str, d: Optional[int]) -> Optional[SetData]:
    """The SetData of a file of labels, one user's set per line (None for files of ids)."""
    from ..datasets import SetData

    lines = _tokens(path)
    if lines is None:
        return None
    ids, size = _ids(lines, d, path)
    sets = [np.unique(np.array(user, dtype=np.int64)) for user in ids]
    offsets = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum([s.size for s in sets], out=offsets[1:])
    items = np.concatenate(sets) if sets else np.zeros(0, dtype=np.int64)
    return SetData(offsets=offsets, items=items, d=size, name=os.path.basename(path))
