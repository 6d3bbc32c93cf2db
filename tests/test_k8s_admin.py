"""Kubernetes as an admin applies it (issue 47, point 10): the manifests in ``docs/k8s/`` against the
API schema (kubernetes-validate, offline) and against what the code asks of the cluster (the RBAC the
site checks, the Pod Security level its pods need, the options the Job passes), then applied to the
test API server (``tests/kube_fake.py``: the Namespace made, the RBAC its authorization table) and the
Job's own command run as its coordinator there: the pods go to the context's namespace, request their
GPUs through the device plugin, and the nodes get the verdict's labels and taint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("kubernetes")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

from kube_cluster import fake_cluster  # noqa: E402 - after the skips

from netbench.sites.k8s.pods import (  # noqa: E402
    TAINT_KEY,
    NodeInfo,
    PodTemplate,
    busbw_class,
    parse_resources,
    parse_tolerations,
    pod_manifest,
    with_taint,
    without_taint,
)
from netbench.sites.k8s.site import NEEDS, PUBLISH, REMEDIATE, SELECT_IDLE  # noqa: E402

K8S = Path(__file__).resolve().parent.parent / "docs" / "k8s"
KINDS = {
    "Namespace",
    "ServiceAccount",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "PersistentVolumeClaim",
    "Job",
    "CronJob",
    "Deployment",  # metrics.yaml: the exporter of the metrics ConfigMap
    "Service",
}


def _docs() -> list[dict[str, Any]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        out += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return out


def _one(kind: str) -> dict[str, Any]:
    found = [d for d in _docs() if d["kind"] == kind]
    assert len(found) == 1, kind
    return found[0]


def _pod_specs() -> list[dict[str, Any]]:
    return [
        _one("Job")["spec"]["template"]["spec"],
        _one("CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"],
    ]


# -- the manifests, as files ------------------------------------------------------------------------------
def test_every_manifest_is_valid_against_the_api_schema_and_in_netbench_s_namespace() -> None:
    docs = _docs()
    assert {d["kind"] for d in docs} == KINDS
    for doc in docs:
        kubernetes_validate.validate(doc, "1.31", strict=True)
    ns = _one("Namespace")["metadata"]["name"]
    namespaced = [d for d in docs if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding")]
    assert {d["metadata"]["namespace"] for d in namespaced} == {ns}


def test_the_namespace_admits_the_pods_netbench_starts() -> None:
    """hostNetwork and an added capability are refused by Pod Security's baseline and restricted
    levels: the namespace enforces the one level that admits the pods netbench makes."""
    labels = _one("Namespace")["metadata"]["labels"]
    node = NodeInfo.of({"metadata": {"name": "g0"}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    assert isinstance(node, NodeInfo)
    template = PodTemplate(
        namespace="netbench",
        image="i:1",
        run_id="r",
        resources=parse_resources([]),
        tolerations=parse_tolerations([]),
    )
    pod = pod_manifest(template, node, "agent", 1, ["true"])
    assert (
        pod["spec"]["hostNetwork"] and pod["spec"]["containers"][0]["securityContext"]["capabilities"]["add"]
    )
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"


def _granted(rules: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {
        (verb, res)
        for r in rules
        if r.get("apiGroups") == [""]
        for res in r["resources"]
        for verb in r["verbs"]
    }


def test_the_rbac_grants_exactly_what_the_site_asks_for() -> None:
    """Every (verb, resource) the site asks the API server about before a run (NEEDS, and REMEDIATE
    for --k8s-label/--k8s-taint, which the Job passes) is granted to the Job's service account: the
    namespaced ones by the Role bound in its namespace, the nodes by the ClusterRole; nothing more."""
    sa = _one("ServiceAccount")["metadata"]
    subject = {"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}
    for binding, role in (("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")):
        b = _one(binding)
        assert b["subjects"] == [subject] and b["roleRef"]["kind"] == role
        assert b["roleRef"]["name"] == _one(role)["metadata"]["name"]
    wanted = NEEDS + REMEDIATE + SELECT_IDLE + PUBLISH  # --k8s-idle-only, --k8s-metrics-configmap too
    want_ns = {(v, res + (f"/{sub}" if sub else "")) for v, res, sub, namespaced in wanted if namespaced}
    want_cluster = {
        (v, res + (f"/{sub}" if sub else "")) for v, res, sub, namespaced in wanted if not namespaced
    }
    assert _granted(_one("Role")["rules"]) == want_ns
    assert _granted(_one("ClusterRole")["rules"]) == want_cluster
    for spec in _pod_specs():
        assert spec["serviceAccountName"] == sa["name"]


def _job_args(spec: dict[str, Any]) -> list[str]:
    c = spec["containers"][0]
    assert c["command"] == ["netbench"]
    return c["args"]


def test_the_job_and_cronjob_run_preflight_with_options_it_has() -> None:
    from netbench.commands.preflight import command as preflight

    for spec in _pod_specs():
        args = _job_args(spec)
        assert args[:3] == ["preflight", "--launcher", "k8s"]
        ctx = preflight.make_context("preflight", list(args[1:]))  # an unknown option: UsageError here
        assert ctx.params["k8s_taint"] and ctx.params["k8s_label"]
        assert ctx.params["k8s_image"] == spec["containers"][0]["image"]  # the pods run the Job's image
        assert ctx.params["k8s_namespace"] is None  # the pods go where the Job is
        # $(POD_IP) is expanded by Kubernetes from the container's env (no shell in between)
        env = {e["name"] for e in spec["containers"][0]["env"]}
        assert ctx.params["advertise"] == "$(POD_IP)" and "POD_IP" in env
        mounts = {m["mountPath"]: m["name"] for m in spec["containers"][0]["volumeMounts"]}
        claim = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"]}
        assert (
            ctx.params["out"].startswith("/out/")
            and claim[mounts["/out"]] == _one("PersistentVolumeClaim")["metadata"]["name"]
        )
    # one check, now or nightly; nightly spares the nodes that passed lately (tests/test_k8s_helm.py)
    job, cron = _job_args(_pod_specs()[0]), _job_args(_pod_specs()[1])
    at = cron.index("--k8s-skip-tested-within")
    assert cron[:at] + cron[at + 2:] == job
    assert _one("CronJob")["spec"]["concurrencyPolicy"] == "Forbid"


def test_the_image_hands_no_gpu_to_a_pod_that_requests_none() -> None:
    """The Dockerfile sets no NVIDIA_VISIBLE_DEVICES: ``all`` in an image gives every GPU of the node to
    any pod of it (the coordinator's included), around the device plugin."""
    env_lines = [line for line in (K8S / "Dockerfile").read_text().splitlines() if not line.startswith("#")]
    assert not any("NVIDIA_VISIBLE_DEVICES" in line for line in env_lines)


# -- the taint lifecycle, as changes of a node ------------------------------------------------------------
def test_suspect_prefers_no_schedule_fail_is_no_schedule_and_a_clean_run_lifts_either() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "g0", "annotations": {"a": "b"}},
        "spec": {"taints": [{"key": "other", "effect": "NoExecute"}]},
    }
    assert with_taint(node, "slow_link: g0-g1 [run r1]", "suspect")
    assert [t for t in node["spec"]["taints"] if t["key"] == TAINT_KEY] == [
        {"key": TAINT_KEY, "value": "suspect", "effect": "PreferNoSchedule"}
    ]
    assert with_taint(node, "host_failing: g0 [run r2]", "fail")  # one taint of netbench's at a time
    assert [t for t in node["spec"]["taints"] if t["key"] == TAINT_KEY] == [
        {"key": TAINT_KEY, "value": "fail", "effect": "NoSchedule"}
    ]
    kubernetes_validate.validate(node, "1.31", strict=True)
    assert without_taint(node) and not without_taint(node)
    assert node["spec"]["taints"] == [{"key": "other", "effect": "NoExecute"}]
    assert node["metadata"]["annotations"] == {"a": "b"}


