"""The wrappers :class:`ldpfast._aggregator.Aggregator` puts around its subclasses'
methods: run under the aggregator's lock (one, or two in a fixed order), and ``estimate``
taking labels as candidates."""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, TypeVar, cast

from ._labels import is_labels
from ._memory import _length

def _locked_pair(a: Any, b: Any) -> Any:
    """Both aggregators' locks, taken in a fixed order (no deadlock when two threads lock
    the same pair in opposite roles)."""
    first, second = sorted((a, b), key=id)
    stack = contextlib.ExitStack()
    stack.enter_context(first._lock)
    stack.enter_context(second._lock)
    return stack


F = TypeVar("F", bound=Callable[..., Any])


def _locked(method: F) -> F:
    """``method`` run under its aggregator's lock."""
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    call._ldpfast_locked = True  # type: ignore[attr-defined]
    return cast(F, call)


def _label_candidates(estimate: F) -> F:
    """``estimate(candidates, ...)`` that also takes labels as candidates, turned into
    value ids by the parameters' domain (:mod:`ldpfast.domain`)."""
    @functools.wraps(estimate)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        domain = self.params.label_domain
        if domain is not None:
            if args and is_labels(args[0]):
                args = (_encoded(self, domain, args[0]),) + args[1:]
            elif is_labels(kwargs.get("candidates")):
                kwargs["candidates"] = _encoded(self, domain, kwargs["candidates"])
        return estimate(self, *args, **kwargs)

    call._ldpfast_labels = True  # type: ignore[attr-defined]
    return cast(F, call)


def _encoded(server: Any, domain: Any, labels: Any) -> Any:
    """``labels`` as value ids, once the server's memory budget has room for the encoding."""
    _check_encoding(server, domain, labels)
    return domain.encode(labels)


def _check_encoding(server: Any, domain: Any, labels: Any) -> None:
    """Refuse (ParameterError) label candidates whose encoding would take ``server`` over the
    memory budget, before they are read."""
    server._check_call(domain._encode_nbytes(labels), lambda: f"encoding {_length(labels)} candidate labels")
