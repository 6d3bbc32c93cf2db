"""Metrics and the report's reference in a place no node owns (issue 47, point 10: "the Prometheus
textfile is written by hostPath on whichever node ran the Job, so a stale file keeps an alert
firing"): ``--k8s-metrics-configmap`` replaces a ConfigMap of the run's namespace whole, each run,
against the test API server (``tests/kube_fake.py``, the real ``kubernetes`` client)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("kubernetes")
from kube_cluster import ThisMachine, fake_cluster  # noqa: E402 - after the skip
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

NAME = "netbench-metrics"
STALE = (
    '# TYPE netbench_finding gauge\n'
    'netbench_finding{rule="host_failing",severity="fail",subject_kind="node",subject="n9"} 1\n'
)


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]


def test_a_run_replaces_the_configmap_whole_with_its_metrics_the_fleet_s_verdicts_and_its_report(
    tmp_path: Path,
) -> None:
    """An older run's ConfigMap (a failing n9, a key of its own) is replaced whole: its finding is
    gone. The new one holds the run's Prometheus text (it parses), the verdict of every node of the
    run's choice as its label says now (n1, busy and left out, still reported failing from the run
    that failed it) and the absolute path of this run's report, which is there; the run id."""
    now = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    fail = {"netbench.io/verdict": "fail", "netbench.io/last-run": now}
    labels = {"n0": {}, "n1": fail}
    with fake_cluster(ThisMachine(list(labels)), labels=labels) as cluster:
        api = cluster.api
        api.add_pod("ml", "train-0", "n1", {"nvidia.com/gpu": "1"})
        api.store["configmaps"][("default", NAME)] = {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": NAME, "namespace": "default", "resourceVersion": "1", "uid": "u"},
            "data": {"netbench.prom": STALE, "report": "/out/old/report.html", "old-key": "x"},
        }
        r = subprocess.run(
            cluster.argv("sweep", "--k8s-idle-only", "--k8s-label", "--k8s-metrics-configmap", NAME,
                         "--procs-per-host", "2", "--pattern", "intra", "-b", "1K", "-e", "1K", "-n", "2",
                         "-w", "1", "--out", str(tmp_path / "out" / "{id}")),
            capture_output=True, text=True, timeout=300,
        )
        said = r.stdout[-3000:] + r.stderr[-3000:]
        assert r.returncode in (0, 1), said  # 1: a warning (another test's run on this machine)
        cm = api.configmap("default", NAME)
        n0 = api.node("n0")["metadata"]["labels"]["netbench.io/verdict"]
    assert cm is not None, said
    (run_dir,) = (tmp_path / "out").iterdir()
    assert set(cm["data"]) == {"netbench.prom", "report", "run-id"}, cm["data"].keys()
    assert cm["data"]["run-id"] == run_dir.name
    report = cm["data"]["report"]
    assert report == str(run_dir.resolve() / "report.html") and Path(report).is_file()
    text = cm["data"]["netbench.prom"]
    assert 'subject="n9"' not in text
    samples = _samples(text)
    verdicts = {s[1]["node"]: s[1]["verdict"] for s in samples if s[0] == "netbench_node_verdict"}
    assert verdicts == {"n0": n0, "n1": "fail"}, text
    stamps = {s[1]["node"]: s[2] for s in samples if s[0] == "netbench_node_last_run_timestamp_seconds"}
    assert set(stamps) == {"n0", "n1"} and all(abs(v - time.time()) < 600 for v in stamps.values())
    info = [s for s in samples if s[0] == "netbench_run_info"]
    assert info and info[0][1]["run_id"] == run_dir.name
    assert any(s[0] == "netbench_busbw_gbps" and s[1]["hosts"] == "n0" for s in samples)
    assert f"metrics of run {run_dir.name} in configmap default/{NAME}" in r.stdout + r.stderr


