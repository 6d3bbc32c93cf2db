"""Idle nodes, not tested lately (issue 47, point 10: "idle-node and tested-within-24h selection as
Oracle's checks do"): ``--k8s-idle-only`` and ``--k8s-skip-tested-within`` on the command line against
the test API server (``tests/kube_fake.py``, the real ``kubernetes`` client). Every node left out is
named, one line a group; nothing left to test is exit 3 (docs/exit-status.md: nothing measured)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("kubernetes")

from kube_cluster import netbench_argv  # noqa: E402 - after the skip
from kube_fake import FakeApiServer  # noqa: E402

GPU = {"nvidia.com/gpu": "1"}


def _stamp(hours_ago: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() - hours_ago * 3600))


def _labels(verdict: str, hours_ago: float) -> dict[str, str]:
    return {"netbench.io/verdict": verdict, "netbench.io/last-run": _stamp(hours_ago)}


@pytest.fixture
def api():
    server = FakeApiServer()
    try:
        yield server
    finally:
        server.close()


def _fleet(api: FakeApiServer) -> None:
    """Nodes in every state the two options tell apart (no kubelet: the pods they get stay Pending)."""
    nodes = {
        "g00": {},  # another user's training holds its GPU
        "g01": {},  # a Pending pod bound to it: the kubelet holds the GPU for it
        "g02": {},  # its GPU pod has ended
        "g03": {},  # the GPU pod there is netbench's own (a run's pod, being removed)
        "g04": {},  # a pod that asks for no GPU
        "g05": _labels("pass", 1),  # passed an hour ago
        "g06": _labels("fail", 1),  # failed an hour ago: re-tested (a clean run lifts its taint)
        "g07": _labels("suspect", 1),  # suspect (maybe it could not be tested): re-tested
        "g08": _labels("pass", 30),  # passed 30 hours ago
        "g09": {"netbench.io/verdict": "pass", "netbench.io/last-run": "yesterday"},  # not a time
        "g10": {"netbench.io/verdict": "pass", "netbench.io/last-run": "20991231T000000Z"},  # far ahead
    }
    for name, labels in nodes.items():
        api.add_node(name, labels=labels, address="10.9.0.1", allocatable=GPU)
    api.add_pod("ml", "train-0", "g00", GPU)
    api.add_pod("ml", "train-1", "g01", GPU, phase="Pending")
    api.add_pod("ml", "done", "g02", GPU, phase="Succeeded")
    ours = {"netbench.io/run-id": "20261206T000000Z-aaaaaa"}
    api.add_pod("nb", "nb-old-agent1-g03", "g03", GPU, labels=ours)
    api.add_pod("kube-system", "dns", "g04", {"cpu": "100m"})
    api.add_pod("ml", "waiting", None, GPU, phase="Pending")  # not scheduled: on no node


def _sweep(
    api: FakeApiServer, tmp_path: Path, *extra: str, command: str = "sweep"
) -> subprocess.CompletedProcess:
    kc = api.kubeconfig(tmp_path / "kubeconfig")
    args = ["--no-inventory", "--start-timeout", "3", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0"]
    if command == "preflight":
        args = ["--budget", "1m"]
    return subprocess.run(
        [*netbench_argv(kc, command), *extra, *args, "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=240,
    )


def _tried(api: FakeApiServer) -> set[str]:
    return {o["spec"]["nodeName"] for o in api.created if o["kind"] == "Pod"}


def test_idle_nodes_not_passed_within_the_period_are_the_ones_tested(
    api: FakeApiServer, tmp_path: Path
) -> None:
    """Busy: a GPU pod of someone else's that has not ended (Running, or Pending but bound) on it; a
    finished pod, netbench's own pod, a pod without GPUs, an unscheduled pod make no node busy. Skipped:
    verdict pass within 24 h; fail, suspect, pass 30 h ago, an unreadable or future stamp are tested.
    Each group left out is one line naming its nodes; the pods go only to the nodes taken."""
    _fleet(api)
    r = _sweep(api, tmp_path, "--k8s-idle-only", "--k8s-skip-tested-within", "24h")
    said = r.stderr[-4000:]
    taken = {"g02", "g03", "g04", "g06", "g07", "g08", "g09", "g10"}
    assert _tried(api) == taken, said
    assert "# netbench sweep over 8 host(s)" in r.stdout, r.stdout + said
    busy = [line for line in said.splitlines() if "left out, busy" in line]
    assert busy == ["# kubernetes: 2 node(s) left out, busy (another pod requests nvidia.com/gpu there; "
                    "--k8s-idle-only): g00 (pod 'ml/train-0'), g01 (pod 'ml/train-1')"], said
    recent = [line for line in said.splitlines() if "left out, passed within" in line]
    assert len(recent) == 1 and recent[0].startswith(
        "# kubernetes: 1 node(s) left out, passed within 24h (netbench.io/last-run; "
        "--k8s-skip-tested-within): g05 ("), said
    unread = [line for line in said.splitlines() if "not a past time" in line]
    assert len(unread) == 1 and "g09 ('yesterday')" in unread[0] and "g10 ('20991231T000000Z')" in unread[0]
    assert "Traceback" not in said


def test_without_the_options_every_chosen_node_is_tested(api: FakeApiServer, tmp_path: Path) -> None:
    """The options are opt-in: without them the busy and lately passed nodes are tried as before."""
    _fleet(api)
    r = _sweep(api, tmp_path, "--k8s-nodes", "g00,g05")
    assert _tried(api) == {"g00", "g05"}, r.stderr[-3000:]
    assert "left out" not in r.stderr


@pytest.mark.parametrize("command", ["sweep", "preflight"])
def test_nothing_left_to_test_is_exit_3_with_one_line_and_nothing_made(
    api: FakeApiServer, tmp_path: Path, command: str
) -> None:
    """Every chosen node busy or passed lately: the groups named, then one error line; exit 3 (sweep
    and preflight: nothing measured), no pod, no Secret, no run directory."""
    _fleet(api)
    r = _sweep(api, tmp_path, "--k8s-nodes", "g00,g01,g05", "--k8s-idle-only",
               "--k8s-skip-tested-within", "24h", command=command)
    assert r.returncode == 3, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("netbench")]
    assert errors == ["netbench: error: kubernetes: nothing left to test: of the 3 node(s) chosen, 2 busy, "
                      "1 passed within 24h: nothing measured"], r.stderr
    assert "g00 (pod 'ml/train-0'), g01 (pod 'ml/train-1')" in r.stderr and "g05 (" in r.stderr
    assert [o for o in api.created if o["kind"] in ("Pod", "Secret")] == []
    assert not (tmp_path / "run").exists()


def test_the_idle_check_needs_its_own_rbac(api: FakeApiServer, tmp_path: Path) -> None:
    """Seeing other users' pods is a cluster-wide list: without it, exit 2 naming it, nothing started."""
    _fleet(api)
    api.denied = {("list", "pods")}
    r = _sweep(api, tmp_path, "--k8s-idle-only")
    said = "may not list pods in namespace default; list pods (cluster-wide)"
    assert r.returncode == 2 and said in r.stderr, r.stderr
    assert api.created == []


@pytest.mark.parametrize("bad", ["0", "1ms", "8d", "soon"])
def test_a_period_that_is_no_duration_is_bad_input(api: FakeApiServer, tmp_path: Path, bad: str) -> None:
    r = _sweep(api, tmp_path, "--k8s-skip-tested-within", bad)
    assert r.returncode == 2 and "--k8s-skip-tested-within" in r.stderr and "Traceback" not in r.stderr
    assert api.requests == []  # refused while the command line is read


def test_the_options_are_refused_by_other_launchers(tmp_path: Path) -> None:
    import sys

    hosts = tmp_path / "hosts.txt"
    hosts.write_text("h0\nh1\n")
    for flag in (["--k8s-idle-only"], ["--k8s-skip-tested-within", "24h"], ["--k8s-metrics-configmap", "m"]):
        r = subprocess.run([sys.executable, "-m", "netbench", "sweep", "--hosts", str(hosts), *flag,
                            "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and flag[0] in r.stderr and "--launcher k8s" in r.stderr, r.stderr
