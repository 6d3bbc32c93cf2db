"""Whole runs imported twice: a log concatenated with itself (``cat a.log a.log a.log``), one file
given twice, the same job's log saved under two names. Every rank line (its pid included) and every
value the same is a copy, never a second measurement: two real runs differ in their pids and, at
two decimals, in their times. A copy judged as a sample would triple the evidence of one run."""

from __future__ import annotations

from typing import Any

from netbench.importers.nccl_tests.model import NcclTest, Problem

#: what a repeated run is said as (one problem on the run kept, the copies' table lines counted)
COPY_REASON = ("the same run again, every rank line and value identical (a log concatenated with itself, "
               "or one file given twice?): imported once")


def _outline(t: NcclTest) -> tuple[Any, ...]:
    """What tells runs apart at a glance: collective, configuration, rank lines and the first and
    last rows (no run's rows are compared in full unless all these agree)."""
    def values(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["bytes"], r["count"], r["dtype"], r["op"], r["root"], r["in_place"], r["time_us"],
                r["algbw_GBps"], r["busbw_GBps"], r.get("wrong"))

    ranks = tuple((r.rank, r.host, r.device, r.bus_id, r.pid) for r in t.ranks)
    ends = (values(t.rows[0]), values(t.rows[-1])) if t.rows else ()
    return t.collective, repr(sorted(t.config.items())), ranks, len(t.rows), ends


def _same_values(a: NcclTest, b: NcclTest) -> bool:
    keys = ("bytes", "count", "dtype", "op", "root", "in_place", "time_us", "algbw_GBps", "busbw_GBps",
            "wrong", "max_error", "per_iter")
    return all(all(x.get(k) == y.get(k) for k in keys) for x, y in zip(a.rows, b.rows, strict=True))


def drop_copies(tests: list[NcclTest]) -> list[NcclTest]:
    """The runs, each copy of an earlier one left out and counted on it (a ``repeated`` problem:
    the copy's source and table lines). A copy's own problems that the first lacks are kept."""
    kept: list[NcclTest] = []
    seen: dict[tuple[Any, ...], list[NcclTest]] = {}
    said: dict[int, Problem] = {}
    for t in tests:
        outline = _outline(t)
        first = next((k for k in seen.get(outline, []) if _same_values(k, t)), None)
        if first is None:
            kept.append(t)
            seen.setdefault(outline, []).append(t)
            continue
        p = said.get(id(first))
        if p is None:
            p = said[id(first)] = Problem("repeated", COPY_REASON,
                                          example=f"{t.source} line {t.rows[0]['line']}: the run again")
            first.problems.append(p)
        for row in t.rows:
            if not row["in_place"]:
                p.add(row["line"])
        known = {(q.kind, q.reason) for q in first.problems}
        first.problems += [q for q in t.problems if (q.kind, q.reason) not in known]
    return kept
