"""``--k8s-label`` and ``--k8s-taint``: the verdict written back onto the nodes, only when asked.

A node's verdict: ``fail`` when the drain rule drains it (``reports.verdict.judge``, the rule of every
output: a failure of its own; preflight hands its drain list, the same rule's), ``suspect`` when a
warning or failure names it otherwise (a slow link it is part of, a borderline re-test), else
``pass``. The taints follow Google's cluster-health-scanner: ``suspect`` is
``netbench.io/preflight=suspect:PreferNoSchedule``, ``fail`` is ``=fail:NoSchedule``, and a node a
later run measured and passed has either lifted; a node this run could not measure keeps what it had
(nothing was learnt of it). The labels: the verdict, the run id, when it was written
(``netbench.io/last-run``) and the node's busbw class against the fleet (``kubepods.busbw_class``).
Each node is changed by read-modify-write with its resourceVersion (``Kube.update_node``): a
conflict reads it again, so a label another controller set meanwhile stays.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from statistics import median
from typing import Any

from netbench.common.rundir import RunDir
from netbench.reports.verdict import drain_reasons, judge
from netbench.sites.k8s.client import Kube, KubeError
from netbench.sites.k8s.pods import (
    BUSBW_LABEL,
    LAST_RUN_LABEL,
    RUN_LABEL,
    TAINT_EFFECTS,
    TAINT_KEY,
    VERDICT_LABEL,
    busbw_class,
    label_value_ok,
    with_labels,
    with_taint,
    without_taint,
)


@dataclass(frozen=True)
class Measured:
    """What the run's rows say of each node: measured at all, and its best large-message pair."""

    hosts: frozenset[str]
    """Nodes with at least one ok row (a pair, a ring): the run has evidence about them."""
    best: dict[str, float]
    """Node -> its best pair's busbw (GB/s) at the largest pair size: a node's best pair bounds its
    cap (a half-rate node has no pair above half), where a mean blends in its partners' faults."""


def to_drain(findings: list[Any], hosts: list[str]) -> list[str]:
    """The nodes to taint: the one drain rule's over the cluster's nodes (a sweep hands none)."""
    return list(judge(findings, len(hosts)).drain)


NODE_KINDS = ("node", "pair", "component")
"""Findings about a node itself, a pair it is part of, or a version it runs: they make it suspect. A
run's finding (the whole fleet below its ceiling) or a switch's lists every host behind it, and is
no node's fault: it never taints them all."""


def _named(f: Any) -> list[str]:
    if f.subject_kind not in NODE_KINDS:
        return []
    return list(getattr(f, "hosts", None) or []) + ([f.subject] if f.subject_kind == "node" else [])


def node_verdicts(findings: list[Any], hosts: list[str], drain: list[str] | None) -> dict[str, str]:
    if drain is None:
        drain = to_drain(findings, hosts)
    out = {h: "pass" for h in hosts}
    for f in findings:
        if f.severity in ("warn", "fail"):
            for h in _named(f):
                if h in out:
                    out[h] = "suspect"
    for h in drain:
        if h in out:
            out[h] = "fail"
    return out


def suspect_reasons(findings: list[Any]) -> dict[str, str]:
    """Each node a warning or failure names -> ``rule: title`` of the first (worst first) of them."""
    out: dict[str, str] = {}
    for f in findings:
        if f.severity in ("warn", "fail"):
            for h in _named(f):
                out.setdefault(h, f"{f.rule}: {f.title}")
    return out


def measured(rundir: RunDir) -> Measured:
    from netbench.common.rundir import load_results

    df = load_results(rundir.path)
    if df.empty or "status" not in df:
        return Measured(frozenset(), {})
    ok = df[df["status"] == "ok"]
    hosts = frozenset(h for group in ok["hosts"] for h in (group or []) if isinstance(h, str))
    pairs = ok[ok["pattern"] == "pair"] if "pattern" in ok else ok.iloc[0:0]
    best: dict[str, float] = {}
    if not pairs.empty:
        top = pairs[pairs["bytes"] == pairs["bytes"].max()]
        for group, bw in zip(top["hosts"], top["busbw_GBps"], strict=True):
            for h in group or []:
                if isinstance(bw, float | int) and bw > 0:
                    best[h] = max(best.get(h, 0.0), float(bw))
    return Measured(hosts, best)


