"""The Kubernetes launcher: one agent per node as a pod pinned to it (``nodeName``), the same agent the
other launchers start (``netbench.agents.worker agent``).

The pods reach the run's store on this machine over the nodes' own network (``hostNetwork``); the
store's secret reaches them through a Secret of the launch (``NETBENCH_STORE_SECRET`` from a
``secretKeyRef``: never in the pod spec, never on a command line). The agent's stdout, the protocol
lines, comes back as the pod's log (followed); the coordinator validates every line as for any
other launcher. One watch over the run's pods (``PodWatch``) keeps each pod's phase, so a pod that
stays Pending, is evicted or whose node stops answering is named by what Kubernetes says of it
(``end_reason``). Stopping an agent deletes its pod.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from netbench.agents.launchers import HostSlot, agent_argv, forwarded_env
from netbench.sites.k8s.client import Kube, KubeError
from netbench.sites.k8s.pods import (
    RUN_LABEL,
    SECRET_KEY,
    NodeInfo,
    PodTemplate,
    owner_reference,
    pod_manifest,
    quote,
    secret_manifest,
)

FINAL = ("Succeeded", "Failed")


class PodWatch:
    """The latest state of every pod of a run (one watch, in a thread); ``wait`` for a change."""

    def __init__(self, kube: Kube, run_id: str):
        self.kube = kube
        self.pods: dict[str, dict[str, Any]] = {}
        self.gone: set[str] = set()
        self.cond = threading.Condition()
        self.stop_event = threading.Event()
        self.error: str | None = None
        self.thread = threading.Thread(
            target=self._run, args=(f"{RUN_LABEL}={run_id}",), daemon=True, name="k8s-watch"
        )
        self.thread.start()

    def _run(self, selector: str) -> None:
        try:
            for kind, pod in self.kube.watch_pods(selector, self.stop_event):
                name = (pod.get("metadata") or {}).get("name")
                if not isinstance(name, str):
                    continue
                with self.cond:
                    if kind == "DELETED":
                        self.pods.pop(name, None)
                        self.gone.add(name)
                    else:
                        self.pods[name] = pod
                        self.gone.discard(name)
                    self.cond.notify_all()
        except Exception as exc:  # noqa: BLE001 - the pods' states are unknown from here on: said
            with self.cond:
                self.error = f"the watch of the run's pods failed: {quote(str(exc), 200)}"
                self.cond.notify_all()

    def get(self, name: str) -> dict[str, Any] | None:
        with self.cond:
            return self.pods.get(name)

    def wait(self, name: str, until: Callable[[dict[str, Any] | None, bool], bool], timeout: float) -> bool:
        """Wait until ``until(pod or None, gone)`` holds (True) or ``timeout`` passes (False)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not until(self.pods.get(name), name in self.gone):
                left = deadline - time.monotonic()
                if left <= 0 or self.error:
                    return False
                self.cond.wait(min(left, 1.0))
            return True

    def settle(self, nodes: set[str], timeout: float) -> None:
        """Wait (at most ``timeout``) until no pod of the run still runs on ``nodes``: a pod being
        deleted holds its GPUs until its kubelet has stopped it, and the next launch's pod there
        would be refused for want of them."""

        def busy() -> bool:
            return any((p.get("spec") or {}).get("nodeName") in nodes and phase_of(p) not in FINAL
                       for p in self.pods.values())

        deadline = time.monotonic() + timeout
        with self.cond:
            while busy() and not self.error:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.cond.wait(min(left, 1.0))

    def stop(self) -> None:
        self.stop_event.set()


def phase_of(pod: dict[str, Any] | None) -> str:
    status = (pod or {}).get("status") or {}
    phase = status.get("phase") if isinstance(status, dict) else None
    return phase if isinstance(phase, str) else "Pending"


