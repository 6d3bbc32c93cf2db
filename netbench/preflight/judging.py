"""Preflight's own decisions, pure functions: which pairs the quick pass runs, whom to drain. Who
is a suspect, whom it is re-tested with and what the re-test says are ``netbench.confirm``'s, shared
with ``sweep --hosts``. Tested without any host (tests/test_preflight_plan.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from netbench.confirm import Pair


def drain_and_check(findings: list[Any], n_hosts: int) -> tuple[list[str], list[str]]:
    """The drain rule (module docstring): nodes to drain, and links/switches to check."""
    drain: dict[str, None] = {}
    check: dict[str, None] = {}
    for f in findings:
        if f.subject_kind == "pair" and f.severity in ("warn", "fail"):
            check.setdefault(f.subject, None)
        if f.severity != "fail":
            continue
        if f.subject_kind == "node" or (f.subject_kind == "component" and 0 < 2 * len(f.hosts) < n_hosts):
            for h in f.hosts or [f.subject]:
                drain.setdefault(h, None)
        elif f.subject_kind == "switch":
            check.setdefault(f.subject, None)
    return sorted(drain), sorted(check)


# -- stages 2 and 4: measuring -----------------------------------------------------------------------
def quick_rounds(hosts: list[str], partners: int) -> list[list[Pair]]:
    """The first circle-method rounds, until every host has ``partners`` partners (or all of them)."""
    from netbench.collectives.pairs import circle_rounds

    want = min(partners, len(hosts) - 1)
    have: Counter[str] = Counter()
    out: list[list[Pair]] = []
    for rnd in circle_rounds(hosts):
        if all(have[h] >= want for h in hosts):
            break
        out.append(rnd)
        for a, b in rnd:
            have[a] += 1
            have[b] += 1
    return out
