"""Simulated fleet histories: a series of nightly runs of one fabric with planted events at known
nights, for testing ``netbench history`` against a truth no real fleet gives.

Each night every node pair is measured once at one size (the pairwise pass of a fat tree with full
bisection): busbw = NIC x the slower node's factor x the link's factor, each time multiplied by the
simulator's own noise law (``sim.measure.noise_factor``: normal, t3 ...). The night's rows go through
the report's pair model (``reports.pairmodel``, the analysis every run gets) and into the history
store as a run's tables (``history.ingest.tables_of``): what ``history add`` stores for a real run,
without writing 90 run directories. Events (``plan_events``):

- tied: a rollout moves ``field`` (NIC firmware, driver, NCCL) to a new value on a set of nodes, and
  each of them loses ``loss`` from that night on (a firmware regression);
- untied: one node loses ``loss`` from a night on, nothing in its environment changed (a part);
- benign: a rollout on some nodes with no effect (one untied loss is planted on one of its nodes,
  that night: it must not be blamed on the rollout), a fleet-wide NCCL upgrade with none either;
- drift: a node losing ``rate`` a night from a night on (an optic degrading);
- blip: a node 20% slow for one night only (must not be reported);
- link: a pair's path slow from a night on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd

from netbench.sim.measure import noise_factor

BASE_ENV = {"nic_firmware": "28.39.1002", "driver_version": "580.95.05", "nccl": "2.27.3"}
NEW_ENV = {"nic_firmware": "28.41.1000", "driver_version": "580.105.08", "nccl": "2.28.3"}
SIZE = 1 << 30
NIC_GBPS = 180.0


@dataclass(frozen=True)
class Event:
    kind: str  # tied | untied | benign | drift | blip | link
    night: int
    hosts: tuple[str, ...]
    loss: float = 0.0  # share of busbw lost (0.1 = 10%); drift: a night
    field: str | None = None
    value: str | None = None


@dataclass
class History:
    nodes: int
    nights: int
    noise: float
    shape: str
    seed: int
    events: list[Event] = field(default_factory=list)
    start: datetime = field(default_factory=lambda: datetime(2026, 9, 1, 2, tzinfo=UTC))

    @property
    def hosts(self) -> list[str]:
        return [f"node{i + 1:04d}" for i in range(self.nodes)]

    def leaf(self, i: int) -> str:
        return f"leaf{i * self.leaves // self.nodes + 1:02d}"

    @property
    def leaves(self) -> int:
        return max(1, self.nodes // 16)


def plan_events(h: History, tied: int = 3, untied: int = 3) -> list[Event]:
    """A history's events, drawn from its seed: nights leave a week before the first and two nights
    after the last, so each can be seen to persist."""
    rng = np.random.default_rng(h.seed + 7919)
    hosts = h.hosts
    free = list(rng.permutation(hosts))
    size = max(3, h.nodes // 16)  # 16 of 256: as the 32 of 512

    def night() -> int:
        return int(rng.integers(8, h.nights - 2))

    def take(k: int) -> tuple[str, ...]:
        return tuple(str(free.pop()) for _ in range(k))

    events = []
    fields = list(BASE_ENV)
    for k in range(tied):
        fld = fields[k % len(fields)]
        events.append(Event("tied", night(), take(size), float(rng.uniform(0.05, 0.15)), fld,
                            f"{NEW_ENV[fld]}.{k}"))
    benign = Event("benign", night(), take(size), 0.0, "nic_firmware", "28.40.0990")
    events.append(benign)
    events.append(Event("untied", benign.night, benign.hosts[:1], float(rng.uniform(0.05, 0.15))))
    events += [Event("untied", night(), take(1), float(rng.uniform(0.05, 0.15))) for _ in range(untied - 1)]
    events.append(Event("benign", night(), tuple(hosts), 0.0, "nccl", "2.29.1"))
    events.append(Event("drift", int(rng.integers(8, max(9, h.nights - 25))), take(1), 0.006))
    events += [Event("blip", night(), take(1), 0.2) for _ in range(2)]
    events.append(Event("link", night(), take(2), 0.3))
    return events


def node_factors(h: History, night: int) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """Each node's and link's busbw factor on ``night``."""
    nodes: dict[str, float] = {}
    links: dict[tuple[str, str], float] = {}
    for e in h.events:
        if e.kind in ("tied", "untied") and night >= e.night:
            for host in e.hosts:
                nodes[host] = nodes.get(host, 1.0) * (1 - e.loss)
        elif e.kind == "drift" and night >= e.night:
            nodes[e.hosts[0]] = nodes.get(e.hosts[0], 1.0) * max(0.5, 1 - e.loss * (night - e.night + 1))
        elif e.kind == "blip" and night == e.night:
            nodes[e.hosts[0]] = nodes.get(e.hosts[0], 1.0) * (1 - e.loss)
        elif e.kind == "link" and night >= e.night:
            links[tuple(sorted(e.hosts))] = 1 - e.loss  # type: ignore[index]
    return nodes, links


def environment(h: History, night: int) -> dict[str, dict[str, str]]:
    """env.json's hosts on ``night``: every rollout of that night or before applied."""
    env = {host: dict(BASE_ENV) for host in h.hosts}
    for e in sorted(h.events, key=lambda e: e.night):
        if e.field and night >= e.night:
            for host in e.hosts:
                env[host][e.field] = str(e.value)
    return env


def night_rows(h: History, night: int, rng: np.random.Generator) -> pd.DataFrame:
    """The night's pair rows, as a run writes them (the columns the analysis reads)."""
    hosts = h.hosts
    n = len(hosts)
    nodes, links = node_factors(h, night)
    factor = np.array([nodes.get(x, 1.0) for x in hosts])
    ia, ib = np.triu_indices(n, 1)
    bw = NIC_GBPS * np.minimum(factor[ia], factor[ib])
    for (a, b), f in links.items():
        i, j = hosts.index(a), hosts.index(b)
        bw[(ia == min(i, j)) & (ib == max(i, j))] *= f
    bw = bw / noise_factor(h.shape, h.noise, rng.standard_normal(bw.shape), rng)
    leaf = np.array([h.leaf(i) for i in range(n)])
    same = leaf[ia] == leaf[ib]
    names = np.array(hosts, dtype=object)
    return pd.DataFrame({
        "collective": "all_reduce", "pattern": "pair", "bytes": SIZE, "status": "ok", "engine": "nccl",
        "hosts": [[a, b] for a, b in zip(names[ia], names[ib], strict=True)],
        "busbw_GBps": bw, "round": 0, "load": np.where(same, 0, 1),
        "hop_class": np.where(same, "leaf", "spine"),
    })


def write_history(h: History, store: Any, progress: Any = None) -> None:
    """Every night of ``h`` analysed and added to ``store`` (a ``history.store.HistoryStore``)."""
    from netbench.history.ingest import tables_of
    from netbench.reports.context import AnalysisContext

    rng = np.random.default_rng(h.seed)
    topology = {host: h.leaf(i) for i, host in enumerate(h.hosts)}
    for night in range(h.nights):
        when = h.start + timedelta(days=night)
        run_id = f"{when:%Y%m%dT%H%M%SZ}-h{h.seed:x}n{night:03d}"
        ctx = AnalysisContext.from_data(
            night_rows(h, night, rng), env={"hosts": environment(h, night)}, topology=topology,
            run={"run_id": run_id, "started": when.isoformat(), "command": "simulate", "status": "completed"},
        )
        store.add(tables_of(ctx))
        if progress is not None:
            progress(night)
