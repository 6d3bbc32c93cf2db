"""``--launcher k8s`` on a fake cluster of real test hosts: the real ``kubernetes`` client against
``tests/kube_fake.py``'s API server, ``tests/kube_kubelet.py`` running every pod as real processes in
the node's network namespace, real ranks over the veths.

The sweep gives the findings and exit status of ``--launcher ssh`` on the same hosts (one capped with
tc); preflight's ``--k8s-taint`` taints exactly the capped node; SIGINT mid-run leaves no pod, no
Secret, no process; a pod Pending forever is named within the start timeout; an evicted pod and a
node gone NotReady cost only that host's pairs."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("kubernetes")

from kube_cluster import FakeCluster, fake_cluster  # noqa: E402

pytestmark = pytest.mark.netns

HOSTS = ["h0", "h1", "h2", "h3"]
CAPPED = "h2"
# the pairs alone: a ring over all four at 40 Mbit/s would take minutes and judges no node
MEASURE = [
    "--pattern",
    "pairwise",
    "--pair-sizes",
    "1M",
    "-k",
    "all_reduce",
    "-n",
    "5",
    "-w",
    "1",
    "--timeout",
    "30",
]
# preflight on this 2-core VM (tests/test_preflight_netns.py): "slow" is well below the peers
NOISY_VM = "[thresholds]\nslow_pair_factor = 0.35\nslow_node_factor = 0.5\n"
QUICK = ["--pair-sizes", "256K,1M", "-n", "5", "-w", "1", "--timeout", "20"]


@pytest.fixture(scope="module")
def net():
    from netns import module_network

    with module_network(HOSTS) as net:
        for h in HOSTS:  # every pair bound by the network, not by CPU time on a shared 2-core machine
            net.limit_host(h, "100mbit")
        net.limit_host(CAPPED, "40mbit")  # 0.4x: far below the slow-node threshold
        yield net


@pytest.fixture
def cluster(net):
    """A fresh fake cluster on the module's hosts (cheap: an HTTP server and a thread)."""
    with fake_cluster(net) as c:
        yield c


def _found(out: Path) -> set[tuple[str, str]]:
    found = json.loads((out / "findings.json").read_text())["findings"]
    return {(f["rule"], f["subject"]) for f in found if f["severity"] != "info"}


def _left_behind(cluster: FakeCluster) -> tuple[list, list, list]:
    """(pods, secrets, processes the kubelet started that still run) once the run has ended."""
    return (
        [p["metadata"]["name"] for p in cluster.api.pods()],
        [s["metadata"]["name"] for s in cluster.api.secrets()],
        cluster.kubelet.running(),
    )


