"""A fake kubelet for ``tests/kube_fake.py``: every pod the API server is given for one of its nodes
runs as a real process inside that node's test host (``tests/netns.py``: its network, hostname and
mounts), and its phases, exit code and log go back through the API, as a kubelet's would.

It talks to the server with the real ``kubernetes`` client (its own token): a watch of every pod,
status written with ``replace_namespaced_pod_status``, deletion finished with grace 0 once the
process is gone. What it does of a pod: the image is not pulled (this machine's filesystem is the
"image"; images in ``bad_images``, or every image on a node given ``pull_fails``, stay Pending with
ErrImagePull/ImagePullBackOff); extended resources (``nvidia.com/gpu``...) are admitted against the
node's allocatable count, minus what running pods hold (a pod that does not fit fails with
``OutOf<resource>``, as a real kubelet rejects a pod pinned with nodeName); ``env`` values,
``secretKeyRef`` (read through the API) and ``fieldRef: spec.nodeName`` are resolved; stdout and stderr
go to one log file that the API server serves (``FakeApiServer.logs``). Not modelled: containers
(no image, cgroups, securityContext, volumes: /dev/shm is the host's), probes, restarts.

``evict`` is the kubelet evicting a pod under node pressure (Failed, reason Evicted); ``stop_node``
is a node dying: its processes killed, its kubelet silent, the node NotReady.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kube_fake import KUBELET_TOKEN, FakeApiServer, _now


class FakeKubelet:
    def __init__(
        self, api: FakeApiServer, net: Any, nodes: list[str], workdir: Path, bad_images: tuple[str, ...] = ()
    ):
        from kubernetes import client

        self.api, self.net, self.nodes, self.workdir = api, net, set(nodes), workdir
        self.bad_images = set(bad_images)
        self.pull_fails: set[str] = set()
        self.dead: set[str] = set()
        cfg = client.Configuration()
        cfg.host = api.url
        cfg.api_key = {"authorization": f"Bearer {KUBELET_TOKEN}"}
        self.core = client.CoreV1Api(client.ApiClient(cfg))
        self.procs: dict[tuple[str, str], subprocess.Popen] = {}
        self.started: set[tuple[str, str]] = set()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        api.managed_nodes |= self.nodes
        api.kubelet_nodes |= self.nodes
        self.thread = threading.Thread(target=self._loop, daemon=True, name="fake-kubelet")
        self.thread.start()

    # -- the watch ----------------------------------------------------------------------------------------
    def _loop(self) -> None:
        from kubernetes import watch

        version = None
        while not self.stopping.is_set():
            kw: dict[str, Any] = {"timeout_seconds": 2, "deserialize": False}
            if version:
                kw["resource_version"] = version
            try:
                for event in watch.Watch().stream(self.core.list_pod_for_all_namespaces, **kw):
                    pod = event["object"]
                    version = pod["metadata"].get("resourceVersion") or version
                    if event["type"] != "DELETED":
                        self._handle(pod)
                    if self.stopping.is_set():
                        return
            except Exception:  # noqa: BLE001 - the server closing under us: start the watch again
                version = None
                time.sleep(0.1)

    def _handle(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod.get("spec", {})
        key = (meta["namespace"], meta["name"])
        node = spec.get("nodeName")
        if node not in self.nodes or node in self.dead:
            return
        if meta.get("deletionTimestamp"):
            threading.Thread(
                target=self._delete, args=(key, int(meta.get("deletionGracePeriodSeconds") or 0)), daemon=True
            ).start()
            return
        with self.lock:
            if key in self.started or pod.get("status", {}).get("phase") != "Pending":
                return
            self.started.add(key)
        threading.Thread(target=self._start, args=(pod,), daemon=True).start()

    # -- a pod's life ---------------------------------------------------------------------------------------
    def _status(self, key: tuple[str, str], status: dict[str, Any]) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": key[1], "namespace": key[0]},
            "status": status,
        }
        try:
            self.core.replace_namespaced_pod_status(key[1], key[0], body)
        except Exception as exc:  # noqa: BLE001 - deleted meanwhile
            if getattr(exc, "status", None) != 404:
                print(f"fake kubelet: status of {key}: {exc}", file=sys.stderr)

    def _container(self, state: dict[str, Any], image: str, ready: bool = False) -> list[dict[str, Any]]:
        return [
            {
                "name": "netbench",
                "image": image,
                "imageID": "",
                "ready": ready,
                "restartCount": 0,
                "state": state,
            }
        ]

    def _start(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        key = (meta["namespace"], meta["name"])
        node = spec["nodeName"]
        c = spec["containers"][0]
        image = c.get("image", "")
        if image in self.bad_images or node in self.pull_fails:
            self._status(
                key,
                {
                    "phase": "Pending",
                    "containerStatuses": self._container(
                        {
                            "waiting": {
                                "reason": "ErrImagePull",
                                "message": f'failed to pull image "{image}": not found',
                            }
                        },
                        image,
                    ),
                },
            )
            time.sleep(0.5)
            self._status(
                key,
                {
                    "phase": "Pending",
                    "containerStatuses": self._container(
                        {
                            "waiting": {
                                "reason": "ImagePullBackOff",
                                "message": f'Back-off pulling image "{image}"',
                            }
                        },
                        image,
                    ),
                },
            )
            return
        short = self._admit(node, key, c.get("resources", {}).get("requests") or {})
        if short:
            self._status(key, {"phase": "Failed", "reason": f"OutOf{short[0]}", "message": short[1]})
            return
        try:
            env = self._env(key[0], node, c.get("env") or [])
        except Exception as exc:  # noqa: BLE001 - a missing secret: CreateContainerConfigError
            self._status(
                key,
                {
                    "phase": "Pending",
                    "containerStatuses": self._container(
                        {"waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}}, image
                    ),
                },
            )
            return
        log = self.workdir / f"{key[0]}_{key[1]}.log"
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        argv = list(c.get("command") or []) + list(c.get("args") or [])
        with self.lock:
            if meta["name"] not in {k[1] for k in self.started}:
                os.close(fd)
                return
            proc = self.net.popen(
                node,
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=fd,
                start_new_session=True,
                cwd="/",
            )
            self.procs[key] = proc
        os.close(fd)
        with self.api.cond:
            self.api.logs[key] = log
        addr = self.net.host(node).addr
        self._status(
            key,
            {
                "phase": "Running",
                "hostIP": addr,
                "podIP": addr,
                "startTime": _now(),
                "containerStatuses": self._container({"running": {"startedAt": _now()}}, image, True),
            },
        )
        rc = proc.wait()
        with self.lock:
            if self.procs.get(key) is not proc or node in self.dead:
                return  # deleted, evicted or its node died: whoever did that says how it ended
            del self.procs[key]
        code = rc if rc >= 0 else 128 - rc
        self._status(
            key,
            {
                "phase": "Succeeded" if code == 0 else "Failed",
                "hostIP": addr,
                "podIP": addr,
                "containerStatuses": self._container(
                    {
                        "terminated": {
                            "exitCode": code,
                            "reason": "Completed" if code == 0 else "Error",
                            "finishedAt": _now(),
                        }
                    },
                    image,
                ),
            },
        )

    def _admit(self, node: str, key: tuple[str, str], requests: dict[str, str]) -> tuple[str, str] | None:
        alloc = self.api.node(node)["status"]["allocatable"]
        for res, want in requests.items():
            if "/" not in res:
                continue
            used = 0
            for other in self.api.pods():
                o = (other["metadata"]["namespace"], other["metadata"]["name"])
                if (
                    o != key
                    and other["spec"].get("nodeName") == node
                    and other.get("status", {}).get("phase") in ("Running",)
                ):
                    used += int(
                        other["spec"]["containers"][0].get("resources", {}).get("requests", {}).get(res, 0)
                    )
            cap = int(alloc.get(res, 0))
            if used + int(want) > cap:
                return res, (
                    f"Pod was rejected: Node didn't have enough resource: {res}, requested: {want}, "
                    f"used: {used}, capacity: {cap}"
                )
        return None

    def _env(self, ns: str, node: str, items: list[dict[str, Any]]) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/root", "HOSTNAME": node}
        if os.environ.get("PYTHONPATH"):  # the "image" is this machine's python, with the tests' import path
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        for item in items:
            if "value" in item:
                env[item["name"]] = item["value"]
                continue
            source = item.get("valueFrom", {})
            if "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                secret = self.core.read_namespaced_secret(ref["name"], ns, _preload_content=False)
                import json

                data = json.loads(secret.data)["data"]
                env[item["name"]] = base64.b64decode(data[ref["key"]]).decode()
            elif source.get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
                env[item["name"]] = node
        return env

    def _kill(self, key: tuple[str, str], grace: float) -> int | None:
        with self.lock:
            proc = self.procs.pop(key, None)
        if proc is None:
            return None
        # grace 0 (a hard eviction, a node dying, a forced deletion): SIGKILL at once, as a kubelet does
        steps = ((signal.SIGTERM, grace), (signal.SIGKILL, 5)) if grace > 0 else ((signal.SIGKILL, 5),)
        for sig, wait in steps:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(max(wait, 0.1))
                break
            except subprocess.TimeoutExpired:
                continue
        rc = proc.poll()
        return None if rc is None else (rc if rc >= 0 else 128 - rc)

    def _delete(self, key: tuple[str, str], grace: int) -> None:
        self._kill(key, grace)
        with self.lock:
            self.started.discard(key)
        try:
            self.core.delete_namespaced_pod(key[1], key[0], body={"gracePeriodSeconds": 0})
        except Exception:  # noqa: BLE001 - gone already
            pass

    # -- faults the tests plant --------------------------------------------------------------------------
    def evict(
        self, namespace: str, name: str, message: str = "The node was low on resource: memory."
    ) -> None:
        """The kubelet evicts the pod (a hard eviction threshold, node pressure): its processes killed at
        once, the pod Failed/Evicted."""
        code = self._kill((namespace, name), 0)
        self._status(
            (namespace, name),
            {
                "phase": "Failed",
                "reason": "Evicted",
                "message": message,
                "containerStatuses": self._container(
                    {
                        "terminated": {
                            "exitCode": code if code is not None else 137,
                            "reason": "Error",
                            "finishedAt": _now(),
                        }
                    },
                    "",
                ),
            },
        )

    def stop_node(self, node: str) -> None:
        """The node dies: its pods' processes killed, its kubelet silent (their log streams break off,
        their status stays as last reported), the node NotReady."""
        self.dead.add(node)
        self.api.kubelet_nodes.discard(node)
        for key in [
            k
            for k, p in list(self.procs.items())
            if any(
                q["metadata"]["name"] == k[1] and q["spec"].get("nodeName") == node for q in self.api.pods()
            )
        ]:
            self._kill(key, 0)
        self.api.set_node_ready(node, False)
        with self.api.cond:
            self.api.cond.notify_all()

    def running(self) -> list[tuple[str, str]]:
        with self.lock:
            return [k for k, p in self.procs.items() if p.poll() is None]

    def close(self) -> None:
        self.stopping.set()
        for key in list(self.procs):
            self._kill(key, 0)
