"""Wrong results, timeouts and errors: measurements that did not produce a trustworthy number, and
a run that ended before its plan did.

One finding per group (a pair, the world ring ...), with the sizes affected. When a host fails in
most of its groups, that is said once about the host instead of once per partner.

Every host behind one leaf lost at once (``switch_silent``) is the leaf or its uplink, not that
many hosts failing in the same second: said once about the switch, which goes to the check list,
and none of its hosts is drained for it. "At once": the coordinator's stamps of their faults within
``SILENT_S`` of each other, and hosts on other leaves still running. The same for a rail of
``--pattern rail``: every group of one rail failed while the other rails measured is that rail's
switch (named from the inventory's rail ports), not every host's NIC on it at once.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from netbench.reports.context import AnalysisContext, records
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule, size_label
from netbench.reports.runcheck import ENDED_EARLY

from netbench.common.findings import Finding
from netbench.common.rows import blamed_hosts, never_ran

BUFFERS_TOO_LARGE = "BuffersTooLarge: "
"""How a rank's error starts when the sizes asked for could not be allocated (collectives.rank)."""
_WHAT = {"wrong_results": "returned wrong results", "timeout": "timed out", "error": "failed"}
SILENT_S = 30.0
"""Faults of one leaf's hosts this close together are one event (an agent is declared lost some
heartbeats after it went quiet, so hosts cut at one instant are seen seconds apart)."""


def _group_id(row: dict[str, Any]) -> str:
    if row.get("group"):
        return str(row["group"])
    hosts = row.get("hosts") or []
    return f"{row.get('pattern')}:{'|'.join(hosts) if len(hosts) <= 4 else f'{len(hosts)} hosts'}"


def _ended_early(ctx: AnalysisContext) -> list[Finding]:
    """A run that ended before its plan did (Ctrl-C, SIGTERM from Slurm's time limit or ``timeout``,
    a full disk, a lost launcher), or that never recorded its end at all (run.json still ``running``
    or ``starting``: SIGKILL, the OOM killer, a power cut; or a run still under way): whatever else
    is found, the verdict only covers the rows measured, so it must not read PASS."""
    status = ctx.run.get("status")
    if status not in ENDED_EARLY:
        return []
    if status in ("running", "starting"):
        why = f"run.json still says {status}: killed before it could record its end, or still running"
    else:
        why = str(ctx.run.get("error") or status)[:200]
    rest = ctx.rest  # every failed row is here (only plain, measured pair rows are not)
    failed = int((rest["status"] != "ok").sum()) if len(rest) else 0
    n_rows = ctx.row_count
    evidence: dict[str, Any] = {"status": status, "rows": n_rows, "rows_failed": failed}
    for key in ("signal", "stopped_in"):
        if isinstance(ctx.run.get(key), str):
            evidence[key] = ctx.run[key]
    return [
        Finding(
            rule="run_incomplete",
            severity="warn",
            subject_kind="run",
            subject="run",
            title=f"The run ended early ({why}): only what was measured before is judged "
            f"({n_rows} rows, {n_rows - failed} measured, {failed} failed)",
            evidence=evidence,
            action="Rerun to measure the rest of the plan; run.json's error and the launcher's output "
            "say why it stopped.",
        )
    ]


def check(ctx: AnalysisContext) -> list[Finding]:
    return _ended_early(ctx) + _failed_rows(ctx)


def _lost_hosts(ctx: AnalysisContext) -> dict[str, str]:
    """Hosts the run lost (run.json's ``down_hosts`` and ``faults``, every launch's), with the first
    reason recorded for each: a host that died, hung or could not be reached is named whatever its
    rows say (one lost before its first pair has none)."""
    out: dict[str, str] = {}
    listed = ctx.run.get("hosts")
    known = set(ctx.hosts) | {h for h in (listed if isinstance(listed, list) else []) if isinstance(h, str)}
    faults = ctx.run.get("faults")
    for f in faults if isinstance(faults, list) else []:
        if isinstance(f, dict) and isinstance(f.get("host"), str) and f["host"] in known:
            out.setdefault(f["host"], str(f.get("message") or f.get("kind") or "failed")[:200])
    down = ctx.run.get("down_hosts")
    for h in down if isinstance(down, list) else []:
        if isinstance(h, str) and h in known:
            out.setdefault(h, "marked down")
    return out


