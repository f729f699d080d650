"""Records of many attributes: multi-attribute frequencies, k-way marginals,
multi-dimensional range queries and key-value data. Importing this package imports (and so
registers) every protocol module in it: modules not starting with ``_``."""

from __future__ import annotations

from .._family import load_family

load_family(__name__, __path__)
