"""Exceptions raised by ldpfast.

Every message names the offending parameter, the constraint it breaks and the value
received, e.g. ``epsilon must be finite and in [9.53674e-07, 66.5], got -1.0``.
"""

from __future__ import annotations

import warnings

__all__ = ["LdpfastError", "ParameterError", "ReportError", "IncompatibleError", "FormatError",
           "DTypeError", "StorageError", "PrivacyWarning", "ConvergenceWarning", "CollisionWarning",
           "MissingDependencyError"]


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
    ordering matrix). Emitted every time such parameters or clients are built (not once per
    call site as Python's default filter would: ldpfast installs an ``"always"`` filter for
    this category at import); silencing it takes an explicit filter
    (``warnings.simplefilter("ignore", PrivacyWarning)``, which takes precedence)."""


class CollisionWarning(UserWarning):
    """A :class:`ldpfast.HashedDomain` whose ``d`` is small enough that distinct labels
    sharing a value is not negligible (a label is then estimated with the frequency of the
    others that share its value); the message gives the probability."""


class ConvergenceWarning(UserWarning):
    """An iterative estimate (IBU, iterative MLE) reached its step limit before its stopping
    rule held; the message gives the certified log-likelihood gap it reached and what that
    gap bounds."""


warnings.filterwarnings("always", category=PrivacyWarning)
