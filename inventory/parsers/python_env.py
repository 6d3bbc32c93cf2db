"""The probe's python section: ``key=value`` lines printed by a fixed snippet in probe.sh
(``python=3.11.7``, ``torch=2.13.0+cpu``, ``torch_cuda=13.0``, ``torch_nccl=2.28.9``,
``torch_cuda_available=False``, ``torch_gpus=0`` (what that torch can use), or
``torch_error=...`` / ``torch_nccl_error=...`` saying why a value is missing), and nccl4py, the
NCCL engine's bindings: ``nccl4py=0.6.0`` (the installed distribution, importable or not) and
``nccl4py_import=ok`` or ``nccl4py_error=ModuleNotFoundError: No module named 'cuda'``."""

from __future__ import annotations

from dataclasses import dataclass

from netbench.inventory.parsers._common import clean


@dataclass
class PythonEnv:
    python: str | None = None
    executable: str | None = None
    torch: str | None = None
    torch_cuda: str | None = None
    torch_nccl: str | None = None
    torch_error: str | None = None
    torch_nccl_error: str | None = None
    torch_cuda_available: str | None = None
    torch_gpus: str | None = None
    nccl4py: str | None = None
    nccl4py_import: str | None = None
    nccl4py_error: str | None = None


def parse_python_env(text: str) -> PythonEnv:
    env = PythonEnv()
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key in PythonEnv.__dataclass_fields__:
            setattr(env, key, clean(value))
    if env.python is None:
        raise ValueError("no python= line")
    return env