def _pair_rows_of(ctx: AnalysisContext) -> Counter[str]:
    """How many pair rows name each host: those of two hosts counted from ``ctx.pairs``, any other
    (a pair row naming another number of hosts) from the frame."""
    import numpy as np

    pairs = ctx.pairs
    n = len(pairs.names)
    counts = np.bincount(pairs.a, minlength=n) + np.bincount(pairs.b, minlength=n)
    out: Counter[str] = Counter({h: int(k) for h, k in zip(pairs.names, counts.tolist(), strict=True) if k})
    df = ctx.rest
    for hosts in df.loc[(df["pattern"] == "pair").to_numpy() & ~ctx.in_pairs, "hosts"].dropna():
        for h in hosts:
            out[h] += 1
    return out


def _failed_rows(ctx: AnalysisContext) -> list[Finding]:
    df = ctx.rest  # every failed or wrong row is here (only plain, measured pair rows are not)
    wrong = df["wrong"].fillna(0).astype(float) > 0
    bad = df[wrong | (df["status"] != "ok")]
    lost = _lost_hosts(ctx)
    if bad.empty and not lost:
        return []
    per_group: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in records(bad):
        w = row.get("wrong")
        kind = (
            "wrong_results"
            if w is not None and w == w and w > 0
            else ("timeout" if row.get("status") == "timeout" else "error")
        )
        per_group[(kind, _group_id(row))].append(row)
    # groups per host, to tell a failing host from failing links
    groups_of = _pair_rows_of(ctx)
    # a failed pair is evidence against the host its error names (a dead, hung or cut-off host),
    # never against its partner; one that names none counts against both ends
    failed_of: Counter[str] = Counter()
    named: dict[tuple[str, str], set[str]] = {}
    for key, rows in per_group.items():
        too_large = all(BUFFERS_TOO_LARGE in str(r.get("error")) for r in rows)  # the sizes', no host's
        if rows[0].get("pattern") == "pair" and not too_large:
            hosts = rows[0].get("hosts") or []
            named[key] = set().union(*(blamed_hosts(r) for r in rows))
            for h in named[key] or hosts:
                failed_of[h] += len(rows)
    silent = _silent_switches(ctx, lost)
    behind = {h for hs in silent.values() for h in hs}
    bad_hosts = ({h for h, k in failed_of.items() if k >= 3 and k >= 0.5 * groups_of[h]} | set(lost)) - behind
    out: list[Finding] = [_silent(leaf, hs, lost) for leaf, hs in sorted(silent.items())]
    dark = _failed_rails(ctx, df)
    out += [_rail_silent(ctx, rail, hosts) for rail, hosts in sorted(dark.items())]
    # what the run recorded about each host's ranks: no rank's log is kept in the run directory, so
    # the finding quotes the coordinator's words (run.json's faults) instead of pointing at a file
    faults = [f for f in ctx.run.get("faults") or [] if isinstance(f, dict)]
    for host in sorted(bad_hosts):
        why = lost.get(host)
        fault = next((str(f.get("message"))[:300] for f in faults if f.get("host") == host), None)
        evidence: dict[str, Any] = {"failed_rows": failed_of[host], "pair_rows": groups_of[host]}
        if why:
            evidence["lost"] = why
        elif fault:
            evidence["fault"] = fault
        out.append(
            Finding(
                rule="host_failing",
                severity="fail",
                subject_kind="node",
                subject=host,
                title=f"{host}: {failed_of[host]} of its {groups_of[host]} pair measurements failed"
                + (f" (lost during the run: {why})" if why else ""),
                evidence=evidence,
                action=(
                    f"Drain {host}: it died, hung or could not be reached during the run (run.json's "
                    f"faults say how); {ctx.site.about(host).lost}"
                    if why
                    else f"Drain {host}. How its ranks ended is in run.json's faults"
                    + (f" ({fault})" if fault else "")
                    + f" and its failed rows' errors in results.jsonl; {ctx.site.about(host).ranks_ended}"
                ),
                hosts=[host],
            )
        )
    for (kind, gid), rows in sorted(per_group.items()):
        hosts = rows[0].get("hosts") or []
        if rows[0].get("pattern") == "pair" and (set(hosts) & (bad_hosts | behind) or named.get((kind, gid))):
            # told once about the host; a pair that never ran, or failed for a host the run lost,
            # is no measurement of its link
            continue
        if all(never_ran(r) for r in rows):
            continue  # a group that never ran measured nothing: the host that stopped it is named above
        if rows[0].get("pattern") == "rail" and _rail_of(rows[0]) in dark:
            continue  # told once about the rail
        sizes = sorted({int(r.get("bytes") or 0) for r in rows} - {0})  # a failed row carries bytes 0
        errors = Counter(str(r.get("error")) for r in rows if r.get("error"))
        subject_kind = "pair" if rows[0].get("pattern") == "pair" else "run"
        colls = sorted({str(r.get("collective")) for r in rows})
        evidence: dict[str, Any] = {
            "rows": len(rows),
            "collectives": colls,
            "sizes_bytes": sizes[:40],
            "hosts": hosts if len(hosts) <= 16 else len(hosts),
        }
        if kind == "wrong_results":
            evidence["wrong_elements"] = int(sum(float(r.get("wrong") or 0) for r in rows))
        if errors:
            evidence["errors"] = dict(errors.most_common(3))
        shown = ", ".join(size_label(s) for s in sizes[:6]) + (" ..." if len(sizes) > 6 else "")
        where = f"{', '.join(colls)} at {shown}" if sizes else ", ".join(colls)
        out.append(
            Finding(
                rule=kind,
                severity="fail",
                subject_kind=subject_kind,
                subject="|".join(hosts) if subject_kind == "pair" else gid,
                title=f"{gid} {_WHAT[kind]} in {len(rows)} measurement(s) ({where})",
                evidence=evidence,
                action=(
                    "Wrong results mean corrupted data: drain the hosts and check GPU "
                    "memory (ECC, Xid 48/63/64) "
                    "and NIC errors."
                    if kind == "wrong_results"
                    else "Lower -e (or --pair-sizes): the largest size's buffers do not fit these hosts' "
                    "memory (nothing is wrong with the hosts)."
                    if any(BUFFERS_TOO_LARGE in e for e in errors)
                    else "Re-run this group alone; if it fails again, check the hosts' logs and links."
                ),
                hosts=list(hosts) if len(hosts) <= 16 else [],
            )
        )
    return out


