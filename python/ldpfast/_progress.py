"""Progress of long queries on stderr.

A query that takes seconds (a whole-dictionary OCMS or OLH estimate costs one step per
report and candidate) draws one line on stderr while it runs, redrawn at most ten times
a second and erased at the end. The rule, the same as ``ldpfast simulate``'s progress bar:

* by default (``set_progress(None)``) the line is drawn only when stderr is a terminal,
  so library output, logs, pipes and notebooks stay clean;
* ``LDPFAST_PROGRESS=1`` or ``set_progress(True)`` draws it anyway (e.g. a notebook),
  ``LDPFAST_PROGRESS=0`` or ``set_progress(False)`` never (``set_progress`` wins over the
  variable);
* only queries expected to take long (:data:`MIN_STEPS` steps) draw anything, and
  :func:`suppressed` turns it off inside a block (the simulation harness runs many queries
  under its own bar);
* iterative fits (IBU, MLE: :class:`IterationProgress`), whose length is not known in
  advance, draw from their :data:`FIT_DELAY`-th second on.

The query runs in pieces to report progress; the pieces add up to the same counts.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Iterator, Optional, TextIO

from .errors import ParameterError

__all__ = ["set_progress", "get_progress", "suppressed", "QueryProgress", "IterationProgress", "MIN_STEPS",
           "FIT_DELAY"]

#: Queries of fewer steps (hashed (report, candidate) pairs) draw nothing: about a second.
MIN_STEPS = 2e9
#: Seconds an iterative fit runs before its line appears.
FIT_DELAY = 1.0

_setting: Optional[bool] = None
_quiet = threading.local()


def set_progress(enabled: Optional[bool]) -> None:
    """Progress lines of long queries: True (always, on stderr), False (never) or None
    (default: when stderr is a terminal, unless ``LDPFAST_PROGRESS`` says otherwise)."""
    global _setting
    if enabled is not None and not isinstance(enabled, bool):
        raise ParameterError(f"enabled must be True, False or None, got {enabled!r}")
    _setting = enabled


def get_progress() -> bool:
    """Whether a long query started now would draw its progress line."""
    if getattr(_quiet, "depth", 0):
        return False
    if _setting is not None:
        return _setting
    env = os.environ.get("LDPFAST_PROGRESS", "").strip()
    if env in ("0", "1"):
        return env == "1"
    stream = sys.stderr
    return stream is not None and hasattr(stream, "isatty") and stream.isatty()


@contextlib.contextmanager
def suppressed() -> Iterator[None]:
    """No query progress inside the block (this thread)."""
    _quiet.depth = getattr(_quiet, "depth", 0) + 1
    try:
        yield
    finally:
        _quiet.depth -= 1


class _Line:
    """One line on ``stream``, redrawn in place and erased by :meth:`close`."""

    def __init__(self, stream: Optional[TextIO]):
        self.stream = stream if stream is not None else sys.stderr
        self.start = self._last = time.monotonic()
        self._width = 0

    def _write(self, text: str) -> None:
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)

    def close(self) -> None:
        """Erase the line."""
        if self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()


class QueryProgress(_Line):
    """One progress line: ``label: 40% (40,000/100,000 candidates), 12 s, about 18 s left``."""

    def __init__(self, label: str, total: int, stream: Optional[TextIO] = None):
        super().__init__(stream)
        self.label, self.total, self.done = label, max(int(total), 1), 0

    def advance(self, steps: int) -> None:
        self.done += int(steps)
        now = time.monotonic()
        if now - self._last >= 0.1 or self.done >= self.total:
            self._last = now
            elapsed = now - self.start
            share = min(self.done / self.total, 1.0)
            left = f", about {elapsed / share - elapsed:.0f} s left" if 0 < share < 1 else ""
            self._write(f"{self.label}: {share:.0%} ({self.done:,}/{self.total:,} candidates), "
                        f"{elapsed:.0f} s{left}")


class IterationProgress(_Line):
    """The line of an iterative fit, from its :data:`FIT_DELAY`-th second on:
    ``ibu over 73,447 columns: step 1,200 of at most 10,000, gap 3.1e-05 (stops at 6.8e-08), 42 s``."""

    def __init__(self, label: str, max_steps: int, target: float, stream: Optional[TextIO] = None):
        super().__init__(stream)
        self.label, self.max_steps, self.target, self.done = label, int(max_steps), float(target), 0

    def advance(self, gap: float) -> None:
        """One more gradient: the certified ``gap`` of the iterate after ``done`` steps (the
        first gradient is the start's, step 0)."""
        now = time.monotonic()
        if now - self.start >= FIT_DELAY and now - self._last >= 0.1:
            self._last = now
            self._write(f"{self.label}: step {self.done:,} of at most {self.max_steps:,}, gap {gap:.2g} "
                        f"(stops at {self.target:.2g}), {now - self.start:.0f} s")
        self.done += 1
