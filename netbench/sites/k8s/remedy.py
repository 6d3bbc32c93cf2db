"""``--k8s-label`` and ``--k8s-taint``: the verdict written back onto the nodes, only when asked.

A node's verdict: ``fail`` when the drain rule drains it (``reports.verdict.judge``, the rule of every
output: a failure of its own; preflight hands its drain list, the same rule's), ``suspect`` when a
warning or failure names it otherwise (a slow link it is part of, a borderline re-test), else
``pass``. Its busbw class: the 1-2-5 bucket of its mean large-message busbw over its pairs
(``kubepods.busbw_class``). The taint goes on the nodes to drain. Each node is changed by
read-modify-write with its resourceVersion (``Kube.update_node``): a conflict reads it again, so a
label another controller set meanwhile stays.
"""

from __future__ import annotations

from typing import Any

from netbench.common.rundir import RunDir
from netbench.reports.verdict import drain_reasons, judge
from netbench.sites.k8s.client import Kube, KubeError
from netbench.sites.k8s.pods import (
    BUSBW_LABEL,
    RUN_LABEL,
    VERDICT_LABEL,
    busbw_class,
    label_value_ok,
    with_labels,
    with_taint,
)


def to_drain(findings: list[Any], hosts: list[str]) -> list[str]:
    """The nodes to taint: the one drain rule's over the cluster's nodes (a sweep hands none)."""
    return list(judge(findings, len(hosts)).drain)


def node_verdicts(findings: list[Any], hosts: list[str], drain: list[str] | None) -> dict[str, str]:
    if drain is None:
        drain = to_drain(findings, hosts)
    out = {h: "pass" for h in hosts}
    for f in findings:
        if f.severity in ("warn", "fail"):
            for h in list(getattr(f, "hosts", None) or []) + (
                [f.subject] if f.subject_kind == "node" else []
            ):
                if h in out:
                    out[h] = "suspect"
    for h in drain:
        if h in out:
            out[h] = "fail"
    return out


def node_busbw(rundir: RunDir) -> dict[str, float]:
    """Each node's mean busbw (GB/s) over its ok pair rows at the largest pair size."""
    from netbench.common.rundir import load_results

    df = load_results(rundir.path)
    if df.empty or "pattern" not in df:
        return {}
    pairs = df[(df["pattern"] == "pair") & (df["status"] == "ok")]
    if pairs.empty:
        return {}
    top = pairs[pairs["bytes"] == pairs["bytes"].max()]
    per: dict[str, list[float]] = {}
    for hosts, bw in zip(top["hosts"], top["busbw_GBps"], strict=True):
        for h in hosts or []:
            if isinstance(bw, float | int):
                per.setdefault(h, []).append(float(bw))
    return {h: sum(v) / len(v) for h, v in per.items() if v}


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
    lines = []
    if label:
        bw = node_busbw(rundir)
        for host, verdict in verdicts.items():
            labels = {VERDICT_LABEL: verdict}
            if label_value_ok(rundir.run_id):
                labels[RUN_LABEL] = rundir.run_id
            cls = busbw_class(bw.get(host))
            if cls and label_value_ok(cls):
                labels[BUSBW_LABEL] = cls
            try:
                kube.update_node(host, lambda node, labels=labels: with_labels(node, labels))
            except KubeError as exc:
                lines.append(f"netbench: could not label node {host}: {exc}")
                continue
            lines.append(
                f"netbench: labelled node {host} {VERDICT_LABEL}={verdict}"
                + (f" {BUSBW_LABEL}={cls}" if cls else "")
            )
    if taint:
        why = drain_reasons(findings, drain)
        for host in drain:
            reason = f"{why[host]} [run {rundir.run_id}, report {rundir.path / 'report.html'}]"[:1000]
            try:
                kube.update_node(host, lambda node, reason=reason: with_taint(node, reason))
            except KubeError as exc:
                lines.append(f"netbench: could not taint node {host}: {exc}")
                continue
            lines.append(f"netbench: tainted node {host} netbench.io/preflight=fail:NoSchedule ({why[host]})")
    return lines
