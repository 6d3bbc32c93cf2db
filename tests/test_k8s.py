"""``--launcher k8s`` without test hosts: the manifests against the API schema (kubernetes-validate,
offline), the options, and what the real ``kubernetes`` client meets at the fake API server
(``tests/kube_fake.py``) before anything runs: a wrong kubeconfig, context or token, RBAC refusals,
node choice; and the remediation's read-modify-write under a concurrent writer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

pytest.importorskip("kubernetes")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

from kube_cluster import IMAGE, ThisMachine, fake_cluster, netbench_argv  # noqa: E402 - after the skips
from kube_fake import FakeApiServer  # noqa: E402

from netbench.common.errors import UsageError  # noqa: E402
from netbench.sites.k8s.pods import (  # noqa: E402
    TAINT_KEY,
    TAINT_REASON,
    NodeChoice,
    NodeInfo,
    PodTemplate,
    busbw_class,
    owner_reference,
    parse_resources,
    parse_tolerations,
    pod_manifest,
    secret_manifest,
    topology_uplinks,
    with_labels,
    with_taint,
)


@pytest.fixture(scope="module")
def api():
    server = FakeApiServer(namespaces=("default", "nb"))
    for i in range(3):
        server.add_node(
            f"g{i}",
            address=f"10.1.0.{i + 1}",
            allocatable={"nvidia.com/gpu": "8", "rdma/ib": "4"},
            labels={
                "pool": "h100",
                "topology.kubernetes.io/zone": "z1",
                "network.topology.nvidia.com/leaf": f"leaf{i // 2}",
            },
        )
    server.add_node("cpu0", address="10.1.0.9")
    server.add_node("down0", address="10.1.0.8", allocatable={"nvidia.com/gpu": "8"}, ready=False)
    yield server
    server.close()


def _node(name: str = "g0", gpus: str = "8") -> NodeInfo:
    info = NodeInfo.of(
        {
            "metadata": {"name": name, "labels": {}},
            "status": {
                "allocatable": {"nvidia.com/gpu": gpus, "rdma/ib": "4"},
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )
    assert isinstance(info, NodeInfo)
    return info


def _template(**kw) -> PodTemplate:
    base = dict(
        namespace="nb",
        image="registry.example/netbench:0.1",
        run_id="20261203T064709Z-ffc0bb",
        resources=parse_resources(["rdma/ib=1"]),
        tolerations=parse_tolerations(["dedicated=gpu:NoSchedule"]),
        owner=owner_reference("Secret", "netbench-abc", "2b6c1f7e-0000-4000-8000-000000000000"),
        env={"NCCL_ALGO": "Ring"},
        secret_name="netbench-abc-l1",
    )
    base.update(kw)
    return PodTemplate(**base)


# -- the manifests, against the API schema --------------------------------------------------------------
@pytest.mark.parametrize("role", ["agent", "probe"])
def test_every_pod_manifest_is_valid_against_the_api_schema(role: str) -> None:
    pod = pod_manifest(_template(), _node(), role, 3, ["python3", "-m", "netbench.agents.worker", "agent"])
    kubernetes_validate.validate(pod, "1.31", strict=True)
    spec, c = pod["spec"], pod["spec"]["containers"][0]
    assert spec["nodeName"] == "g0" and spec["hostNetwork"] and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert c["resources"]["requests"] == {"nvidia.com/gpu": "8", "rdma/ib": "1"} == c["resources"]["limits"]
    assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in spec["volumes"]
    assert {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    assert pod["metadata"]["labels"]["netbench.io/run-id"] == "20261203T064709Z-ffc0bb"
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "Secret"
    # the store's secret comes from a Secret, never written into the spec
    secret_env = [e for e in c["env"] if e["name"] == "NETBENCH_STORE_SECRET"]
    assert secret_env == [
        {
            "name": "NETBENCH_STORE_SECRET",
            "valueFrom": {"secretKeyRef": {"name": "netbench-abc-l1", "key": "store-secret"}},
        }
    ]


def test_secret_manifests_are_valid_and_a_cpu_node_asks_for_no_gpu() -> None:
    kubernetes_validate.validate(secret_manifest("nb", "netbench-abc", "r1", {}), "1.31", strict=True)
    owned = secret_manifest(
        "nb",
        "netbench-abc-l1",
        "r1",
        {"store-secret": "s3cr3t"},
        owner=owner_reference("Secret", "netbench-abc", "u"),
    )
    kubernetes_validate.validate(owned, "1.31", strict=True)
    pod = pod_manifest(
        _template(resources=parse_resources([])), _node("cpu0", gpus="0"), "agent", 1, ["true"]
    )
    kubernetes_validate.validate(pod, "1.31", strict=True)
    assert "resources" not in pod["spec"]["containers"][0]
    long = pod_manifest(_template(), _node("n" * 63 + ".rack-" + "x" * 150), "agent", 1, ["true"])
    kubernetes_validate.validate(long, "1.31", strict=True)


def test_node_labels_and_taint_are_valid_changes_of_a_node() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "g0", "labels": {"a": "b"}},
        "spec": {"taints": [{"key": "other", "effect": "NoExecute"}]},
    }
    assert with_labels(node, {"netbench.io/verdict": "fail", "netbench.io/busbw-class": busbw_class(6, 12.5)})
    assert not with_labels(node, {"netbench.io/verdict": "fail"})  # nothing to write: no write
    assert with_taint(node, "slow_node: h2 is 0.4x its peers [run r1]")
    assert not with_taint(node, "slow_node: h2 is 0.4x its peers [run r1]")
    kubernetes_validate.validate(node, "1.31", strict=True)
    assert node["metadata"]["labels"] == {
        "a": "b",
        "netbench.io/verdict": "fail",
        "netbench.io/busbw-class": "reduced",
    }
    assert node["spec"]["taints"] == [
        {"key": "other", "effect": "NoExecute"},
        {"key": TAINT_KEY, "value": "fail", "effect": "NoSchedule"},
    ]
    assert node["metadata"]["annotations"][TAINT_REASON].startswith("slow_node")


# -- the options -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("g0,g1", NodeChoice(names=("g0", "g1"))),
        ("pool=h100", NodeChoice(selector="pool=h100")),
        ("pool in (h100,a100),!cordoned", NodeChoice(selector="pool in (h100,a100),!cordoned")),
        (None, NodeChoice()),
    ],
)
def test_k8s_nodes_is_names_or_a_selector(text, want) -> None:
    assert NodeChoice.parse(text) == want


@pytest.mark.parametrize(
    ("parse", "bad"),
    [
        (NodeChoice.parse, "g0;rm -rf /"),
        (NodeChoice.parse, "pool=$(id)"),
        (parse_resources, ["nvidia.com/gpu"]),
        (parse_resources, ["gpu=1"]),
        (parse_resources, ["nvidia.com/gpu=-1"]),
        (parse_resources, ["nvidia.com/gpu=80000000000"]),  # a typo no node satisfies: Pending until timeout
        (parse_resources, ["rdma/ib=4097"]),
        (parse_tolerations, ["key=va lue"]),
        (parse_tolerations, ["key:Never"]),
    ],
)
def test_bad_k8s_options_are_usage_errors(parse, bad) -> None:
    with pytest.raises(UsageError):
        parse(bad)


def test_device_counts_up_to_a_nodes_worth_are_taken() -> None:
    assert parse_resources(["rdma/ib=4096", "nvidia.com/gpu=0"]) == {"rdma/ib": "4096", "nvidia.com/gpu": "0"}


def test_topology_labels_become_switches() -> None:
    nodes = [
        NodeInfo(
            f"g{i}",
            {"topology.kubernetes.io/zone": "z1", "network.topology.nvidia.com/leaf": f"l{i // 2}"},
            None,
            True,
            True,
        )
        for i in range(4)
    ]
    up = topology_uplinks(nodes)
    assert up["g0"] == up["g1"] == "zone-z1.leaf-l0" and up["g2"] == "zone-z1.leaf-l1"
    assert up["zone-z1.leaf-l0"] == "zone-z1"
    assert topology_uplinks(nodes + [NodeInfo("g9", {}, None, True, True)]) == {}  # one node unplaced: none


def test_an_untrusted_node_record_is_refused_not_used() -> None:
    assert isinstance(NodeInfo.of({"metadata": {"name": "bad name;x"}}), str)
    info = NodeInfo.of(
        {
            "metadata": {"name": "g0", "labels": {"ok": "v", "bad": "a b\x1b[31m"}},
            "status": {"addresses": [{"type": "InternalIP", "address": "$(reboot)"}]},
        }
    )
    assert (
        isinstance(info, NodeInfo) and info.labels == {"ok": "v"} and info.address is None and not info.ready
    )


# -- the CLI against the fake API server: bad input is one line, exit 2, nothing made ----------------------
def _sweep(
    tmp_path: Path, kubeconfig: Path, *argv: str, command: str = "sweep", image: str | None = IMAGE, env=None
) -> Result:
    """The command line, in this process (the CLI's one-line boundary, without an interpreter's start
    each: these all end before anything runs)."""
    from netbench.cli import cli

    args = netbench_argv(kubeconfig, command, *argv, "--out", str(tmp_path / "run"), image=image)
    return CliRunner(env=env).invoke(cli, args[args.index(command):])


def _one_line(r: Result, code: int = 2) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == code and len(lines) == 1, (r.exit_code, r.stderr, r.exception)
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception  # no traceback
    return lines[0]


BAD_INPUT = {"sweep": 2, "preflight": 3}
"""Bad input's status: preflight keeps its own table (docs/exit-status.md), where 2 is "nodes to
drain" and 3 "could not run", bad input included, so a refused run never reads as "drain nothing"."""


