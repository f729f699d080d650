"""The ``ldpfast`` command line (also ``python -m ldpfast``).

Each subcommand lives in ``ldpfast/commands/<name>.py`` and defines ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from typing import Any, List, Optional

from .errors import LdpfastError

COMMANDS = ("demo", "params", "simulate", "reproduce", "aggregate", "estimate", "audit", "shuffle")

#: Exit status after Ctrl-C: 128 + SIGINT, as a shell reports for a command killed by it.
EXIT_INTERRUPTED = 130

_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`]*)`")   # :class:`~ldpfast.Domain` -> ldpfast.Domain
_LITERAL = re.compile(r"``([^`]*)``")


def plain(text: Optional[str]) -> Optional[str]:
    """Help text without reStructuredText markup (roles, literals): ``--help`` is read in a
    terminal, where the docstrings' markup is noise."""
    if text is None:
        return None
    return _LITERAL.sub(r"\1", _ROLE.sub(r"\1", text))


def _load(name: str) -> Any:
    return importlib.import_module(f"ldpfast.commands.{name}")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="ldpfast", description=plain(__doc__.splitlines()[0]))
    parser.add_argument("--version", action="version", version=f"ldpfast {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        try:
            module = _load(name)
        except ModuleNotFoundError as exc:
            if exc.name == f"ldpfast.commands.{name}":
                continue
            raise
        # no abbreviations: `audit --d 1000` must not silently mean `--detect 1000`
        command = sub.add_parser(name, help=plain(module.HELP), description=plain(module.HELP), allow_abbrev=False)
        module.add_arguments(command)
        for action in command._actions:
            action.help = plain(action.help)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: Optional[List[str]]) -> argparse.Namespace:
    """``parser.parse_args(argv)``, except that arguments the subcommand does not know are
    refused by the subcommand's parser, so the error shows that subcommand's usage (argparse
    itself reports them with the top-level usage)."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        subparsers.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


#: Exit status after the reader of our output went away (``| head``): 128 + SIGPIPE, as
#: a shell reports for a command killed by SIGPIPE.
EXIT_BROKEN_PIPE = 141


def main(argv: Optional[List[str]] = None) -> int:
    """Run one subcommand. Errors in the user's input (parameters, files) print one line
    ``ldpfast CMD: error: ...`` on stderr and return 2; Ctrl-C prints ``ldpfast CMD:
    interrupted`` and returns 130; a closed output pipe ends quietly."""
    try:
        args = _parse(build_parser(), argv)
        try:
            return int(_load(args.command).run(args) or 0)
        except KeyboardInterrupt:
            print(f"ldpfast {args.command}: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        except LdpfastError as exc:
            print(f"ldpfast {args.command}: error: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            if isinstance(exc, BrokenPipeError):
                raise
            # files named on the command line: missing, unreadable, unwritable, directories
            print(f"ldpfast {args.command}: error: {exc}", file=sys.stderr)
            return 2
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush of the buffered
    output does not raise again (the recipe of Python's signal module documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (e.g. captured)
        pass


if __name__ == "__main__":
    sys.exit(main())
