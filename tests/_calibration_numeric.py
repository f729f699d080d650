"""Calibration cases of the numeric family (tests/_calibration.py imports them)."""

from typing import Dict

from _calibration import Case

NUMERIC_CASES: Dict[str, Case] = {}
