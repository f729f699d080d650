"""Numeric data: means, variances, distributions, quantiles and range queries of numbers a
user holds (bounded values, or values of an ordered domain). Importing this package imports
(and so registers) every protocol module in it: modules not starting with ``_``."""

from __future__ import annotations

from .._family import load_family

load_family(__name__, __path__)
