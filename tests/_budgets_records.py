"""Exact loss derivations of the record protocols (tests/test_budgets.py reads them)."""

from fractions import Fraction
from typing import Any, Callable, Dict

RECORD_LOSS: Dict[str, Callable[[Any], Fraction]] = {}