def _silent_switches(ctx: AnalysisContext, lost: dict[str, str]) -> dict[str, list[str]]:
    """leaf -> its hosts, for each leaf (topology, labels or learned) of two hosts or more whose every
    host the run lost at once while some host elsewhere was not lost."""
    listed = ctx.run.get("hosts")
    hosts = [h for h in listed if isinstance(h, str)] if isinstance(listed, list) else ctx.hosts
    if not lost or set(hosts) <= set(lost):
        return {}  # nothing lost, or everything: the coordinator's own side, not one leaf
    by_leaf: dict[str, list[str]] = defaultdict(list)
    for h in hosts:
        if ctx.switches.get(h):
            by_leaf[ctx.switches[h]].append(h)
    stamps: dict[str, float] = {}
    for f in ctx.run.get("faults") or []:
        if isinstance(f, dict) and isinstance(f.get("host"), str) and isinstance(f.get("ts"), int | float):
            stamps.setdefault(f["host"], float(f["ts"]))
    out = {}
    for leaf, hs in by_leaf.items():
        if len(hs) < 2 or not set(hs) <= set(lost) or len(by_leaf) < 2:
            continue
        seen = [stamps[h] for h in hs if h in stamps]
        if len(seen) == len(hs) and max(seen) - min(seen) <= SILENT_S:
            out[leaf] = sorted(hs)
    return out


