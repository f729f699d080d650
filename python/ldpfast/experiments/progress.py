"""A one-line progress bar for long simulations."""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

__all__ = ["ProgressBar"]


class ProgressBar:
    """A one-line progress bar on stderr (redrawn at most 10 times per second)."""

    def __init__(self, total: int, enabled: bool = True, stream: Optional[TextIO] = None,
                 width: int = 30):
        self.total, self.done, self.width = max(int(total), 1), 0, width
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.start = time.monotonic()
        self._last = 0.0
        self.label = ""

    def advance(self, steps: int = 1, label: str = "") -> None:
        self.done += steps
        self.label = label or self.label
        now = time.monotonic()
        if self.enabled and (now - self._last >= 0.1 or self.done >= self.total):
            self._last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        frac = min(self.done / self.total, 1.0)
        filled = int(frac * self.width)
        elapsed = now - self.start
        eta = elapsed / frac - elapsed if frac > 0 else float("nan")
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
                          f"{elapsed:6.1f}s eta {eta:6.1f}s {self.label[:40]:<40}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
