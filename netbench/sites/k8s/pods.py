"""What netbench asks of Kubernetes, as plain manifests and pure functions (no client imported): the
pods (one per node, pinned with ``nodeName``), the run's parent object and secrets, the node facts
read back (names, addresses, readiness, GPUs, topology labels), the remediation labels and taint.

Everything read from the API server is untrusted: names are checked (``validate_hostname`` and the
Kubernetes name rules) before they become host names, label values before they become switch names,
and status text only ever reaches a message through ``quote_untrusted``. ``tests/test_k8s.py``
validates every manifest made here against the API schema (``kubernetes-validate``).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from netbench.common.errors import UsageError
from netbench.inventory.hosts import validate_hostname

DOMAIN = "netbench.io"
RUN_LABEL = f"{DOMAIN}/run-id"
ROLE_LABEL = f"{DOMAIN}/role"  # agent | probe
LAUNCH_LABEL = f"{DOMAIN}/launch"
VERDICT_LABEL = f"{DOMAIN}/verdict"  # pass | suspect | fail (--k8s-label)
BUSBW_LABEL = f"{DOMAIN}/busbw-class"  # full | reduced | low (busbw_class)
LAST_RUN_LABEL = f"{DOMAIN}/last-run"  # when the verdict label was written: 20261207T021500Z (UTC)
TAINT_KEY = f"{DOMAIN}/preflight"  # --k8s-taint: suspect:PreferNoSchedule, fail:NoSchedule
TAINT_REASON = f"{DOMAIN}/taint-reason"
SECRET_KEY = "store-secret"
CONTAINER = "netbench"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_ENV = "env"  # --k8s-resource nvidia.com/gpu=env: the runtime's NVIDIA_VISIBLE_DEVICES, no request
DEVICE_ENV = ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
"""Never handed on to a pod that requests its GPUs: the device plugin chooses the devices (and sets
NVIDIA_VISIBLE_DEVICES itself); ``all`` there would be the known way around its accounting, and the
coordinator's CUDA indices mean nothing on another node."""

# the standard topology labels, widest first: the leaf switch is the narrowest one a node has
# (NVIDIA topograph's accelerator/leaf/spine/core; GKE's and EKS' network-topology blocks; the
# well-known zone); each level's parent is the next wider one present
TOPOLOGY_LABELS = (
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "network.topology.nvidia.com/core",
    "network.topology.nvidia.com/spine",
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
    "network.topology.nvidia.com/leaf",
    "cloud.google.com/gce-topology-host",
    "network.topology.nvidia.com/accelerator",
)
_LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]{1,4}$")
# a device count a node can hold: past it a typo (gpu=80000000000) would reach the API server as a
# request no node satisfies, and the pods would wait Pending until the timeout
MAX_DEVICES = 4096
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def label_value_ok(value: str) -> bool:
    return isinstance(value, str) and bool(_LABEL_VALUE.match(value))


