"""MTUs that differ between hosts.

``mtu_mismatch`` (warn): a host whose interface runs another MTU than most hosts' interface of that
name, at the start of the run (the inventory) or at its end (the counters snapshot after the run,
which reads the MTUs again, so a change mid-run is seen). Frames larger than a peer's MTU are
dropped or fragmented: a pair across the mismatch stalls or times out, which otherwise reads as a
bad link (issue 45: an MTU set to 1280 on one host mid-run was "Check link node03-node06"). The
finding names the host, the interface, both values, when it was seen, and the host's failed pairs.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule

from netbench.common.findings import Finding

MIN_MTU, MAX_MTU = 68, 65536


def check(ctx: AnalysisContext) -> list[Finding]:
    start = {str(n["host"]): _mtus(n.get("mtu")) for n in ctx.inventory if isinstance(n.get("host"), str)}
    end = {str(c["host"]): _mtus(c.get("mtu")) for c in ctx.counters
           if c.get("phase") == "after" and isinstance(c.get("host"), str) and c.get("mtu")}
    now = {h: end.get(h) or start.get(h) or {} for h in {*start, *end}}
    per_iface: dict[str, dict[str, int]] = defaultdict(dict)
    for host, mtus in now.items():
        for iface, mtu in mtus.items():
            per_iface[iface][host] = mtu
    failed = _failed_pairs(ctx)
    out = []
    for iface, hosts in sorted(per_iface.items()):
        common, n = Counter(hosts.values()).most_common(1)[0]
        if len(hosts) < 3 or 2 * n <= len(hosts):
            continue  # too few hosts, or no majority: nothing to call the fleet's MTU
        for host in sorted(h for h, m in hosts.items() if m != common):
            out.append(_finding(host, iface, hosts[host], common, n, start.get(host, {}).get(iface),
                                failed.get(host, [])))
    return out


def _mtus(value: Any) -> dict[str, int]:
    """An untrusted record's interface -> MTU, whole numbers in range only."""
    if not isinstance(value, dict):
        return {}
    return {str(k)[:32]: v for k, v in value.items() if type(v) is int and MIN_MTU <= v <= MAX_MTU}


def _failed_pairs(ctx: AnalysisContext) -> dict[str, list[str]]:
    rows = ctx.rest  # every failed row is here
    if rows.empty or "status" not in rows.columns:
        return {}
    out: dict[str, list[str]] = defaultdict(list)
    bad = rows[(rows["status"] != "ok") & (rows["pattern"] == "pair")]
    for hosts in bad["hosts"]:
        if isinstance(hosts, list | tuple) and len(hosts) == 2:
            pair = "|".join(hosts)
            for h in hosts:
                if pair not in out[h]:
                    out[h].append(pair)
    return out


def _finding(host: str, iface: str, mtu: int, common: int, n: int, at_start: int | None,
             failed: list[str]) -> Finding:
    changed = at_start is not None and at_start != mtu
    when = f" (changed during the run, from {at_start})" if changed else ""
    cause = f"; its failed pairs ({', '.join(failed[:6])}{' ...' if len(failed) > 6 else ''}) may be this" \
        if failed else ""
    return Finding(
        rule="mtu_mismatch",
        severity="warn",
        subject_kind="node",
        subject=host,
        title=f"{host}: {iface} MTU {mtu}, where {n} hosts run {common}{when}{cause}",
        evidence={"interface": iface, "mtu": mtu, "fleet_mtu": common, "hosts_at_fleet_mtu": n,
                  "mtu_at_start": at_start, "failed_pairs": failed[:50]},
        action=f"Set {iface}'s MTU on {host} to {common} like its peers (ip link set {iface} mtu "
        f"{common}, and the setting that made it {mtu}), then re-test its pairs before blaming links.",
        hosts=[host],
    )


RULE = Rule(name="mtu", ids=ids("mtu_mismatch"), check=check, doc=__doc__ or "")
