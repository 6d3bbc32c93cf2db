"""A one-line progress bar on stderr, drawn only when stderr is a terminal (never in logs/CI)."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, enabled: bool | None = None, stream=None):  # noqa: ANN001
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._last = 0.0
        self._shown = False
        self.t0 = time.monotonic()

    def update(self, done: int, total: int, what: str = "") -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and done < total:
            return
        self._last = now
        width = 30
        frac = min(1.0, done / total) if total else 0.0
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        eta = ""
        if 0 < done < total:
            eta = f" eta {int((now - self.t0) / done * (total - done))}s"
        self.stream.write(f"\r[{bar}] {done}/{total}{eta} {what[:40]:<40}")
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self.enabled and self._shown:
            self.stream.write("\r" + " " * 100 + "\r")
            self.stream.flush()
            self._shown = False

    def note(self, text: str) -> None:
        self.clear()
        self.stream.write(text + "\n")
        self.stream.flush()
