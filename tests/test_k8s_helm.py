"""The Helm chart (issue 47, point 10: "no Helm chart"), docs/k8s/helm/netbench, rendered by Helm's
own engine: ``helm_python`` (PyPI's helm-python-sdk) is Helm v4's Go SDK through a C ABI, the same
``helm template`` and ``helm lint`` code, without the ``helm`` binary that neither Debian nor PyPI
ships for Linux. Every rendered document is validated against the Kubernetes 1.31 API schema
(kubernetes-validate), its RBAC checked against what the site asks for the flags its command passes,
the command parsed by preflight's own options; then the chart is applied to the test API server
(``tests/kube_fake.py``: its Namespace made, its Role and ClusterRole the authorization table) and
the CronJob's command run there as its pod would run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

helm = pytest.importorskip("helm_python")
kubernetes_validate = pytest.importorskip("kubernetes_validate")
pytest.importorskip("kubernetes")

from netbench.sites.k8s.site import NEEDS, PUBLISH, REMEDIATE, SELECT_IDLE  # noqa: E402

K8S = Path(__file__).resolve().parent.parent / "docs" / "k8s"
CHART = K8S / "helm" / "netbench"

VALUES: dict[str, dict[str, Any]] = {
    "defaults": {},
    # a site's own choices: every value the README names
    "site": {
        "image": {"repository": "registry.site.test/tools/netbench", "tag": "1.2.3"},
        "namespace": {"name": "gpu-checks"},
        "nodes": {"label": "pool", "value": "h100"},
        "gpus": 8,
        "extraResources": ["rdma/ib=1"],
        "schedule": "0 */4 * * *",
        "selection": {"skipTestedWithin": "24h"},
        "policy": {
            "thresholds": {"slow_pair_factor": 0.7, "single_sample": "info"},
            "busbw": [{"collective": "all_reduce", "pattern": "pair", "hop_class": "leaf",
                       "min_bytes": "1G", "busbw_GBps": 150.0}],
        },
        "reports": {"claim": {"storageClassName": "fast-rwx", "size": "20Gi",
                              "accessModes": ["ReadWriteMany"]}},
        "job": {"enabled": True},
    },
    # the least: an existing namespace and claim, nothing written back, every node every run
    "minimal": {
        "namespace": {"create": False, "name": ""},
        "reports": {"claim": {"create": False}},
        "remediate": {"label": False, "taint": False},
        "selection": {"idleOnly": False, "skipTestedWithin": ""},
        "metrics": {"configMap": ""},
        "gpus": "env",
    },
}


def _render(values: dict[str, Any], namespace: str = "default") -> list[dict[str, Any]]:
    """``helm template netbench CHART -n namespace --values ...``: the documents, in file order."""
    out = helm.Chart.load(CHART).render(values, name="netbench", namespace=namespace, is_install=True)
    docs = []
    for path in sorted(out):
        if path.endswith(".yaml"):
            docs += [d for d in yaml.safe_load_all(out[path]) if d]
    return docs


def _kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def _pod_specs(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    specs = {"CronJob": _kind(docs, "CronJob")[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]}
    for job in _kind(docs, "Job"):
        specs["Job"] = job["spec"]["template"]["spec"]
    return specs


def _granted(rules: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(v, res) for r in rules if r.get("apiGroups") == [""]
            for res in r["resources"] for v in r["verbs"]}


def _policy(docs: list[dict[str, Any]]) -> str | None:
    made = [d for d in _kind(docs, "ConfigMap") if d["metadata"]["name"] == "netbench-policy"]
    return made[0]["data"]["policy.toml"] if made else None


def _params(spec: dict[str, Any], docs: list[dict[str, Any]], tmp: Path) -> dict[str, Any]:
    """The container's args as preflight's own command line reads them (an unknown option: UsageError),
    the policy file where the pod has it mounted written here from the chart's ConfigMap."""
    from netbench.commands.preflight import command as preflight

    c = spec["containers"][0]
    assert c["command"] == ["netbench"] and c["args"][:3] == ["preflight", "--launcher", "k8s"]
    args = list(c["args"][1:])
    if "--policy" in args:
        assert args[args.index("--policy") + 1] == "/etc/netbench/policy.toml"
        (tmp / "policy.toml").write_text(_policy(docs) or "")
        args[args.index("--policy") + 1] = str(tmp / "policy.toml")
    return preflight.make_context("preflight", args).params


def test_helm_lint_finds_nothing_to_fix() -> None:
    """``helm lint --strict``: no warning, no error (an icon is only recommended)."""
    for values in VALUES.values():
        report = helm.lint(str(CHART), values, strict=True, kube_version="v1.31.0")
        assert report["errors"] == [] and [m for m in report["messages"] if m["severity"] >= 2] == [], report