def test_busbw_class_separates_a_half_rate_node_from_healthy_ones() -> None:
    """Issue 47's numbers: the half-rate node's pairs at 0.021-0.024 GB/s, the others' 0.028-0.046; each
    node's best pair against the median node's best."""
    best = {
        "node01": 0.046,
        "node02": 0.041,
        "node03": 0.044,
        "node04": 0.039,
        "node05": 0.024,
        "node06": 0.043,
    }
    fleet = sorted(best.values())[len(best) // 2]
    classes = {h: busbw_class(bw, fleet) for h, bw in best.items()}
    assert classes.pop("node05") == "reduced"
    assert set(classes.values()) == {"full"}


# -- applied to the test API server, the Job's command run there ------------------------------------------
NODES = ["n0", "n1", "n2", "n3", "n4"]  # five: a node needs 3 partners to be judged (tests/test_sites.py)
QUICK = ["--pair-sizes", "256K", "-n", "3", "-w", "1", "--timeout", "20", "--no-ring", "--budget", "3m"]
# preflight on this 2-core VM (tests/test_k8s_netns.py): "slow" is well below the peers
NOISY_VM = "[thresholds]\nslow_pair_factor = 0.35\nslow_node_factor = 0.5\n"


def _apply(api, docs: list[dict[str, Any]]) -> None:  # noqa: ANN001 - tests/kube_fake.py's server
    """What the test API server serves of the manifests: the Namespace is made, and the Role and
    ClusterRole become its authorization table (every verb on its resources not granted is refused)."""
    granted = set()
    for d in docs:
        if d["kind"] == "Namespace":
            api.namespaces.add(d["metadata"]["name"])
        elif d["kind"] in ("Role", "ClusterRole"):
            granted |= _granted(d["rules"])
    resources = ["nodes", "pods", "pods/log", "pods/status", "pods/eviction", "secrets", "namespaces"]
    verbs = ["get", "list", "watch", "create", "update", "patch", "delete"]
    api.denied = {(v, r) for v in verbs for r in resources} - granted


def _kubeconfig(api, path: Path, namespace: str) -> Path:  # noqa: ANN001 - tests/kube_fake.py's server
    """The Job's view of the cluster: its namespace as the context's (a pod reads its own namespace
    from its service account; here the kubeconfig's context carries it, as ``kubectl config
    set-context --namespace`` does)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "nb",
        "clusters": [{"name": "fake", "cluster": {"server": api.url}}],
        "users": [{"name": "tester", "user": {"token": api.token}}],
        "contexts": [
            {"name": "nb", "context": {"cluster": "fake", "user": "tester", "namespace": namespace}}
        ],
    }
    path.write_text(json.dumps(doc))
    return path


def _run_job(net, kubeconfig: Path, out: Path, inject: str | None) -> subprocess.CompletedProcess:  # noqa: ANN001
    """The Job's args as Kubernetes would run them ($(POD_IP) expanded: the address the nodes reach the
    coordinator on; /out the claim), plus what the test cluster needs (its kubeconfig, this python in
    the pods) and a quick measurement."""
    args = [
        a.replace("$(POD_IP)", net.root_addr).replace("/out/", f"{out}/") for a in _job_args(_pod_specs()[0])
    ]
    (out.parent / "policy.toml").write_text(NOISY_VM)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NETBENCH_", "KUBE"))}
    env["CUDA_VISIBLE_DEVICES"] = "3"  # the coordinator's own: never handed to the pods
    if inject:
        env["NETBENCH_INJECT"] = inject
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "netbench",
            *args,
            "--kubeconfig",
            str(kubeconfig),
            "--python",
            sys.executable,
            *QUICK,
            "--policy",
            str(out.parent / "policy.toml"),
        ],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
    )


def _ours(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in node["spec"].get("taints") or [] if t["key"] == TAINT_KEY]


@pytest.fixture(scope="module")
def net():
    from netns import module_network

    with module_network(NODES) as net:
        for h in NODES:  # every pair bound by the network, not by CPU time on a shared 2-core machine
            net.limit_host(h, "100mbit")
        yield net


@pytest.mark.netns
def test_the_job_applied_runs_in_its_namespace_taints_the_failing_node_and_a_clean_run_lifts_it(
    net,
    tmp_path: Path,  # noqa: ANN001
) -> None:
    """Applied to the test API server with only the RBAC of rbac.yaml, the Job's own command (as its
    pod would run it) checks the opted-in nodes: its pods are in the context's namespace (netbench,
    not default) and request the node's GPU through the device plugin, with no NVIDIA_VISIBLE_DEVICES
    or CUDA_VISIBLE_DEVICES of the coordinator's; n1, whose results are wrong, is tainted
    fail:NoSchedule with its report's absolute path, every node labelled with its verdict, when, and
    its busbw class. The next run, n1 clean again, lifts the taint."""
    labels = {n: {"netbench.io/check": "true"} for n in NODES}
    with fake_cluster(net, labels=labels) as cluster:
        cluster.api.add_node("cpu-system", address=net.root_addr)  # not opted in: never touched
        docs = _docs()
        _apply(cluster.api, docs)
        ns = _one("Namespace")["metadata"]["name"]
        kc = _kubeconfig(cluster.api, tmp_path / "kubeconfig", ns)

        r = _run_job(net, kc, tmp_path / "out", "corrupt:@n1")
        said = r.stdout[-3000:] + r.stderr[-3000:]
        assert r.returncode == 2, said
        assert r.stdout.splitlines() == ["n1"], said
        pods = [o for o in cluster.api.created if o["kind"] == "Pod"]
        assert pods and {p["metadata"]["namespace"] for p in pods} == {ns}, said
        assert {p["spec"]["nodeName"] for p in pods} == set(NODES)
        for p in pods:
            c = p["spec"]["containers"][0]
            assert c["resources"]["requests"] == {"nvidia.com/gpu": "1"} == c["resources"]["limits"]
            assert not {"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"} & {e["name"] for e in c["env"]}
        node = cluster.api.node("n1")
        assert _ours(node) == [{"key": TAINT_KEY, "value": "fail", "effect": "NoSchedule"}], said
        (run_dir,) = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
        reason = node["metadata"]["annotations"]["netbench.io/taint-reason"]
        assert (
            f"report {run_dir.resolve() / 'report.html'}]" in reason
            and Path(reason.split("report ")[-1][:-1]).is_file()
        )
        got = {n: cluster.api.node(n)["metadata"]["labels"] for n in NODES}
        assert got["n1"]["netbench.io/verdict"] == "fail"
        assert all(
            len(v["netbench.io/last-run"]) == 16 and v["netbench.io/last-run"].endswith("Z")
            for v in got.values()
        )
        assert [n for n in NODES if _ours(cluster.api.node(n))] == ["n1"]
        assert "netbench.io/verdict" not in cluster.api.node("cpu-system")["metadata"]["labels"]

        r = _run_job(net, kc, tmp_path / "out", None)
        said = r.stdout[-3000:] + r.stderr[-3000:]
        assert r.returncode == 0 and r.stdout == "", said
        node = cluster.api.node("n1")
        assert _ours(node) == [] and "netbench.io/taint-reason" not in node["metadata"].get(
            "annotations", {}
        ), said
        assert "lifted netbench.io/preflight from node n1" in r.stderr
        got = {n: cluster.api.node(n)["metadata"]["labels"] for n in NODES}
        assert {v["netbench.io/verdict"] for v in got.values()} == {"pass"}, said
        assert {v["netbench.io/busbw-class"] for v in got.values()} <= {"full", "reduced", "low"}
        assert cluster.api.pods() == [] and cluster.api.secrets() == []


# -- the namespace: --k8s-namespace, else the kubeconfig context's ---------------------------------------
@pytest.mark.parametrize(
    ("context_ns", "flag", "want"),
    [
        ("nb", [], "namespace nb"),
        ("nb", ["--k8s-namespace", "default"], "namespace default"),
        (None, [], "namespace default"),
    ],
)
def test_the_context_s_namespace_is_used_unless_k8s_namespace_is_given(
    tmp_path: Path, context_ns: str | None, flag: list[str], want: str
) -> None:
    """As kubectl: context ``nb`` with its namespace set sends the run's pods there; --k8s-namespace
    wins; a context without one is ``default``. Seen in the RBAC refusal, which names the namespace
    it asked about (nothing is started)."""
    from kube_cluster import netbench_argv
    from kube_fake import FakeApiServer

    api = FakeApiServer(namespaces=("default", "nb"))
    try:
        api.add_node("g0", address="10.1.0.1", allocatable={"nvidia.com/gpu": "1"})
        api.denied = {("create", "pods")}
        kc = _kubeconfig(api, tmp_path / "kc", context_ns) if context_ns else api.kubeconfig(tmp_path / "kc")
        r = subprocess.run(
            [*netbench_argv(kc, "sweep"), *flag, "--out", str(tmp_path / "run")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 2 and f"may not create pods in {want}" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and api.created == []
    finally:
        api.close()


def test_a_context_namespace_that_is_not_a_name_is_one_line(tmp_path: Path) -> None:
    from kube_cluster import netbench_argv
    from kube_fake import FakeApiServer

    api = FakeApiServer()
    try:
        kc = _kubeconfig(api, tmp_path / "kc", "Not_A/Namespace")
        r = subprocess.run(
            [*netbench_argv(kc, "sweep"), "--out", str(tmp_path / "run")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "context 'nb': namespace 'Not_A/Namespace' is not a Kubernetes namespace name" in r.stderr
    finally:
        api.close()


# -- labels and taints from a fleet's real analysis ----------------------------------------------------------
def test_a_fleet_s_half_rate_node_and_slow_link_get_their_class_and_taints(tmp_path: Path) -> None:
    """A 16-node fleet on two leaves (cross-spine pairs at 0.85, 5% noise; tests/synthetic.py), gpu005 at
    half rate and the link gpu010-gpu011 at 0.4: the real analysis's findings through ``remediate``
    against the test API server (the real client). gpu005 alone is ``reduced``; every node a warning
    names (and no other) is tainted suspect:PreferNoSchedule or fail:NoSchedule as its verdict says;
    a node tainted by an earlier run and clean in this one has the taint lifted."""
    from kube_fake import FakeApiServer
    from netbench.reports.engine import analyze
    from synthetic import make_fleet, write_run_dir

    from netbench.common.rundir import RunDir
    from netbench.sites.k8s.client import KubeTarget, connect
    from netbench.sites.k8s.remedy import node_verdicts, remediate

    fleet = make_fleet(n_nodes=16, slow_nodes={"gpu005": 0.5}, slow_links={("gpu010", "gpu011"): 0.4})
    run = RunDir.open(write_run_dir(fleet, tmp_path / "run"))
    findings = analyze(run.path)
    api = FakeApiServer()
    try:
        for h in fleet.hosts:
            api.add_node(h, allocatable={"nvidia.com/gpu": "8"})
        earlier = api.node("gpu001")  # tainted by an earlier run
        with_taint(earlier, "host_failing: gpu001 [run r0]", "fail")
        api.store["nodes"][("", "gpu001")] = earlier
        kube = connect(KubeTarget(str(api.kubeconfig(tmp_path / "kc"))))
        lines = remediate(kube, run, findings, None, fleet.hosts, label=True, taint=True)
        verdicts = node_verdicts(findings, fleet.hosts, None)
        nodes = {h: api.node(h) for h in fleet.hosts}
    finally:
        api.close()
    classes = {h: n["metadata"]["labels"]["netbench.io/busbw-class"] for h, n in nodes.items()}
    assert classes.pop("gpu005") == "reduced", lines
    assert set(classes.values()) == {"full"}, classes
    # the run's own warnings (the fleet below its ceiling) list every host: no node's fault
    assert {h for h, v in verdicts.items() if v != "pass"} == {"gpu005", "gpu010", "gpu011"}, findings
    effect = {"suspect": "PreferNoSchedule", "fail": "NoSchedule"}
    for h, node in nodes.items():
        v = verdicts[h]
        assert _ours(node) == ([{"key": TAINT_KEY, "value": v, "effect": effect[v]}] if v in effect else [])
        assert node["metadata"]["labels"]["netbench.io/verdict"] == v
    assert "netbench: lifted netbench.io/preflight from node gpu001 (clean this run)" in lines


# -- GPUs: through the device plugin, the old way only when asked -------------------------------------------
def test_gpus_are_requested_from_the_device_plugin_and_env_is_the_documented_old_way() -> None:
    from netbench.common.errors import UsageError

    node = NodeInfo.of({"metadata": {"name": "g0"}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    assert isinstance(node, NodeInfo)
    leaked = {"CUDA_VISIBLE_DEVICES": "3", "NVIDIA_VISIBLE_DEVICES": "all", "NCCL_ALGO": "Ring"}

    def pod(resources: list[str]) -> dict[str, Any]:
        t = PodTemplate(
            namespace="netbench",
            image="i:1",
            run_id="r",
            resources=parse_resources(resources),
            tolerations=parse_tolerations([]),
            env=leaked,
        )
        made = pod_manifest(t, node, "agent", 1, ["true"])
        kubernetes_validate.validate(made, "1.31", strict=True)
        return made["spec"]["containers"][0]

    plugin = pod([])
    assert plugin["resources"]["requests"] == {"nvidia.com/gpu": "8"} == plugin["resources"]["limits"]
    assert {e["name"]: e["value"] for e in plugin["env"]} == {"NCCL_ALGO": "Ring"}
    assert pod(["nvidia.com/gpu=2"])["resources"]["requests"] == {"nvidia.com/gpu": "2"}
    old = pod(["nvidia.com/gpu=env"])
    assert "resources" not in old
    assert {e["name"]: e["value"] for e in old["env"]} == {
        "NCCL_ALGO": "Ring",
        "NVIDIA_VISIBLE_DEVICES": "all",
    }
    with pytest.raises(UsageError, match="nvidia.com/gpu=env"):
        parse_resources(["rdma/ib=env"])
    # the pods tolerate netbench's own taint: a node it tainted is re-tested, and cleared, next run
    assert {"key": TAINT_KEY, "operator": "Exists"} in pod_manifest(
        PodTemplate(namespace="n", image="i:1", run_id="r", resources={}, tolerations=parse_tolerations([])),
        node,
        "agent",
        1,
        ["true"],
    )["spec"]["tolerations"]
