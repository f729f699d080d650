"""Exact loss derivations of the numeric family (tests/test_budgets.py reads them)."""

from fractions import Fraction
from typing import Any, Callable, Dict

NUMERIC_LOSS: Dict[str, Callable[[Any], Fraction]] = {}