@pytest.mark.parametrize("command", ["sweep", "preflight"])
def test_rbac_forbidden_is_bad_input_before_anything_runs(
    api: FakeApiServer, tmp_path: Path, command: str
) -> None:
    cfg = api.kubeconfig(tmp_path / "kc")
    api.denied = {("create", "pods"), ("get", "pods/log")}
    try:
        before = len(api.requests)
        line = _one_line(_sweep(tmp_path, cfg, command=command), code=BAD_INPUT[command])
    finally:
        api.denied = set()
    assert "may not create pods in namespace default; get pods/log in namespace default" in line, line
    assert "docs/recipes.md" in line
    assert not [
        r
        for r in api.requests[before:]
        if r[0] in ("POST", "PUT", "DELETE") and "selfsubjectaccessreviews" not in r[1]
    ]
    assert api.pods() == [] and api.secrets() == [] and not (tmp_path / "run").exists()


def test_labels_and_taints_need_their_own_rbac(api: FakeApiServer, tmp_path: Path) -> None:
    cfg = api.kubeconfig(tmp_path / "kc")
    api.denied = {("update", "nodes")}
    try:
        assert "may not update nodes (cluster-wide)" in _one_line(
            _sweep(tmp_path, cfg, "--k8s-taint")
        )
        r = _sweep(tmp_path, cfg, "--k8s-taint", "--budget", "30s", command="preflight")
        assert "may not update nodes" in _one_line(r, code=BAD_INPUT["preflight"])
    finally:
        api.denied = set()