def container_state(pod: dict[str, Any] | None) -> dict[str, Any]:
    """The container's ``state`` (waiting / running / terminated), {} before there is one."""
    status = (pod or {}).get("status") or {}
    for c in (status.get("containerStatuses") or []) if isinstance(status, dict) else []:
        if isinstance(c, dict) and isinstance(c.get("state"), dict):
            return c["state"]
    return {}


def exit_code(pod: dict[str, Any] | None) -> int | None:
    term = container_state(pod).get("terminated")
    if isinstance(term, dict) and isinstance(term.get("exitCode"), int):
        return term["exitCode"]
    return None if phase_of(pod) not in FINAL else (0 if phase_of(pod) == "Succeeded" else 1)


def describe_pod(pod: dict[str, Any] | None, node: NodeInfo | None = None) -> str:
    """What Kubernetes says of the pod, in one line (every word of it quoted: the API's text is not ours)."""
    if pod is None:
        return "its pod is gone (deleted)"
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    parts = [f"pod {phase_of(pod)}"]
    for key in ("reason", "message"):
        if isinstance(status.get(key), str) and status[key]:
            parts.append(quote(status[key], 160))
    state = container_state(pod)
    for kind in ("waiting", "terminated"):
        s = state.get(kind)
        if isinstance(s, dict):
            what = [quote(s[k], 160) for k in ("reason", "message") if isinstance(s.get(k), str) and s[k]]
            if kind == "terminated" and isinstance(s.get("exitCode"), int):
                what.append(f"exit code {s['exitCode']}")
            if what:
                parts.append(f"container {kind}: " + ", ".join(what))
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("status") == "False" and cond.get("type") == "PodScheduled":
            parts.append("not scheduled: " + quote(cond.get("message") or cond.get("reason") or "", 160))
    if isinstance((pod.get("metadata") or {}).get("deletionTimestamp"), str):
        parts.append("being deleted")
    line = "; ".join(parts)
    if node is not None and not node.ready:
        line += f"; node {node.name} is NotReady"
    return line


class K8sAgent:
    """One pod running a host's agent: its log is the agent's stdout."""

    def __init__(self, launcher: K8sLauncher, host: str, pod: str):
        self.launcher = launcher
        self.host = host
        self.pod = pod
        self.stopped = threading.Event()
        self._stream: Any = None

    def lines(self) -> Iterator[str]:
        watch = self.launcher.watch

        def started(pod: dict[str, Any] | None, gone: bool) -> bool:
            return gone or self.stopped.is_set() or phase_of(pod) in ("Running", *FINAL)

        while not watch.wait(self.pod, started, 1.0):  # Pending: until it runs, ends, or is stopped
            if watch.error:
                raise KubeError(watch.error)
        pod = watch.get(self.pod)
        if self.stopped.is_set() or pod is None:
            return
        if phase_of(pod) in FINAL and not container_state(pod):
            return  # refused before it ran (the kubelet's admission: no room on the node): end_reason says
        try:
            self._stream = self.launcher.kube.pod_log(self.pod, follow=True)
        except KubeError:
            if phase_of(watch.get(self.pod)) in FINAL or self.stopped.is_set():
                return  # it ended (or was stopped) before its log could be read: end_reason says how
            raise
        try:
            for raw in self._stream:
                yield raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        except Exception:
            if self.stopped.is_set():
                return  # terminate() closed the stream under this read (urllib3 raises): our end, no fault
            raise
        finally:
            self._stream.release_conn()  # urllib3's response: its connection back to the pool
        # the log ends with the container; give the watch a moment to say how it ended
        watch.wait(self.pod, lambda p, gone: gone or phase_of(p) in FINAL, 5.0)

    def terminate(self) -> None:
        """Delete the pod (its container is stopped); with --k8s-keep it stays for a look, and its
        agent ends with the run's store."""
        if self.stopped.is_set():
            return
        self.stopped.set()
        if not self.launcher.keep:
            try:
                self.launcher.kube.delete_pod(self.pod, grace_s=5)
            except KubeError:
                pass  # the site's clean-up deletes what is left and says what it could not
        # The log's reader may be blocked in a read: closing the response would wait on that read's
        # lock (until the log ends, or LOG_SILENCE_S), so its socket is shut down for reading instead
        # (urllib3 >= 2.3), which ends the read at once; lines() then returns quietly.
        stream = self._stream
        if stream is not None:
            try:
                stream.shutdown()
            except (ValueError, RuntimeError, OSError):
                pass  # released or closed already: the read has ended

    def returncode(self) -> int | None:
        pod = self.launcher.watch.get(self.pod)
        code = exit_code(pod)
        if code is None and (pod is None or self.stopped.is_set()):
            return -15  # deleted (by us, or by whoever deleted it): ended
        return code

    def end_reason(self) -> str | None:
        """Kubernetes' word on the pod: Pending and why (an image that cannot be pulled, no
        capacity), evicted, OOM-killed, the node NotReady."""
        pod = self.launcher.watch.get(self.pod)
        node = self.launcher.node_state(self.launcher.nodes[self.host].name)
        return f"{self.pod}: {describe_pod(pod, node)}"


