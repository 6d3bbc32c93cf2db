"""A small Kubernetes API server for tests: the real ``kubernetes`` client talks to it over HTTP.

What it serves (JSON, the API's own paths and shapes): nodes (list with label selectors, get,
replace with resourceVersion conflicts, watch), pods (create, get, list, watch, delete with a grace
period, status, log with ``follow``), secrets (create, get, list, delete), namespaces (get),
``SelfSubjectAccessReview``, ``/version``. Bearer-token authentication (a wrong token: 401), an RBAC
table (``deny``: 403 with the API's Status, and the access reviews answer from the same table),
ownerReferences garbage collection (deleting an owner deletes its dependents), and the pod
life-cycle a kubelet drives: deletion marks a running pod (deletionTimestamp) for its node's kubelet
to stop, which then removes it; on a node whose kubelet is gone the pod stays Terminating until
deleted with grace 0, as on a real cluster.

Not served: anything else (404), patches, admission webhooks, the scheduler (every pod here is
pinned with nodeName), quotas. The kubelet is ``tests/kube_kubelet.py``.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

KUBELET_TOKEN = "kubelet-token"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# -- label selectors ------------------------------------------------------------------------------------
_TERM = re.compile(
    r"^\s*(!?)([A-Za-z0-9_./-]+)\s*(?:(==|=|!=)\s*([A-Za-z0-9_.-]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*$"
)


def _split_selector(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


def selector_matches(selector: str | None, labels: dict[str, str]) -> bool:
    if not selector:
        return True
    for term in _split_selector(selector):
        m = _TERM.match(term)
        if not m:
            raise ValueError(f"unable to parse requirement: {term!r}")
        neg, key, op, value, setop, values = m.groups()
        have = labels.get(key)
        if op in ("=", "=="):
            ok = have == value
        elif op == "!=":
            ok = have != value
        elif setop:
            choices = {v.strip() for v in values.split(",")}
            ok = have in choices if setop == "in" else have not in choices
        else:
            ok = have is not None
        if neg:
            ok = not ok
        if not ok:
            return False
    return True


def field_matches(selector: str | None, obj: dict[str, Any]) -> bool:
    for term in (selector or "").split(","):
        if not term.strip():
            continue
        key, _, value = term.partition("=")
        node = obj
        for part in key.strip().split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node != value:
            return False
    return True


class FakeApiServer:
    """Start with ``FakeApiServer()``; ``url``; ``kubeconfig(path)``; always ``close()``."""

    def __init__(self, token: str = "test-token", namespaces: tuple[str, ...] = ("default",)):
        self.token = token
        self.cond = threading.Condition()
        self.rv = 0
        self.store: dict[str, dict[tuple[str, str], dict[str, Any]]] = {
            "nodes": {},
            "pods": {},
            "secrets": {},
            "configmaps": {},  # --k8s-metrics-configmap
        }
        self.namespaces = set(namespaces)
        self.events: list[tuple[int, str, str, dict[str, Any]]] = []  # rv, resource, type, object
        self.denied: set[tuple[str, str]] = set()  # (verb, resource[/sub]) refused to the user
        self.logs: dict[tuple[str, str], Path] = {}  # pod -> its log file (the kubelet's)
        self.managed_nodes: set[str] = set()  # nodes a kubelet serves (or served, before it died)
        self.kubelet_nodes: set[str] = set()  # nodes whose kubelet is alive
        self.requests: list[tuple[str, str]] = []
        self.created: list[dict[str, Any]] = []  # every object the user's client created, as sent
        self.conflict_once: set[str] = set()  # nodes whose next replace meets a concurrent write
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def kubeconfig(self, path: Path, token: str | None = None, context: str = "fake") -> Path:
        """A kubeconfig for this server (YAML is a superset of JSON)."""
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": context,
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": token or self.token}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "tester"}}],
        }
        path.write_text(json.dumps(doc))
        return path

    # -- the store ----------------------------------------------------------------------------------------
    def _bump(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
        """Under ``cond``: a new resourceVersion for ``obj`` and an event for the watchers."""
        self.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        self.events.append((self.rv, resource, kind, copy.deepcopy(obj)))
        self.cond.notify_all()

    def add_node(
        self,
        name: str,
        labels: dict[str, str] | None = None,
        address: str | None = None,
        allocatable: dict[str, str] | None = None,
        ready: bool = True,
    ) -> None:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "uid": str(uuid.uuid4()),
                "labels": {"kubernetes.io/hostname": name, **(labels or {})},
            },
            "spec": {},
            "status": {
                "addresses": [{"type": "InternalIP", "address": address}] if address else [],
                "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110", **(allocatable or {})},
                "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110", **(allocatable or {})},
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True" if ready else "False",
                        "reason": "KubeletReady" if ready else "KubeletNotReady",
                    }
                ],
            },
        }
        with self.cond:
            self.store["nodes"][("", name)] = node
            self._bump("nodes", "ADDED", node)

    def set_node_ready(self, name: str, ready: bool, reason: str = "NodeStatusUnknown") -> None:
        with self.cond:
            node = self.store["nodes"][("", name)]
            node["status"]["conditions"] = [
                {
                    "type": "Ready",
                    "status": "True" if ready else "Unknown",
                    "reason": "KubeletReady" if ready else reason,
                    "message": "kubelet is posting ready status"
                    if ready
                    else "Kubelet stopped posting node status.",
                }
            ]
            self._bump("nodes", "MODIFIED", node)

    def node(self, name: str) -> dict[str, Any]:
        with self.cond:
            return copy.deepcopy(self.store["nodes"][("", name)])

    def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        with self.cond:
            return [copy.deepcopy(p) for (ns, _), p in self.store["pods"].items() if namespace in (None, ns)]

    def secrets(self) -> list[dict[str, Any]]:
        with self.cond:
            return [copy.deepcopy(s) for s in self.store["secrets"].values()]

    def configmap(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self.cond:
            return copy.deepcopy(self.store["configmaps"].get((namespace, name)))

    def add_pod(
        self,
        namespace: str,
        name: str,
        node: str | None,
        requests: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        phase: str = "Running",
    ) -> None:
        """Someone else's pod, as the API has it (no kubelet runs it): bound to ``node`` (None:
        not scheduled), asking for ``requests`` (= limits)."""
        container: dict[str, Any] = {"name": "c", "image": "other:1"}
        if requests:
            container["resources"] = {"requests": dict(requests), "limits": dict(requests)}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4()),
                         "labels": dict(labels or {})},
            "spec": {"containers": [container], **({"nodeName": node} if node else {})},
            "status": {"phase": phase},
        }
        with self.cond:
            self.namespaces.add(namespace)
            self.store["pods"][(namespace, name)] = pod
            self._bump("pods", "ADDED", pod)

    def wait_for(self, check, timeout: float = 30.0) -> bool:  # noqa: ANN001 - a predicate of the server
        """Wait (on the server's own changes, no polling) until ``check(self)`` is true."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not check(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
            return True

    def set_pod_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any] | None:
        with self.cond:
            pod = self.store["pods"].get((namespace, name))
            if pod is None:
                return None
            pod["status"] = status
            self._bump("pods", "MODIFIED", pod)
            return copy.deepcopy(pod)

    def delete(self, resource: str, namespace: str, name: str, grace: int | None) -> dict[str, Any] | None:
        """The API's deletion: a pod its live kubelet runs is marked (the kubelet stops it and removes
        it); everything else goes at once, its dependents after it (ownerReferences)."""
        with self.cond:
            obj = self.store[resource].get((namespace, name))
            if obj is None:
                return None
            if resource == "pods" and grace != 0:
                node = obj["spec"].get("nodeName")
                terminal = obj.get("status", {}).get("phase") in ("Succeeded", "Failed")
                if node in self.managed_nodes and not terminal:
                    meta = obj["metadata"]
                    if "deletionTimestamp" not in meta:
                        meta["deletionTimestamp"] = _now()
                        meta["deletionGracePeriodSeconds"] = (
                            grace
                            if grace is not None
                            else obj["spec"].get("terminationGracePeriodSeconds", 30)
                        )
                        self._bump("pods", "MODIFIED", obj)
                    return copy.deepcopy(obj)
            del self.store[resource][(namespace, name)]
            self._bump(resource, "DELETED", obj)
            uid = obj["metadata"].get("uid")
            dependents = [
                (res, key)
                for res, objs in self.store.items()
                for key, o in objs.items()
                if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])
            ]
        for res, (ns, nm) in dependents:  # the garbage collector, background propagation
            self.delete(res, ns, nm, None)
        return copy.deepcopy(obj)

    # -- requests ----------------------------------------------------------------------------------------
    def allowed(self, verb: str, resource: str) -> bool:
        return (verb, resource) not in self.denied

    def watch(
        self, resource: str, namespace: str | None, query: dict[str, str], alive: threading.Event
    ) -> Iterator[dict[str, Any]]:
        timeout = float(query.get("timeoutSeconds") or 30)
        deadline = time.monotonic() + timeout
        labels, fields = query.get("labelSelector"), query.get("fieldSelector")

        def wanted(obj: dict[str, Any]) -> bool:
            meta = obj.get("metadata", {})
            return (
                (namespace is None or meta.get("namespace", "") == namespace)
                and selector_matches(labels, meta.get("labels") or {})
                and field_matches(fields, obj)
            )

        with self.cond:
            since = query.get("resourceVersion")
            if since in (None, "", "0"):
                start = [copy.deepcopy(o) for o in self.store[resource].values() if wanted(o)]
                pos = self.rv
            else:
                start, pos = [], int(since)
        for obj in start:
            yield {"type": "ADDED", "object": obj}
        while alive.is_set():
            with self.cond:
                while self.rv <= pos and time.monotonic() < deadline:
                    self.cond.wait(min(1.0, max(0.01, deadline - time.monotonic())))
                new = [e for e in self.events if e[0] > pos]
                pos = self.rv
            for _, res, kind, obj in new:
                if res == resource and wanted(obj):
                    yield {"type": kind, "object": obj}
            if time.monotonic() >= deadline:
                return


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


