"""The names every module of the re-test package shares: a pair of hosts, one launch's phases."""

from __future__ import annotations

Pair = tuple[str, str]
PhaseList = list[tuple[str, int, list[Pair]]]
"""(phase name, the rows' round, its pairs) of one launch."""
