"""The ``ldpfast`` command line (also ``python -m ldpfast``).

Each subcommand lives in ``ldpfast/commands/<name>.py`` and defines ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

from .errors import LdpfastError

COMMANDS = ("demo", "params", "simulate", "reproduce", "aggregate", "audit")


def _load(name: str):
    return importlib.import_module(f"ldpfast.commands.{name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ldpfast", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        try:
            module = _load(name)
        except ModuleNotFoundError as exc:
            if exc.name == f"ldpfast.commands.{name}":
                continue
            raise
        module.add_arguments(sub.add_parser(name, help=module.HELP, description=module.HELP))
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(_load(args.command).run(args) or 0)
    except LdpfastError as exc:
        print(f"ldpfast {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
