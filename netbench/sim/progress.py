"""``netbench simulate``'s progress on stderr: a simulation of thousands of nodes spends minutes
building the fabric, planning, measuring thousands of phases and analysing them, and a command that
prints nothing for minutes looks hung. Each stage says so when it starts, with the seconds since the
start; the phases of the measurement say how far they are (``i/N``) at most every ``every_s``
seconds, so 8,191 pairwise rounds print a few dozen lines, not thousands. stdout keeps the results."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Progress:
    say: Callable[[str], None] = lambda s: None
    """Where the lines go (the command: stderr; a library caller: nowhere)."""
    every_s: float = 2.0
    """The least time between two lines about phases (the first and the last always print)."""
    started: float = field(default_factory=time.monotonic)
    _last: float = field(default=float("-inf"), repr=False)

    def stage(self, text: str) -> None:
        """A stage begins: one line, at once."""
        now = time.monotonic()
        self._last = now
        self.say(f"# simulate [{now - self.started:.0f} s]: {text}")

    def phase(self, done: int, total: int, name: str) -> None:
        """Phase ``done`` of ``total`` is being measured; said when it is the first or the last, or
        ``every_s`` has passed since the last line."""
        if done in (1, total) or time.monotonic() - self._last >= self.every_s:
            self.stage(f"measuring phase {done}/{total} ({name})")