def label_key_ok(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return bool(_LABEL_NAME.match(name))


def check_namespace(ns: str) -> str:
    if not _DNS_LABEL.match(ns or ""):
        raise UsageError(
            f"--k8s-namespace {ns!r}: not a Kubernetes namespace name (lower-case letters, "
            "digits and '-', at most 63)"
        )
    return ns


def check_node_name(name: object) -> str | None:
    """Why ``name`` (from the API server) cannot be a host of the run, or None when it can."""
    if not isinstance(name, str) or not _DNS_SUBDOMAIN.match(name):
        return "not a Kubernetes node name"
    return validate_hostname(name)


# -- the user's options -------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeChoice:
    """``--k8s-nodes``: node names (comma-separated), or a label selector (it has ``=``, ``!`` or
    ``in (...)``), or None: every schedulable node with nvidia.com/gpu."""

    names: tuple[str, ...] = ()
    selector: str | None = None

    @classmethod
    def parse(cls, text: str | None) -> NodeChoice:
        if text is None or not text.strip():
            return cls()
        text = text.strip()
        if re.search(r"[=!()]|\s(?:not)?in\s", text):
            if len(text) > 1000 or re.search(r"[^A-Za-z0-9_./=!(), -]", text):
                raise UsageError(
                    f"--k8s-nodes {text!r}: not a label selector (key=value, key!=value, "
                    "key in (a,b), comma-separated)"
                )
            return cls(selector=text)
        names = tuple(n.strip() for n in text.split(",") if n.strip())
        for n in names:
            why = check_node_name(n)
            if why:
                raise UsageError(f"--k8s-nodes: {n!r}: {why}")
        if len(set(names)) != len(names):
            raise UsageError("--k8s-nodes names a node twice")
        return cls(names=names)


def _count_ok(count: str) -> bool:
    return bool(_QUANTITY.match(count)) and int(count) <= MAX_DEVICES


def parse_resources(items: Sequence[str]) -> dict[str, str]:
    """``--k8s-resource NAME=COUNT`` (repeatable; COUNT a whole number or ``all``: the node's
    allocatable count) -> NAME -> COUNT. nvidia.com/gpu=all unless given (a node's every GPU, through
    the device plugin); ``nvidia.com/gpu=env`` is the old way for a cluster without the plugin: no
    request, ``NVIDIA_VISIBLE_DEVICES=all`` in the pod (``pod_manifest``)."""
    out: dict[str, str] = {}
    for item in items:
        name, eq, count = item.partition("=")
        if (
            not eq
            or not label_key_ok(name)
            or "/" not in name
            or not (count == "all" or _count_ok(count) or (count == GPU_ENV and name == GPU_RESOURCE))
        ):
            raise UsageError(
                f"--k8s-resource {item!r}: want NAME=COUNT (e.g. nvidia.com/gpu=8, rdma/ib=1, "
                f"COUNT 0-{MAX_DEVICES} or all: the node's allocatable count; nvidia.com/gpu=env: no "
                "request, every GPU through NVIDIA_VISIBLE_DEVICES, for a cluster without the device plugin)"
            )
        out[name] = count
    out.setdefault(GPU_RESOURCE, "all")
    return out


def parse_tolerations(items: Sequence[str]) -> list[dict[str, str]]:
    """``--k8s-toleration KEY[=VALUE][:EFFECT]`` or ``all`` (repeatable) -> the pods' tolerations;
    nvidia.com/gpu (any effect) is always tolerated: GPU nodes commonly carry that taint; and
    netbench.io/preflight, netbench's own."""
    # netbench's own taint too: a node it tainted is re-tested by the next run (whose clean result
    # lifts the taint) instead of being left out of it for ever
    out: list[dict[str, str]] = [
        {"key": GPU_RESOURCE, "operator": "Exists"},
        {"key": TAINT_KEY, "operator": "Exists"},
    ]
    for item in items:
        if item == "all":
            out.append({"operator": "Exists"})
            continue
        rest, colon, effect = item.partition(":")
        key, eq, value = rest.partition("=")
        if not label_key_ok(key) or (eq and not label_value_ok(value)) or (colon and effect not in _EFFECTS):
            raise UsageError(
                f"--k8s-toleration {item!r}: want KEY[=VALUE][:EFFECT] (EFFECT one of "
                f"{', '.join(_EFFECTS)}) or all"
            )
        tol = {"key": key, "operator": "Equal" if eq else "Exists"}
        if eq:
            tol["value"] = value
        if colon:
            tol["effect"] = effect
        out.append(tol)
    return out


# -- what the API server says of a node ----------------------------------------------------------------
@dataclass(frozen=True)
class NodeInfo:
    """A node as read from the API (validated): the facts the site needs."""

    name: str
    labels: dict[str, str]
    address: str | None  # InternalIP (the store is reached from it; the probe's own view is in the inventory)
    ready: bool
    schedulable: bool
    allocatable: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> NodeInfo | str:
        """The node, or why the API server's record of it cannot be used (a message)."""
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        why = check_node_name(name)
        if why:
            return f"node {quote(name)}: {why}"
        raw_labels = meta.get("labels") or {}
        labels = (
            {
                k: v
                for k, v in raw_labels.items()
                if isinstance(k, str) and label_key_ok(k) and label_value_ok(v)
            }
            if isinstance(raw_labels, Mapping)
            else {}
        )
        spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
        status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
        address = None
        for a in status.get("addresses") or []:
            if isinstance(a, Mapping) and a.get("type") == "InternalIP" and isinstance(a.get("address"), str):
                if validate_hostname(a["address"]) is None:
                    address = a["address"]
                    break
        ready = any(
            isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        alloc = status.get("allocatable") if isinstance(status.get("allocatable"), Mapping) else {}
        return cls(
            name=name,
            labels=labels,
            address=address,
            ready=ready,
            schedulable=not spec.get("unschedulable"),
            allocatable={
                k: str(v) for k, v in alloc.items() if isinstance(k, str) and isinstance(v, str | int)
            },
        )

    def count(self, resource: str) -> int:
        """The node's allocatable count of a countable resource (0 when absent or not a count)."""
        value = self.allocatable.get(resource, "0")
        return int(value) if _QUANTITY.match(value) else 0


def quote(value: object, limit: int = 120) -> str:
    from netbench.common.text import quote_untrusted

    return quote_untrusted(value, limit)


def topology_uplinks(nodes: Sequence[NodeInfo]) -> dict[str, str]:
    """host -> leaf and switch -> parent (``netbench.inventory.topology``'s uplinks) from the standard
    topology labels; {} unless every node has the same levels (a partial tree would judge some
    pairs by a class the others lack). A level's switch is named ``<label's last part>-<value>``
    under its parent's name, so two zones' ``block-1`` stay two switches."""
    levels = [k for k in TOPOLOGY_LABELS if all(k in n.labels for n in nodes)]
    if not nodes or not levels:
        return {}
    out: dict[str, str] = {}
    for n in nodes:
        parent = None
        for key in levels:
            switch = f"{key.rsplit('/', 1)[1]}-{n.labels[key]}"
            switch = f"{parent}.{switch}" if parent else switch
            if parent is not None:
                out.setdefault(switch, parent)
            parent = switch
        assert parent is not None
        out[n.name] = parent
    return out


# -- the manifests ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PodTemplate:
    """What every pod of a run shares (the options), filled per node by ``pod_manifest``."""

    namespace: str
    image: str
    run_id: str
    resources: dict[str, str]  # name -> count or "all" (parse_resources)
    tolerations: list[dict[str, str]]
    owner: dict[str, Any] | None = None  # the parent object's ownerReference
    env: dict[str, str] = field(default_factory=dict)
    secret_name: str | None = None  # NETBENCH_STORE_SECRET from it (never in the spec itself)


def short_id(run_id: str) -> str:
    return hashlib.sha256(run_id.encode()).hexdigest()[:10]


def parent_name(run_id: str) -> str:
    return f"netbench-{short_id(run_id)}"


def pod_name(run_id: str, role: str, launch: int, node: str) -> str:
    base = f"nb-{short_id(run_id)}-{role}{launch}-"
    tail = node.lower()
    if len(base) + len(tail) > 200 or not _DNS_SUBDOMAIN.match(base + tail):
        tail = hashlib.sha256(node.encode()).hexdigest()[:16]
    return base + tail


def run_labels(run_id: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "netbench", RUN_LABEL: run_id}


def requests_for(template: PodTemplate, node: NodeInfo) -> dict[str, str]:
    """The pod's resource requests (= limits) on ``node``: ``all`` is the node's allocatable count,
    and a resource the node has none of is left out of ``all`` (a CPU node asks for no GPU)."""
    out: dict[str, str] = {}
    for name, count in template.resources.items():
        if count == GPU_ENV:
            continue
        n = node.count(name) if count == "all" else int(count)
        if n > 0:
            out[name] = str(n)
    return out


def pod_manifest(
    template: PodTemplate, node: NodeInfo, role: str, launch: int, command: Sequence[str]
) -> dict[str, Any]:
    """One pod on ``node`` (pinned with nodeName) running ``command`` (an argv: no shell of ours
    around it), host network, /dev/shm in memory, IPC_LOCK (RDMA memory registration)."""
    given = {k: v for k, v in template.env.items() if k not in DEVICE_ENV}
    if template.resources.get(GPU_RESOURCE) == GPU_ENV:
        given["NVIDIA_VISIBLE_DEVICES"] = "all"
    env = [{"name": k, "value": v} for k, v in sorted(given.items())]
    if template.secret_name:
        env.append(
            {
                "name": "NETBENCH_STORE_SECRET",
                "valueFrom": {"secretKeyRef": {"name": template.secret_name, "key": SECRET_KEY}},
            }
        )
    res = requests_for(template, node)
    labels = {**run_labels(template.run_id), ROLE_LABEL: role, LAUNCH_LABEL: str(launch)}
    meta: dict[str, Any] = {
        "name": pod_name(template.run_id, role, launch, node.name),
        "namespace": template.namespace,
        "labels": labels,
    }
    if template.owner:
        meta["ownerReferences"] = [template.owner]
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": template.image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(command),
        "env": env,
        "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if res:
        container["resources"] = {"requests": res, "limits": res}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node.name,
            "hostNetwork": True,
            "dnsPolicy": "ClusterFirstWithHostNet",
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "tolerations": list(template.tolerations),
            "containers": [container],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
        },
    }


