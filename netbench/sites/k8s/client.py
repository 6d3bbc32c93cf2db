"""The Kubernetes API through the official ``kubernetes`` client (``pip install 'netbench[k8s]'``),
imported here and only when ``--launcher k8s`` asks for it.

Credentials: a kubeconfig (``--kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``, with
``--k8s-context``) or, inside a pod with none of those, the pod's service account. What the API
server sends back is handled as plain JSON and treated as untrusted (``netbench.sites.k8s.pods``
validates what becomes a name; messages are quoted). Every failure of the API becomes a ``KubeError``
with one line; before anything runs the site asks the server whether each verb it needs is allowed
(``SelfSubjectAccessReview``), so a missing RBAC rule is exit 2 with the rule named, not a half-made run.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netbench.common.errors import UsageError
from netbench.sites.k8s.pods import quote

API_TIMEOUT_S = 30.0
LOG_SILENCE_S = 300.0
"""A followed log silent this long is a lost stream (an agent says it is alive every 2 s)."""


class KubeError(UsageError):
    """The API server refused or could not be reached, the credentials or the RBAC rules do not do:
    one line, exit 2 (preflight: 3, could not run), before anything runs when found by the site."""


class Conflict(KubeError):
    """409: the object changed since it was read (resourceVersion), or already exists."""


class NotFound(KubeError):
    """404."""


@dataclass(frozen=True)
class KubeTarget:
    """Which cluster and how: ``--kubeconfig``, ``--k8s-context``, ``--k8s-namespace``."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    """None: the kubeconfig context's namespace (as kubectl), in a pod its own, else ``default``."""


SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
"""Inside a pod: the namespace of its service account (a Job's pods go where the Job is)."""


def _client():  # noqa: ANN202 - the kubernetes package, imported on demand
    try:
        import kubernetes
    except ImportError:
        raise UsageError("--launcher k8s needs the kubernetes client: pip install 'netbench[k8s]'") from None
    return kubernetes


def describe_api_error(exc: BaseException, what: str) -> KubeError:
    """One line for a failed call (``what``: the call, in words)."""
    code = getattr(exc, "status", None)
    if isinstance(code, int) and code:
        said = ""
        body = getattr(exc, "body", None)
        try:
            said = json.loads(body).get("message", "") if body else ""
        except (ValueError, AttributeError, TypeError):
            said = ""
        said = f": {quote(said, 300)}" if said else ""
        kind = {409: Conflict, 404: NotFound}.get(code, KubeError)
        hint = {
            401: " (the kubeconfig's credentials were refused)",
            403: " (RBAC: docs/recipes.md lists the Role netbench needs)",
        }.get(code, "")
        return kind(f"kubernetes: {what}: HTTP {code}{said}{hint}")
    reason = getattr(exc, "reason", None) or exc
    return KubeError(f"kubernetes: {what}: cannot reach the API server: {quote(str(reason), 200)}")


#: the largest kubeconfig read (certificates embedded for a few dozen clusters stay far below it)
MAX_KUBECONFIG_BYTES = 4 << 20


def check_kubeconfig(path: str) -> None:
    """UsageError saying what is wrong with the kubeconfig at ``path`` before the client reads it:
    missing, not a regular file (``/dev/zero``, a FIFO: refused without reading or waiting), too
    large, empty, not YAML, or YAML that is not a kubeconfig (a table with its clusters)."""
    import yaml

    from netbench.common.files import open_regular

    where = f"kubeconfig {path}"
    if not Path(path).exists():
        raise UsageError(f"{where}: no such file (give --kubeconfig, or run inside a pod)")
    try:
        fh = open_regular(path, "kubeconfig")
    except UsageError as exc:
        raise UsageError(f"kubeconfig {exc}") from None
    with fh:
        try:
            raw = fh.read(MAX_KUBECONFIG_BYTES + 1)
        except OSError as exc:
            raise UsageError(f"{where}: cannot read it: {exc.strerror}") from None
    if len(raw) > MAX_KUBECONFIG_BYTES:
        raise UsageError(f"{where}: larger than {MAX_KUBECONFIG_BYTES >> 20} MiB; not a kubeconfig")
    if not raw.strip():
        raise UsageError(f"{where}: the file is empty (a kubeconfig lists clusters, users and contexts)")
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        said = getattr(exc, "problem", None) or type(exc).__name__
        raise UsageError(f"{where}: not YAML: {quote(str(said), 120)}{at}") from None
    except RecursionError:
        raise UsageError(f"{where}: not YAML: nested too deeply") from None
    if not isinstance(data, dict) or not isinstance(data.get("clusters"), list) or not data["clusters"]:
        raise UsageError(f"{where}: YAML, but not a kubeconfig (no list of clusters)")


