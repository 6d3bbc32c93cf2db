"""A run's progress on stderr: on a terminal one status line, rewritten in place (the phase, its
round k of n, the pairs done, an ETA, a bar); elsewhere (a pipe, a log file, a CI job) plain lines,
a few: the pairwise phase of a ``--hosts`` run prints no table, so without them a sweep said nothing
for its longest phase.

The ETA of a phase's rounds is the mean of the rounds of that phase measured so far (wall clock)
times the rounds left: a round's length is set by its slowest pair, so rows per second would
mislead."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from netbench.collectives.plan import Phase
from netbench.collectives.plangroups import PairGroups

PLAIN_EVERY_S = 5.0
"""Plain lines: a round's line at most this often (a series' first and last rounds always)."""
PLAIN_HEARTBEAT_S = 30.0
"""Plain lines: within one long round, a line this often, so a log shows the run is alive."""
TTY_EVERY_S = 0.1

_ROUND = re.compile(r"^(?P<kind>.+?) (?P<k>\d+)/(?P<n>\d+)$")  # "pairwise round 3/12", "re-test 1/2"


def _kind(name: str) -> str | None:
    m = _ROUND.match(name)
    return m["kind"] if m else None


@dataclass(frozen=True)
class PhaseCount:
    """What progress knows of a phase of the plan: its name and the pairs it measures (0 for a
    phase that is not a round of pairs: world, ring, intra)."""

    name: str
    pairs: int = 0


def phase_counts(phases: Sequence[Phase]) -> list[PhaseCount]:
    """A plan's phases as progress counts them: a pairwise round's pairs are its groups; a rail
    round's groups are one a rail of each pair, so its pairs are its distinct host pairs."""
    def pairs(p: Phase) -> int:
        if isinstance(p.groups, PairGroups):
            return len(p.groups)
        return len({tuple(g.hosts) for g in p.groups if g.pattern == "rail"})

    return [PhaseCount(p.name, pairs(p)) for p in phases]


@dataclass
class _Series:
    """The rounds of one kind in a launch ("pairwise round", "re-test"): their pairs and times."""

    kind: str
    rounds: int
    pairs: int
    started: float
    done_rounds: int = 0
    done_pairs: int = 0
    durations: list[float] = field(default_factory=list)

    def eta(self, now: float, since: float) -> float | None:
        """Seconds left, the running round included; None before a round was measured."""
        if not self.durations:
            return None
        mean = sum(self.durations) / len(self.durations)
        return max(0.0, mean * (self.rounds - self.done_rounds) - (now - since))


def _own_terminal(stream: TextIO) -> TextIO | None:
    """A handle on the terminal ``stream`` writes to now, kept for the launch: while ranks run, fd
    2 is a pipe copied to the terminal a line at a time (``agents.launchers.without_torch_noise``),
    where a status line, which never ends its line, waited unseen until the next newline."""
    try:
        return os.fdopen(os.dup(stream.fileno()), "w", encoding="utf-8", errors="replace")
    except (AttributeError, OSError, ValueError):  # not a file (a test's buffer): the stream itself
        return None


