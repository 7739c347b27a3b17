"""A progress line on stderr for long commands: shown only when stderr is a terminal and the
work is large (never in a pipe or a log file), turned off by the commands' ``--no-progress``."""
from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``update(done)`` redraws ``<what>: NN% of <total>`` at most a few times a second;
    ``finish()`` clears the line.  ``total``: bytes (or items with ``unit``)."""
    MIN_BYTES = 64 * 1024 * 1024
    EVERY = 0.2  # seconds between redraws

    def __init__(self, total: int, what: str = "", err: TextIO | None = None, unit: str = "bytes",
                 enabled: bool = True):
        self.err = err or sys.stderr
        self.total, self.what, self.unit = max(total, 1), what, unit
        self.shown, self.drawn = -1, 0.0
        isatty = getattr(self.err, "isatty", None)
        large = total >= self.MIN_BYTES if unit == "bytes" else total > 1
        self.on = enabled and large and bool(isatty and isatty())

    def update(self, done: int) -> None:
        if not self.on:
            return
        percent = min(100, done * 100 // self.total)
        now = time.monotonic()
        if percent != self.shown and (now - self.drawn >= self.EVERY or percent == 100):
            self.shown, self.drawn = percent, now
            label = f"{self.what}: " if self.what else ""
            self.err.write(f"\r{label}{percent:3d}% of {self.total} {self.unit}")
            self.err.flush()

    def finish(self) -> None:
        if self.on and self.shown >= 0:
            self.err.write("\r" + " " * 72 + "\r")
            self.err.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.finish()
