"""report.html's history section (``reports.html.history.HistorySection``) from the fleet history:

- the fleet's headline busbw by run, for each collective and pattern this run measured at its
  largest size (the store's ``fleet`` table, this run's point among them);
- the environment changes the store knows (a field whose value a host had in one run and another in
  its next), grouped by run, field and values, each with its hosts; those that ``netbench history
  changes`` names as the likely cause of nodes' losses (``query.attribute``) marked as such;
- each finding's entity (a node, a link, a switch) in one line: its last persistent change
  (``history.changes``, with what changed in its environment then) and its figure before and after,
  or that it had none, with this run against its earlier runs.

Only the runs up to this one count: a report on an older run tells its past, not what came after.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from netbench.collectives.sizes import format_size
from netbench.common.findings import Finding
from netbench.history.changes import WINDOW, Change, find_shifts
from netbench.history.overlay import WithRun
from netbench.history.query import _dated, _moved_with_an_end, changes, env_by_run, series
from netbench.reports.html.history import EnvMark, HistoryPoint, HistorySection, HistorySeries, PastLine

MAX_SERIES = 6  # headline charts
MAX_MARKS = 20  # environment changes listed (those that cost the most hosts first)
MAX_PAST = 30  # findings' entities told


@dataclass(frozen=True)
class _Runs:
    """The runs a section tells: ``days`` those up to this one (oldest first, their start); ``past``
    the history without this run (where changes are searched: this run, one measurement, is told
    against them) and ``order`` its runs (a change's ``split`` indexes it)."""

    days: dict[str, str]
    this: str | None
    size: int | None  # the largest size of this run's pair model: the figures' size
    past: WithRun
    order: list[str]


def build_section(view: WithRun, this: str | None, findings: Sequence[Finding]) -> HistorySection | None:
    """The section for the run ``this`` (None: not in the history) and its ``findings``; None when
    the history holds no run at all."""
    runs = view.runs()
    if runs.num_rows == 0:
        return None
    ids: list[str] = runs.column("run_id").to_pylist()
    started: list[str] = runs.column("started").to_pylist()
    store = str(view.root)
    if runs.num_rows == 1 and this in ids:
        return HistorySection(store, 1, note="it holds only this run: nothing to compare with yet")
    upto = ids.index(this) + 1 if this in ids else len(ids)
    later = len(ids) - upto
    past = WithRun(view.store, None, without=this)
    before = set(ids[:upto]) - {this}
    node_changes = [c for c in changes(past, ("node",)) if c.first_bad in before]  # type: ignore[arg-type]
    at = _Runs(dict(zip(ids[:upto], started[:upto], strict=True)), this,
               _largest(runs.column("sizes")[upto - 1].as_py()) if this in ids else None,
               past, past.runs().column("run_id").to_pylist() if past.exists() else [])
    return HistorySection(
        store, upto,
        series=_headlines(view, ids[:upto], this),
        marks=_marks(view, list(at.days), started, node_changes),
        past=_past(view, findings, at, node_changes),
        note=f"{later} later run{'s' * (later != 1)} left out" if later else "",
    )


def _largest(sizes: Any) -> int | None:
    text = str(sizes or "")
    return int(text.rsplit(",", 1)[-1]) if text else None


def _headlines(view: WithRun, ids: list[str], this: str | None) -> tuple[HistorySeries, ...]:
    fleet = view.table("fleet", columns=["run_id", "started", "collective", "pattern", "bytes", "busbw_GBps"])
    if not fleet.num_rows:
        return ()
    df = fleet.to_pandas()
    df = df[df["run_id"].isin(ids) & np.isfinite(df["busbw_GBps"].astype(float))]
    if not len(df):
        return ()
    last = this if this in set(df["run_id"]) else df.sort_values("started")["run_id"].iloc[-1]
    mine = df[df["run_id"] == last]
    keys = mine.groupby(["collective", "pattern"])["bytes"].max().reset_index()
    out = []
    for coll, pattern, size in keys.itertuples(index=False):
        part = df[(df["collective"] == coll) & (df["pattern"] == pattern) & (df["bytes"] == size)]
        if part["run_id"].nunique() < 2:
            continue
        part = part.sort_values(["started", "run_id"])
        points = tuple(HistoryPoint(str(r.started), str(r.run_id), float(r.busbw_GBps), r.run_id == this)
                       for r in part.itertuples(index=False))
        out.append(HistorySeries(f"{coll} {pattern} {format_size(int(size))}", points))
    return tuple(out[:MAX_SERIES])


def env_changes(view: WithRun, ids: list[str]) -> pd.DataFrame:
    """Every host's environment changes between its consecutive runs among ``ids``: one row a host
    and field that had a value in one run and another in its next (``order``: the run of the new
    one), a field first or no longer recorded being no change (a newer netbench records more)."""
    env = view.table("env", columns=["run_id", "host", "field", "value"])
    cols = ["order", "host", "field", "old", "value"]
    if not env.num_rows:
        return pd.DataFrame(columns=cols)
    df = env.to_pandas()
    df["order"] = df["run_id"].map({r: k for k, r in enumerate(ids)})
    df = df.dropna(subset=["order"]).sort_values(["host", "field", "order"])
    df["old"] = df.groupby(["host", "field"], sort=False)["value"].shift()
    return df.loc[df["old"].notna() & (df["old"] != df["value"]), cols]


def _marks(view: WithRun, ids: list[str], started: list[str], node_changes: list[Change]
           ) -> tuple[EnvMark, ...]:
    moved = env_changes(view, ids)
    if not len(moved):
        return ()
    causes: dict[tuple[str, str, str | None, str | None], list[Change]] = {}
    for c in node_changes:
        if c.cause is not None:
            causes.setdefault((c.first_bad, c.cause.field, c.cause.old, c.cause.new), []).append(c)
    marks = []
    for (order, fld, old, new), hosts in moved.groupby(["order", "field", "old", "value"])["host"]:
        k = int(order)
        text = f"{fld} {old} -> {new} on {hosts.nunique()} host{'s' * (hosts.nunique() != 1)}"
        hit = causes.get((ids[k], fld, old, new), [])
        if hit:
            lost = sorted(-c.shift_pct for c in hit)
            text += (f": the likely cause of {len(hit)} node{'s' * (len(hit) != 1)}' loss of "
                     f"{lost[0]:.0f}-{lost[-1]:.0f}%" if round(lost[0]) != round(lost[-1]) else
                     f": the likely cause of {len(hit)} node{'s' * (len(hit) != 1)}' loss of {lost[0]:.0f}%")
        marks.append((bool(hit), hosts.nunique(), k, EnvMark(started[k], text, bool(hit))))
    kept = sorted(marks, key=lambda m: (not m[0], -m[1], m[2]))[:MAX_MARKS]
    return tuple(m[3] for m in sorted(kept, key=lambda m: (m[2], m[3].text)))


def _subjects(findings: Sequence[Finding]) -> dict[tuple[str, str], str]:
    """The findings' entities the history knows, worst finding first: (kind, entity) -> severity."""
    out: dict[tuple[str, str], str] = {}
    for f in findings:
        if f.subject_kind == "node":
            key = ("node", f.subject)
        elif f.subject_kind == "pair" and f.subject.count("|") == 1:
            key = ("link", f.subject.replace("|", ","))
        elif f.subject_kind == "switch":
            key = ("switch", f.subject)
        else:
            continue
        out.setdefault(key, f.severity)  # worst first: the first is the worst
    return dict(list(out.items())[:MAX_PAST])


def _past(view: WithRun, findings: Sequence[Finding], at: _Runs, node_changes: list[Change]
          ) -> tuple[PastLine, ...]:
    wanted = _subjects(findings)
    if not wanted:
        return ()
    nodes = [e for k, e in wanted if k == "node"]
    links = [e for k, e in wanted if k == "link"]
    switches = [e for k, e in wanted if k == "switch"]
    figures = _busbw(view, nodes, links, at.size) if at.size else {}
    figures |= _switch_effects(view, switches)
    found = {(c.kind, c.entity): c for c in node_changes}  # oldest first: the latest of each kept
    for c in _link_changes(at.past, links, node_changes) + _switch_changes(at.past, switches):
        if c.first_bad in at.days:
            found[(c.kind, c.entity)] = c
    lines = []
    for (kind, entity), severity in wanted.items():
        text = _line(kind, entity, figures.get(entity, {}), at, found.get((kind, entity)), view)
        lines.append(PastLine(entity.replace(",", " - "), severity, text))
    return tuple(lines)


def _busbw(view: WithRun, nodes: list[str], links: list[str], size: int) -> dict[str, dict[str, float]]:
    """Per entity, per run: a node's median busbw over its pairs at ``size``, a link's own busbw."""
    ends = sorted(set(nodes) | {h for link in links for h in link.split(",")})
    if not ends:
        return {}
    where = (pc.field("bytes") == size) & (pc.field("a").isin(ends) | pc.field("b").isin(ends))
    table = view.table("links", columns=["run_id", "a", "b", "busbw_GBps"], where=where)
    if not table.num_rows:
        return {}
    df = table.to_pandas()
    out: dict[str, dict[str, float]] = {}
    for host in nodes:
        mine = df[(df["a"] == host) | (df["b"] == host)]
        out[host] = mine.groupby("run_id")["busbw_GBps"].median().astype(float).to_dict()
    for link in links:
        a, b = link.split(",")
        mine = df[((df["a"] == a) & (df["b"] == b)) | ((df["a"] == b) & (df["b"] == a))]
        out[link] = mine.groupby("run_id")["busbw_GBps"].median().astype(float).to_dict()
    return out


def _link_changes(view: WithRun, links: list[str], node_changes: list[Change]) -> list[Change]:
    if not links:
        return []
    where = None
    for link in links:
        a, b = link.split(",")
        one = ((pc.field("a") == a) & (pc.field("b") == b)) | ((pc.field("a") == b) & (pc.field("b") == a))
        where = one if where is None else where | one
    s = series(view, "link", where)  # type: ignore[arg-type] - a store as the queries read it
    found = [_dated(s, sh) for sh in find_shifts(s.values, "link")]
    return [_as_asked(c, links) for c in found if not _moved_with_an_end(c, node_changes)]


def _as_asked(c: Change, links: list[str]) -> Change:
    """A link's change named as the finding names it (the store keeps the analysis's order)."""
    a, b = c.entity.split(",")
    return c if c.entity in links else replace(c, entity=f"{b},{a}")


def _switch_changes(view: WithRun, switches: list[str]) -> list[Change]:
    if not switches:
        return []
    s = series(view, "switch", pc.field("switch").isin(switches))  # type: ignore[arg-type]
    return [_dated(s, sh) for sh in find_shifts(s.values, "switch")]


def _switch_effects(view: WithRun, switches: list[str]) -> dict[str, dict[str, float]]:
    """Per switch, per run: its cross-switch pairs against their class, in percent."""
    if not switches:
        return {}
    table = view.table("switches", columns=["run_id", "switch", "effect"],
                       where=pc.field("switch").isin(switches))
    out: dict[str, dict[str, float]] = {}
    names = ("run_id", "switch", "effect")
    cols = [table.column(k).to_pylist() for k in names] if table.num_rows else [[]] * 3
    for run, sw, eff in zip(*cols, strict=True):
        if eff is not None and math.isfinite(eff):
            out.setdefault(sw, {})[run] = 100 * (math.exp(eff) - 1)
    return out


def _line(kind: str, entity: str, fig: dict[str, float], at: _Runs, change: Change | None,
          view: WithRun) -> str:
    """One entity's past in words (module docstring)."""
    name = entity.replace(",", " - ")
    unit = (lambda v: f"{v:+.1f}% against its class") if kind == "switch" else (lambda v: f"{v:.3g} GB/s")
    at_size = f" at {format_size(at.size)}" if at.size and kind != "switch" else ""
    earlier = [r for r in at.days if r != at.this and r in fig]
    now = fig.get(at.this) if at.this is not None else None
    if change is not None:
        k = change.split
        before = [fig[r] for r in at.order[max(0, k - WINDOW):k] if r in fig]
        after = [fig[r] for r in at.order[k:] if r in fig and r in at.days]
        moved = (f"{unit(float(np.median(before)))} -> {unit(float(np.median(after)))}{at_size}"
                 if before and after else f"{change.shift_pct:+.1f}%")
        head = (f"{name} was fine until {change.last_good_at[:10]}" if change.shift_pct < 0
                else f"{name} got faster from {change.first_bad_at[:10]}")
        said = (f"{head}: {moved} ({change.shape} {change.shift_pct:+.1f}% from run {change.first_bad}, "
                f"{change.confidence} confidence)")
        if kind == "node":
            said += ("; then " + "; ".join(e.text() for e in change.env[:3])) if change.env else \
                "; no environment change recorded then"
        if now is not None and after:
            level = float(np.median(after))
            rel = f" ({100 * (now / level - 1):+.0f}% against its level since)" if kind != "switch" else ""
            said += f"; this run {unit(now)}{rel}"
        return said
    if not earlier:
        return f"{name}: no figure of it in the history before this run{at_size}"
    med = float(np.median([fig[r] for r in earlier]))
    said = (f"{name}: no persistent change in its {len(earlier)} earlier run{'s' * (len(earlier) != 1)} "
            f"({at.days[earlier[0]][:10]} to {at.days[earlier[-1]][:10]}, median {unit(med)}{at_size})")
    if now is not None:
        rel = f" ({100 * (now / med - 1):+.0f}%)" if kind != "switch" and med > 0 else ""
        said += f"; this run {unit(now)}{rel}"
    if kind == "node" and at.this is not None:
        said += _env_since(view, entity, earlier[-1], at.this, at.days[earlier[-1]][:10])
    return said


def _env_since(view: WithRun, host: str, before: str, this: str, day: str) -> str:
    env = env_by_run(view, host)  # type: ignore[arg-type] - a store as the queries read it
    old, new = env.get(before, {}), env.get(this, {})
    moved = [f"{k} {old[k]} -> {new[k]}" for k in sorted(set(old) & set(new)) if old[k] != new[k]]
    return f"; since its run of {day}: {', '.join(moved[:3])}" if moved else ""
