"""The UCI Adult census extract (Becker and Kohavi, 1996; CC BY 4.0): 32,561 people, six
numeric and nine categorical attributes, the data set the numeric and multi-dimensional LDP
papers evaluate on (HIO, AHEAD, CALM, PriPL-Tree). Bundled as ``data/adult.data.gz``
(provenance and checksum in ``data/PROVENANCE.md``); :func:`load_adult` checks the sha256.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
from importlib import resources
from typing import Dict, Tuple

import numpy as np

from ..errors import ParameterError

__all__ = ["AdultData", "load_adult", "ADULT_NUMERIC", "ADULT_CATEGORICAL"]

_FILE = "adult.data.gz"
_SHA256 = "c7a2b4716a97f930123e0baf879188d701e798172631a654fc703d4b082907f3"
_COLUMNS = ("age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
            "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
            "income")
#: The integer-valued attributes, by name.
ADULT_NUMERIC = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")
#: The categorical attributes (a missing category is its own label, ``?``).
ADULT_CATEGORICAL = tuple(c for c in _COLUMNS if c not in ADULT_NUMERIC)


@dataclasses.dataclass(frozen=True)
class AdultData:
    """Adult, one entry per person in file order.

    Attributes:
        numeric: ``{name: int64[n]}`` for the attributes of :data:`ADULT_NUMERIC`.
        categorical: ``{name: (codes, labels)}``: ``codes`` (``int64[n]``) index ``labels``
            (sorted), for the attributes of :data:`ADULT_CATEGORICAL`.
    """

    numeric: Dict[str, np.ndarray]
    categorical: Dict[str, Tuple[np.ndarray, Tuple[str, ...]]]

    @property
    def n(self) -> int:
        return int(self.numeric["age"].size)


def load_adult() -> AdultData:
    """The bundled Adult extract (the training part, 32,561 people).

    Raises:
        ParameterError: the bundled file does not match its recorded sha256.
    """
    path = resources.files("ldpfast").joinpath("data", _FILE)
    blob = path.read_bytes()
    actual = hashlib.sha256(blob).hexdigest()
    if actual != _SHA256:
        raise ParameterError(f"bundled file {_FILE} is corrupt: sha256 {actual}, expected {_SHA256}")
    rows = [line.split(", ") for line in gzip.decompress(blob).decode("ascii").splitlines() if line]
    columns = list(zip(*rows))
    numeric = {name: np.array(columns[_COLUMNS.index(name)], dtype=np.int64) for name in ADULT_NUMERIC}
    categorical = {}
    for name in ADULT_CATEGORICAL:
        labels, codes = np.unique(np.array(columns[_COLUMNS.index(name)]), return_inverse=True)
        categorical[name] = (codes.astype(np.int64).ravel(), tuple(str(v) for v in labels))
    return AdultData(numeric, categorical)
