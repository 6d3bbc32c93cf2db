"""``--launcher k8s``: the nodes of a Kubernetes cluster, a pod per node (``netbench.sites.k8s.launcher``).

Hosts: ``--k8s-nodes`` (names, or a label selector), else every schedulable, Ready node with
nvidia.com/gpu; less, with ``--k8s-idle-only`` and ``--k8s-skip-tested-within``, the nodes another pod's
GPUs are on and those that passed lately, each group named (``selection``). Before anything is made, the
credentials are checked (a wrong kubeconfig, context or server: exit 2) and the server asked whether
each verb the run needs is allowed (RBAC: exit 2 naming what is missing). Everything the run makes hangs
off one parent object (a Secret, ``netbench-<id>``): the launches' Secrets and every pod point at it
(ownerReferences), so deleting it removes them all; ``close`` does that, and waits for the pods to be
gone, at the end of the run however it ends (``--k8s-keep``: the pods stay, for ``kubectl logs``).

Inventory: the same ``inventory/probe.sh`` as over SSH, as one pod per node (its log is the probe's
output, split and assembled exactly as the SSH collector's). Switches: ``--topology`` when given,
else the nodes' standard topology labels (``kubepods.TOPOLOGY_LABELS``). Port counters: before
and after the run, a counters-only probe pod on each node (as the SSH site's second probe). After
the report, ``--k8s-label`` writes each node's verdict, when, the run id and its busbw class against
the fleet as labels, ``--k8s-taint`` taints suspect nodes PreferNoSchedule and the nodes the findings
would drain NoSchedule, and lifts the taint from nodes measured clean (``remedy``): both
read-modify-write with the node's resourceVersion, and never without the flag; then
``--k8s-metrics-configmap`` replaces a ConfigMap with the run's metrics (``metrics``). The namespace:
``--k8s-namespace``, else the kubeconfig context's (in a pod, its own), else ``default``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from netbench.agents.launchers import Launcher
from netbench.common.errors import UsageError
from netbench.common.rundir import RunDir, new_run_id
from netbench.defaults import INVENTORY_TIMEOUT_S
from netbench.inventory.hosts import HostEntry
from netbench.inventory.model import NodeInventory
from netbench.run.options import Options
from netbench.run.planner import HostCaps
from netbench.sites.base import Echo, Site, Switches
from netbench.sites.k8s.client import Kube, KubeError, KubeTarget, connect
from netbench.sites.k8s.pods import (
    GPU_RESOURCE,
    RUN_LABEL,
    NodeChoice,
    NodeInfo,
    PodTemplate,
    check_namespace,
    parent_name,
    parse_resources,
    parse_tolerations,
    secret_manifest,
    topology_uplinks,
)

CLEANUP_WAIT_S = 30.0
CLOSE_NOW_S = 5.0  # a second signal's one request (close_now): the process ends after it, however it went
SETTLE_S = 30.0  # the most a launch waits for the last one's pods on its nodes to be gone

# what the run asks of the API server: (verb, resource, subresource, namespaced)
NEEDS = [
    ("list", "nodes", "", False),
    ("get", "nodes", "", False),  # a node's state when its pod ends (NotReady)
    ("list", "pods", "", True),
    ("watch", "pods", "", True),
    ("create", "pods", "", True),
    ("delete", "pods", "", True),
    ("get", "pods", "log", True),
    ("create", "secrets", "", True),
    ("delete", "secrets", "", True),
]
REMEDIATE = [("update", "nodes", "", False)]
SELECT_IDLE = [("list", "pods", "", False)]  # --k8s-idle-only: every namespace's pods, whose GPUs are held
PUBLISH = [("get", "configmaps", "", True), ("create", "configmaps", "", True),
           ("update", "configmaps", "", True)]  # --k8s-metrics-configmap


@dataclass
class K8sSite:
    opts: Options
    name: str = "k8s"
    uses: frozenset[str] = frozenset(
        {
            "procs_per_host",
            "python",
            "topology",
            "advertise",
            "launcher",
            "kubeconfig",
            "k8s_context",
            "k8s_namespace",
            "k8s_nodes",
            "k8s_image",
            "k8s_resources",
            "k8s_tolerations",
            "k8s_keep",
            "k8s_label",
            "k8s_taint",
            "k8s_idle_only",
            "k8s_skip_tested_within",
            "k8s_metrics_configmap",
        }
    )
    one_machine: bool = False
    job_id: str | None = None
    why: dict[str, str] = field(
        default_factory=lambda: {
            "hosts_file": "the hosts are the cluster's nodes: choose them with --k8s-nodes",
            "ssh_config": "nothing is reached over SSH there: the pods are",
            "accept_new_host_keys": "nothing is reached over SSH there: the pods are",
        }
    )
    source: str = "the cluster's nodes"
    """What the opening line says the hosts came from (in place of a hosts file)."""
    echo: Echo = field(default=lambda line: print(line, file=sys.stderr, flush=True))
    """Where the site's own notes go: stderr (preflight's stdout is its drain list alone)."""

    def __post_init__(self) -> None:  # the options alone: the cluster is asked in hosts()
        k8s = self.opts.site.k8s
        self.choice = NodeChoice.parse(k8s.k8s_nodes)
        ns = check_namespace(k8s.k8s_namespace) if k8s.k8s_namespace is not None else None
        self.target = KubeTarget(k8s.kubeconfig, k8s.k8s_context, ns)  # None: the context's (Kube)
        self.resources = parse_resources(self.opts.site.k8s.k8s_resources)
        self.tolerations = parse_tolerations(self.opts.site.k8s.k8s_tolerations)
        if self.opts.site.k8s.k8s_image is None:  # no image of ours is published: a default would never pull
            raise UsageError(
                "--launcher k8s needs --k8s-image (or NETBENCH_K8S_IMAGE): an image with netbench and "
                "torch in it; docs/k8s/Dockerfile builds one (docs/recipes.md)"
            )
        self.image = self.opts.site.k8s.k8s_image
        if k8s.k8s_metrics_configmap is not None:
            from netbench.sites.k8s.metrics import check_name

            check_name(k8s.k8s_metrics_configmap)
        if not self.image.strip() or any(c.isspace() for c in self.image):
            raise UsageError(f"--k8s-image {self.image!r}: not an image reference")
        self.kube: Kube | None = None
        self.nodes: dict[str, NodeInfo] = {}
        self.fleet: list[str] = []  # the nodes chosen, before --k8s-idle-only and --k8s-skip-tested-within
        self.run_id = new_run_id()  # the run's (pipeline, preflight): every pod is labelled with it
        self.owner: dict[str, Any] | None = None
        self.watch: Any = None
        self.launches = 0
        self._lock = threading.Lock()
        self._closed = False

    @property
    def namespace(self) -> str:
        """The run's namespace: --k8s-namespace, else the context's or the pod's (known once connected)."""
        assert self.kube is not None
        return self.kube.namespace

    # -- the hosts: the cluster asked, before anything is made -------------------------------------------
    def hosts(self) -> list[HostEntry]:
        if self.kube is None:
            self.kube = connect(self.target)
            self.kube.check_namespace()
            k8s = self.opts.site.k8s
            denied = self.kube.may(NEEDS + (REMEDIATE if k8s.k8s_label or k8s.k8s_taint else [])
                                   + (SELECT_IDLE if k8s.k8s_idle_only else [])
                                   + (PUBLISH if k8s.k8s_metrics_configmap else []))
            if denied:
                raise KubeError(
                    f"kubernetes: the credentials ({self.kube.where}) may not "
                    f"{'; '.join(denied)}: nothing was started (docs/recipes.md has the Role)"
                )
            chosen = self._choose_nodes()
            self.fleet = [n.name for n in chosen]
            self.nodes = {n.name: n for n in self._select(chosen)}
        return [HostEntry(name=n, source=f"node {n}") for n in self.nodes]

    def _choose_nodes(self) -> list[NodeInfo]:
        assert self.kube is not None
        listed = self.kube.list_nodes(self.choice.selector)
        found: dict[str, NodeInfo] = {}
        for obj in listed:
            info = NodeInfo.of(obj)
            if isinstance(info, str):
                self.echo(f"# kubernetes: {info}: left out")
                continue
            found[info.name] = info
        if self.choice.names:
            missing = [n for n in self.choice.names if n not in found]
            if missing:
                raise UsageError(f"--k8s-nodes: no node named {', '.join(missing)} in the cluster")
            return [found[n] for n in self.choice.names]
        chosen = [
            n
            for n in found.values()
            if n.schedulable and n.ready and (self.choice.selector or n.count(GPU_RESOURCE) > 0)
        ]
        if not chosen:
            what = f"matching {self.choice.selector!r}" if self.choice.selector else f"with {GPU_RESOURCE}"
            raise UsageError(f"kubernetes: no schedulable, Ready node {what} (--k8s-nodes chooses others)")
        from netbench.common.naming import natural_key

        return sorted(chosen, key=lambda n: natural_key(n.name))

    def _select(self, chosen: list[NodeInfo]) -> list[NodeInfo]:
        """The chosen nodes less the busy ones and those passed lately, when asked (``selection``);
        each group left out said in a line; none left is exit 3 (nothing measured)."""
        from netbench.sites.k8s.selection import lines, nothing_left, select

        k8s = self.opts.site.k8s
        within = k8s.k8s_skip_tested_within
        if not k8s.k8s_idle_only and within is None:
            return chosen
        assert self.kube is not None
        pods = self.kube.list_all_pods() if k8s.k8s_idle_only else None
        sel = select(chosen, pods, within, time.time())
        for line in lines(sel, within):
            self.echo(line)
        if not sel.take:
            raise nothing_left(sel, len(chosen), within)
        return sel.take

    # -- the run's objects ---------------------------------------------------------------------------------
    def _template(self) -> PodTemplate:
        return PodTemplate(
            namespace=self.namespace,
            image=self.image,
            run_id=self.run_id,
            resources=self.resources,
            tolerations=self.tolerations,
            owner=self._parent(),
        )

    def _parent(self) -> dict[str, Any]:
        """The run's parent object (made once): every Secret and pod of the run is owned by it."""
        with self._lock:
            if self.owner is None:
                from netbench.sites.k8s.launcher import PodWatch, owner_of

                assert self.kube is not None
                self.watch = PodWatch(self.kube, self.run_id)
                name = parent_name(self.run_id)
                made = self.kube.create_secret(secret_manifest(self.namespace, name, self.run_id, {}))
                self.owner = owner_of(made, "Secret")
                self.echo(
                    f"# kubernetes: {self.kube.where}, namespace {self.namespace}; the run's "
                    f"pods are labelled {RUN_LABEL}={self.run_id} and owned by secret {name}"
                )
            return self.owner

    def node_state(self, name: str) -> NodeInfo | None:
        """The node as the API server sees it now (Ready or not), for a pod's end reason."""
        try:
            assert self.kube is not None
            info = NodeInfo.of(self.kube.read_node(name))
        except KubeError:
            return None
        return info if isinstance(info, NodeInfo) else None

    def _next_launch(self, hosts: list[str]) -> int:
        """The next launch's number, once the last launch's pods on ``hosts`` are gone."""
        if self.watch is not None:
            self.watch.settle(set(hosts), SETTLE_S)
        with self._lock:
            self.launches += 1
            return self.launches

    # -- inventory: the probe as a pod on every node -----------------------------------------------------
    def inventory(
        self, entries: list[HostEntry], echo: Echo, timeout_s: float = INVENTORY_TIMEOUT_S
    ) -> list[NodeInventory]:
        from netbench.inventory.model import leave_out_unusable
        from netbench.sites.k8s.probe import probe_nodes

        template = self._template()
        records = probe_nodes(
            self,
            template,
            [self.nodes[e.name] for e in entries],
            self._next_launch([e.name for e in entries]),
            python=self.opts.site.python or "python3",
            start_s=self.opts.site.start_timeout_s,
            timeout_s=timeout_s,
            concurrency=self.opts.site.concurrency,
        )
        leave_out_unusable(records, self.opts.measure.backend)
        return records

    def switches(self, entries: list[HostEntry], echo: Echo) -> Switches:
        if self.opts.site.topology:
            from netbench.sites.ssh.site import file_switches

            return file_switches(entries, self.opts.site.topology, echo)
        uplinks = topology_uplinks([self.nodes[e.name] for e in entries])
        if uplinks:
            leaves = {uplinks[e.name] for e in entries}
            echo(f"# switches from the nodes' topology labels: {len(leaves)} leaf switch(es)")
        else:
            echo(
                "# switches: the nodes carry no common topology labels (give --topology); pairs not "
                "judged by hop class"
            )
        return Switches(uplinks=uplinks)

    def caps(self, entries: list[HostEntry], nodes: Mapping[str, NodeInventory]) -> list[HostCaps]:
        return [HostCaps.of(e.name, nodes.get(e.name)) for e in entries]

    def launcher(self, hosts: list[str]) -> Launcher:
        from netbench.sites.k8s.launcher import K8sLauncher

        template = self._template()
        return K8sLauncher(
            self.kube,
            self.watch,
            template,
            {h: self.nodes[h] for h in hosts},
            self._next_launch(hosts),
            self._parent(),
            python=self.opts.site.python,
            advertise=self.opts.site.advertise,
            keep=self.opts.site.k8s.k8s_keep,
            node_state=self.node_state,
        )

    def counters(self, phase: str, entries: list[HostEntry], rundir: RunDir) -> None:
        """The port counters before and after the run, as over SSH: a counters-only probe pod a node."""
        from netbench.inventory.fleet import counter_snapshot
        from netbench.sites.k8s.probe import probe_nodes

        chosen = [self.nodes[e.name] for e in entries]
        nodes = probe_nodes(self, self._template(), chosen, self._next_launch([n.name for n in chosen]),
                            python=self.opts.site.python or "python3", start_s=self.opts.site.start_timeout_s,
                            timeout_s=30.0, concurrency=self.opts.site.concurrency, only="counters")
        rundir.write_counters(phase, counter_snapshot(nodes))

    # -- after the report: labels and taints, when asked ----------------------------------------------------
    def judged(self, rundir: RunDir, findings: list[Any] | None, drain: list[str] | None, echo: Echo) -> None:
        k8s = self.opts.site.k8s
        if findings is None or self.kube is None:
            return
        if k8s.k8s_label or k8s.k8s_taint:
            from netbench.sites.k8s.remedy import remediate

            for line in remediate(self.kube, rundir, findings, drain, list(self.nodes),
                                  label=k8s.k8s_label, taint=k8s.k8s_taint):
                echo(line)
        if k8s.k8s_metrics_configmap:
            self._publish(k8s.k8s_metrics_configmap, rundir, findings, echo)

    def _publish(self, name: str, rundir: RunDir, findings: list[Any], echo: Echo) -> None:
        """The run's metrics into ConfigMap ``name``, with the fleet's verdicts as its nodes' labels
        say now (after ``remediate``): the run's node choice, re-read."""
        from netbench.sites.k8s.metrics import publish

        assert self.kube is not None
        try:
            listed = self.kube.list_nodes(self.choice.selector)
        except KubeError as exc:
            echo(f"netbench: could not write configmap {name}: {exc}")
            return
        read = [i for i in (NodeInfo.of(o) for o in listed) if isinstance(i, NodeInfo)]
        fleet = [n for n in read if n.name in set(self.fleet)]
        for line in publish(self.kube, name, rundir, findings, fleet, time.time()):
            echo(line)

    # -- the end, however the run ends -------------------------------------------------------------------
    def close(self) -> None:
        """Delete the parent object and every pod of the run, and wait until they are gone
        (``--k8s-keep``: leave them and say how to remove them)."""
        if self._closed or self.kube is None or self.owner is None:
            return
        self._closed = True
        kube, selector = self.kube, f"{RUN_LABEL}={self.run_id}"
        if self.opts.site.k8s.k8s_keep:
            self.echo(
                f"# kubernetes: pods kept (--k8s-keep): kubectl -n {self.namespace} get pods -l "
                f"{selector}; kubectl -n {self.namespace} delete secret {self.owner['name']} "
                "removes them"
            )
            self._stop_watch()
            return
        try:
            self._delete_parent()
            left = remove_pods(kube, selector, self.node_state, CLEANUP_WAIT_S)
        except KubeError as exc:
            self.echo(f"# {exc}; the run's pods may remain: kubectl delete pods -l {selector}")
            left = []
        self._stop_watch()
        if left:
            self.echo(
                f"# kubernetes: {len(left)} pod(s) still there after {CLEANUP_WAIT_S:g} s: "
                f"{', '.join(left[:5])} (kubectl -n {self.namespace} delete pods -l {selector})"
            )

    def close_now(self) -> None:
        """What a second signal leaves time for (``sites.base.finished``): the parent deleted, one
        request of at most CLOSE_NOW_S, after which the API server's garbage collector removes every
        Secret and pod of the run without this process; a parent already gone is no error."""
        if self.kube is None or self.owner is None or self.opts.site.k8s.k8s_keep:
            return
        try:
            self._delete_parent(CLOSE_NOW_S)
        except KubeError:
            pass  # no time left to say so: ``kubectl delete secret`` is in docs/recipes.md

    def _delete_parent(self, timeout_s: float | None = None) -> None:
        assert self.kube is not None and self.owner is not None
        self.kube.delete_secret(self.owner["name"], timeout_s=timeout_s)

    def _stop_watch(self) -> None:
        if self.watch is not None:
            self.watch.stop()


def remove_pods(kube: Kube, selector: str, node_state: Any, wait_s: float) -> list[str]:
    """Delete every pod matching ``selector`` and wait until they are gone; a pod whose node is
    NotReady cannot be stopped by its kubelet, so it is removed from the API at once (grace 0), as
    ``kubectl delete --force`` would. The names of those still there after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    asked: set[str] = set()
    forced: set[str] = set()
    while True:
        pods = kube.list_pods(selector)
        names = [str((p.get("metadata") or {}).get("name")) for p in pods]
        if not pods or time.monotonic() > deadline:
            return names
        for pod, name in zip(pods, names, strict=True):
            node = (pod.get("spec") or {}).get("nodeName")
            state = node_state(node) if isinstance(node, str) else None
            if (state is not None and not state.ready) or not isinstance(node, str):
                if name not in forced:
                    forced.add(name)
                    kube.delete_pod(name, grace_s=0)
            elif name not in asked:
                asked.add(name)
                kube.delete_pod(name, grace_s=5)
        time.sleep(0.2)


def make(opts: Options) -> Site:
    return K8sSite(opts)
