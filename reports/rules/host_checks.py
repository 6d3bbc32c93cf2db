"""Hosts that could not take part, and runs that were not alone on the fabric.

- ``host_cannot_run``: a host the inventory reached but where no rank can run (the ranks' python
  has no torch, or one too old; GPUs its torch cannot use in a run on GPUs), left out before
  launch (inventory.jsonl's status ``cannot_run``, the cause in its error). Its own set-up, not its
  hardware: "could not test HOST", naming the interpreter and the fix, a warning that never drains
  it (nothing of it was measured, so neither is it cleared: never a PASS).
- ``host_refuses``: a host whose pairs with two or more partners failed before a byte moved while
  those partners measured with others: it takes no connection in (a firewall that lets only SSH
  in). "could not test HOST", a warning: its pairs are not links to check, and it is not drained.
  Where the coordinator's connection to the port the host's agent listens on was refused or went
  unanswered (its rows say so: reports/refusals.py), the port and how are named.
- ``pairs_not_judged``: hosts the pair model had too few measured partners to judge, and pairs it
  has no measurement of (a pairwise sweep's; preflight samples pairs by design): a warning,
  so that a run that could not judge a host never says PASS about it.
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
from netbench.reports.refusals import Refusal, read
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule

from netbench.common.findings import Finding

#: a stamp this far behind one its host stamped earlier is a step of the clock, not the order in which
#: rows of parallel groups reached the coordinator (seconds apart at most)
STEP_S = 60.0


def check(ctx: AnalysisContext) -> list[Finding]:
    return _cannot_run(ctx) + _refuses(ctx) + _not_judged(ctx) + _shared(ctx) + _clock_stepped(ctx)


def refusing_hosts(ctx: AnalysisContext) -> dict[str, list[str]]:
    """Hosts whose pairs with two or more partners never moved a byte (the group stalled in its
    set-up, every rank alive, or failed with a refusal of the coordinator's connection said: no row
    of it measured, no host lost) while each of those partners
    measured with another host: the
    host takes no connection in (a firewall that lets only SSH in, a port it refuses), its own
    fault, not its links'. host -> those partners, sorted."""
    import numpy as np

    rest, pairs = ctx.rest, ctx.pairs
    if not ctx.row_count or not {"pattern", "hosts", "status"} <= set(rest.columns):
        return {}
    # the stalled pairs: their rows failed, so they are all in the frame (few)
    stalled: dict[frozenset[str], None] = {}  # timed out with every rank alive: no host lost, no error
    timed_out = (rest["status"] == "timeout").to_numpy() & ctx.in_pairs
    for hosts in rest.loc[timed_out, "hosts"]:
        stalled.setdefault(frozenset(map(str, hosts)), None)
    # a pair that failed with an error naming a host of it that refused the coordinator's connection:
    # a firewall that rejects connections (one that drops them lets the set-up stall, as above)
    if "error" in rest.columns:
        errored = (rest["status"] == "error").to_numpy() & ctx.in_pairs
        for text, hosts in zip(rest.loc[errored, "error"], rest.loc[errored, "hosts"], strict=True):
            pair = frozenset(map(str, hosts))
            if isinstance(text, str) and any(r.host in pair for r in read(text)):
                stalled.setdefault(pair, None)
    if not stalled:
        return {}
    code = {h: i for i, h in enumerate(pairs.names)}
    ok_a, ok_b = pairs.a[pairs.ok], pairs.b[pairs.ok]
    measured = np.bincount(ok_a, minlength=len(code)) + np.bincount(ok_b, minlength=len(code))
    keys = [(code[a], code[b]) for a, b in (sorted(k) for k in stalled if len(k) == 2)]
    n = max(len(code), 1)
    wanted = np.array([min(a, b) * n + max(a, b) for a, b in keys], dtype=np.int64)
    ends = np.unique(np.concatenate([wanted // n, wanted % n]))
    near = np.isin(ok_a, ends) | np.isin(ok_b, ends)
    got = np.minimum(ok_a[near], ok_b[near]).astype(np.int64) * n + np.maximum(ok_a[near], ok_b[near])
    good = set(np.intersect1d(wanted, got).tolist())
    lost = ctx.lost_hosts
    failed: dict[str, set[str]] = {}
    for key in stalled:
        if len(key) != 2 or key & lost:
            continue
        a, b = sorted(key)
        if min(code[a], code[b]) * n + max(code[a], code[b]) in good:
            continue
        failed.setdefault(a, set()).add(b)
        failed.setdefault(b, set()).add(a)

    def measured_without(p: str, x: str) -> bool:  # the pair p-x never measured: any of p's did
        return bool(measured[code[p]])

    return {x: sorted(ps) for x, ps in failed.items()
            if len(ps) >= 2 and all(
                len(failed.get(p, ())) < len(ps) and measured_without(p, x) for p in ps)}


def _refused_ports(ctx: AnalysisContext, host: str) -> list[Refusal]:
    """How ``host`` turned the coordinator's connection away, as its stalled pairs' rows say
    (reports/refusals.py): one per port and way, in port order."""
    rest = ctx.rest
    if "error" not in rest.columns:
        return []
    failed = rest["status"].isin(("timeout", "error")).to_numpy() & ctx.in_pairs
    found: dict[tuple[int, str], Refusal] = {}
    for text, hosts in zip(rest.loc[failed, "error"], rest.loc[failed, "hosts"], strict=True):
        if isinstance(text, str) and host in set(map(str, hosts)):
            found.update(((r.port, r.how), r) for r in read(text) if r.host == host)
    return [found[k] for k in sorted(found)]


def _refuses(ctx: AnalysisContext) -> list[Finding]:
    out = []
    for host, partners in sorted(refusing_hosts(ctx).items()):
        with_ = ", ".join(partners)
        pairs = f"its pairs with {with_} failed before a byte moved, while {with_} measured with other hosts"
        seen = _refused_ports(ctx, host)
        ports = sorted({r.port for r in seen})
        if seen:  # the coordinator's own connection to the host's port: the port, and how it failed
            first = next((r for r in seen if not r.dropped), seen[0])  # a refusal says the most
            how = (f"the coordinator's connection: {first.how}; "
                   f"{'a firewall that drops them?' if first.dropped else 'its firewall?'}")
            title = (f"Could not test {host}: it refuses connections on TCP port{'s' * (len(ports) > 1)} "
                     f"{', '.join(map(str, ports))} ({how}); {pairs}")
        else:
            title = f"Could not test {host}: it refuses connections ({pairs})"
        out.append(Finding(
            rule="host_refuses",
            severity="warn",
            subject_kind="node",
            subject=host,
            title=title,
            evidence={"partners": partners, "ports": ports, "connect": [r.how for r in seen]},
            action=f"A firewall on {host} or a port it refuses, not its links: open the ranks' TCP ports on "
            f"{host} (NCCL's and the coordinator's; SSH alone is not enough), then measure it again.",
            hosts=[host],
        ))
    return out


def _not_judged(ctx: AnalysisContext) -> list[Finding]:
    """Hosts of the pairwise phase the pair model could not judge (too few measured partners) and
    pairs it has no usable measurement of (failed, never run, or in a round a stalled group
    disturbed): said, so that silence is never read as "fine". Preflight's quick
    pass samples pairs by design (its sequential tests decide the hosts it left open): not there."""
    m = ctx.pair_model
    if m is None or ctx.run.get("command") == "preflight":
        return []
    import numpy as np

    n = len(m.hosts)
    # said by another finding already: left out by the inventory, lost during the run, refusing
    said_else = {str(x.get("host")) for x in ctx.inventory if x.get("status") not in (None, "ok", "partial")}
    said_else |= ctx.lost_hosts
    said_else |= set(refusing_hosts(ctx))
    measured = (m.cls >= 0) | (m.cls >= 0).T
    missing_ij = [(i, j) for i, j in zip(*np.triu_indices(n, 1), strict=True)
                  if not measured[i, j] and not {m.hosts[i], m.hosts[j]} & said_else]
    # a host the model could not judge because pairs of it are missing (a small fleet whose every
    # pair was measured is judged as far as it can be: its size is no missing evidence)
    short = {k for ij in missing_ij for k in ij}
    hosts = [m.hosts[i] for i in sorted(short) if not m.judged[i]]
    # a host of the run with no pair measured at all is not in the model
    listed = ctx.run.get("hosts") if isinstance(ctx.run.get("hosts"), list) else [
        x.get("host") for x in ctx.inventory]  # run.json's list, else the inventory's (an import's)
    hosts += [str(h) for h in listed if h is not None and str(h) not in said_else | set(m.hosts)]
    missing = [f"{m.hosts[i]}-{m.hosts[j]}" for i, j in missing_ij]
    if not hosts and not missing:
        return []
    said = [f"host{'s' * (len(hosts) > 1)} {_some(hosts)} (too few measured partners)"] if hosts else []
    if missing:
        plural = "s" * (len(missing) > 1)
        said.append(f"{len(missing)} pair{plural} with no usable measurement: {_some(missing)}")
    return [Finding(
        rule="pairs_not_judged",
        severity="warn",
        subject_kind="run",
        subject=", ".join(hosts) if hosts else f"{len(missing)} pair{'s' * (len(missing) > 1)}",
        title=f"Could not judge {'; '.join(said)}: no verdict on them, neither fault nor clean",
        evidence={"hosts": hosts, "pairs": missing[:200], "pairs_missing": len(missing),
                  "partners": {h: int(m.partners[m.hosts.index(h)]) if h in m.hosts else 0 for h in hosts}},
        action="Look at their failed rows (results.jsonl) and measure them again: a full pairwise sweep "
        "(--pattern pairwise) over these hosts judges every pair.",
        hosts=hosts,
    )]


def _some(items: list[str], n: int = 6) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def _cannot_run(ctx: AnalysisContext) -> list[Finding]:
    out = []
    for n in ctx.inventory:
        if n.get("status") != CANNOT_RUN:
            continue
        host, why = str(n["host"]), str(n.get("error") or "no cause recorded")[:300]
        py = _interpreter(ctx, n)
        out.append(Finding(
            rule="host_cannot_run",
            severity="warn",
            subject_kind="node",
            subject=host,
            title=f"Could not test {host}: {_said(why, py)}{_fix(ctx)}",
            evidence={"status": CANNOT_RUN, "error": why, "interpreter": py,
                      "python": n.get("python_version"), "torch": n.get("torch_version")},
            action="Left out before launch, so nothing of it was measured (neither drained nor cleared): "
            f"{ctx.site.about(host).runtime}, then check it again.",
            hosts=[host],
        ))
    return out


def _interpreter(ctx: AnalysisContext, node: dict) -> str:
    """The python the host's ranks would have run: its ``python=`` label, else ``--python``, else the
    launchers' default."""
    labels = node.get("labels") if isinstance(node.get("labels"), dict) else {}
    options = ctx.run.get("options") if isinstance(ctx.run.get("options"), dict) else {}
    return str(labels.get("python") or options.get("python") or "python3")[:200]


def _fix(ctx: AnalysisContext) -> str:
    """Where the interpreter is chosen: the hosts file or --python, except in a pod (its image; the
    action names the site's own way)."""
    return "" if ctx.run.get("launcher") == "k8s" else "; pass --python or python= in the hosts file"


def _said(why: str, py: str) -> str:
    """The inventory's cause, about the interpreter by name ("its /usr/bin/python3 has no torch")."""
    if why.startswith("torch is not importable by its python"):
        return f"its {py} has no torch ({why.split(': ', 1)[-1]})"
    return why.replace("its python", f"its {py}", 1) if "its python" in why else f"{py}: {why}"


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
    step = {h: back for h, back in ctx.split.clock.back.items() if back > STEP_S}
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
    ids=ids("host_cannot_run", "host_refuses", "pairs_not_judged", "fabric_shared", "clock_stepped"),
    check=check,
    doc=__doc__ or "",
)
