"""The inventory on Kubernetes: ``inventory/probe.sh`` as one pod per node, its log the probe's output.

The same script and the same assembler as the SSH collector and the Slurm step, so the records are
identical: ``sh -c SCRIPT sh PYTHON NONCE`` (the nonce in the section headers, so tool output cannot
forge a section). A pod that does not run within ``start_s`` (Pending: an image that cannot be
pulled, no room on the node) or does not finish within ``timeout_s`` is a record with status
``unreachable`` and what Kubernetes says of it; its pod is deleted either way.
"""

from __future__ import annotations

import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from netbench.inventory.assemble import build_inventory, split_sections
from netbench.inventory.local import read_probe_script
from netbench.inventory.model import NodeInventory, check_can_run
from netbench.sites.k8s.client import KubeError
from netbench.sites.k8s.launcher import FINAL, container_state, describe_pod, phase_of
from netbench.sites.k8s.pods import NodeInfo, PodTemplate, pod_manifest

LOG_LIMIT = 32 << 20  # a probe's output is ~100 KB; a node that sends more is cut there


def probe_nodes(
    site: Any,
    template: PodTemplate,
    nodes: list[NodeInfo],
    launch: int,
    python: str,
    start_s: float,
    timeout_s: float,
    concurrency: int,
    only: str = "",
) -> list[NodeInventory]:
    """One record per node, in ``nodes`` order, ``concurrency`` pods at a time; never raises for a
    node's own failure. ``only="counters"``: the port counters alone (the snapshots around a run)."""
    nonce = secrets.token_hex(8)
    script = read_probe_script()
    kube, watch = site.kube, site.watch

    def one(node: NodeInfo) -> NodeInventory:
        start = time.monotonic()
        argv = ["sh", "-c", script, "sh", python, nonce, *([only] if only else [])]
        manifest = pod_manifest(template, node, "probe", launch, argv)
        name = manifest["metadata"]["name"]

        def gone(why: str) -> NodeInventory:
            return NodeInventory(
                host=node.name,
                status="unreachable",
                error=why,
                probe_seconds=round(time.monotonic() - start, 3),
            )

        try:
            kube.create_pod(manifest)
        except KubeError as exc:
            return gone(str(exc))
        try:
            running = watch.wait(name, lambda p, g: g or phase_of(p) in ("Running", *FINAL), start_s)
            if not running:
                return gone(
                    f"the probe's pod did not start within {start_s:g} s: "
                    f"{name}: {describe_pod(watch.get(name), site.node_state(node.name))}"
                )
            done = watch.wait(name, lambda p, g: g or phase_of(p) in FINAL, timeout_s)
            pod = watch.get(name)
            if not done or pod is None:
                return gone(
                    f"the probe did not finish within {timeout_s:g} s: {name}: "
                    f"{describe_pod(pod, site.node_state(node.name))}"
                )
            if not container_state(pod):  # refused before it ran (no room for its requests on the node)
                said = describe_pod(pod, site.node_state(node.name))
                return gone(f"the probe's pod did not run: {name}: {said}")
            text = read_log(kube, name)
        except KubeError as exc:
            return gone(str(exc))
        finally:
            if not site.opts.site.k8s.k8s_keep:
                try:
                    kube.delete_pod(name, grace_s=0)
                except KubeError:
                    pass  # the site's clean-up tries again
        inv = build_inventory(node.name, split_sections(text, nonce=nonce))
        inv.probe_seconds = round(time.monotonic() - start, 3)
        inv.address = node.address
        inv.ranks_python = True  # the pods of the run start the python the probe asked
        if phase_of(pod) == "Failed" and inv.status == "ok":
            inv.status, inv.error = "partial", f"probe pod {name}: {describe_pod(pod)}"
        return inv if only else check_can_run(inv)

    workers = max(1, min(concurrency, len(nodes)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="k8s-probe") as pool:
        return list(pool.map(one, nodes))


def read_log(kube: Any, name: str) -> str:
    stream = kube.pod_log(name, follow=False)
    try:
        data = stream.read(LOG_LIMIT) if hasattr(stream, "read") else bytes(stream)
    finally:
        if hasattr(stream, "release_conn"):
            stream.release_conn()
    return data.decode("utf-8", errors="replace")
