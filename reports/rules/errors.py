"""Wrong results, timeouts and errors: measurements that did not produce a trustworthy number, and
a run that ended before its plan did.

One finding per group (a pair, the world ring ...), with the sizes affected. When a host fails in
most of its groups, that is said once about the host instead of once per partner.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule, size_label

from netbench.common.findings import Finding

_WHAT = {"wrong_results": "returned wrong results", "timeout": "timed out", "error": "failed"}


def _group_id(row: dict[str, Any]) -> str:
    if row.get("group"):
        return str(row["group"])
    hosts = row.get("hosts") or []
    return f"{row.get('pattern')}:{'|'.join(hosts) if len(hosts) <= 4 else f'{len(hosts)} hosts'}"


def _ended_early(ctx: AnalysisContext) -> list[Finding]:
    """A run that ended before its plan did (Ctrl-C, Slurm cancelling the step, a lost launcher):
    whatever else is found, the verdict only covers the rows measured, so it must not read PASS."""
    status = ctx.run.get("status")
    if status not in ("interrupted", "failed"):
        return []
    why = str(ctx.run.get("error") or status)[:200]
    return [
        Finding(
            rule="run_incomplete",
            severity="warn",
            subject_kind="run",
            subject="run",
            title=f"The run ended early ({why}): only what was measured before is judged",
            evidence={"status": status, "rows": int(len(ctx.rows))},
            action="Rerun to measure the rest of the plan; run.json's error and the launcher's output "
            "say why it stopped.",
        )
    ]


def check(ctx: AnalysisContext) -> list[Finding]:
    return _ended_early(ctx) + _failed_rows(ctx)


def _failed_rows(ctx: AnalysisContext) -> list[Finding]:
    df = ctx.rows
    wrong = df["wrong"].fillna(0).astype(float) > 0
    bad = df[wrong | (df["status"] != "ok")]
    if bad.empty:
        return []
    per_group: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in bad.to_dict("records"):
        w = row.get("wrong")
        kind = (
            "wrong_results"
            if w is not None and w == w and w > 0
            else ("timeout" if row.get("status") == "timeout" else "error")
        )
        per_group[(kind, _group_id(row))].append(row)
    # groups per host, to tell a failing host from failing links
    groups_of: Counter[str] = Counter()
    for hosts in df.loc[df["pattern"] == "pair", "hosts"].dropna():
        for h in hosts:
            groups_of[h] += 1
    failed_of: Counter[str] = Counter()
    for rows in per_group.values():
        if rows[0].get("pattern") == "pair":
            for h in rows[0].get("hosts") or []:
                failed_of[h] += len(rows)
    bad_hosts = {h for h, k in failed_of.items() if k >= 3 and k >= 0.5 * groups_of[h]}
    out: list[Finding] = []
    # what the run recorded about each host's ranks: no rank's log is kept in the run directory, so
    # the finding quotes the coordinator's words (run.json's faults) instead of pointing at a file
    faults = [f for f in ctx.run.get("faults") or [] if isinstance(f, dict)]
    for host in sorted(bad_hosts):
        fault = next((str(f.get("message"))[:300] for f in faults if f.get("host") == host), None)
        evidence = {"failed_rows": failed_of[host], "pair_rows": groups_of[host]}
        if fault:
            evidence["fault"] = fault
        out.append(
            Finding(
                rule="host_failing",
                severity="fail",
                subject_kind="node",
                subject=host,
                title=f"{host}: {failed_of[host]} of its {groups_of[host]} pair measurements failed",
                evidence=evidence,
                action=(
                    f"Drain {host}. How its ranks ended is in run.json's faults"
                    + (f" ({fault})" if fault else "")
                    + " and its failed rows' errors in results.jsonl; why is on the host "
                    "(dmesg for NCCL errors and Xids, the ranks' python and torch)."
                ),
                hosts=[host],
            )
        )
    for (kind, gid), rows in sorted(per_group.items()):
        hosts = rows[0].get("hosts") or []
        if rows[0].get("pattern") == "pair" and set(hosts) & bad_hosts:
            continue  # told once about the host
        sizes = sorted({int(r.get("bytes") or 0) for r in rows})
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
        out.append(
            Finding(
                rule=kind,
                severity="fail",
                subject_kind=subject_kind,
                subject="|".join(hosts) if subject_kind == "pair" else gid,
                title=f"{gid} {_WHAT[kind]} in {len(rows)} measurement(s) ({', '.join(colls)} at {shown})",
                evidence=evidence,
                action=(
                    "Wrong results mean corrupted data: drain the hosts and check GPU "
                    "memory (ECC, Xid 48/63/64) "
                    "and NIC errors."
                    if kind == "wrong_results"
                    else "Re-run this group alone; if it fails again, check the hosts' logs and links."
                ),
                hosts=list(hosts) if len(hosts) <= 16 else [],
            )
        )
    return out


RULE = Rule(
    name="errors",
    ids=ids("wrong_results", "timeout", "error", "host_failing", "run_incomplete"),
    check=check,
    doc=__doc__ or "",
)