def _read_small(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(256).strip() or None
    except OSError:
        return None


def _context_namespace(k8s: Any, path: str, context: str | None) -> tuple[str | None, str]:
    """The namespace the kubeconfig's context names (``kubectl config set-context --namespace``), as
    kubectl would use it, and where it came from (for a message)."""
    contexts, current = k8s.config.list_kube_config_contexts(config_file=path)
    chosen = next((c for c in contexts or [] if isinstance(c, dict) and c.get("name") == context), None)
    chosen = chosen if context else current
    inner = chosen.get("context") if isinstance(chosen, dict) else None
    ns = inner.get("namespace") if isinstance(inner, dict) else None
    name = chosen.get("name") if isinstance(chosen, dict) else None
    return (ns if isinstance(ns, str) and ns else None), f"kubeconfig {path}, context {quote(name, 60)}"


def _checked_namespace(ns: str | None, where: str) -> str | None:
    """``ns`` read from a file (untrusted): a namespace name, or one line saying where it is wrong."""
    from netbench.sites.k8s.pods import check_namespace

    if ns is None:
        return None
    try:
        return check_namespace(ns)
    except UsageError:
        raise UsageError(
            f"{where}: namespace {quote(ns, 80)} is not a Kubernetes namespace name (give --k8s-namespace)"
        ) from None


class Kube:
    """One cluster: a configured API client and the namespace of the run's objects."""

    def __init__(self, target: KubeTarget):
        k8s = _client()
        self.k8s = k8s
        cfg = k8s.client.Configuration()
        path = target.kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
        in_cluster = (
            not target.kubeconfig
            and not os.environ.get("KUBECONFIG")
            and not Path(path).is_file()
            and os.environ.get("KUBERNETES_SERVICE_HOST")
        )
        try:
            if in_cluster:
                if target.context:
                    raise UsageError(
                        "--k8s-context names a kubeconfig context, and there is no kubeconfig "
                        "(in-cluster credentials)"
                    )
                k8s.config.load_incluster_config(client_configuration=cfg)
                self.where = "in-cluster service account"
                found, said = _read_small(SA_NAMESPACE_FILE), f"the service account's {SA_NAMESPACE_FILE}"
            else:
                check_kubeconfig(path)
                k8s.config.load_kube_config(
                    config_file=path, context=target.context, client_configuration=cfg, persist_config=False
                )
                self.where = f"kubeconfig {path}" + (f", context {target.context}" if target.context else "")
                found, said = _context_namespace(k8s, path, target.context)
        except UsageError:
            raise
        except Exception as exc:  # ConfigException, a YAML error, a missing field: the file is wrong
            raise UsageError(f"kubeconfig {path}: {quote(str(exc), 300)}") from None
        self.namespace = target.namespace or _checked_namespace(found, said) or "default"
        self.api = k8s.client.ApiClient(cfg)
        self.core = k8s.client.CoreV1Api(self.api)
        self.host = cfg.host

    # -- plain JSON calls ------------------------------------------------------------------------------
    def call(self, what: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``method`` (a CoreV1Api call) returning the response's JSON; a KubeError naming ``what``."""
        kwargs.setdefault("_request_timeout", API_TIMEOUT_S)
        try:
            resp = method(*args, _preload_content=False, **kwargs)
            data = resp.data
        except Exception as exc:  # ApiException, urllib3's connection errors
            raise describe_api_error(exc, what) from None
        try:
            return json.loads(data) if data else {}
        except ValueError:
            raise KubeError(f"kubernetes: {what}: the API server sent something that is not JSON") from None

    def version(self) -> str:
        """The server's version, which also proves the credentials work (401 otherwise)."""
        try:
            resp = self.k8s.client.VersionApi(self.api).get_code(
                _preload_content=False, _request_timeout=10.0
            )
            info = json.loads(resp.data)
        except Exception as exc:  # noqa: BLE001
            raise describe_api_error(exc, f"connecting to {self.host} ({self.where})") from None
        return str(info.get("gitVersion", "?"))[:40] if isinstance(info, dict) else "?"

    def check_namespace(self) -> None:
        try:
            self.call(f"reading namespace {self.namespace}", self.core.read_namespace, self.namespace)
        except NotFound:
            raise KubeError(
                f"kubernetes: namespace {self.namespace!r} does not exist (--k8s-namespace, or the "
                "kubeconfig context's namespace)"
            ) from None
        except KubeError as exc:
            if "HTTP 403" not in str(exc):  # reading namespaces is not ours to ask: create pods says
                raise

    def may(self, checks: list[tuple[str, str, str, bool]]) -> list[str]:
        """Each (verb, resource, subresource, namespaced) the credentials may NOT do, in words."""
        k8s = self.k8s
        auth = k8s.client.AuthorizationV1Api(self.api)
        denied = []
        for verb, resource, sub, namespaced in checks:
            attrs = {"verb": verb, "resource": resource}
            if sub:
                attrs["subresource"] = sub
            if namespaced:
                attrs["namespace"] = self.namespace
            body = {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attrs},
            }
            what = f"{verb} {resource}{'/' + sub if sub else ''}"
            review = self.call(f"asking whether it may {what}", auth.create_self_subject_access_review, body)
            if (review.get("status") or {}).get("allowed") is not True:
                where = f" in namespace {self.namespace}" if namespaced else " (cluster-wide)"
                denied.append(what + where)
        return denied

    # -- nodes ----------------------------------------------------------------------------------------
    def list_nodes(self, selector: str | None = None) -> list[dict[str, Any]]:
        kw = {"label_selector": selector} if selector else {}
        doc = self.call("listing nodes", self.core.list_node, **kw)
        items = doc.get("items") if isinstance(doc, dict) else None
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    def read_node(self, name: str) -> dict[str, Any]:
        return self.call(f"reading node {name}", self.core.read_node, name)

    def update_node(self, name: str, change: Callable[[dict[str, Any]], bool], attempts: int = 5) -> bool:
        """Read-modify-write: read the node, apply ``change`` (False: nothing to do), write it back
        with the resourceVersion read (replace), again on a conflict; True when it was written."""
        for _ in range(attempts):
            node = self.read_node(name)
            if not change(node):
                return False
            try:
                self.call(f"updating node {name}", self.core.replace_node, name, node)
                return True
            except Conflict:
                continue  # someone wrote it between our read and write: read it again
        raise KubeError(f"kubernetes: updating node {name}: it kept changing ({attempts} conflicts)")

    # -- the run's objects ----------------------------------------------------------------------------
    def create_secret(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return self.call(
            f"creating secret {manifest['metadata']['name']}",
            self.core.create_namespaced_secret,
            self.namespace,
            manifest,
        )

    def delete_secret(self, name: str, timeout_s: float | None = None) -> None:
        """Delete the secret, its dependents after it (the garbage collector's, in the background)."""
        try:
            self.call(
                f"deleting secret {name}",
                self.core.delete_namespaced_secret,
                name,
                self.namespace,
                body={"propagationPolicy": "Background"},
                _request_timeout=timeout_s or API_TIMEOUT_S,
            )
        except NotFound:
            pass

    def create_pod(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return self.call(
            f"creating pod {manifest['metadata']['name']}",
            self.core.create_namespaced_pod,
            self.namespace,
            manifest,
        )

    def delete_pod(self, name: str, grace_s: int | None = None) -> None:
        body: dict[str, Any] = {"propagationPolicy": "Background"}
        if grace_s is not None:
            body["gracePeriodSeconds"] = grace_s
        try:
            self.call(
                f"deleting pod {name}", self.core.delete_namespaced_pod, name, self.namespace, body=body
            )
        except NotFound:
            pass

    def list_pods(self, selector: str) -> list[dict[str, Any]]:
        doc = self.call(
            "listing pods", self.core.list_namespaced_pod, self.namespace, label_selector=selector
        )
        items = doc.get("items") if isinstance(doc, dict) else None
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    def list_all_pods(self) -> list[dict[str, Any]]:
        """Every pod of the cluster, every namespace (``selection``: whose GPUs are held where)."""
        doc = self.call("listing the cluster's pods", self.core.list_pod_for_all_namespaces)
        items = doc.get("items") if isinstance(doc, dict) else None
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    def put_configmap(self, manifest: dict[str, Any], attempts: int = 5) -> None:
        """Make the ConfigMap or replace the one there whole (its every key: nothing of an older run
        stays), with the resourceVersion read, again on a conflict."""
        name = manifest["metadata"]["name"]
        for _ in range(attempts):
            try:
                have = self.call(f"reading configmap {name}", self.core.read_namespaced_config_map,
                                 name, self.namespace)
            except NotFound:
                try:
                    self.call(f"creating configmap {name}", self.core.create_namespaced_config_map,
                              self.namespace, manifest)
                    return
                except Conflict:
                    continue  # made meanwhile (another run): read it and replace it
            version = (have.get("metadata") or {}).get("resourceVersion") if isinstance(have, dict) else None
            body = {**manifest, "metadata": {**manifest["metadata"], "resourceVersion": version}}
            try:
                self.call(f"replacing configmap {name}", self.core.replace_namespaced_config_map,
                          name, self.namespace, body)
                return
            except Conflict:
                continue
        raise KubeError(f"kubernetes: configmap {name}: it kept changing ({attempts} conflicts)")

    def pod_log(self, name: str, follow: bool) -> Any:
        """The pod's log as a stream (urllib3's response: iterate its lines; ``close()`` it)."""
        try:
            return self.core.read_namespaced_pod_log(
                name,
                self.namespace,
                follow=follow,
                _preload_content=False,
                _request_timeout=(API_TIMEOUT_S, LOG_SILENCE_S) if follow else API_TIMEOUT_S,
            )
        except Exception as exc:  # noqa: BLE001
            raise describe_api_error(exc, f"reading the log of pod {name}") from None

    def watch_pods(self, selector: str, stop: threading.Event) -> Iterator[tuple[str, dict[str, Any]]]:
        """(event type, pod) for every change of the pods matching ``selector``, starting with every
        such pod as it is (ADDED), until ``stop`` is set; a dropped watch is resumed where it was."""
        k8s = self.k8s
        version: str | None = None
        failures = 0
        while not stop.is_set():
            w = k8s.watch.Watch()
            kw: dict[str, Any] = {
                "label_selector": selector,
                "timeout_seconds": 2,
                "deserialize": False,
                "_request_timeout": API_TIMEOUT_S,
            }
            if version:
                kw["resource_version"] = version
            try:
                for event in w.stream(self.core.list_namespaced_pod, self.namespace, **kw):
                    obj = (
                        event.get("object") if isinstance(event, dict) else None
                    )  # deserialize=False: the JSON as sent
                    if not isinstance(obj, dict):
                        continue
                    if event.get("type") == "ERROR":  # 410 Gone: start again from the whole list
                        version = None
                        break
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    failures = 0
                    yield str(event.get("type")), obj
                    if stop.is_set():
                        w.stop()
                        return
            except Exception:  # noqa: BLE001 - a dropped connection: resume, a few times
                failures += 1
                if failures > 5:
                    raise
                version = None
                stop.wait(min(2.0, 0.2 * failures))


def connect(target: KubeTarget) -> Kube:
    """A client whose credentials and server were checked (the version call): UsageError or
    KubeError, one line, exit 2, for a wrong kubeconfig, context or server."""
    kube = Kube(target)
    kube.version()
    return kube