def test_sweep_on_k8s_gives_the_findings_and_exit_status_of_ssh(
    net, cluster: FakeCluster, tmp_path: Path
) -> None:
    outs, codes, said = {}, {}, {}
    for site in ("ssh", "k8s"):
        outs[site] = tmp_path / site
        if site == "ssh":
            (tmp_path / "ssh-cfg").mkdir()
            argv = [*net.netbench_argv(tmp_path / "ssh-cfg"), "--launcher", "ssh"]
        else:
            argv = cluster.argv("sweep")
        r = subprocess.run(
            [*argv, "--out", str(outs[site]), *MEASURE], capture_output=True, text=True, timeout=400
        )
        codes[site], said[site] = r.returncode, r.stdout[-3000:] + r.stderr[-3000:]
        assert (outs[site] / "findings.json").is_file(), said[site]
    assert _found(outs["ssh"]) == {("slow_node", CAPPED)}, said["ssh"]
    assert _found(outs["k8s"]) == _found(outs["ssh"]), said["k8s"]
    assert codes == {"ssh": 2, "k8s": 2}, said
    run = json.loads((outs["k8s"] / "run.json").read_text())
    assert run["launcher"] == "k8s" and run["status"] == "completed" and run["hosts"] == HOSTS
    assert run["confirm"]["launches"]  # the suspect re-tested: one more launch of pods
    inventory = [json.loads(line) for line in (outs["k8s"] / "inventory.jsonl").read_text().splitlines()]
    assert [(n["host"], n["status"]) for n in inventory] == [(h, "ok") for h in HOSTS]
    assert [n["hostname"] for n in inventory] == HOSTS  # the probe ran in each node's own namespace

    def counted(out: Path) -> set[tuple[str, str, str]]:  # the port counters around the run, as over SSH
        lines = [json.loads(x) for x in (out / "counters.jsonl").read_text().splitlines()]
        return {(c["phase"], c["host"], c["status"]) for c in lines}

    assert (
        counted(outs["k8s"])
        == counted(outs["ssh"])
        == {(p, h, "ok") for p in ("before", "after") for h in HOSTS}
    )
    # every object netbench made is valid against the API schema, and carried the run's id
    import kubernetes_validate

    run_id = run["run_id"]
    kinds = sorted({o["kind"] for o in cluster.api.created})
    assert kinds == ["Pod", "Secret"], kinds
    for obj in cluster.api.created:
        kubernetes_validate.validate(obj, "1.31", strict=True)
        assert obj["metadata"]["labels"]["netbench.io/run-id"] == run_id
    # and everything is gone
    launches = {p for m, p in cluster.api.requests if m == "POST" and p.endswith("/pods")}
    assert launches and _left_behind(cluster) == ([], [], [])