def classes(seen: Measured) -> dict[str, str]:
    """Node -> its busbw class against the median of the nodes' best pairs."""
    if not seen.best:
        return {}
    fleet = median(seen.best.values())
    out = {h: busbw_class(bw, fleet) for h, bw in seen.best.items()}
    return {h: c for h, c in out.items() if c}


def _label_lines(kube: Kube, rundir: RunDir, verdicts: dict[str, str], seen: Measured) -> list[str]:
    lines = []
    cls = classes(seen)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for host, verdict in verdicts.items():
        labels = {VERDICT_LABEL: verdict, LAST_RUN_LABEL: stamp}
        if label_value_ok(rundir.run_id):
            labels[RUN_LABEL] = rundir.run_id
        mine = cls.get(host)

        def change(node: dict[str, Any], labels: dict[str, str] = labels, mine: str | None = mine) -> bool:
            changed = with_labels(node, labels if mine is None else {**labels, BUSBW_LABEL: mine})
            have = (node.get("metadata") or {}).get("labels") or {}
            if mine is None and BUSBW_LABEL in have:  # an older run's class: not this run's evidence
                node["metadata"]["labels"] = {k: v for k, v in have.items() if k != BUSBW_LABEL}
                changed = True
            return changed

        try:
            kube.update_node(host, change)
        except KubeError as exc:
            lines.append(f"netbench: could not label node {host}: {exc}")
            continue
        lines.append(
            f"netbench: labelled node {host} {VERDICT_LABEL}={verdict} {LAST_RUN_LABEL}={stamp}"
            + (f" {BUSBW_LABEL}={mine}" if mine else "")
        )
    return lines


def _taint_lines(
    kube: Kube,
    rundir: RunDir,
    findings: list[Any],
    drain: list[str],
    verdicts: dict[str, str],
    seen: Measured,
) -> list[str]:
    lines = []
    why = {**suspect_reasons(findings), **drain_reasons(findings, drain)}
    # absolute: the annotation is read on another machine, days later (in the Job, a path on its
    # report volume: docs/k8s/README.md)
    report = rundir.path.resolve() / "report.html"
    for host, verdict in verdicts.items():
        if verdict == "fail" or (verdict == "suspect" and host in seen.hosts):
            reason = f"{why.get(host, verdict)} [run {rundir.run_id}, report {report}]"[:1000]
            tag = f"{TAINT_KEY}={verdict}:{TAINT_EFFECTS[verdict]}"

            def change(node: dict[str, Any], reason: str = reason, verdict: str = verdict) -> bool:
                return with_taint(node, reason, verdict)

            done = f"tainted node {host} {tag} ({why.get(host, verdict)})"
        elif verdict == "pass" and host in seen.hosts:
            change, done = without_taint, f"lifted {TAINT_KEY} from node {host} (clean this run)"
        else:
            continue  # not measured this run: what it had stays
        try:
            if kube.update_node(host, change):
                lines.append(f"netbench: {done}")
        except KubeError as exc:
            lines.append(f"netbench: could not change the taint of node {host}: {exc}")
    return lines


def remediate(
    kube: Kube,
    rundir: RunDir,
    findings: list[Any],
    drain: list[str] | None,
    hosts: list[str],
    label: bool,
    taint: bool,
) -> list[str]:
    """Label and/or taint the nodes; one line a node changed (or that could not be)."""
    if drain is None:
        drain = to_drain(findings, hosts)
    verdicts = node_verdicts(findings, hosts, drain)
    seen = measured(rundir)
    lines = _label_lines(kube, rundir, verdicts, seen) if label else []
    if taint:
        lines += _taint_lines(kube, rundir, findings, drain, verdicts, seen)
    return lines