@pytest.mark.parametrize("case", list(VALUES))
def test_every_rendered_document_is_valid_and_in_the_chart_s_namespace(case: str) -> None:
    docs = _render(VALUES[case], namespace="ops")
    for doc in docs:
        kubernetes_validate.validate(doc, "1.31", strict=True)
    want = (VALUES[case].get("namespace") or {}).get("name", "netbench") or "ops"  # "": the release's
    cluster_wide = ("Namespace", "ClusterRole", "ClusterRoleBinding")
    assert {d["metadata"]["namespace"] for d in docs if d["kind"] not in cluster_wide} == {want}
    made = _kind(docs, "Namespace")
    if case == "minimal":
        assert made == [] and _kind(docs, "PersistentVolumeClaim") == [] and _kind(docs, "Deployment") == []
    else:  # the pods netbench starts use hostNetwork and IPC_LOCK: only "privileged" admits them
        assert made[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
        assert made[0]["metadata"]["name"] == want


@pytest.mark.parametrize("case", list(VALUES))
def test_the_rbac_grants_exactly_what_the_chart_s_command_asks_for(case: str, tmp_path: Path) -> None:
    """Every (verb, resource) the site asks about for the flags the chart's command passes is granted
    to its service account (namespaced by the Role, cluster-wide by the ClusterRole), nothing more;
    the command is one preflight takes, its pods run the chart's image, reach it on $(POD_IP), keep
    their run directory on the claim and read the policy the values made."""
    docs = _render(VALUES[case])
    (role,), (cluster,) = _kind(docs, "Role"), _kind(docs, "ClusterRole")
    specs = _pod_specs(docs)
    assert set(specs) == ({"CronJob", "Job"} if case == "site" else {"CronJob"})
    for kind, spec in specs.items():
        p = _params(spec, docs, tmp_path)
        wanted = (NEEDS + (REMEDIATE if p["k8s_label"] or p["k8s_taint"] else [])
                  + (SELECT_IDLE if p["k8s_idle_only"] else [])
                  + (PUBLISH if p["k8s_metrics_configmap"] else []))
        key = {(v, res + (f"/{sub}" if sub else ""), ns) for v, res, sub, ns in wanted}
        assert _granted(role["rules"]) == {(v, res) for v, res, ns in key if ns}, kind
        assert _granted(cluster["rules"]) == {(v, res) for v, res, ns in key if not ns}, kind
        c = spec["containers"][0]
        assert p["k8s_image"] == c["image"] and spec["serviceAccountName"] == "netbench"
        assert p["advertise"] == "$(POD_IP)" and p["k8s_namespace"] is None  # the pods go where the Job is
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        claims = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName") for v in spec["volumes"]}
        assert p["out"].startswith("/out/") and claims[mounts["/out"]] == "netbench-reports"
        assert (p["policy"] is not None) == (case == "site") == ("/etc/netbench" in mounts)
        # the run now (the Job) tests every idle node; the routine spares those passed lately
        skip = {"defaults": 72000.0, "site": 86400.0, "minimal": None}[case] if kind == "CronJob" else None
        assert p["k8s_skip_tested_within"] == skip, kind
    if case == "site":
        p = _params(specs["CronJob"], docs, tmp_path)
        assert p["k8s_nodes"] == "pool=h100" and p["k8s_image"] == "registry.site.test/tools/netbench:1.2.3"
        assert p["k8s_resources"] == ("nvidia.com/gpu=8", "rdma/ib=1")
        assert _kind(docs, "CronJob")[0]["spec"]["schedule"] == "0 */4 * * *"
        (claim,) = _kind(docs, "PersistentVolumeClaim")
        assert claim["spec"]["storageClassName"] == "fast-rwx" and claim["spec"]["resources"]["requests"] == {
            "storage": "20Gi"}
    if case == "minimal":
        assert _params(specs["CronJob"], docs, tmp_path)["k8s_resources"] == ("nvidia.com/gpu=env",)


def test_the_chart_s_defaults_are_the_plain_manifests() -> None:
    """One routine two ways: the chart with its defaults runs the command of docs/k8s/cronjob.yaml
    (its Job the command of job.yaml) and grants what docs/k8s/rbac.yaml grants."""
    docs = _render({"job": {"enabled": True}})
    plain = [d for p in sorted(K8S.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]
    specs = _pod_specs(docs)
    for kind in ("CronJob", "Job"):
        (doc,) = _kind(plain, kind)
        spec = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"] if kind == "CronJob" else doc["spec"][
            "template"]["spec"]
        assert specs[kind]["containers"][0]["args"] == spec["containers"][0]["args"], kind
    for kind in ("Role", "ClusterRole"):
        assert _granted(_kind(docs, kind)[0]["rules"]) == _granted(_kind(plain, kind)[0]["rules"]), kind
    assert _kind(docs, "Namespace")[0]["metadata"]["labels"].items() >= _kind(plain, "Namespace")[0][
        "metadata"]["labels"].items()


def test_the_busbw_thresholds_become_a_policy_netbench_reads(tmp_path: Path) -> None:
    from netbench.reports.policy import load_policy

    path = tmp_path / "policy.toml"
    path.write_text(_policy(_render(VALUES["site"])) or "")
    policy = load_policy(path)
    assert policy.thresholds.slow_pair_factor == 0.7 and policy.thresholds.single_sample == "info"
    (floor,) = policy.expect.busbw
    assert (floor.collective, floor.pattern, floor.hop_class, floor.min_bytes, floor.busbw_GBps) == (
        "all_reduce", "pair", "leaf", 1 << 30, 150.0)


@pytest.mark.parametrize(("values", "said"), [
    ({"selection": {"skipTestedWithin": "24h"}, "remediate": {"label": False}},
     "selection.skipTestedWithin reads the nodes' netbench.io/last-run label, which only "
     "remediate.label writes"),
    ({"gpus": "eight"}, "gpus eight: want all, a number, or env"),
])
def test_values_that_cannot_work_are_refused_when_rendered(values: dict[str, Any], said: str) -> None:
    with pytest.raises(helm.HelmRenderError, match=said):
        _render(values)


def _stamp(hours_ago: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() - hours_ago * 3600))


