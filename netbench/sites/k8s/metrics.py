"""``--k8s-metrics-configmap NAME``: the run's Prometheus text and its report's reference in a ConfigMap
of the run's namespace, a place no node owns (docs/k8s/README.md says why not a hostPath or the claim).

The ConfigMap is replaced whole by every run that judged (``Kube.put_configmap``): nothing of an older
run stays, so a finding about a node that is clean now stops being exported. Keys:

- ``netbench.prom``: ``reports.export.prometheus`` of the run (the series the textfile recipe had),
  and the fleet's state from the nodes' own labels (``--k8s-label``): ``netbench_node_verdict{node,
  verdict} 1`` and ``netbench_node_last_run_timestamp_seconds{node}`` for every node of the run's
  choice (``--k8s-nodes``), those a run left out (busy, tested lately) included: a node failed by an
  earlier run and busy now is still reported failing, one whose label says pass is not.
- ``report``: the report's absolute path (in the Job: on the report claim), ``run-id``.

A ConfigMap holds 1 MiB: past ``LIMIT`` the pairs' measurement series are left out, then every
measurement series (the findings and the verdicts stay), and a line says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from netbench.common.errors import UsageError
from netbench.common.rundir import RunDir
from netbench.sites.k8s.client import Kube, KubeError
from netbench.sites.k8s.pods import LAST_RUN_LABEL, VERDICT_LABEL, NodeInfo, run_labels
from netbench.sites.k8s.selection import last_run_age

PROM_KEY = "netbench.prom"
LAST_RUN_SERIES = "netbench_node_last_run_timestamp_seconds"
LIMIT = 900 * 1024  # of the 1 MiB a ConfigMap may hold, room for its other keys and metadata
_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?$")


def check_name(name: str) -> str:
    if not _NAME.match(name or ""):
        raise UsageError(f"--k8s-metrics-configmap {name!r}: not a ConfigMap name (lower-case letters, "
                         "digits, '-' and '.', at most 253)")
    return name


def node_series(nodes: Sequence[NodeInfo], now: float) -> str:
    """The fleet's state from its nodes' labels: their verdict and when it was written."""
    from netbench.reports.export.prometheus import escape_label

    verdicts, stamps = [], []
    for n in nodes:
        verdict = n.labels.get(VERDICT_LABEL)
        if verdict is None:
            continue
        node = escape_label(n.name)
        verdicts.append(f'netbench_node_verdict{{node="{node}",verdict="{escape_label(verdict)}"}} 1')
        age = last_run_age(n.labels.get(LAST_RUN_LABEL), now)
        if age is not None:
            stamps.append(f'{LAST_RUN_SERIES}{{node="{node}"}} {float(round(now - age))!r}')
    out = []
    if verdicts:
        out += ["# HELP netbench_node_verdict The node's netbench.io/verdict label (value 1).",
                "# TYPE netbench_node_verdict gauge", *verdicts]
    if stamps:
        out += [f"# HELP {LAST_RUN_SERIES} Unix time of the node's netbench.io/last-run label.",
                f"# TYPE {LAST_RUN_SERIES} gauge", *stamps]
    return "".join(line + "\n" for line in out)


def prometheus_text(rows: list[dict[str, Any]], findings: list[Any], run: dict[str, Any],
                    fleet: str) -> tuple[str, str | None]:
    """The text within LIMIT, and what was left out to fit (None: nothing)."""
    from netbench.reports.export.prometheus import to_prometheus

    text = to_prometheus(rows, findings, run) + fleet
    if len(text.encode()) <= LIMIT:
        return text, None
    text = to_prometheus([r for r in rows if r.get("pattern") != "pair"], findings, run) + fleet
    if len(text.encode()) <= LIMIT:
        return text, "the pairs' measurement series"
    return to_prometheus([], findings, run) + fleet, "every measurement series"


def configmap_manifest(namespace: str, name: str, run_id: str, data: dict[str, str]) -> dict[str, Any]:
    labels = {k: v for k, v in run_labels(run_id).items() if k == "app.kubernetes.io/name"}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": data,
    }


def publish(kube: Kube, name: str, rundir: RunDir, findings: list[Any], fleet: Sequence[NodeInfo],
            now: float) -> list[str]:
    """Replace ConfigMap ``name`` with the run's metrics; one line saying what was written or why not."""
    report = str(rundir.path.resolve() / "report.html")
    text, left = prometheus_text(rundir.read_rows(), findings, rundir.read_run(), node_series(fleet, now))
    if len(text.encode()) > LIMIT:
        return [f"netbench: could not write configmap {name}: {len(text) >> 10} KiB of findings and node "
                "verdicts, more than a ConfigMap holds"]
    data = {PROM_KEY: text, "report": report, "run-id": rundir.run_id}
    try:
        kube.put_configmap(configmap_manifest(kube.namespace, name, rundir.run_id, data))
    except KubeError as exc:
        return [f"netbench: could not write configmap {name}: {exc}"]
    said = f"netbench: metrics of run {rundir.run_id} in configmap {kube.namespace}/{name} (report {report})"
    if left:
        said += f"; {left} left out, past the {LIMIT >> 10} KiB a ConfigMap can hold (report.html has them)"
    return [said]