def secret_manifest(
    namespace: str, name: str, run_id: str, data: Mapping[str, str], owner: dict[str, Any] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": run_labels(run_id)}
    if owner:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": meta,
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def owner_reference(kind: str, name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid, "blockOwnerDeletion": True}


# -- remediation: labels and taint, as changes to a node's record ----------------------------------------
def with_labels(node: dict[str, Any], labels: Mapping[str, str]) -> bool:
    """Set ``labels`` on the node record (in place); True when that changed anything."""
    meta = node.setdefault("metadata", {})
    have = meta.get("labels") or {}
    if all(have.get(k) == v for k, v in labels.items()):
        return False
    meta["labels"] = {**have, **labels}
    return True


TAINT_EFFECTS = {"suspect": "PreferNoSchedule", "fail": "NoSchedule"}
"""cluster-health-scanner's lifecycle: a suspect node is avoided while there is room elsewhere, a
failed one takes no new pods; a later clean run of the node lifts either (``without_taint``)."""


def _mine(t: Mapping[str, Any]) -> bool:
    return t.get("key") == TAINT_KEY


def with_taint(node: dict[str, Any], reason: str, value: str = "fail") -> bool:
    """Set netbench's taint for ``value`` (suspect: PreferNoSchedule, fail: NoSchedule; one taint of
    netbench's at a time) and the reason annotation; True when that changed anything. Other taints
    stay as they are."""
    spec = node.setdefault("spec", {})
    taints = [t for t in (spec.get("taints") or []) if isinstance(t, dict)]
    mine = {"key": TAINT_KEY, "value": value, "effect": TAINT_EFFECTS[value]}
    meta = node.setdefault("metadata", {})
    notes = meta.get("annotations") or {}
    if [t for t in taints if _mine(t)] == [mine] and notes.get(TAINT_REASON) == reason:
        return False
    spec["taints"] = [t for t in taints if not _mine(t)] + [mine]
    meta["annotations"] = {**notes, TAINT_REASON: reason}
    return True


def without_taint(node: dict[str, Any]) -> bool:
    """Lift netbench's taint (any effect) and its reason: the node was found clean; True when that
    changed anything. Other taints and annotations stay."""
    spec = node.setdefault("spec", {})
    taints = [t for t in (spec.get("taints") or []) if isinstance(t, dict)]
    notes = (node.get("metadata") or {}).get("annotations") or {}
    if not any(_mine(t) for t in taints) and TAINT_REASON not in notes:
        return False
    spec["taints"] = [t for t in taints if not _mine(t)]
    if TAINT_REASON in notes:
        node["metadata"]["annotations"] = {k: v for k, v in notes.items() if k != TAINT_REASON}
    return True


BUSBW_CLASSES = ((0.8, "full"), (0.4, "reduced"), (0.0, "low"))
"""A node's best pair against the fleet's typical (median) node's best: ``full`` at 0.8 or more,
``reduced`` from 0.4 (a node at half rate, whose every pair is capped by it), ``low`` below."""


def busbw_class(best_gbps: float | None, fleet_gbps: float | None) -> str | None:
    """A label value for a node's large-message busbw relative to the run's fleet, so that a selector
    (``netbench.io/busbw-class=full``) picks the nodes at full rate and leaves a half-rate one out.
    Relative, not absolute buckets: the nodes of one fleet sit in one decade, where fixed 1-2-5
    buckets put a node at half rate in the same bucket as its healthy peers."""
    if best_gbps is None or fleet_gbps is None or not best_gbps > 0 or not fleet_gbps > 0:
        return None
    ratio = best_gbps / fleet_gbps
    return next(name for floor, name in BUSBW_CLASSES if ratio >= floor)
