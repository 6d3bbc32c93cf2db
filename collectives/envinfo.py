"""The software environment of a rank's host: recorded with every run so numbers can be compared.

NCCL's version is read from the library torch actually loaded (``torch.cuda.nccl.version()``), not
from a header or a package name, because that is the one that ran.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from typing import Any

ENV_PREFIXES = (
    "NCCL_",
    "GLOO_",
    "TORCH_NCCL",
    "TORCH_DISTRIBUTED",
    "CUDA_VISIBLE_DEVICES",
    "UCX_",
    "OMPI_MCA_",
    "NETBENCH_",
)
#: a variable whose name contains one of these (in any case) is never recorded: env.json is attached
#: to tickets and shown in the HTML report. Open MPI's own names are lower case after the prefix
#: (OMPI_MCA_pmix_password), users' names are whatever they typed (NETBENCH_api_token).
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "KEY", "AUTH", "COOKIE")


def is_secret(name: str) -> bool:
    upper = name.upper()
    return any(w in upper for w in SECRET_WORDS)


def relevant_env() -> dict[str, str]:
    """NCCL_*/GLOO_*/... variables (algorithm, protocol, interfaces) — never anything secret-looking."""
    out = {}
    for k, v in os.environ.items():
        if k.startswith(ENV_PREFIXES) and not is_secret(k):
            out[k] = v
    return dict(sorted(out.items()))


def collect_env(device: str) -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": device,
        "env": relevant_env(),
    }
    try:
        import torch.distributed as dist

        info["gloo"] = dist.is_gloo_available()
        info["nccl_available"] = dist.is_nccl_available()
    except Exception:  # noqa: BLE001 - diagnostics only
        pass
    if device == "cuda" and torch.cuda.is_available():
        try:
            v = torch.cuda.nccl.version()
            info["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
        except Exception as exc:  # noqa: BLE001
            info["nccl"] = f"unknown ({exc})"
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        try:
            info["driver"] = _driver_version()
        except Exception:  # noqa: BLE001
            pass
    try:
        import mpi4py

        # only the library's name: no MPI_Init (under mpirun a rank that initialises MPI and exits
        # without finalising is reported by mpirun as a crashed job)
        mpi4py.rc.initialize = mpi4py.rc.finalize = False
        from mpi4py import MPI

        info["mpi"] = MPI.Get_library_version().splitlines()[0]
    except Exception:  # noqa: BLE001
        pass
    return info


def capabilities(nccl4py: bool = False) -> dict[str, Any]:
    """What this process's torch can do, as a rank reports it before it needs any of it: the
    backend is chosen from these (netbench.run.planner.choose_backend), not from what nvidia-smi
    shows, since a CPU build of torch on a GPU node sees GPUs it cannot use.

    ``nccl4py``: also ask whether nccl4py's bindings import (the NCCL engine; ``nccl4py`` its
    version, ``nccl4py_error`` why not), on a CUDA torch only. The planner asks for the local sweep
    (``HostCaps.here``); a rank asks only when its plan's engine needs it, so a torch or CPU run
    imports nothing of nccl4py."""
    import torch

    cuda = bool(torch.cuda.is_available())
    caps: dict[str, Any] = {
        "torch": str(torch.__version__),
        "torch_cuda": torch.version.cuda,  # None: a CPU build
        "cuda_available": cuda,
        "gpus": torch.cuda.device_count() if cuda else 0,
        "nccl": None,
        "nccl4py": None,
        "nccl4py_error": None,  # None with nccl4py None: not asked
    }
    if cuda:
        try:
            v = torch.cuda.nccl.version()
            caps["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
        except Exception:  # noqa: BLE001 - no NCCL in this build: the caps say so by None
            pass
    if cuda and nccl4py:
        from netbench.collectives.native import nccl4py_status

        caps["nccl4py"], caps["nccl4py_error"] = nccl4py_status()
    return caps


def _driver_version() -> str | None:
    path = "/proc/driver/nvidia/version"
    if os.path.exists(path):
        with open(path) as fh:
            first = fh.readline()
        for tok in first.split():
            if tok.count(".") >= 1 and tok.replace(".", "").isdigit():
                return tok
    return None


def local_address_towards(addr: str) -> str:
    """The local IP address the kernel would use to reach ``addr`` (UDP connect sends nothing)."""
    if addr in ("127.0.0.1", "localhost", "::1"):
        return "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((addr, 9))
        return s.getsockname()[0]


def interface_of(ip: str) -> str | None:
    """Name of the interface holding ``ip`` (for NCCL_SOCKET_IFNAME), from the kernel's table."""
    import fcntl
    import struct

    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                packed = fcntl.ioctl(
                    s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15])
                )  # SIOCGIFADDR
            except OSError:
                continue
            if socket.inet_ntoa(packed[20:24]) == ip:
                return name
    return None


def subnet_of(ip: str) -> str | None:
    """The IPv4 network (``10.1.2.0/24``) of the local interface holding ``ip``, for Open MPI's
    ``*_tcp_if_include`` (it takes networks, and an interface name may differ from host to host)."""
    import fcntl
    import ipaddress
    import struct

    name = interface_of(ip)
    if name is None:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            # SIOCGIFNETMASK
            packed = fcntl.ioctl(s.fileno(), 0x891B, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return str(ipaddress.IPv4Network(f"{ip}/{socket.inet_ntoa(packed[20:24])}", strict=False))