@pytest.mark.parametrize(
    ("command", "case"),
    [("sweep", c) for c in ("no file", "not yaml", "wrong context", "wrong token", "no server")]
    + [("sweep", "no namespace")]
    + [("preflight", c) for c in ("no file", "wrong context", "wrong token")],
)
def test_a_wrong_kubeconfig_or_context_is_bad_input(
    api: FakeApiServer, tmp_path: Path, command: str, case: str
) -> None:
    cfg = tmp_path / "kc"
    extra: list[str] = []
    if case == "not yaml":
        cfg.write_text("{{{ not: [yaml")
    elif case == "wrong context":
        api.kubeconfig(cfg)
        extra = ["--k8s-context", "prod-east"]
    elif case == "wrong token":
        api.kubeconfig(cfg, token="stale")
    elif case == "no server":
        doc = json.loads(api.kubeconfig(cfg).read_text())
        doc["clusters"][0]["cluster"]["server"] = "http://127.0.0.1:1"
        cfg.write_text(json.dumps(doc))
    elif case == "no namespace":
        api.kubeconfig(cfg)
        extra = ["--k8s-namespace", "missing"]
    line = _one_line(_sweep(tmp_path, cfg, *extra, command=command), code=BAD_INPUT[command])
    said = {
        "no file": "no such file",
        "not yaml": "kubeconfig",
        "wrong context": "prod-east",
        "wrong token": "HTTP 401",
        "no server": "cannot reach the API server",
        "no namespace": "namespace 'missing' does not exist",
    }[case]
    assert said in line, line
    assert api.pods() == [] and api.secrets() == [] and not (tmp_path / "run").exists()


