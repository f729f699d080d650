"""Exceptions raised by ldpfast.

Every message names the offending parameter, the constraint it breaks and the value
received, e.g. ``epsilon must be finite and in [9.53674e-07, 66.5], got -1.0``.
"""

from __future__ import annotations

import re
import threading
import warnings
from typing import Any, List, Set, cast

__all__ = ["LdpfastError", "ParameterError", "ReportError", "IncompatibleError", "FormatError",
           "DTypeError", "StorageError", "PrivacyWarning", "ConvergenceWarning", "CollisionWarning",
           "MissingDependencyError", "reset_privacy_warnings"]


class LdpfastError(Exception):
    """Base class of ldpfast's own errors."""


class ParameterError(LdpfastError, ValueError):
    """A protocol parameter is invalid (out of range, wrong kind, inconsistent)."""


class ReportError(LdpfastError, ValueError):
    """A batch of reports is malformed; the aggregator that rejected it is unchanged."""


class IncompatibleError(LdpfastError, ValueError):
    """Two objects with different parameters were combined (e.g. merging aggregators)."""


class FormatError(LdpfastError, ValueError):
    """Serialized bytes are corrupt, of an unknown version, or of another protocol."""


class DTypeError(LdpfastError, TypeError):
    """An array has a type that cannot be used without an unsafe conversion."""


class StorageError(LdpfastError, OSError):
    """Reading or writing a file failed (missing, no permission, disk full, I/O error); the
    message names the file and the system's reason."""


class MissingDependencyError(LdpfastError, ImportError):
    """An optional package a feature needs is not installed; the message names the
    ``ldpfast[extra]`` that installs it (``ldpfast.arrow``: ``arrow``, plots: ``plot``,
    ``ldpfast.dask``: ``dask``, ``Estimate.to_pandas``: ``pandas``, the shuffle accountant:
    ``shuffle``)."""


class PrivacyWarning(UserWarning):
    """A protocol whose reports are not covered by its nominal eps (e.g. PrivSketch's
    ordering matrix). Shown once per process for each protocol and reason (the message with
    its numbers, such as eps, left out), wherever the parameters or clients are built:
    ldpfast's filter for this category, installed at import, lets a message through the
    first time only (Python's default would repeat it from every call site).
    ``warnings.simplefilter("always", PrivacyWarning)`` (which ``pytest.warns`` applies)
    shows every one, ``"ignore"`` silences it, and :func:`reset_privacy_warnings` lets each
    through once more."""


class CollisionWarning(UserWarning):
    """A :class:`ldpfast.HashedDomain` whose ``d`` is small enough that distinct labels
    sharing a value is not negligible (a label is then estimated with the frequency of the
    others that share its value); the message gives the probability."""


class ConvergenceWarning(UserWarning):
    """An iterative estimate (IBU, iterative MLE) reached its step limit before its stopping
    rule held; the message gives the certified log-likelihood gap it reached and what that
    gap bounds."""


class _ShownBefore:
    """The message matcher of ldpfast's PrivacyWarning filter: a message matches (and is
    ignored) when one with the same words, numbers aside, went through before. Python calls
    ``match`` for warnings of every category; only PrivacyWarnings are ignored on a match."""

    _NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")

    def __init__(self) -> None:
        self._seen: Set[str] = set()
        self._lock = threading.Lock()

    def match(self, text: str) -> bool:
        key = self._NUMBER.sub("#", str(text))
        with self._lock:
            if key in self._seen:
                return True
            self._seen.add(key)
            return False

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


_SHOWN_BEFORE = _ShownBefore()


def reset_privacy_warnings() -> None:
    """Let each PrivacyWarning through once more (for tests, and sessions that want to
    see them again)."""
    _SHOWN_BEFORE.clear()


def _install_privacy_filters(append: bool = False) -> None:
    """ldpfast's PrivacyWarning filters: "always" (so that Python's per-call-site registries
    never hold one back) and, just in front of it, the matcher that ignores what went
    through before. In front of all other filters at import; ``append=True`` puts them
    behind the others (tests/conftest.py, since pytest replaces the filters of each test:
    marks and ``pytest.warns`` then keep their precedence)."""
    filters = cast(List[Any], warnings.filters)
    filters[:] = [f for f in filters if f[1] is not _SHOWN_BEFORE]
    warnings.filterwarnings("always", category=PrivacyWarning, append=append)
    # (filterwarnings compiles a str pattern: the matcher object goes into the list itself)
    filters.insert(filters.index(("always", None, PrivacyWarning, None, 0)),
                   ("ignore", _SHOWN_BEFORE, PrivacyWarning, None, 0))


_install_privacy_filters()
