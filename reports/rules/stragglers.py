"""Stragglers: the host (rank, GPU) that ARRIVES last at world/ring collectives, again and again.

In a collective everyone finishes together; the straggler is the rank the others wait for, and a
waiting rank's own elapsed time is the longest. So this reads arrivals on one clock
(arrivals.jsonl, ``reports.arrivals``: per point, decisive late arrivals beyond the clock bound,
binomial against chance, persistent / periodic / moving), never who finished last. A host named in
most of a group's judged sizes is a finding: ``straggler`` when persistent,
``straggler_periodic`` when most of its sizes found it late every k-th iteration. Moving late
arrivals (system noise) and runs without arrivals (older runs, imported nccl-tests -I maxima, which
only bound the straggler) give none.

A rank late because of its path is not a straggler (issue 45): in a ring, the rank whose sends cross
to another leaf waits on that uplink (a 2:1 or capped uplink makes it last, iteration after
iteration), and the rank before a slow host waits on that host. So a host whose next host in the
group's ring is behind another leaf, or is slow itself (the pair model's node effect below the slow
node bar), is not named: its lateness is what its path predicts, and the cause is named elsewhere
(the uplink, the slow node).
"""

from __future__ import annotations

import math
from collections import Counter

from netbench.reports.arrivals import PointVerdict
from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule, size_label
from netbench.reports.stats import g3, sig3

from netbench.common.findings import Finding


def _finding(host: str, points: list[PointVerdict], judged: int, hosts: tuple[str, ...]) -> Finding:
    kinds = Counter(p.kind for p in points)
    periodic = kinds["periodic"] > kinds["persistent"]
    period = Counter(p.period for p in points if p.period).most_common(1)[0][0] if periodic else None
    rank, rank_n = Counter(p.rank for p in points).most_common(1)[0]
    local = next(p.local_rank for p in points if p.rank == rank)
    gpu = points[0].device == "cuda"
    share = sum(p.wait_share for p in points) / len(points)
    late = sum(p.late_us for p in points) / len(points)
    where = f"rank {rank} ({'GPU' if gpu else 'local rank'} {local} of {host})"
    sizes = sorted({p.bytes for p in points})
    how = f"every {period}th iteration" if periodic else "persistently"
    p_values = [p.p_value for p in points if p.p_value is not None]
    return Finding(
        rule="straggler_periodic" if periodic else "straggler",
        severity="warn",
        subject_kind="node",
        subject=host,
        title=(f"{host} arrives last {how} at collectives over {len(hosts)} hosts, in {len(points)} of "
               f"{judged} sizes: {where}, {g3(late)} us after the others, {g3(100 * share)}% of "
               "the collective spent waiting for it"),
        evidence={
            "sizes_named": len(points),
            "sizes_judged": judged,
            "sizes_bytes": sizes,
            "group_hosts": len(hosts),
            "straggler_rank": rank,
            "straggler_local_rank": local,
            "rank_named_sizes": rank_n,
            "kind": "periodic" if periodic else "persistent",
            "period_iters": period,
            "late_us": sig3(late),
            "wait_share_pct": sig3(100 * share),
            "clock_err_us": sig3(max(p.clock_err_us for p in points)),
            "p_value": sig3(min(p_values)) if p_values else None,
            "sizes": [size_label(b) for b in sizes],
        },
        action=(f"Everyone waits for {host}" + (f" every {period}th iteration: look for a periodic "
                "task on it (a timer, a daemon, checkpointing)" if periodic else
                ": check its CPU/GPU clocks and throttling, noisy neighbours, cgroup CPU limits and "
                "the NUMA binding of its ranks") + "; drain it if the job cannot wait."),
        hosts=[host],
    )


def check(ctx: AnalysisContext) -> list[Finding]:
    out: list[Finding] = []
    for group in ctx.analyses.stragglers:
        judged = len(group.judged)
        for host, points in group.stragglers():
            if not _path_explains(ctx, group.hosts, host):
                out.append(_finding(host, points, judged, group.hosts))
    return out


def _path_explains(ctx: AnalysisContext, hosts: tuple[str, ...], host: str) -> bool:
    """Whether ``host`` waits on its path: the host after it in the ring (``hosts``, in rank order, a
    host's ranks side by side) is behind another leaf, or slow."""
    ring = [h for k, h in enumerate(hosts) if k == 0 or h != hosts[k - 1]]
    if len(ring) > 1 and ring[0] == ring[-1]:
        ring.pop()
    if host not in ring or len(ring) < 2:
        return False
    after = ring[(ring.index(host) + 1) % len(ring)]
    mine, theirs = ctx.switches.get(host), ctx.switches.get(after)
    if mine is not None and theirs is not None and mine != theirs:
        return True
    model = ctx.pair_model
    if model is None or after not in model.hosts:
        return False
    k = model.hosts.index(after)
    bar = math.log(ctx.policy.thresholds.slow_node_factor)
    return bool(model.judged[k] and model.node_effect[k] < bar)


RULE = Rule(name="stragglers", ids=ids("straggler", "straggler_periodic"), check=check, doc=__doc__ or "")