def test_without_an_image_k8s_says_so_before_asking_the_cluster(api: FakeApiServer, tmp_path: Path) -> None:
    """No image of netbench's is published: a default would only ever be ErrImagePull on every node."""
    cfg = api.kubeconfig(tmp_path / "kc")
    before = len(api.requests)
    line = _one_line(_sweep(tmp_path, cfg, image=None, env={"NETBENCH_K8S_IMAGE": None}))
    assert "--launcher k8s needs --k8s-image" in line and "docs/k8s/Dockerfile" in line, line
    assert len(api.requests) == before  # refused before the cluster was asked anything
    # an image configured in the environment does: the run goes on to the cluster (which has no such node)
    r = _sweep(tmp_path, cfg, "--k8s-nodes", "nope", image=None, env={"NETBENCH_K8S_IMAGE": IMAGE})
    assert "no node named nope" in _one_line(r)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--k8s-nodes", "g0,nope"], "no node named nope"),
        (["--k8s-nodes", "pool=a100"], "no schedulable, Ready node matching 'pool=a100'"),
        (["--k8s-image", "bad image"], "--k8s-image"),
        (
            ["--hosts", "hosts.txt"],
            "--hosts cannot be used with --launcher k8s: the hosts are the cluster's nodes",
        ),
    ],
)
def test_a_node_choice_that_finds_nothing_is_exit_2(
    api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv, said
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts.txt").write_text("a\nb\n")
    line = _one_line(_sweep(tmp_path, api.kubeconfig(tmp_path / "kc"), *argv))
    assert said in line, line


def test_k8s_options_are_refused_by_other_launchers(tmp_path: Path) -> None:
    from netbench.cli import cli

    (tmp_path / "hosts.txt").write_text("a\nb\n")
    r = CliRunner().invoke(
        cli, ["sweep", "--hosts", str(tmp_path / "hosts.txt"), "--k8s-taint", "--out", str(tmp_path / "run")]
    )
    assert "--k8s-taint cannot be used with --launcher ssh: it is for --launcher k8s" in _one_line(r)


def test_default_nodes_are_the_ready_schedulable_gpu_nodes(api: FakeApiServer) -> None:
    from netbench.run.options import K8sOptions, Options, SiteOptions
    from netbench.sites.k8s.site import K8sSite

    cfg = api.kubeconfig(Path(api.__class__.__module__).with_suffix(".kc").absolute())
    try:
        k8s = K8sOptions(kubeconfig=str(cfg), k8s_image=IMAGE)
        site = K8sSite(Options(site=SiteOptions(launcher="k8s", k8s=k8s)))
        assert [e.name for e in site.hosts()] == ["g0", "g1", "g2"]  # not cpu0 (no GPU), not down0 (NotReady)
        picked = K8sSite(
            Options(site=SiteOptions(launcher="k8s", k8s=K8sOptions(kubeconfig=str(cfg), k8s_image=IMAGE,
                                                                    k8s_nodes="g2,cpu0")))
        )
        assert [e.name for e in picked.hosts()] == ["g2", "cpu0"]  # named: as given
        sw = site.switches(site.hosts(), lambda line: None)
        assert sw.uplinks["g0"] == sw.uplinks["g1"] != sw.uplinks["g2"]
        assert api.pods() == [] and api.secrets() == []  # choosing made nothing
    finally:
        cfg.unlink()


def test_inventory_on_k8s_is_the_probe_as_a_pod_on_each_node(tmp_path: Path) -> None:
    """``netbench inventory --launcher k8s``: the same probe, as a pod a node (the fake kubelet runs it
    on this machine). A node that cannot pull the image is named with Kubernetes' words within
    --timeout; a node whose one GPU another pod holds refuses the pod (pinned with nodeName, the
    kubelet's admission, not the scheduler) and is named at once; the switches come from the nodes'
    topology labels; nothing of the run is left, and the other pod stays."""
    import socket

    leaf = "network.topology.nvidia.com/leaf"
    labels = {f"n{i}": {"topology.kubernetes.io/zone": "z1", leaf: f"l{i // 2}"} for i in range(4)}
    with fake_cluster(ThisMachine(list(labels)), labels=labels) as cluster:
        cluster.kubelet.pull_fails.add("n3")
        _hold_the_gpu(cluster, "n2")
        r = subprocess.run(
            cluster.argv("inventory", "--timeout", "10s", "--json", "--out", str(tmp_path / "run")),
            capture_output=True, text=True, timeout=120,
        )
        assert r.returncode == 1, r.stderr[-3000:]  # nodes failed
        got = {n["host"]: n for n in json.loads(r.stdout)}
        assert [got[h]["status"] for h in labels] == ["ok", "ok", "unreachable", "unreachable"], r.stderr
        assert got["n0"]["hostname"] == got["n1"]["hostname"] == socket.gethostname()  # the probe ran there
        assert "did not start within 10 s" in got["n3"]["error"] and "ImagePullBackOff" in got["n3"]["error"]
        assert "OutOfnvidia.com/gpu" in got["n2"]["error"], got["n2"]["error"]
        assert "Node didn't have enough resource" in got["n2"]["error"]
        switch = {h: [x["switch"] for x in got[h]["neighbors"] if x["source"] == "topology"] for h in labels}
        assert switch == {h: [f"zone-z1.leaf-l{int(h[1]) // 2}"] for h in labels}
        run = json.loads((tmp_path / "run" / "run.json").read_text())
        assert run["launcher"] == "k8s" and run["failed_hosts"] == ["n2", "n3"]
        probes = {o["spec"]["nodeName"] for o in cluster.api.created if o["kind"] == "Pod"}
        assert probes == set(labels)
        assert [p["metadata"]["name"] for p in cluster.api.pods()] == ["training"]  # theirs stays
        assert cluster.api.secrets() == [] and [k for k in cluster.kubelet.running() if k[0] != "nb"] == []


def _hold_the_gpu(cluster, node: str) -> None:  # noqa: ANN001
    """Another user's pod, running on ``node`` and holding its one GPU."""
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host, cfg.api_key = cluster.api.url, {"authorization": f"Bearer {cluster.api.token}"}
    gpu = {"nvidia.com/gpu": "1"}
    client.CoreV1Api(client.ApiClient(cfg)).create_namespaced_pod("nb", {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "training"},
        "spec": {"nodeName": node, "containers": [{
            "name": "c", "image": "train:1", "command": ["sleep", "600"],
            "resources": {"requests": gpu, "limits": gpu},
        }]},
    })
    assert cluster.api.wait_for(lambda api: api.pods("nb")[0].get("status", {}).get("phase") == "Running", 30)