def test_preflight_k8s_taint_taints_exactly_the_capped_node(cluster: FakeCluster, tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text(NOISY_VM)
    r = subprocess.run(
        cluster.argv(
            "preflight",
            "--policy",
            str(tmp_path / "policy.toml"),
            *QUICK,
            "--k8s-taint",
            "--k8s-label",
            "--out",
            str(tmp_path / "run"),
        ),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert r.returncode == 2, r.stderr[-3000:]
    assert r.stdout.splitlines() == [CAPPED]  # stdout is the drain list alone
    tainted = {
        h: [t for t in cluster.api.node(h)["spec"].get("taints") or [] if t["key"] == "netbench.io/preflight"]
        for h in HOSTS
    }
    assert {h for h, t in tainted.items() if t} == {CAPPED}, r.stderr[-3000:]
    assert tainted[CAPPED] == [{"key": "netbench.io/preflight", "value": "fail", "effect": "NoSchedule"}]
    node = cluster.api.node(CAPPED)
    assert node["metadata"]["annotations"]["netbench.io/taint-reason"].startswith("slow_node")
    labels = {h: cluster.api.node(h)["metadata"]["labels"] for h in HOSTS}
    assert labels[CAPPED]["netbench.io/verdict"] == "fail"
    assert all(labels[h]["netbench.io/verdict"] in ("pass", "suspect") for h in HOSTS if h != CAPPED)
    run_id = json.loads((tmp_path / "run" / "run.json").read_text())["run_id"]
    assert all(labels[h]["netbench.io/run-id"] == run_id for h in HOSTS)
    assert f"tainted node {CAPPED}" in r.stderr
    assert _left_behind(cluster) == ([], [], [])


def _start(cluster: FakeCluster, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        cluster.argv("sweep", "--out", str(out), *MEASURE, "--confirm-budget", "0", *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _agents_running(cluster: FakeCluster, n: int, timeout: float = 120.0) -> list[dict]:
    def ready(api) -> bool:  # noqa: ANN001
        agents = [p for p in api.pods() if p["metadata"]["labels"].get("netbench.io/role") == "agent"]
        return len(agents) >= n and all(p.get("status", {}).get("phase") == "Running" for p in agents)

    assert cluster.api.wait_for(ready, timeout), [p.get("status") for p in cluster.api.pods()]
    return [p for p in cluster.api.pods() if p["metadata"]["labels"].get("netbench.io/role") == "agent"]


def _wait_rows(out: Path, n: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    path = out / "results.jsonl"
    while time.monotonic() < deadline:  # the run directory is another process's: read it as it grows
        if path.is_file() and len(path.read_text().splitlines()) >= n:
            return
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} rows in {path} after {timeout} s")


def test_sigint_mid_run_leaves_no_pod(cluster: FakeCluster, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _start(cluster, out, "--no-inventory")
    _agents_running(cluster, len(HOSTS))
    _wait_rows(out, 1)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
    assert _left_behind(cluster) == ([], [], []), stderr[-2000:]
    assert any(m == "DELETE" and "/secrets/" in p for m, p in cluster.api.requests)  # the parent object


def _rows(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]


def _only_its_pairs_failed(out: Path, host: str) -> None:
    pairs = [r for r in _rows(out) if r["pattern"] == "pair"]
    failed = {tuple(sorted(r["hosts"])) for r in pairs if r["status"] != "ok"}
    ok = {tuple(sorted(r["hosts"])) for r in pairs if r["status"] == "ok"}
    assert failed and all(host in p for p in failed), failed
    assert {p for p in ok} >= {
        tuple(sorted((a, b))) for a in HOSTS for b in HOSTS if a < b and host not in (a, b)
    } - failed


def test_an_evicted_pod_costs_only_its_hosts_pairs(cluster: FakeCluster, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _start(cluster, out, "--no-inventory")
    victim = next(p for p in _agents_running(cluster, len(HOSTS)) if p["spec"]["nodeName"] == "h3")
    _wait_rows(out, 1)
    cluster.kubelet.evict("default", victim["metadata"]["name"])
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 2, stderr[-3000:]
    _only_its_pairs_failed(out, "h3")
    faults = json.loads((out / "run.json").read_text())["faults"]
    assert any(f["host"] == "h3" and "Evicted" in f["message"] for f in faults), faults
    assert _left_behind(cluster) == ([], [], [])


def test_a_node_gone_notready_costs_only_its_pairs_and_leaves_no_pod(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    proc = _start(cluster, out, "--no-inventory")
    _agents_running(cluster, len(HOSTS))
    _wait_rows(out, 1)
    cluster.kubelet.stop_node("h1")
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 2, stderr[-3000:]
    _only_its_pairs_failed(out, "h1")
    faults = json.loads((out / "run.json").read_text())["faults"]
    assert any(f["host"] == "h1" for f in faults), faults
    assert _left_behind(cluster) == ([], [], [])  # its pod removed from the API: its kubelet is gone


def test_a_pod_pending_forever_is_named_within_the_start_timeout(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    cluster.kubelet.pull_fails.add("h3")  # the node cannot pull the image: ImagePullBackOff, for ever
    for extra in (["--no-inventory"], []):  # the agents' pods; the inventory's probe pods
        out = tmp_path / f"run{len(extra)}"
        t0 = time.monotonic()
        r = subprocess.run(
            cluster.argv(
                "sweep",
                "--out",
                str(out),
                *MEASURE,
                "--confirm-budget",
                "0",
                "--start-timeout",
                "30",
                *extra,
            ),
            capture_output=True,
            text=True,
            timeout=300,
        )
        took = time.monotonic() - t0
        said = r.stdout + r.stderr
        assert "h3" in said and "ImagePullBackOff" in said, said[-3000:]
        # a host down during the run fails it (2); one the inventory could not reach is left out
        # with a warning (1), as over SSH
        assert r.returncode == (2 if extra else 1) and took < 200, (r.returncode, took)
        if not extra:
            left_out = json.loads((out / "run.json").read_text())["left_out"]
            assert list(left_out) == ["h3"] and "ImagePullBackOff" in left_out["h3"], left_out
        ok = {tuple(sorted(x["hosts"])) for x in _rows(out) if x["status"] == "ok"}
        assert ok == {("h0", "h1"), ("h0", "h2"), ("h1", "h2")}, said[-3000:]
        assert _left_behind(cluster) == ([], [], [])


def test_k8s_keep_leaves_the_pods_deleting_their_parent_removes_them_and_sweep_labels_nodes(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    r = subprocess.run(
        cluster.argv(
            "sweep",
            "--out",
            str(out),
            *MEASURE,
            "--confirm-budget",
            "0",
            "--no-inventory",
            "--k8s-keep",
            "--k8s-label",
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode in (0, 1, 2) and (out / "findings.json").is_file(), r.stderr[-3000:]
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    kept = cluster.run_pods(run_id)
    assert sorted(p["spec"]["nodeName"] for p in kept) == HOSTS  # one agent pod a node, its log there
    assert {p["status"]["phase"] for p in kept} == {"Succeeded"}  # the agents ended with the run
    # sweep's --k8s-label: every node's verdict (h2 capped, not re-tested: suspect or fail), the run id,
    # its large-message busbw class
    labels = {h: cluster.api.node(h)["metadata"]["labels"] for h in HOSTS}
    assert {h: labels[h]["netbench.io/run-id"] for h in HOSTS} == {h: run_id for h in HOSTS}
    assert labels[CAPPED]["netbench.io/verdict"] in ("suspect", "fail"), labels
    assert all(labels[h]["netbench.io/busbw-class"].endswith("GBps") for h in HOSTS), labels
    assert not any(cluster.api.node(h)["spec"].get("taints") for h in HOSTS)  # no taint without --k8s-taint
    parent = {ref["name"] for p in kept for ref in p["metadata"]["ownerReferences"]}
    assert len(parent) == 1 and "pods kept (--k8s-keep)" in r.stderr
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host, cfg.api_key = cluster.api.url, {"authorization": f"Bearer {cluster.api.token}"}
    client.CoreV1Api(client.ApiClient(cfg)).delete_namespaced_secret(parent.pop(), "default")
    assert cluster.api.wait_for(
        lambda api: not api.pods() and not api.secrets(), 30
    )  # the owner took them along


def test_a_node_without_room_for_the_pod_is_named_and_the_rest_measured(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    """Another pod holds h3's one GPU: the kubelet refuses netbench's pod there (nodeName bypasses the
    scheduler, so it fails at admission instead of pending), and the run names it with those words."""
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host, cfg.api_key = cluster.api.url, {"authorization": f"Bearer {cluster.api.token}"}
    core = client.CoreV1Api(client.ApiClient(cfg))
    gpu = {"nvidia.com/gpu": "1"}
    core.create_namespaced_pod(
        "nb",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "training"},
            "spec": {
                "nodeName": "h3",
                "containers": [
                    {
                        "name": "c",
                        "image": "train:1",
                        "command": ["sleep", "600"],
                        "resources": {"requests": gpu, "limits": gpu},
                    }
                ],
            },
        },
    )
    assert cluster.api.wait_for(lambda api: api.pods("nb")[0].get("status", {}).get("phase") == "Running", 30)
    out = tmp_path / "run"
    r = subprocess.run(
        cluster.argv("sweep", "--out", str(out), *MEASURE, "--confirm-budget", "0"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = r.stdout + r.stderr
    assert "OutOfnvidia.com/gpu" in said and "Node didn't have enough resource" in said, said[-3000:]
    left_out = json.loads((out / "run.json").read_text())["left_out"]
    assert list(left_out) == ["h3"], left_out
    ok = {tuple(sorted(x["hosts"])) for x in _rows(out) if x["status"] == "ok"}
    assert ok == {("h0", "h1"), ("h0", "h2"), ("h1", "h2")}, said[-3000:]
    assert [p["metadata"]["name"] for p in cluster.api.pods()] == ["training"]  # theirs stays, ours is gone