def _run(tmp_path: Path, name: str, slow: dict[str, float]):  # noqa: ANN202 - (RunDir, findings)
    from netbench.reports.engine import analyze
    from synthetic import make_fleet, write_run_dir

    from netbench.common.rundir import RunDir

    fleet = make_fleet(n_nodes=8, slow_nodes=slow)
    run = RunDir.open(write_run_dir(fleet, tmp_path / name))
    return fleet, run, analyze(run.path)


def test_a_node_no_longer_failing_stops_being_reported(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """Two runs of an 8-node fleet through the site's publish and the real client: the first finds
    gpu005 at half rate (its findings and its fail verdict exported), the next finds it clean and
    labels it pass: nothing of gpu005's failure is left in the ConfigMap. Past the size a ConfigMap
    holds, the pairs' series are left out first and the line says so; the findings stay."""
    from kube_fake import FakeApiServer

    from netbench.sites.k8s import metrics
    from netbench.sites.k8s.client import KubeTarget, connect
    from netbench.sites.k8s.pods import NodeInfo
    from netbench.sites.k8s.remedy import remediate

    api = FakeApiServer()
    try:
        kube = connect(KubeTarget(str(api.kubeconfig(tmp_path / "kc"))))

        def one(name: str, slow: dict[str, float]) -> tuple[str, list[str]]:
            fleet, run, findings = _run(tmp_path, name, slow)
            for h in fleet.hosts:
                if ("", h) not in api.store["nodes"]:
                    api.add_node(h, allocatable={"nvidia.com/gpu": "8"})
            remediate(kube, run, findings, None, fleet.hosts, label=True, taint=False)
            nodes = [NodeInfo.of(api.node(h)) for h in fleet.hosts]
            lines = metrics.publish(kube, NAME, run, findings, nodes, time.time())
            return api.configmap("default", NAME)["data"]["netbench.prom"], lines

        first, _ = one("r1", {"gpu005": 0.5})
        assert 'netbench_node_verdict{node="gpu005",verdict="fail"} 1' in first, first
        assert any(s[0] == "netbench_finding" and "gpu005" in s[1]["subject"] for s in _samples(first))
        later, _ = one("r2", {})
        assert "gpu005" in later and 'node="gpu005",verdict="pass"' in later
        assert not [s for s in _samples(later) if s[0] == "netbench_finding" and "gpu005" in s[1]["subject"]]
        assert 'verdict="fail"' not in later

        monkeypatch.setattr(metrics, "LIMIT", len(later.encode()) - 1)
        cut, lines = one("r3", {"gpu005": 0.5})
        assert "the pairs' measurement series left out" in lines[0], lines
        assert not [s for s in _samples(cut) if s[1].get("pattern") == "pair"]
        assert 'netbench_node_verdict{node="gpu005",verdict="fail"} 1' in cut
    finally:
        api.close()


def test_a_bad_configmap_name_or_missing_rbac_is_exit_2_before_anything_runs(tmp_path: Path) -> None:
    from kube_cluster import netbench_argv
    from kube_fake import FakeApiServer

    api = FakeApiServer()
    try:
        api.add_node("g0", address="10.1.0.1", allocatable={"nvidia.com/gpu": "1"})
        kc = api.kubeconfig(tmp_path / "kc")
        r = subprocess.run([*netbench_argv(kc, "sweep"), "--k8s-metrics-configmap", "Not/A_Name",
                            "--out", str(tmp_path / "r1")], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and "--k8s-metrics-configmap 'Not/A_Name': not a ConfigMap name" in r.stderr
        assert api.requests == []
        api.denied = {("update", "configmaps")}
        r = subprocess.run([*netbench_argv(kc, "preflight"), "--k8s-metrics-configmap", NAME,
                            "--out", str(tmp_path / "r2")], capture_output=True, text=True, timeout=120)
        assert r.returncode == 3 and "may not update configmaps in namespace default" in r.stderr, r.stderr
        assert api.created == [] and json.dumps(api.store["configmaps"]) == "{}"
    finally:
        api.close()
