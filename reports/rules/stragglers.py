"""Stragglers: a host (or rank) that finishes last in world/ring collectives again and again.

Someone is always last; what matters is whether it is the same host far more often than chance
(1/H for H hosts; exact binomial test, Bonferroni over hosts), by a margin that is not noise
(its time above the median rank's). Rank r of a group of H hosts with P ranks per host lives on
``hosts[r // P]``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule
from netbench.reports.stats import g3, sig3

from netbench.common.findings import Finding


def _binom_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def check(ctx: AnalysisContext) -> list[Finding]:
    t = ctx.policy.thresholds
    rows = ctx.ok_rows
    rows = rows[rows["pattern"].isin(["world", "ring"]) & rows["rank_time_us"].notna()]
    out: list[Finding] = []
    by_group: dict[tuple[str, ...], list[tuple[str, int, float]]] = defaultdict(list)
    for hosts, times in zip(rows["hosts"], rows["rank_time_us"], strict=True):
        if not isinstance(hosts, list) or len(hosts) < 2 or not times:
            continue
        vals = [float(x) for x in times]
        if len(vals) % len(hosts):
            continue  # ranks per host not uniform: cannot place ranks on hosts
        per_host = len(vals) // len(hosts)
        last = max(range(len(vals)), key=vals.__getitem__)
        med = sorted(vals)[len(vals) // 2]
        excess = (vals[last] - med) / med if med > 0 else 0.0
        by_group[tuple(hosts)].append((hosts[last // per_host], last, excess))
    for hosts, events in by_group.items():
        n = len(events)
        if n < t.straggler_min_rows:
            continue
        h_count = Counter(h for h, _, _ in events)
        alpha = 0.01 / len(hosts)
        for host, k in h_count.most_common():
            frac = k / n
            if frac < t.straggler_fraction:
                break
            mine = [e for e in events if e[0] == host]
            mean_excess = sum(e[2] for e in mine) / len(mine)
            p = _binom_sf(k, n, 1 / len(hosts))
            if p >= alpha or mean_excess < t.straggler_min_excess:
                continue
            rank, rank_k = Counter(e[1] for e in mine).most_common(1)[0]
            out.append(
                Finding(
                    rule="straggler",
                    severity="warn",
                    subject_kind="node",
                    subject=host,
                    title=(
                        f"{host} finished last in {k} of {n} collectives over {len(hosts)} hosts "
                        f"(chance: {g3(100 / len(hosts))}%), {g3(100 * mean_excess)}% behind the median rank"
                    ),
                    evidence={
                        "last_count": k,
                        "rows": n,
                        "group_hosts": len(hosts),
                        "p_value": sig3(p),
                        "mean_excess_pct": sig3(100 * mean_excess),
                        "most_often_last_rank": rank,
                        "rank_last_count": rank_k,
                    },
                    action=(
                        f"Everyone waits for {host}: check CPU/GPU clocks and throttling, noisy neighbours, "
                        "NIC errors and NUMA binding of its ranks."
                    ),
                    hosts=[host],
                )
            )
    return out


RULE = Rule(name="stragglers", ids=ids("straggler"), check=check, doc=__doc__ or "")
