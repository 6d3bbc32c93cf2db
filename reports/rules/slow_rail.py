"""Slow rail: one NIC (and its cable, its rail switch port) of a node, seen by ``--pattern rail``.

A rail group is rank k of one node with rank k of another: GPU k's NIC on both ends and the rail
switch between them, nothing else. A NIC capped below its peers bottlenecks every rail group it is
in, so its best group (capped parts bottleneck, they do not multiply) is still well below the
groups of the same rail that do not include it. That names the node and the rail:
"node X rail 3 (mlx5_3) is 45% below its rail peers (rail switch railsw3)". The NIC and switch come
from the inventory's GPU-NIC affinity (``inventory.rails``); without it the finding says why the NIC
is unknown. A rail must be both practically slow (its best group at most ``slow_pair_factor`` of the
median of its peers) and apart from them (each of its points below each of theirs), so that a noisy
fabric's spread is not taken for a bad NIC. When every rail of a node is slow the node is the fault,
and one finding says so.

With two nodes a rail has no peers that leave one end out: a rail far below the pair's other rails
is then a warning on the pair's rail, naming both NICs (a third node tells which end it is).

Without ``--pattern rail`` a bad NIC shows as a slow node: NCCL's channels run in lock-step over
every NIC of a pair, so one NIC at 0.7 makes every pair of its node run at 0.7. A node the re-tests
confirmed slow on a rail-optimised fabric is then re-tested rail by rail (``netbench.confirm.rails``);
a rail it confirmed (kind ``nic``) is a finding here, naming the node, the rail, the NIC and its rail
switch. Rail rows of the re-test rounds are judged there, against the controls measured beside
them, and are left out of the comparison above.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from netbench.inventory.model import NodeInventory
from netbench.inventory.rails import RailPort, ports_by_host, rail_ports
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule, size_label

from netbench.common.findings import Finding

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext

_ACTION = ("Check this NIC and its link: ibstat / ethtool (rate, state), its PCIe link, the cable and "
           "transceiver and the rail switch port it is cabled to; then re-run `netbench sweep --hosts ... "
           "--pattern rail` on this node with two known-good partners.")
_ACTION_RETESTED = ("Check this NIC and its link: ibstat / ethtool (rate, state), its PCIe link, the cable "
                    "and transceiver and the rail switch port it is cabled to; its node stays drained until "
                    "a clean netbench run on it returns it to service.")
_ACTION_NODE = ("Every rail of this node is slow: look at the node (CPU/PCIe, GPU clocks, NIC firmware "
                "and driver) rather than one NIC; drain it until it is fixed.")
_ACTION_PAIR = ("Re-run `--pattern rail` with a third node: the end whose rail stays slow with every "
                "partner is the bad NIC or cable.")

Pair = tuple[str, str]


def rail_points(ctx: AnalysisContext) -> tuple[str, list[int], dict[int, dict[Pair, list[float]]]] | None:
    """(collective, sizes, rail -> {(a, b): busbw of each point}) of the rail rows at the largest sizes
    measured (the collective of the most rail groups, all_reduce first), or None without rail rows."""
    df = ctx.rest  # every row that is not a pair's
    rows = df[(df["pattern"] == "rail") & (df["status"] == "ok") & df["busbw_GBps"].notna()]
    if "rail" not in rows.columns or rows.empty:
        return None
    retests = ctx.analyses.retests
    if retests is not None and retests.from_round is not None:  # the re-tests' rows: judged there
        rows = rows[~(rows["round"].fillna(-1) >= retests.from_round)]
    rows = rows[rows["rail"].notna()]
    if rows.empty:
        return None
    counts = rows.groupby("collective")["group"].nunique()
    coll = "all_reduce" if "all_reduce" in counts.index else str(counts.idxmax())
    rows = rows[rows["collective"] == coll]
    sizes = sorted({int(b) for b in rows["bytes"]})[-ctx.policy.thresholds.large_sizes_max:]
    rows = rows[rows["bytes"].isin(sizes)]
    points: dict[int, dict[Pair, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows.itertuples(index=False):
        a, b = sorted(r.hosts)
        points[int(r.rail)][(a, b)].append(float(r.busbw_GBps))
    return coll, sizes, {k: dict(by) for k, by in points.items()}


def _port(ports: dict[str, list[RailPort]], host: str, rail: int) -> RailPort:
    got = ports.get(host)
    if got is None:
        return RailPort(rail, unknown="the run has no inventory of this host")
    return got[rail]


def _where(p: RailPort) -> str:
    return f" (rail switch {p.switch})" if p.switch else ""


def _evidence(p: RailPort, **kw: Any) -> dict[str, Any]:
    return {"rail": p.rail, "nic": p.nic, "netdev": p.netdev, "rail_switch": p.switch,
            "switch_port": p.switch_port, "nic_unknown": p.unknown, **kw}


def _retested(ctx: AnalysisContext) -> list[Finding]:
    """A finding for each NIC the rail-by-rail re-test confirmed slow (``netbench.confirm.rails``)."""
    retests = ctx.analyses.retests
    found = [rt for rt in (retests.results.values() if retests is not None else ())
             if rt.kind == "nic" and rt.verdict == "confirmed"]
    if not found:
        return []
    invs = {d.get("host"): d for d in ctx.inventory}
    out = []
    for rt in sorted(found, key=lambda rt: rt.subject):
        host, _, rail_text = rt.subject.rpartition("/rail")
        if not rail_text.isdigit():  # run.json is untrusted: a key that names no rail names no NIC
            continue
        rail = int(rail_text)
        inv = invs.get(host)
        node = NodeInventory.from_dict(inv) if inv is not None else None
        p = rail_ports(node, max(rail + 1, len(node.gpus) if node else 0))[rail]
        ratio = statistics.median(rt.ratios.values()) if rt.ratios else 1.0
        slow, runs = rt.slow_runs or (len(rt.ratios), len(rt.ratios))
        where = f", rail switch {p.switch}" if p.switch else ""
        out.append(Finding(
            rule="slow_rail", severity="fail", subject_kind="node", subject=host,
            title=f"{host} NIC {p.nic or '(unknown)'} (GPU {p.rail}'s rail{where}) is "
                  f"{1 - ratio:.0%} below its rail's controls on a "
                  f"rail-by-rail re-test, with {slow} of {runs} known-good partner(s); the node's other "
                  "rails are not: the NIC, not the node",
            evidence=_evidence(p, retest=asdict(rt)),
            action=_ACTION_RETESTED, hosts=[host],
        ))
    return out


def check(ctx: AnalysisContext) -> list[Finding]:
    return _retested(ctx) + _swept(ctx)


def _swept(ctx: AnalysisContext) -> list[Finding]:
    """The rail rows of the sweep (``--pattern rail``): each node's rail against its rail peers."""
    got = rail_points(ctx)
    if got is None:
        return []
    coll, sizes, points = got
    # a group's level is its median point: one point slowed by a busy CPU does not make a rail slow
    levels = {k: {p: statistics.median(v) for p, v in by.items()} for k, by in points.items()}
    factor = ctx.policy.thresholds.slow_pair_factor
    ports = ports_by_host(ctx.inventory, max(levels) + 1)
    at = f"{coll} at {', '.join(size_label(s) for s in sizes)}"
    slow: dict[str, list[tuple[RailPort, float, float, dict[Pair, float], dict[Pair, float]]]]
    slow = defaultdict(list)
    two_node: list[tuple[int, Pair, float, float]] = []
    for rail, by_pair in sorted(levels.items()):
        hosts = sorted({h for p in by_pair for h in p})
        for h in hosts:
            own = {p: bw for p, bw in by_pair.items() if h in p}
            peers = {p: bw for p, bw in by_pair.items() if h not in p}
            if not peers:
                continue
            ref = statistics.median(peers.values())
            best = max(own.values())
            # and apart: every point with this end below every point without it (a capped NIC caps
            # them all), so the spread of a noisy fabric does not make one end of it look slow
            pts = points[rail]
            apart = max(x for p in own for x in pts[p]) < min(x for p in peers for x in pts[p])
            if ref > 0 and best <= factor * ref and apart:
                slow[h].append((_port(ports, h, rail), best, ref, own, peers))
        if len(hosts) == 2:  # nothing leaves one end out: compare with the pair's other rails
            (pair, bw), = by_pair.items()
            others = [lv[pair] for k, lv in levels.items() if k != rail and pair in lv]
            ref = statistics.median(others) if others else 0.0
            apart = bool(others) and max(points[rail][pair]) < min(
                x for k, by in points.items() if k != rail and pair in by for x in by[pair])
            if ref > 0 and bw <= factor * ref and apart:
                two_node.append((rail, pair, bw, ref))
    out: list[Finding] = []
    for h, found in slow.items():
        rails_of_h = sum(1 for lv in levels.values() if any(h in p for p in lv))
        if len(found) == rails_of_h and rails_of_h > 1:
            ratio = statistics.fmean(best / ref for _, best, ref, _, _ in found)
            out.append(Finding(
                rule="slow_rail", severity="fail", subject_kind="node", subject=h,
                title=f"{h}: every rail ({rails_of_h}) is {1 - ratio:.0%} below its rail peers ({at}): "
                      "the node, not one NIC",
                evidence={"collective": coll, "sizes": sizes, "rails": [p.rail for p, *_ in found],
                          "busbw_GBps": [round(b, 4) for _, b, *_ in found],
                          "peers_median_GBps": [round(r, 4) for _, _, r, *_ in found]},
                action=_ACTION_NODE, hosts=[h],
            ))
            continue
        for p, best, ref, own, peers in found:
            out.append(Finding(
                rule="slow_rail", severity="fail", subject_kind="node", subject=h,
                title=f"{h} {p.label()} is {1 - best / ref:.0%} below its rail peers{_where(p)}: best "
                      f"{best:.3g} GB/s with {len(own)} partner(s) vs median {ref:.3g} GB/s ({at})",
                evidence=_evidence(
                    p, collective=coll, sizes=sizes, busbw_GBps=round(best, 4),
                    peers_median_GBps=round(ref, 4),
                    partners={"|".join(k): round(v, 4) for k, v in own.items()},
                    peers={"|".join(k): round(v, 4) for k, v in peers.items()},
                ),
                action=_ACTION, hosts=[h],
            ))
    for rail, (a, b), bw, ref in two_node:
        pa, pb = _port(ports, a, rail), _port(ports, b, rail)
        out.append(Finding(
            rule="slow_rail_pair", severity="warn", subject_kind="pair", subject=f"{a}|{b}",
            title=f"rail {rail} between {a} ({pa.nic or 'NIC unknown'}) and {b} ({pb.nic or 'NIC unknown'})"
                  f"{_where(pa)} is {1 - bw / ref:.0%} below the pair's other rails ({bw:.3g} vs "
                  f"{ref:.3g} GB/s, {at})",
            evidence={"rail": rail, "collective": coll, "sizes": sizes, "busbw_GBps": round(bw, 4),
                      "other_rails_median_GBps": round(ref, 4), "nics": {a: pa.nic, b: pb.nic},
                      "nic_unknown": {h: p.unknown for h, p in ((a, pa), (b, pb)) if p.unknown},
                      "rail_switch": pa.switch or pb.switch},
            action=_ACTION_PAIR, hosts=[a, b],
        ))
    return out


RULE = Rule(name="slow_rail", ids=ids("slow_rail", "slow_rail_pair"), check=check, doc=__doc__ or "")
