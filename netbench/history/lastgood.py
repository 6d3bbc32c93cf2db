"""Each node of a run against its own last good run in the history (``netbench preflight``).

A node's last good run is the latest earlier run in the history that judged it (its effect in the
pair model) with no warning or failure about it. Its figure there and now is the median busbw of its
pairs at the largest size both runs measured (the store's ``links``; the run's own pair model), and
its noise the run-to-run spread of its effect over the history (``changes.noise``, as ``netbench
history changes`` judges a series). The records (``reports.lastgood.LastGood``) are an input of the
run's analysis (``AnalysisContext.last_good``): the rule ``reports/rules/last_good.py`` judges them
with the run's other findings, so the verdict and every output read one list.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from netbench.history.changes import NOISE_FLOOR, noise
from netbench.history.store import HistoryStore
from netbench.reports.lastgood import LastGood


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
