"""A plain progress bar on stderr (no dependency): redrawn in place on a terminal; when stderr is
a file or a pipe, one line only, the final one (written by close())."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


class Progress:
    def __init__(
        self, label: str, *, stream: TextIO | None = None, enabled: bool = True, width: int = 28, redraw: float = 0.1
    ):
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.width = width
        self.redraw = redraw  # seconds between two draws on a terminal
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.monotonic()
        self._last_text = ""
        self._last_at = 0.0
        self._drawn = False

    def update(self, fraction: float | None, note: str = "", *, force: bool = False) -> None:
        """`fraction` in [0, 1], or None when the total is unknown (the bar then shows time)."""
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.started
        if fraction is None:
            bar = f"{self.label} [{'.' * self.width}] {elapsed:5.0f}s"
        else:
            fraction = min(max(fraction, 0.0), 1.0)
            filled = int(fraction * self.width)
            bar = f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {fraction * 100:5.1f}%"
        text = f"{bar} {note}".rstrip()
        now = time.monotonic()
        if self.tty:
            if force or now - self._last_at >= self.redraw or fraction == 1.0:
                self.stream.write("\r" + text.ljust(len(self._last_text)))
                self.stream.flush()
                self._last_text, self._last_at, self._drawn = text, now, True
            return
        # Not a terminal (a file, a pipe, a CI log): nothing until close() writes the one final line.
        self._last_text = text

    def close(self, note: str = "", fraction: float | None = 1.0) -> None:
        if not self.enabled:
            return
        self.update(fraction, note, force=True)
        if not self.tty:
            self.stream.write(self._last_text + "\n")
            self.stream.flush()
            return
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
