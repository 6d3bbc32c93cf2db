"""Each node of a run against its own last good run in the history (``netbench preflight``).

A node's last good run is the latest earlier run in the history that judged it (its effect in the
pair model) with no warning or failure about it. Its figure there and now is the median busbw of its
pairs at the largest size both runs measured (the store's ``links``; the run's own pair model).

A node is *below its last good run* when it measured at least ``LOSS`` less now, by more than its
own noise: ``Z`` times the run-to-run spread of its effect over the history (``changes.noise``, as
``netbench history changes`` judges a series), for a difference of two runs. One run cannot show
that a loss persists; it is said as measured in this run, against that run, and never drains
(``reports.verdict`` alone decides that). Its finding is a warning when the loss is the node's own
(it lost against the fleet as well, by ``LOSS``) and no warning or failure of this run already names
the node, else information: the fleet as a whole measuring lower is no node's fault.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from netbench.collectives.sizes import format_size
from netbench.common.findings import Finding
from netbench.history.changes import NOISE_FLOOR, noise
from netbench.history.store import HistoryStore

RULE = "slower_than_last_good"
LOSS = 0.10
Z = 3.0


@dataclass(frozen=True)
class LastGood:
    host: str
    run_id: str  # the last good run
    started: str
    bytes: int
    then_GBps: float
    now_GBps: float
    noise_pct: float  # the node's run-to-run spread (one sigma of its effect), in percent

    @property
    def change_pct(self) -> float:
        return 100 * (self.now_GBps / self.then_GBps - 1)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"change_pct": round(self.change_pct, 2), "size": format_size(self.bytes)}


def flagged(findings: list[Finding]) -> set[str]:
    """The nodes a warning or failure names (its subject, or its hosts for a node or a component)."""
    out: set[str] = set()
    for f in findings:
        if f.severity in ("warn", "fail") and f.subject_kind in ("node", "component"):
            out.update(f.hosts or ([f.subject] if f.subject_kind == "node" else []))
    return out


def compare(store: HistoryStore, ctx: Any, this: str | None) -> list[LastGood]:
    """Every node of the run ``ctx`` (run id ``this``) measured now and judged good in an earlier run
    of ``store``, against the latest such run."""
    model = ctx.pair_model
    if model is None or not store.exists():
        return []
    runs = store.runs()
    started = str(ctx.run.get("started") or "")
    order = [r for r, s in zip(runs.column("run_id").to_pylist(), runs.column("started").to_pylist(),
                               strict=True) if r != this and (not started or s < started)]
    if not order:
        return []
    now = _now(model)
    hosts = [h for h in model.hosts if h in now]
    good, sigma = _last_good(store, order, hosts)
    if not good:
        return []
    where = pc.field("a").isin(hosts) | pc.field("b").isin(hosts)
    links = store.table("links", columns=["run_id", "a", "b", "bytes", "busbw_GBps"], where=where,
                        runs=set(good.values())).to_pandas()
    ends = pd.concat([links.rename(columns={end: "host"})[["run_id", "host", "bytes", "busbw_GBps"]]
                      for end in ("a", "b")])  # each pair once a node at either end
    then: dict[tuple[str, str], dict[int, float]] = {}
    for (host, run, size), v in ends.groupby(["host", "run_id", "bytes"])["busbw_GBps"].median().items():
        then.setdefault((str(host), str(run)), {})[int(size)] = float(v)
    days = dict(zip(runs.column("run_id").to_pylist(), runs.column("started").to_pylist(), strict=True))
    out = []
    for host, run in good.items():
        mine = then.get((host, run), {})
        common = [s for s in mine if s in now[host]]
        if not common:
            continue
        size = max(common)
        out.append(LastGood(host, run, str(days[run]), size, mine[size], now[host][size],
                            100 * (math.exp(sigma.get(host, NOISE_FLOOR["node"])) - 1)))
    return out


def _now(model: Any) -> dict[str, dict[int, float]]:
    """Each node's median busbw over its measured pairs, per large size, in this run."""
    bw = np.where(np.isnan(model.bw), np.transpose(model.bw, (0, 2, 1)), model.bw)
    out: dict[str, dict[int, float]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a node with no pair at a size: NaN
        med = np.nanmedian(bw, axis=2)
    for k, size in enumerate(model.sizes):
        for i, host in enumerate(model.hosts):
            if np.isfinite(med[k, i]) and med[k, i] > 0:
                out.setdefault(host, {})[int(size)] = float(med[k, i])
    return out


def _last_good(store: HistoryStore, order: list[str], hosts: list[str]
               ) -> tuple[dict[str, str], dict[str, float]]:
    """Per host, its last good run among ``order`` (oldest first), and its effect's noise (log)."""
    nodes = store.table("nodes", columns=["run_id", "host", "effect"], where=pc.field("host").isin(hosts))
    bad = store.table("findings", columns=["run_id", "severity", "subject"],
                      where=pc.field("severity").isin(["warn", "fail"]) & pc.field("subject").isin(hosts))
    flagged_in = set(zip(bad.column("run_id").to_pylist(), bad.column("subject").to_pylist(), strict=True)) \
        if bad.num_rows else set()
    rank = {r: k for k, r in enumerate(order)}
    series: dict[str, list[tuple[int, float]]] = {}
    good: dict[str, tuple[int, str]] = {}
    cols = [nodes.column(c).to_pylist() for c in ("run_id", "host", "effect")] if nodes.num_rows else [[]] * 3
    for run, host, eff in zip(*cols, strict=True):
        if run not in rank or eff is None or not math.isfinite(eff):
            continue
        series.setdefault(host, []).append((rank[run], eff))
        if (run, host) not in flagged_in and rank[run] > good.get(host, (-1, ""))[0]:
            good[host] = (rank[run], run)
    sigma = {}
    for host, pts in series.items():
        x = np.array([[v for _, v in sorted(pts)]])
        sigma[host] = float(noise(x, NOISE_FLOOR["node"])[0])
    return {h: r for h, (_, r) in good.items()}, sigma


def findings_for(found: list[LastGood], findings: list[Finding]) -> list[Finding]:
    """The findings of the nodes below their last good run (module docstring): one a node whose loss
    is its own, one for those that only lost with the fleet."""
    lower = [g for g in found if g.now_GBps <= (1 - LOSS) * g.then_GBps
             and math.log(g.then_GBps / g.now_GBps) >= Z * math.sqrt(2) * math.log1p(g.noise_pct / 100)]
    if not lower:
        return []
    fleet = float(np.median([g.now_GBps / g.then_GBps for g in found]))
    named = flagged(findings)
    whole = f"; the fleet as a whole measured {100 * (fleet - 1):+.0f}%" if abs(fleet - 1) >= 0.05 else ""
    out, with_fleet = [], []
    for g in lower:
        if g.now_GBps / g.then_GBps / fleet > 1 - LOSS:
            with_fleet.append(g)
            continue
        severity = "info" if g.host in named else "warn"
        out.append(Finding(
            rule=RULE, severity=severity, subject_kind="node", subject=g.host, hosts=[g.host],
            title=(f"{g.host} measured {g.change_pct:+.0f}% against its last good run "
                   f"({g.started[:10]}, run {g.run_id}): {g.now_GBps:.3g} GB/s against "
                   f"{g.then_GBps:.3g} GB/s at {format_size(g.bytes)}{whole}"),
            evidence=g.to_json() | {"fleet_change_pct": round(100 * (fleet - 1), 2)},
            action=(f"See what changed on it since that run: netbench history show node {g.host}"
                    if severity == "warn" else ""),
        ))
    if with_fleet:
        names = ", ".join(g.host for g in with_fleet[:8]) + (" ..." if len(with_fleet) > 8 else "")
        out.append(Finding(
            rule=RULE, severity="info", subject_kind="run", subject="fleet",
            title=(f"{len(with_fleet)} of {len(found)} nodes measured {LOSS:.0%} or more below their last "
                   f"good run, as the fleet did ({100 * (fleet - 1):+.0f}%): {names}"),
            evidence={"nodes": [g.to_json() for g in with_fleet],
                      "fleet_change_pct": round(100 * (fleet - 1), 2)},
            action="netbench history show fleet: when the fleet's headline moved, and what changed then",
        ))
    return out
