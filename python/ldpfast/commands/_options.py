"""Option parsing shared by the subcommands: integers written as ``100000``,
``100_000`` or ``1e5``, and deprecated option spellings kept as aliases."""

from __future__ import annotations

import argparse
import math
import sys
from decimal import Decimal, InvalidOperation
from typing import Any, List, Optional, Sequence

from ..errors import ParameterError


def integer(text: str) -> int:
    """An argparse ``type`` for integer options: ``100000``, ``100_000``, ``1e5`` and
    ``1.5e3`` are accepted when they denote an exact integer; ``1.5`` or ``1e-3`` are not."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = None if "_" in text else Decimal(text)
    except InvalidOperation:
        value = None
    if (value is None or not value.is_finite() or value.adjusted() > 30
            or value != value.to_integral_value()):
        raise argparse.ArgumentTypeError(
            f"expected an integer (e.g. 100000, 100_000 or 1e5), got {text!r}")
    return int(value)


class DeprecatedAlias(argparse.Action):
    """An old option name: stores into the new option's ``dest`` and says on stderr
    which name to use instead."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str = "", **kwargs: Any):
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        print(f"{parser.prog}: warning: {option_string} is deprecated, use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_alias(parser: argparse.ArgumentParser, old: str, new: str, dest: str, type: Any) -> None:
    """Accept ``old`` as a deprecated spelling of ``new`` (hidden from ``--help``)."""
    parser.add_argument(old, dest=dest, type=type, action=DeprecatedAlias, new=new, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)


def parse_floats(text: str, name: str = "--eps") -> List[float]:
    """``"1,2,3"`` or ``"1:5"`` (integers 1..5) -> list of floats: at least one, each finite."""
    refusal = ParameterError(f"{name} must be a comma-separated list of finite numbers or A:B with A <= B, "
                             f"got {text!r}")
    try:
        if ":" in text:
            lo, hi = (int(v) for v in text.split(":"))
            values = [float(v) for v in range(lo, hi + 1)]
        else:
            values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise refusal from None
    if not values or not all(math.isfinite(v) for v in values):
        raise refusal
    return values