def test_the_chart_applied_runs_its_cronjob_s_command_against_the_test_api_server(tmp_path: Path) -> None:
    """Applied with only the RBAC it renders, the CronJob's command (as its pod runs it: $(POD_IP)
    expanded, the claim at /out) passes every access check, reads the opted-in nodes, leaves out the
    busy one and the one that passed an hour ago, each named, and with nothing left exits 3, having
    made nothing (no pod, no Secret, no ConfigMap: the last metrics stay)."""
    from kube_fake import FakeApiServer

    docs = _render({})
    api = FakeApiServer()
    try:
        granted: set[tuple[str, str]] = set()
        for d in docs:
            if d["kind"] == "Namespace":
                api.namespaces.add(d["metadata"]["name"])
            elif d["kind"] in ("Role", "ClusterRole"):
                granted |= _granted(d["rules"])
        resources = ["nodes", "pods", "pods/log", "pods/status", "pods/eviction", "secrets", "namespaces",
                     "configmaps"]
        verbs = ["get", "list", "watch", "create", "update", "patch", "delete"]
        api.denied = {(v, r) for v in verbs for r in resources} - granted
        opted = {"netbench.io/check": "true"}
        api.add_node("g0", labels=opted, address="10.9.0.1", allocatable={"nvidia.com/gpu": "8"})
        api.add_node("g1", labels={**opted, "netbench.io/verdict": "pass", "netbench.io/last-run": _stamp(1)},
                     address="10.9.0.2", allocatable={"nvidia.com/gpu": "8"})
        api.add_node("cpu0", address="10.9.0.3")  # not opted in: never looked at
        api.add_pod("ml", "train-0", "g0", {"nvidia.com/gpu": "8"})
        ns = _kind(docs, "Namespace")[0]["metadata"]["name"]
        kc = tmp_path / "kubeconfig"
        kc.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "job",
            "clusters": [{"name": "c", "cluster": {"server": api.url}}],
            "users": [{"name": "sa", "user": {"token": api.token}}],
            "contexts": [{"name": "job", "context": {"cluster": "c", "user": "sa", "namespace": ns}}],
        }))
        args = [a.replace("$(POD_IP)", "127.0.0.1").replace("/out/", f"{tmp_path}/out/")
                for a in _pod_specs(docs)["CronJob"]["containers"][0]["args"]]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NETBENCH_", "KUBE"))}
        r = subprocess.run([sys.executable, "-m", "netbench", *args, "--kubeconfig", str(kc)],
                           capture_output=True, text=True, timeout=180, env=env)
        assert r.returncode == 3, r.stderr
        assert "may not" not in r.stderr
        assert "g0 (pod 'ml/train-0')" in r.stderr and "passed within 20h" in r.stderr and "g1 (" in r.stderr
        assert ("netbench: error: kubernetes: nothing left to test: of the 2 node(s) chosen, 1 busy, "
                "1 passed within 20h: nothing measured") in r.stderr
        assert [o for o in api.created if o["kind"] in ("Pod", "Secret", "ConfigMap")] == []
    finally:
        api.close()
