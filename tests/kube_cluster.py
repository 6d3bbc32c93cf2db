"""A fake Kubernetes cluster over real test hosts: ``tests/kube_fake.py``'s API server, a node for
every host of a ``tests/netns.py`` network (or of ``ThisMachine``), and ``tests/kube_kubelet.py``
running their pods there."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

from kube_fake import FakeApiServer
from kube_kubelet import FakeKubelet

IMAGE = "registry.test/netbench:0.1"
"""The pods' image: any reference does, the fake kubelet runs this machine's python (the "image" is
this machine's filesystem)."""


def netbench_argv(
    kubeconfig: Path | str, command: str = "sweep", *extra: str, image: str | None = IMAGE
) -> list[str]:
    """``python -m netbench <command> --launcher k8s`` against the cluster of ``kubeconfig``, the
    pods' python this one (the test hosts share this machine's filesystem); ``image`` None: no
    ``--k8s-image``."""
    return [
        sys.executable,
        "-m",
        "netbench",
        command,
        "--launcher",
        "k8s",
        "--kubeconfig",
        str(kubeconfig),
        *(["--k8s-image", image] if image else []),
        "--python",
        sys.executable,
        *extra,
    ]


class ThisMachine:
    """Nodes that are all this machine (no network namespaces, no root): for what needs the pods'
    processes but no network between the nodes (the probe, the clean-up), in place of a
    ``tests/netns.py`` network."""

    __test__ = False

    def __init__(self, names: list[str]):
        self.names = list(names)

    def host(self, name: str) -> SimpleNamespace:
        return SimpleNamespace(name=name, addr="127.0.0.1")

    def popen(self, name: str, argv: list[str], **kwargs) -> subprocess.Popen:
        return subprocess.Popen(argv, **kwargs)


class FakeCluster:
    __test__ = False

    def __init__(self, net, labels: Mapping[str, Mapping[str, str]] | None = None, gpus: int = 1):
        self.net = net
        self.dir = Path(tempfile.mkdtemp(prefix="nbt-kube-"))
        self.api = FakeApiServer(namespaces=("default", "nb"))
        for name in net.names:
            self.api.add_node(
                name,
                labels=dict((labels or {}).get(name, {})),
                address=net.host(name).addr,
                allocatable={"nvidia.com/gpu": str(gpus)} if gpus else {},
            )
        self.kubelet = FakeKubelet(self.api, net, net.names, self.dir)
        self.kubeconfig = self.api.kubeconfig(self.dir / "kubeconfig")

    def argv(self, command: str = "sweep", *extra: str) -> list[str]:
        return netbench_argv(self.kubeconfig, command, *extra)

    def run_pods(self, selector_value: str | None = None) -> list[dict]:
        pods = self.api.pods()
        if selector_value is None:
            return pods
        return [
            p for p in pods if p["metadata"].get("labels", {}).get("netbench.io/run-id") == selector_value
        ]

    def close(self) -> None:
        self.kubelet.close()
        self.api.close()


@contextmanager
def fake_cluster(net, **kwargs) -> Iterator[FakeCluster]:
    cluster = FakeCluster(net, **kwargs)
    try:
        yield cluster
    finally:
        cluster.close()
