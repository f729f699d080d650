"""Calibration cases of the record and key-value protocols (tests/_calibration.py imports them)."""

from typing import Dict

from _calibration import Case

RECORD_CASES: Dict[str, Case] = {}