def duration(seconds: float) -> str:
    """``45 s``, ``3 min 05 s``, ``1 h 02 min``."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Progress:
    """``enabled``: the status line (default: stderr is a terminal). ``plain``: plain lines when the
    status line is off. ``own_terminal``: the status line goes to the terminal itself during a
    launch (``_own_terminal``). ``sweep`` asks for both; preflight's launches log their rounds on
    stderr themselves, which reaches the terminal through the launch's pipe, a line at a time, after
    a status line written beside it: it keeps the stream."""

    def __init__(self, enabled: bool | None = None, stream=None, plain: bool = False,  # noqa: ANN001
                 own_terminal: bool = False, clock: Callable[[], float] = time.monotonic):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.plain = plain and not self.enabled
        self.own_terminal = own_terminal
        self.clock = clock
        self._last = 0.0
        self._shown = False
        self._phases: dict[int, PhaseCount] = {}
        self._series: _Series | None = None
        self._current: tuple[PhaseCount, float, int] | None = None  # the phase, its start, its round
        self._said = -1e18  # when the last plain line was written
        self._tty: TextIO | None = None  # the terminal itself, for a launch (``begin``)

    # -- phases --------------------------------------------------------------------------------------
    def begin(self, phases: Sequence[PhaseCount]) -> None:
        """A launch's plan: its phases by index (each launch of a run begins again)."""
        self._phases = dict(enumerate(phases))
        self._series = self._current = None
        if self.enabled and self.own_terminal and self._tty is None:
            self._tty = _own_terminal(self.stream)

    def phase(self, index: int) -> None:
        """Phase ``index`` of the plan begun starts (the coordinator released it)."""
        now = self.clock()
        self._close(now)
        count = self._phases.get(index)
        if count is None:
            return
        m = _ROUND.match(count.name)
        self._current = (count, now, int(m["k"]) if m and count.pairs else 0)
        if m is None or not count.pairs:
            self._series = None
            self._draw(f"{count.name} (phase {index + 1} of {len(self._phases)})", force=True)
            return
        kind, k, n = m["kind"], int(m["k"]), int(m["n"])
        if self._series is None or self._series.kind != kind:
            pairs = sum(p.pairs for p in self._phases.values() if _kind(p.name) == kind)
            self._series = _Series(kind, n, pairs, now)
        line = self._round_line(k, now, now)
        if self.plain and (k in (1, n) or now - self._said >= PLAIN_EVERY_S):
            self._say(line, now)
        self._draw(line, force=True)

    def end(self, completed: bool = True) -> None:
        """The launch ended: its last phase closed (and said, when it completed), the line cleared."""
        self._close(self.clock(), say=completed)
        self.clear()
        if self._tty is not None:
            with contextlib.suppress(OSError):  # a hung-up terminal refuses the buffered rest (EIO)
                self._tty.close()  # the descriptor is closed all the same
            self._tty = None

    def _round_line(self, k: int, now: float, since: float) -> str:
        s = self._series
        assert s is not None
        eta = s.eta(now, since)
        return (f"{s.kind} {k} of {s.rounds}: {s.done_pairs} of {s.pairs} pairs done, "
                + (f"eta {duration(eta)}" if eta is not None else "eta after this round"))

    def _close(self, now: float, say: bool = True) -> None:
        """The running phase ended: its time counts for the ETA; the series' last says it is done."""
        if self._current is None:
            return
        count, since, k = self._current
        self._current = None
        s = self._series
        if s is None or not k or _kind(count.name) != s.kind:
            return
        s.durations.append(now - since)
        s.done_rounds += 1
        s.done_pairs += count.pairs
        if say and s.done_rounds == s.rounds and (self.plain or self.enabled):
            self.note(f"netbench: {s.kind}s done: {s.done_pairs} pairs in {s.rounds} round(s), "
                      f"{duration(now - s.started)}")

    # -- the status line ----------------------------------------------------------------------------
    def update(self, done: int, total: int, what: str = "") -> None:
        """A row came in: ``done`` of the plan's ``total``; ``what``: the row, in words."""
        now = self.clock()
        count, since, k = self._current or (None, now, 0)
        if self.plain and k and now - self._said >= PLAIN_HEARTBEAT_S:
            self._say(self._round_line(k, now, since), now)
        if not self.enabled or (now - self._last < TTY_EVERY_S and done < total):
            return
        self._last = now
        head = self._round_line(k, now, since) + " " if k else ""
        frac = min(1.0, done / total) if total else 0.0
        bar = "#" * int(frac * 20) + "-" * (20 - int(frac * 20))
        self._write(f"{head}[{bar}] {done}/{total} {what}")

    def _draw(self, line: str, force: bool = False) -> None:
        if self.enabled:
            self._last = self.clock() if force else self._last
            self._write(line)

    def _write(self, line: str) -> None:
        """Rewrite the status line, cut to the terminal's width: a longer one wraps, and ``\\r``
        goes back to the start of its last row only, leaving the rows above it behind."""
        width = self._width()
        self._shown = self._emit("\r" + line[:width].ljust(width))

    def _emit(self, text: str) -> bool:
        """``text`` on the status line's terminal; False when that terminal is gone (EIO once it hung
        up, before SIGHUP reaches this process): the status line stops, SIGHUP ends the run as
        documented (129), never a write's error (exit 1)."""
        out = self._tty or self.stream
        try:
            out.write(text)
            out.flush()
        except OSError:
            self.enabled = False
            return False
        return True

    def _width(self) -> int:
        """The terminal's columns less one (the last column wraps on some), 100 where it says none."""
        try:
            columns = os.get_terminal_size((self._tty or self.stream).fileno()).columns
        except (AttributeError, OSError, ValueError):  # not a file, or not a terminal after all
            columns = 0
        return max(20, (columns or 100) - 1)

    def _say(self, line: str, now: float) -> None:
        self._said = now
        self.stream.write(f"netbench: {line}\n")
        self.stream.flush()

    def clear(self) -> None:
        if self.enabled and self._shown:
            self._emit("\r" + " " * self._width() + "\r")
            self._shown = False

    def note(self, text: str) -> None:
        """A line of its own, where the status line was (the same terminal, so in that order)."""
        self.clear()
        if not self._emit(text + "\n"):
            self.stream.write(text + "\n")  # the terminal is gone: where the rest of the output goes
