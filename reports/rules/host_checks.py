"""Hosts that could not take part, and runs that were not alone on the fabric.

- ``host_cannot_run``: a host the inventory reached but where no rank can run (the ranks' python
  has no torch, or one too old; GPUs its torch cannot use in a run on GPUs), left out before
  launch (inventory.jsonl's status ``cannot_run``, the cause in its error). The job the check is
  for would fail there too, so it fails the verdict, with the cause rather than a rank's exit code.
- ``fabric_shared``: another netbench run was live on some of the hosts (the marker its agents
  hold, netbench/agents/marker.py), seen by the inventory at the start or by the port counters'
  snapshots. Each run then measures the other's traffic as its own: slow pairs and cross-spine
  penalties of this run may be that run's, not the fabric's, so judge the fabric from a run alone.
- ``clock_stepped``: a host's wall clock went back during the run (an NTP step, an admin's ``date``):
  the rows its ranks stamped run backwards in the order they arrived. Every duration is taken on a
  monotonic clock, so nothing measured is wrong and the host is not faulted; but its logs, and any
  tool that orders events by wall time, will be, so it is said about that host (warn, drains nobody).
"""

from __future__ import annotations

from netbench.inventory.model import CANNOT_RUN, shared_runs
from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule

from netbench.common.findings import Finding

#: a stamp this far behind one its host stamped earlier is a step of the clock, not the order in which
#: rows of parallel groups reached the coordinator (seconds apart at most)
STEP_S = 60.0


def check(ctx: AnalysisContext) -> list[Finding]:
    return _cannot_run(ctx) + _shared(ctx) + _clock_stepped(ctx)


def _cannot_run(ctx: AnalysisContext) -> list[Finding]:
    out = []
    for n in ctx.inventory:
        if n.get("status") != CANNOT_RUN:
            continue
        host, why = str(n["host"]), str(n.get("error") or "no cause recorded")[:300]
        out.append(Finding(
            rule="host_cannot_run",
            severity="fail",
            subject_kind="node",
            subject=host,
            title=f"{host} could not run a rank: {why}",
            evidence={"status": CANNOT_RUN, "error": why, "python": n.get("python_version"),
                      "torch": n.get("torch_version")},
            action="Left out before launch, so nothing of it was measured: "
            f"{ctx.site.about(host).runtime}, then check it again.",
            hosts=[host],
        ))
    return out


def _shared(ctx: AnalysisContext) -> list[Finding]:
    # the inventory's records at the start, then each counters snapshot's (before/after the run)
    seen = [*ctx.inventory, *({"host": c.get("host"), "other_runs": c.get("other_runs")}
                              for c in ctx.counters if c.get("host"))]
    own = ctx.run.get("run_id")
    runs = [r for r in shared_runs(seen) if r.run_id is None or r.run_id != own]
    out = []
    for run in runs:
        which = run.run_id or "(id not known)"
        out.append(Finding(
            rule="fabric_shared",
            severity="warn",
            subject_kind="run",
            subject=f"run {which}",
            title=f"Another netbench run ({which}) was on {len(run.hosts)} of these hosts: its traffic "
            "shared their links with this run's",
            evidence={"run_id": run.run_id, "coordinator": run.coordinator, "hosts": list(run.hosts)},
            action="Do not blame the fabric for what this run measured on those hosts: slow pairs and "
            "cross-switch penalties may be the other run's traffic. Measure again when it has ended.",
            hosts=list(run.hosts),
        ))
    return out


def _clock_stepped(ctx: AnalysisContext) -> list[Finding]:
    """A row is stamped by its group's first rank (``hosts[0]``); rows reach results.jsonl in the
    order they were measured, so one host's stamps only go back when its clock did."""
    if ctx.rows.empty or not {"ts", "hosts"} <= set(ctx.rows.columns):
        return []
    latest: dict[str, float] = {}
    step: dict[str, float] = {}
    for ts, hosts in zip(ctx.rows["ts"], ctx.rows["hosts"], strict=True):
        if not isinstance(hosts, list | tuple) or not hosts or not isinstance(ts, float | int) or ts != ts:
            continue
        host = str(hosts[0])
        back = latest.get(host, ts) - ts
        if back > STEP_S:
            step[host] = max(step.get(host, 0.0), back)
        latest[host] = max(latest.get(host, ts), ts)
    return [Finding(
        rule="clock_stepped",
        severity="warn",
        subject_kind="node",
        subject=host,
        title=f"{host}: its wall clock went back {_span(back)} during the run",
        evidence={"stepped_back_s": round(back, 1)},
        action=f"Check time sync on {host} (chronyc tracking, timedatectl): its log times are off. "
        "Nothing measured is affected (durations use a monotonic clock).",
        hosts=[host],
    ) for host, back in sorted(step.items())]


def _span(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min" if seconds >= 60 else \
        f"{seconds:.0f} s"


RULE = Rule(
    name="host_checks",
    ids=ids("host_cannot_run", "fabric_shared", "clock_stepped"),
    check=check,
    doc=__doc__ or "",
)
