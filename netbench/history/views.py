"""The history's answers as a terminal table, markdown for a ticket, or JSON."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

from netbench.common.text import terminal_safe
from netbench.history.changes import Change


def table(head: list[str], rows: list[list[str]], fmt: str) -> str:
    if fmt == "markdown":
        cells = [[c.replace("|", "\\|") for c in r] for r in rows]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in cells])
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip()]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return terminal_safe("\n".join(out))


def day(text: str) -> str:
    return text[:16].replace("T", " ")


def pct(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:+.1f}%"


def change_json(c: Change) -> dict[str, Any]:
    return asdict(c) | {"confidence": c.confidence, "likely_cause": c.cause.field if c.cause else None}


def changes_view(found: list[Change], fmt: str) -> str:
    if fmt == "json":
        return json.dumps({"changes": [change_json(c) for c in found]}, indent=2)
    if not found:
        return "no persistent change in the history"
    head = ["kind", "entity", "shape", "shift", "95% interval", "last good", "first bad", "confidence",
            "environment changes"]
    rows = []
    for c in found:
        env = "; ".join(e.text() for e in c.env) or "none recorded"
        rows.append([c.kind, c.entity, c.shape, pct(c.shift_pct), f"{pct(c.low_pct)} .. {pct(c.high_pct)}",
                     day(c.last_good_at), day(c.first_bad_at), c.confidence, env])
    said = summary(found)
    return table(head, rows, fmt) + (f"\n{said}" if said else "")


def summary(found: list[Change]) -> str:
    """One line per environment change named as a cause, with the hosts it took down."""
    causes: dict[tuple[str, str | None, str | None, str, str], list[Change]] = {}
    for c in found:
        if c.cause is not None:
            key = (c.cause.field, c.cause.old, c.cause.new, day(c.first_bad_at)[:10], c.kind)
            causes.setdefault(key, []).append(c)
    lines = []
    for (fld, old, new, when, kind), hit in causes.items():
        e = hit[0].cause
        assert e is not None
        lo, hi = e.lost_range_pct or (0.0, 0.0)
        lost = f"{lo:.0f}%" if round(lo) == round(hi) else f"{lo:.0f}-{hi:.0f}%"
        names = ", ".join(c.entity.replace(",", "-") for c in hit[:6]) + (" ..." if len(hit) > 6 else "")
        through = "" if kind == "node" else f" through their {kind}{'s' * (len(hit) != 1)}"
        lines.append(f"{when}: {e.changed} hosts moved {fld} {old} -> {new} and {e.lost_changed} of them "
                     f"lost {lost}{through} ({names}); {e.lost_unchanged} of {e.unchanged} that stayed lost "
                     f"anything: the {fld} change is the likely cause")
    return terminal_safe("\n".join(x for x in lines if x))


def runs_view(runs: list[dict[str, Any]], fmt: str) -> str:
    if fmt == "json":
        return json.dumps({"runs": runs}, indent=2)
    head = ["started", "run", "command", "status", "hosts", "rows"]
    rows = [[day(r["started"]), r["run_id"], r["command"], r["status"], str(r["hosts"]), str(r["rows"])]
            for r in runs]
    return table(head, rows, fmt)


def timeline_view(kind: str, entity: str, rows: list[dict[str, Any]], found: list[Change],
                  env: dict[str, dict[str, str]], fmt: str) -> str:
    """One entity's runs, oldest first: its figure, and for a node what changed in its environment."""
    if fmt == "json":
        return json.dumps({"kind": kind, "entity": entity, "runs": rows,
                           "changes": [change_json(c) for c in found]}, indent=2, default=str)
    head = ["started", "run", _figure(kind), "environment change", "change"]
    starts = {c.first_bad: c for c in found}
    out, before = [], None
    for r in sorted(rows, key=lambda r: (r["started"], r["run_id"])):
        mine = env.get(r["run_id"], {})
        moved = [] if before is None else [f"{k} {before.get(k, '-')} -> {v}" for k, v in sorted(mine.items())
                                           if before.get(k) != v]
        before = mine or before
        c = starts.get(r["run_id"])
        said = f"{c.shape} {pct(c.shift_pct)}" + (f" ({c.cause.field})" if c and c.cause else "") if c else ""
        out.append([day(r["started"]), r["run_id"], _value(kind, r), "; ".join(moved), said])
    return table(head, out, fmt)


def _figure(kind: str) -> str:
    return {"node": "vs fleet", "link": "busbw GB/s (residual)", "switch": "cross-switch vs class",
            "fleet": "median busbw GB/s"}[kind]


def _value(kind: str, r: dict[str, Any]) -> str:
    if kind == "fleet":
        from netbench.collectives.sizes import format_size

        return f"{r['busbw_GBps']:.1f} ({r['collective']} {r['pattern']} {format_size(int(r['bytes']))})"
    if kind == "link":
        from netbench.collectives.sizes import format_size

        resid, size = r["resid"], format_size(int(r["bytes"]))
        own = pct(100 * (math.exp(resid) - 1) if resid == resid else None)
        return f"{r['busbw_GBps']:.1f} at {size} ({own})"
    v = r.get("figure", r.get("effect"))  # the figure the changes are found on (query.timeline)
    return "not judged" if v is None or v != v else pct(100 * (math.exp(v) - 1))