def _silent(leaf: str, hosts: list[str], lost: dict[str, str]) -> Finding:
    shown = ", ".join(hosts[:16]) + (f" and {len(hosts) - 16} more" if len(hosts) > 16 else "")
    return Finding(
        rule="switch_silent",
        severity="fail",
        subject_kind="switch",
        subject=leaf,
        title=f"{leaf}: every host behind it ({shown}) was lost at once, while the rest of the fabric "
        "ran on: the switch or its uplink, not the hosts",
        evidence={"hosts": hosts, "lost": {h: lost[h] for h in hosts}},
        action=f"Check {leaf} and its uplink (port state, cabling, the switch's log) for an outage at "
        "the time of the run; its hosts are not drained for it. Measure them again once it is back.",
        hosts=[],
    )


def _rail_of(row: dict[str, Any]) -> int | None:
    rail = row.get("rail")
    return int(rail) if isinstance(rail, int | float) and rail == rail else None


def _failed_rails(ctx: AnalysisContext, df: Any) -> dict[int, list[str]]:
    """rail -> its hosts, for each rail of ``--pattern rail`` none of whose groups (two groups or more)
    measured while another rail's did: the rail's switch (or its uplink), not every host's NIC on it
    at once, as a leaf whose every host went silent is the leaf (issue 45)."""
    if "rail" not in df.columns or not len(df):
        return {}
    rows = df[(df["pattern"] == "rail").to_numpy()]
    measured: dict[int, bool] = {}
    groups: dict[int, set[str]] = defaultdict(set)
    hosts: dict[int, set[str]] = defaultdict(set)
    for row in records(rows):
        rail = _rail_of(row)
        if rail is None or never_ran(row):
            continue
        measured[rail] = measured.get(rail, False) or row.get("status") == "ok"
        groups[rail].add(_group_id(row))
        hosts[rail].update(str(h) for h in row.get("hosts") or [])
    if not any(measured.values()):
        return {}  # nothing measured on any rail: the run's or its hosts', said as such
    return {k: sorted(hosts[k]) for k, ok in measured.items() if not ok and len(groups[k]) >= 2}


def _rail_silent(ctx: AnalysisContext, rail: int, hosts: list[str]) -> Finding:
    from netbench.inventory.rails import ports_by_host

    ports = ports_by_host(ctx.inventory, rail + 1)
    switches = sorted({p[rail].switch for h in hosts if (p := ports.get(h)) and p[rail].switch})
    name = ", ".join(switches) if switches else f"rail {rail}'s switch"
    shown = ", ".join(hosts[:16]) + (f" and {len(hosts) - 16} more" if len(hosts) > 16 else "")
    return Finding(
        rule="switch_silent",
        severity="fail",
        subject_kind="switch",
        subject=switches[0] if len(switches) == 1 else f"rail{rail}",
        title=f"Rail {rail} ({name}): every group on it failed ({shown}), while the other rails measured: "
        "the rail's switch or its cabling, not the hosts",
        evidence={"rail": rail, "hosts": hosts, "switches": switches},
        action=f"Check {name} (port state, the switch's log) for an outage at the time of the run; no host "
        "is drained for it. Measure the rail again once it is back (--pattern rail).",
        hosts=[],
    )


RULE = Rule(
    name="errors",
    ids=ids("wrong_results", "timeout", "error", "host_failing", "run_incomplete", "switch_silent"),
    check=check,
    doc=__doc__ or "",
)
