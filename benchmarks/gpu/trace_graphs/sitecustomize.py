"""Experiment aid for issue 28 (benchmarks/gpu/run_h200.sh stage ``trace``): with this folder on
PYTHONPATH and GRAPH_TRACE naming a file, every process that imports netbench's harness (the
agent's zygote and the ranks forked from it included) appends one line per CUDA graph it makes: its
pid, the graph's class (RawGraph: CUDA's own API; CUDAGraph: torch's) and, where CUDA's runtime
bindings do not import, why. It answers "which graphs does a real sweep make", which no probe
outside the rank can."""

import importlib.abc
import importlib.util
import os
import sys

TARGET = "netbench.collectives.harness"


def _why_no_cudart() -> str:
    try:
        from cuda.bindings import runtime  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any reason is what this logs
        return f"{type(e).__name__}: {e}"
    return "-"


def _patch(module) -> None:  # noqa: ANN001
    capture = module._capture

    def traced(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        graph, launches, stream = capture(*args, **kwargs)
        with open(os.environ["GRAPH_TRACE"], "a") as f:
            f.write(f"{os.getpid()} {type(graph).__name__} launches={launches} cudart={_why_no_cudart()}\n")
        return graph, launches, stream

    module._capture = traced


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201, ARG002
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module) -> None:  # noqa: ANN001
            run(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("GRAPH_TRACE"):
    sys.meta_path.insert(0, _Hook())
