"""A finding's action speaks the site the run was on (run.json's launcher): on Kubernetes it sends the
user to kubectl and the pod, never to SSH; over SSH (or a run that names no site) to ssh and the host."""

from __future__ import annotations

import pytest
from netbench.reports.context import AnalysisContext
from netbench.reports.rules import errors, host_checks, link_health
from synthetic import make_fleet


def _fleet(launcher: str | None):
    fleet = make_fleet(6, 2, pair_sizes=(1 << 30,), ring_sizes=(), seed=1)
    by_host = {n["host"]: n for n in fleet.inventory}
    by_host["gpu002"].update(status="unreachable", error="the probe's pod did not start within 120 s")
    by_host["gpu003"].update(status="cannot_run", error="torch 2.0 is older than 2.1")
    for r in fleet.rows:
        if "gpu005" in r["hosts"]:  # a host that fails with everyone
            r.update(status="timeout", error="pair timed out after 60 s", busbw_GBps=None, time_us=None)
    run = dict(fleet.run)
    run.pop("launcher", None)
    if launcher:
        run["launcher"] = launcher
    return AnalysisContext.from_data(fleet.rows, fleet.inventory, fleet.env, run)


def _actions(launcher: str | None) -> dict[str, str]:
    ctx = _fleet(launcher)
    found = link_health.check(ctx) + host_checks.check(ctx) + errors.check(ctx)
    wanted = {"node_unreachable": "gpu002", "host_cannot_run": "gpu003", "host_failing": "gpu005"}
    return {f.rule: f.action for f in found if wanted.get(f.rule) == f.subject}


def test_on_kubernetes_the_actions_name_kubectl_and_the_pod_never_ssh() -> None:
    said = _actions("k8s")
    assert set(said) == {"node_unreachable", "host_cannot_run", "host_failing"}, said
    assert "kubectl describe node gpu002" in said["node_unreachable"]
    assert "--k8s-image" in said["host_cannot_run"]
    assert "kubectl debug node/gpu005" in said["host_failing"]
    assert not any("ssh" in a.lower() or "hosts file" in a for a in said.values()), said


@pytest.mark.parametrize("launcher", ["ssh", None, "no such site"])
def test_over_ssh_or_an_unknown_site_the_actions_name_ssh(launcher: str | None) -> None:
    said = _actions(launcher)
    assert "ssh gpu002 true" in said["node_unreachable"]
    assert "python=" in said["host_cannot_run"]
    assert not any("kubectl" in a for a in said.values()), said
