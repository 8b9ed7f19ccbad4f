"""A one-line progress bar on stderr, drawn only when stderr is a terminal. No torch."""

from __future__ import annotations

import sys
import time


class Progress:
    """`update(done, total, label)` redraws the line; `close()` clears it."""

    def __init__(self, what: str, *, stream=None, enabled: bool | None = None, deadline: float | None = None):
        self.what = what
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = (bool(isatty and isatty())) if enabled is None else enabled
        self.deadline = deadline
        self.started = time.monotonic()
        self._width = 0

    def update(self, done: int, total: int, label: str = "") -> None:
        if not self.enabled:
            return
        cells = 24
        filled = cells * done // total if total else cells
        elapsed = time.monotonic() - self.started
        left = f", {max(0.0, self.deadline - time.monotonic()):.0f} s left" if self.deadline is not None else ""
        line = f"\r{self.what} [{'#' * filled}{'.' * (cells - filled)}] {done}/{total} {elapsed:.0f} s{left}  {label[:40]}"
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self.stream.write(line + " " * pad)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