class K8sLauncher:
    name = "k8s"

    def __init__(
        self,
        kube: Kube,
        watch: PodWatch,
        template: PodTemplate,
        nodes: dict[str, NodeInfo],
        launch: int,
        owner: dict[str, Any],
        python: str | None = None,
        advertise: str | None = None,
        keep: bool = False,
        node_state: Callable[[str], NodeInfo | None] | None = None,
    ):
        self.kube = kube
        self.watch = watch
        self.template = template
        self.nodes = nodes
        self.launch = launch
        self.owner = owner
        self.python = python or "python3"
        self.advertise = advertise
        self.keep = keep
        self.node_state = node_state or (lambda name: None)
        self._secret: str | None = None
        self._lock = threading.Lock()

    def store_host(self) -> tuple[str, str]:
        """Listen on ``--advertise``, else the address this machine uses towards the first node."""
        if self.advertise:
            return self.advertise, self.advertise
        from netbench.collectives.envinfo import local_address_towards

        first = next((n.address for n in self.nodes.values() if n.address), None)
        if first is None:
            raise KubeError(
                "kubernetes: no node reports an InternalIP: give --advertise (the address the "
                "nodes reach this machine on)"
            )
        addr = local_address_towards(first)
        return addr, addr

    def _launch_secret(self, secret: str) -> str:
        """The launch's Secret holding the store's secret (owned by the run's parent object)."""
        with self._lock:
            if self._secret is None:
                name = f"{self.owner['name']}-l{self.launch}"
                self.kube.create_secret(
                    secret_manifest(
                        self.kube.namespace,
                        name,
                        self.template.run_id,
                        {SECRET_KEY: secret},
                        owner=self.owner,
                    )
                )
                self._secret = name
            return self._secret

    def start(self, slot: HostSlot, store_addr: str, store_port: int, secret: str) -> K8sAgent:
        node = self.nodes.get(slot.host)
        if node is None:
            raise ValueError(f"{slot.host} is not a node of this run")
        from dataclasses import replace

        template = replace(
            self.template,
            secret_name=self._launch_secret(secret),
            env={**self.template.env, **forwarded_env(), "PYTHONUNBUFFERED": "1"},
        )
        argv = agent_argv(self.python, slot, store_addr, store_port)
        manifest = pod_manifest(template, node, "agent", self.launch, argv)
        self.kube.create_pod(manifest)
        return K8sAgent(self, slot.host, manifest["metadata"]["name"])


def owner_of(created: dict[str, Any], kind: str) -> dict[str, Any]:
    meta = created.get("metadata") or {}
    uid, name = meta.get("uid"), meta.get("name")
    if not isinstance(uid, str) or not isinstance(name, str):
        raise KubeError(f"kubernetes: the API server's {kind} has no uid")
    return owner_reference(kind, name, uid)