_PATH = re.compile(
    r"^/api/v1(?:/namespaces/(?P<ns>[^/]+))?/(?P<res>nodes|pods|secrets|namespaces|configmaps)(?:/(?P<name>[^/]+))?"
    r"(?:/(?P<sub>status|log|eviction))?$"
)


def _handler(api: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        # -- plumbing ----------------------------------------------------------------------------------
        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _body(self) -> dict[str, Any]:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            return json.loads(raw) if raw else {}

        def _who(self) -> str | None:
            auth = self.headers.get("Authorization", "")
            token = auth[7:] if auth.startswith("Bearer ") else None
            return {api.token: "user", KUBELET_TOKEN: "kubelet"}.get(token or "")

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        # -- routes -------------------------------------------------------------------------------------
        def _serve(self, method: str) -> None:
            url = urlparse(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            api.requests.append((method, url.path))
            who = self._who()
            if who is None:
                self._body()
                return self._send(401, _status(401, "Unauthorized", "Unauthorized"))
            if url.path.rstrip("/") == "/version":
                return self._send(200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0-fake"})
            if url.path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" and method == "POST":
                review = self._body()
                attrs = review.get("spec", {}).get("resourceAttributes", {})
                res = attrs.get("resource", "") + (
                    "/" + attrs["subresource"] if attrs.get("subresource") else ""
                )
                review["status"] = {"allowed": who == "kubelet" or api.allowed(attrs.get("verb", ""), res)}
                return self._send(201, review)
            m = _PATH.match(url.path)
            if not m:
                return self._send(404, _status(404, "NotFound", f"the server could not find {url.path}"))
            ns, res, name, sub = m.group("ns"), m.group("res"), m.group("name"), m.group("sub")
            verb = {
                "GET": "get" if name else ("watch" if query.get("watch") in ("true", "1") else "list"),
                "POST": "create",
                "PUT": "update",
                "DELETE": "delete",
                "PATCH": "patch",
            }[method]
            if sub == "log":
                verb = "get"
            rbac = res + (f"/{sub}" if sub else "")
            if who == "user" and not api.allowed(verb, rbac):
                self._body()
                where = f' in the namespace "{ns}"' if ns else " at the cluster scope"
                return self._send(
                    403,
                    _status(
                        403,
                        "Forbidden",
                        f'{res} is forbidden: User "tester" cannot '
                        f'{verb} resource "{rbac}" in API group ""{where}',
                    ),
                )
            if ns is not None and ns not in api.namespaces and res != "namespaces":
                self._body()
                return self._send(404, _status(404, "NotFound", f'namespaces "{ns}" not found'))
            if res == "namespaces":
                if name in api.namespaces:
                    return self._send(
                        200, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                    )
                return self._send(404, _status(404, "NotFound", f'namespaces "{name}" not found'))
            if sub == "log":
                return self._log(ns or "", name or "", query)
            if verb == "watch":
                return self._watch(res, ns, query)
            if verb == "list":
                return self._list(res, ns, query)
            key = (ns or "", name or "")
            if method == "GET":
                with api.cond:
                    obj = copy.deepcopy(api.store[res].get(key))
                return self._send(200, obj) if obj else self._missing(res, name)
            if method == "POST":
                return self._create(res, ns or "", self._body())
            if method == "PUT":
                return self._replace(res, key, sub, self._body())
            if method == "DELETE":
                body = self._body()
                grace = body.get("gracePeriodSeconds") if isinstance(body, dict) else None
                if grace is None and query.get("gracePeriodSeconds"):
                    grace = int(query["gracePeriodSeconds"])
                gone = api.delete(res, *key, grace)
                return self._send(200, gone) if gone else self._missing(res, name)
            self._body()
            return self._send(405, _status(405, "MethodNotAllowed", f"{method} is not supported here"))

        def _missing(self, res: str, name: str | None) -> None:
            self._send(404, _status(404, "NotFound", f'{res} "{name}" not found'))

        def _list(self, res: str, ns: str | None, query: dict[str, str]) -> None:
            try:
                with api.cond:
                    items = [
                        copy.deepcopy(o)
                        for (ons, _), o in api.store[res].items()
                        if (ns is None or ons == ns)
                        and selector_matches(query.get("labelSelector"), o["metadata"].get("labels") or {})
                        and field_matches(query.get("fieldSelector"), o)
                    ]
                    rv = str(api.rv)
            except ValueError as exc:
                return self._send(400, _status(400, "BadRequest", str(exc)))
            kind = {"nodes": "NodeList", "pods": "PodList", "secrets": "SecretList",
                    "configmaps": "ConfigMapList"}[res]
            self._send(
                200, {"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": rv}, "items": items}
            )

        def _create(self, res: str, ns: str, obj: dict[str, Any]) -> None:
            if self._who() == "user":
                api.created.append(copy.deepcopy(obj))  # as the client sent it (the tests validate it)
            meta = obj.setdefault("metadata", {})
            name = meta.get("name")
            if not isinstance(name, str) or not re.match(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$", name):
                return self._send(422, _status(422, "Invalid", f"metadata.name: Invalid value: {name!r}"))
            with api.cond:
                if (ns, name) in api.store[res]:
                    return self._send(409, _status(409, "AlreadyExists", f'{res} "{name}" already exists'))
                meta.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=_now())
                if res == "pods":
                    obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
                api.store[res][(ns, name)] = obj
                api._bump(res, "ADDED", obj)
                out = copy.deepcopy(obj)
            self._send(201, out)

        def _replace(self, res: str, key: tuple[str, str], sub: str | None, obj: dict[str, Any]) -> None:
            with api.cond:
                have = api.store[res].get(key)
                if have is None:
                    return self._missing(res, key[1])
                sent = (obj.get("metadata") or {}).get("resourceVersion")
                if res == "nodes" and key[1] in api.conflict_once:  # another writer got there first
                    api.conflict_once.discard(key[1])
                    have["metadata"].setdefault("labels", {})["other.example/touched"] = "yes"
                    api._bump(res, "MODIFIED", have)
                if sent and sent != have["metadata"]["resourceVersion"]:
                    return self._send(
                        409,
                        _status(
                            409,
                            "Conflict",
                            f"Operation cannot be fulfilled on {res} "
                            f'"{key[1]}": the object has been modified; please apply '
                            "your changes to the latest version and try again",
                        ),
                    )
                if sub == "status":
                    have["status"] = obj.get("status", {})
                else:
                    keep = {
                        k: have["metadata"][k]
                        for k in ("uid", "creationTimestamp", "namespace")
                        if k in have["metadata"]
                    }
                    have.update({k: v for k, v in obj.items() if k != "status"})
                    have["metadata"].update(keep)
                api._bump(res, "MODIFIED", have)
                out = copy.deepcopy(have)
            self._send(200, out)

        def _stream_start(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")  # a stream ends its connection: never reused
            self.end_headers()

        def _watch(self, res: str, ns: str | None, query: dict[str, str]) -> None:
            alive = threading.Event()
            alive.set()
            self._stream_start()
            try:
                for event in api.watch(res, ns, query, alive):
                    self._chunk((json.dumps(event) + "\n").encode())
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                alive.clear()
            self.close_connection = True

        def _log(self, ns: str, name: str, query: dict[str, str]) -> None:
            with api.cond:
                pod = copy.deepcopy(api.store["pods"].get((ns, name)))
                path = api.logs.get((ns, name))
            if pod is None:
                return self._missing("pods", name)
            if path is None:
                return self._send(
                    400,
                    _status(
                        400,
                        "BadRequest",
                        f'container "netbench" in pod "{name}" is waiting to start: ContainerCreating',
                    ),
                )
            follow = query.get("follow") in ("true", "1")
            if not follow:
                data = path.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")  # a stream ends its connection: never reused
            self.end_headers()
            node = pod["spec"].get("nodeName")
            try:
                with open(path, "rb") as fh:
                    while True:
                        data = fh.read(65536)
                        if data:
                            self._chunk(data)
                            continue
                        with api.cond:
                            now = api.store["pods"].get((ns, name))
                            ended = now is None or now.get("status", {}).get("phase") in (
                                "Succeeded",
                                "Failed",
                            )
                            lost = node not in api.kubelet_nodes
                            if not ended and not lost:
                                api.cond.wait(0.2)
                        if lost:  # the API server lost its kubelet: the stream breaks off
                            self.close_connection = True
                            return
                        if ended:
                            rest = fh.read()
                            if rest:
                                self._chunk(rest)
                            break
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

    return Handler
