"""Host parsers: uname, os-release, lscpu, numactl, and the NCCL version from an NCCL_DEBUG log."""

from __future__ import annotations

import pytest
from fixtures_path import read_fixture
from netbench.inventory.parsers.lscpu import parse_lscpu
from netbench.inventory.parsers.nccl_debug import parse_nccl_debug
from netbench.inventory.parsers.numactl import parse_numactl
from netbench.inventory.parsers.os_release import parse_os_release, pretty_name
from netbench.inventory.parsers.uname import parse_uname


def test_uname() -> None:
    u = parse_uname(read_fixture("h200-node/uname.txt"))
    assert (u.system, u.nodename, u.kernel, u.machine) == ("Linux", "vm", "6.18.44-fc-v657-gpu", "x86_64")


def test_os_release() -> None:
    text = read_fixture("h200-node/os-release.txt")
    assert pretty_name(text) == "Ubuntu 24.04.3 LTS"
    kv = parse_os_release(text)
    assert kv["VERSION_ID"] == "24.04" and kv["ID"] == "ubuntu" and kv["VERSION_CODENAME"] == "noble"
    assert pretty_name('NAME="Debian GNU/Linux"\nVERSION_ID="12"\n') == "Debian GNU/Linux 12"


def test_lscpu() -> None:
    c = parse_lscpu(read_fixture("h200-node/lscpu.txt"))
    assert c.model == "Intel(R) Xeon(R) Processor"
    assert (c.sockets, c.cores, c.threads, c.numa_nodes) == (1, 16, 16, 1)


def test_numactl() -> None:
    n = parse_numactl(read_fixture("h200-node/numactl.txt"))
    (node,) = n.nodes
    assert (node.node, node.cpus, node.size_mb, node.free_mb) == (0, list(range(16)), 4443, 3176)
    assert n.distances == {0: {0: 10}}
    with pytest.raises(ValueError):
        parse_numactl("numactl: command not found")


def test_nccl_debug_log() -> None:
    info = parse_nccl_debug(read_fixture("h200-node/nccl-debug-init.txt"))
    assert (info.version, info.cuda_build, info.cuda_driver_version) == ("2.28.9", "13.0", "13.0")
    assert info.network == "Socket" and info.interfaces == ["eth0"]


def test_nccl_system_section() -> None:
    from netbench.inventory.parsers.nccl_system import parse_nccl_system

    lib = "lib: /usr/lib/x86_64-linux-gnu/libnccl.so.2 -> /usr/lib/x86_64-linux-gnu/libnccl.so.2.28.9\n"
    assert parse_nccl_system(lib) == "2.28.9"
    header = (
        "header: /usr/include/nccl.h\n#define NCCL_MAJOR 2\n#define NCCL_MINOR 27\n#define NCCL_PATCH 3\n"
    )
    assert parse_nccl_system(lib + header) == "2.27.3"  # the header states what was built
    assert parse_nccl_system("lib: /opt/libnccl.so.2 -> /opt/libnccl.so.2\n") is None


def test_python_env_section() -> None:
    from netbench.inventory.parsers.python_env import parse_python_env

    env = parse_python_env(
        "python=3.12.3\nexecutable=/usr/bin/python3\ntorch=2.9.1+cu130\ntorch_cuda=13.0\ntorch_nccl=2.28.9\n"
    )
    assert (env.python, env.torch, env.torch_cuda, env.torch_nccl) == (
        "3.12.3",
        "2.9.1+cu130",
        "13.0",
        "2.28.9",
    )
    env = parse_python_env("python=3.11.7\ntorch_error=ModuleNotFoundError: No module named 'torch'\n")
    assert env.torch is None and env.torch_error.startswith("ModuleNotFoundError")
    with pytest.raises(ValueError):
        parse_python_env("sh: 1: python3: not found\n")


# The probe's python section as printed on this project's CPU machine (torch 2.13.0+cpu): with no
# nccl4py, and with the real nccl4py 0.6.0 wheel installed without its dependencies (cuda-bindings),
# which is installed but does not import.
PY_CPU = (
    "python=3.11.7\nexecutable=/work/wt-engineplan/.venv/bin/python\ntorch=2.13.0+cpu\ntorch_cuda=None\n"
    "torch_cuda_available=False\ntorch_gpus=0\n"
    "torch_nccl_error=AttributeError: module 'torch._C' has no attribute '_nccl_version'\n"
)
PY_NO_NCCL4PY = PY_CPU + "nccl4py_error=ModuleNotFoundError: No module named 'nccl'\n"
PY_NCCL4PY_BROKEN = PY_CPU + "nccl4py=0.6.0\nnccl4py_error=ModuleNotFoundError: No module named 'cuda'\n"


def test_python_env_section_nccl4py() -> None:
    from netbench.inventory.assemble import Section, build_inventory
    from netbench.inventory.model import NodeInventory
    from netbench.inventory.parsers.python_env import parse_python_env

    env = parse_python_env(PY_NCCL4PY_BROKEN)
    assert (env.nccl4py, env.nccl4py_import, env.nccl4py_error) == (
        "0.6.0", None, "ModuleNotFoundError: No module named 'cuda'"
    )

    def node(text: str | None) -> NodeInventory:
        sections = {"end": Section("end", 0, "")}
        if text is not None:
            sections["python"] = Section("python", 0, text)
        return build_inventory("n1", sections)

    broken, absent = node(PY_NCCL4PY_BROKEN), node(PY_NO_NCCL4PY)
    assert (broken.nccl4py, broken.nccl4py_version) == (False, "0.6.0")
    assert broken.missing["nccl4py"] == (
        "nccl4py 0.6.0 is installed but does not import: ModuleNotFoundError: No module named 'cuda'"
    )
    assert (absent.nccl4py, absent.nccl4py_version) == (False, None)
    assert absent.missing["nccl4py"] == "does not import: ModuleNotFoundError: No module named 'nccl'"
    # a record from before the probe asked: not known, which is not "has none"
    assert node(PY_CPU).nccl4py is None and "nccl4py" not in node(PY_CPU).missing
    assert node(None).nccl4py is None
    assert node(None).missing["nccl4py"] == "probe output has no python section"