def test_inventory_refuses_what_its_launcher_cannot_honour(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from netbench.cli import cli

    for argv, said in (
        (["--k8s-image", IMAGE], "--k8s-image is for --launcher k8s"),
        (["--launcher", "k8s", "--hosts", str(tmp_path / "h.txt"), "--k8s-image", IMAGE],
         "--hosts cannot be used with --launcher k8s"),
        (["--launcher", "k8s", "--k8s-taint"], "No such option '--k8s-taint'"),  # no verdict to act on
    ):
        (tmp_path / "h.txt").write_text("a\n")
        r = CliRunner().invoke(cli, ["inventory", *argv, "--out", str(tmp_path / "run")])
        assert r.exit_code == 2 and said in r.output, (argv, r.output)
        assert not (tmp_path / "run").exists()


SECOND_SIGNAL = r"""
import os, signal, sys, time
from netbench.common.interrupts import Interrupted, handling
from netbench.sites.k8s.pods import pod_manifest
from netbench.run.options import K8sOptions, Options, SiteOptions
from netbench.sites.base import finished
from netbench.sites.k8s.site import K8sSite

k8s = K8sOptions(kubeconfig=sys.argv[1], k8s_image="registry.test/nb:1")
site = K8sSite(Options(site=SiteOptions(launcher="k8s", k8s=k8s)))
with handling(restore=False), finished(site):
    site.hosts()
    template = site._template()  # the run's parent object, made once
    for node in site.nodes.values():
        site.kube.create_pod(pod_manifest(template, node, "agent", 1, ["sleep", "600"]))
    print("made", flush=True)
    try:
        os.kill(os.getpid(), signal.SIGINT)  # the first: the run stops, its teardown begins
        time.sleep(10)
    except Interrupted:
        os.kill(os.getpid(), signal.SIGINT)  # the second, before the teardown got to the pods
        time.sleep(10)
print("not reached", flush=True)
"""


def test_a_second_signal_in_the_teardown_still_leaves_no_pod(tmp_path: Path) -> None:
    """A second Ctrl-C ends netbench at once, but not before the run's parent object is deleted: the
    API server's garbage collector then takes every pod and Secret of the run (this fake's at once)."""
    api = FakeApiServer()
    try:
        for i in range(2):
            api.add_node(f"g{i}", address=f"10.1.0.{i + 1}", allocatable={"nvidia.com/gpu": "1"})
        r = subprocess.run(
            [sys.executable, "-c", SECOND_SIGNAL, str(api.kubeconfig(tmp_path / "kc"))],
            capture_output=True, text=True, timeout=120,
        )
        assert r.returncode == 130 and r.stdout.splitlines() == ["made"], (r.returncode, r.stdout, r.stderr)
        made = {(o["kind"], o["metadata"]["name"]) for o in api.created}
        assert len(made) == 3  # the parent and a pod on each node
        assert api.pods() == [] and api.secrets() == []
        assert any(m == "DELETE" and "/secrets/" in p for m, p in api.requests)
    finally:
        api.close()


def test_label_and_taint_read_modify_write_survive_a_concurrent_writer(
    api: FakeApiServer, tmp_path: Path
) -> None:
    from netbench.sites.k8s.client import KubeTarget, connect

    kube = connect(KubeTarget(str(api.kubeconfig(tmp_path / "kc"))))
    api.conflict_once = {"g1"}  # another controller writes g1 between our read and our write
    assert kube.update_node("g1", lambda node: with_taint(node, "slow_node: test"))
    node = api.node("g1")
    assert node["metadata"]["labels"]["other.example/touched"] == "yes"  # their write stayed
    assert {"key": TAINT_KEY, "value": "fail", "effect": "NoSchedule"} in node["spec"]["taints"]
    assert ("PUT", "/api/v1/nodes/g1") in api.requests
    assert not kube.update_node("g1", lambda node: with_taint(node, "slow_node: test"))  # unchanged: no write


def test_nothing_of_kubernetes_is_imported_unless_asked(tmp_path: Path) -> None:
    code = (
        "import runpy, sys\n"
        "for argv in (['sweep', '--help'], ['preflight', '--help']):\n"
        "    sys.argv = ['netbench', *argv]\n"
        "    try:\n"
        "        runpy.run_module('netbench', run_name='__main__', alter_sys=True)\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code in (0, None), exc.code\n"
        "import netbench.run.pipeline, netbench.sites.registry, netbench.preflight.stages\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'kubernetes_validate') "
        "or m in ('netbench.sites.k8s.client', 'netbench.sites.k8s.site', 'netbench.sites.k8s.launcher')), "
        "file=sys.stderr)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr.strip().splitlines()[-1] == "[]", r.stderr[-2000:]


def test_an_agent_stopped_while_its_log_is_read_ends_quietly(api: FakeApiServer, tmp_path: Path) -> None:
    """terminate() closes the followed log under the reading thread; urllib3 then raises (a read
    timeout, or AttributeError between reads). That is the run's own doing, not a lost host: the
    lines end without an error (CI once drained a healthy node for it)."""
    import threading
    from types import SimpleNamespace

    from netbench.sites.k8s.client import KubeTarget, connect
    from netbench.sites.k8s.launcher import K8sAgent, PodWatch
    from netbench.sites.k8s.pods import RUN_LABEL

    log = tmp_path / "agent.log"
    log.write_bytes(b'{"type": "hello"}\n')
    with api.cond:
        api.store["pods"][("nb", "agent-g0")] = {
            "metadata": {"name": "agent-g0", "namespace": "nb", "labels": {RUN_LABEL: "r1"}},
            "spec": {"nodeName": "g0"},
            "status": {"phase": "Running"},
        }
        api.logs[("nb", "agent-g0")] = log
        api.kubelet_nodes.add("g0")
    kube = connect(KubeTarget(kubeconfig=str(api.kubeconfig(tmp_path / "kubeconfig")), namespace="nb"))
    watch = PodWatch(kube, "r1")
    agent = K8sAgent(SimpleNamespace(watch=watch, kube=kube, keep=True), "g0", "agent-g0")
    got: list[str] = []
    failed: list[BaseException] = []
    first = threading.Event()

    def read() -> None:
        try:
            for line in agent.lines():
                got.append(line)
                first.set()
        except BaseException as exc:  # noqa: BLE001 - what the test asserts there is none of
            failed.append(exc)

    reader = threading.Thread(target=read)
    try:
        reader.start()
        assert first.wait(30)  # the log is being followed, the read now blocks on the open stream
        agent.terminate()
        reader.join(30)
        assert not reader.is_alive()
        assert failed == [] and got == ['{"type": "hello"}\n']
    finally:
        watch.stop()
        with api.cond:
            api.store["pods"].pop(("nb", "agent-g0"), None)
            api.kubelet_nodes.discard("g0")
            api.cond.notify_all()
