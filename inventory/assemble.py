"""From the probe's sectioned output to one NodeInventory.

``split_sections`` cuts the text at ``@@netbench-section <name> rc=<n>@@`` headers; ``build_inventory``
runs one small step per field group. Each step reads its sections, fills fields, and on trouble
records *why* in ``NodeInventory.missing`` ("nvidia-smi not installed", "ibstat failed (rc=255)
...", "parse error in lscpu: ..."). A step that raises loses only its own fields, never the record.

Everything in the text came from a remote host and is kept as data: nothing is evaluated, nothing is
passed to a shell.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime

from netbench.inventory.model import NIC, NcclView, NodeInventory
from netbench.inventory.parsers import (
    ethtool,
    ethtool_link,
    iblinkinfo,
    ibnetdiscover,
    ibstat,
    ibv_devinfo,
    lldp_json,
    lscpu,
    nccl_debug,
    nccl_system,
    nccl_topo_xml,
    net_mtu,
    netbench_runs,
    numactl,
    nvidia_smi_xml,
    nvlink_status,
    ofed,
    os_release,
    port_counters,
    proc_driver,
    python_env,
    sysfs_ib,
    topo_matrix,
    uname,
)
from netbench.inventory.parsers._ib import neighbors_from_links

_HEADER = re.compile(r"^@@netbench-section (\S+) rc=(-?\d+)(?: nonce=(\S+))?@@$")
_MAX_REASON = 200


@dataclass
class Section:
    """One command's output: its name, exit code and text (stdout+stderr)."""

    name: str
    rc: int
    text: str


def split_sections(text: str, nonce: str | None = None) -> dict[str, Section]:
    """Cut probe output into sections. Text before the first header (an SSH banner) is ignored.

    With ``nonce`` only headers carrying it count, so tool output cannot forge a section. Without one,
    a repeated name keeps its last occurrence: the probe prints fabric-supplied text (LLDP, IB node
    descriptions) first, so a header forged there is overridden by the real section later.
    """
    sections: dict[str, Section] = {}
    name: str | None = None
    rc = 0
    lines: list[str] = []
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m and (nonce is None or m.group(3) == nonce):
            if name is not None:
                sections[name] = Section(name, rc, "\n".join(lines))
            name, rc, lines = m.group(1), int(m.group(2)), []
        elif name is not None:
            lines.append(line)
    if name is not None:
        sections[name] = Section(name, rc, "\n".join(lines))
    return sections


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line[:_MAX_REASON]


def why_missing(sections: dict[str, Section], name: str) -> str | None:
    """None when the section is usable, else the reason it is not."""
    s = sections.get(name)
    if s is None:
        return f"probe output has no {name} section"
    if s.rc == 127:
        return _first_line(s.text) or f"{name}: command not installed"
    if s.rc == 124:
        return f"{name} timed out"
    if s.rc != 0:
        detail = _first_line(s.text)
        return f"{name} failed (rc={s.rc})" + (f": {detail}" if detail else "")
    return None


@dataclass
class _Ctx:
    sections: dict[str, Section]
    inv: NodeInventory
    nics: dict[tuple[str, int | None], NIC] = field(default_factory=dict)

    def text(self, name: str) -> str | None:
        return None if why_missing(self.sections, name) else self.sections[name].text

    def miss(self, key: str, name: str) -> None:
        reason = why_missing(self.sections, name)
        if reason:
            self.inv.missing.setdefault(key, reason)


# ---------------------------------------------------------------- steps: one per field group


def _host(c: _Ctx) -> None:
    u = uname.parse_uname(c.text("uname")) if c.text("uname") else None
    h = _first_line(c.text("hostname") or "")
    c.inv.hostname = h or (u.nodename if u else None)
    c.inv.kernel = u.kernel if u else None
    if not c.inv.hostname:
        c.miss("hostname", "hostname")
    if not c.inv.kernel:
        c.miss("kernel", "uname")


_MACHINE_ID = re.compile(r"[0-9a-f]{32}")


def _machine_id(c: _Ctx) -> None:
    text = (c.text("machine-id") or "").strip()
    c.inv.machine_id = text if _MACHINE_ID.fullmatch(text) else None
    if c.inv.machine_id is None:
        c.miss("machine_id", "machine-id")


def _other_runs(c: _Ctx) -> None:
    text = c.text("netbench-runs")
    c.inv.other_runs = netbench_runs.parse_netbench_runs(text) if text is not None else []
    if text is None:
        c.miss("other_runs", "netbench-runs")


def _mtu(c: _Ctx) -> None:
    text = c.text("net-mtu")
    c.inv.mtu = net_mtu.parse_net_mtu(text) if text is not None else {}
    if text is None:
        c.miss("mtu", "net-mtu")


def _os(c: _Ctx) -> None:
    text = c.text("os-release")
    c.inv.os = os_release.pretty_name(text) if text else None
    if text is None:
        c.miss("os", "os-release")
    elif not c.inv.os:
        c.inv.missing["os"] = "os-release has no NAME"


def _cpu(c: _Ctx) -> None:
    text = c.text("lscpu")
    if text is None:
        c.miss("cpu_model", "lscpu")
        return
    cpu = lscpu.parse_lscpu(text)
    c.inv.cpu_model, c.inv.cpu_sockets, c.inv.cpu_cores = cpu.model, cpu.sockets, cpu.cores
    c.inv.numa_nodes = c.inv.numa_nodes or cpu.numa_nodes


def _numa(c: _Ctx) -> None:
    text = c.text("numactl")
    if text is not None:
        c.inv.numa_nodes = len(numactl.parse_numactl(text).nodes) or c.inv.numa_nodes
    if c.inv.numa_nodes is None:
        c.miss("numa_nodes", "numactl")


def _gpus(c: _Ctx) -> None:
    text = c.text("nvidia-smi-q-x")
    if text is None:
        c.miss("gpus", "nvidia-smi-q-x")
        c.miss("driver_version", "nvidia-smi-q-x")
        c.miss("cuda_version", "nvidia-smi-q-x")
        return
    report = nvidia_smi_xml.parse_nvidia_smi_xml(text)
    c.inv.gpus = report.gpus
    c.inv.driver_version = report.driver_version or c.inv.driver_version
    c.inv.cuda_version = report.cuda_version
    if not report.gpus:
        c.inv.missing["gpus"] = "nvidia-smi reported no GPUs"
    if not report.cuda_version:
        c.inv.missing["cuda_version"] = "nvidia-smi reported no CUDA version"


def _proc_driver(c: _Ctx) -> None:
    text = c.text("proc-driver")
    if text and not c.inv.driver_version:
        c.inv.driver_version = proc_driver.parse_proc_driver(text).driver_version
    if c.inv.driver_version:
        c.inv.missing.pop("driver_version", None)


def _topo(c: _Ctx) -> None:
    text = c.text("nvidia-smi-topo")
    if text is None:
        c.miss("topo", "nvidia-smi-topo")
        return
    c.inv.topo = topo_matrix.parse_topo_matrix(text)
    for g in c.inv.gpus:
        numa = c.inv.topo.numa_affinity.get(f"GPU{g.index}", "")
        if g.numa_node is None and numa.isdigit():
            g.numa_node = int(numa)


def _nvlink(c: _Ctx) -> None:
    text = c.text("nvidia-smi-nvlink")
    if text is None:
        c.miss("nvlinks", "nvidia-smi-nvlink")
        return
    c.inv.nvlinks = nvlink_status.parse_nvlink_status(text)


def _merge(c: _Ctx, new: NIC) -> None:
    """Fill the NIC of the same (name, port) field by field; earlier sources win on conflicts."""
    key = (new.name, new.port)
    if key not in c.nics and new.port is None:
        key = next((k for k in c.nics if k[0] == new.name), key)
    old = c.nics.get(key)
    if old is None:
        c.nics[key] = new
        return
    for f in fields(NIC):
        if getattr(old, f.name) is None and getattr(new, f.name) is not None:
            setattr(old, f.name, getattr(new, f.name))


def _ib_nics(c: _Ctx) -> None:
    for name, parse in (("ibstat", ibstat.parse_ibstat), ("sysfs-ib", sysfs_ib.parse_sysfs_ib),
                        ("ibv_devinfo", ibv_devinfo.parse_ibv_devinfo)):
        text = c.text(name)
        s = c.sections.get(name)
        if text is None and name == "ibstat" and s is not None and s.rc not in (124, 127):
            text = s.text  # ibstat exits 255 after an ibpanic but keeps what it printed
        if text is None:
            continue
        try:
            for nic in parse(text):
                _merge(c, nic)
        except Exception as e:  # one source failing must not lose the others
            c.inv.missing[f"nics:{name}"] = f"parse error in {name}: {e}"[:_MAX_REASON]
    panic = ibstat.ibpanic_message(c.sections["ibstat"].text) if "ibstat" in c.sections else None
    if panic:
        c.inv.missing["nics:ibstat"] = f"ibstat stopped part-way: {panic}"[:_MAX_REASON]


def _eth_nics(c: _Ctx) -> None:
    by_netdev = {n.netdev: n for n in c.nics.values() if n.netdev}
    by_bus = {n.pci_bus_id: n for n in c.nics.values() if n.pci_bus_id}
    for name, s in sorted(c.sections.items()):
        if not name.startswith("ethtool-i:") or why_missing(c.sections, name):
            continue
        netdev = name.split(":", 1)[1]
        try:
            eth = ethtool.parse_ethtool_i(s.text, netdev)
        except ValueError as e:
            c.inv.missing[f"nics:{name}"] = f"parse error in {name}: {e}"[:_MAX_REASON]
            continue
        hca = by_netdev.get(netdev) or (by_bus.get(eth.pci_bus_id) if eth.pci_bus_id else None)
        if hca is not None:
            hca.netdev = hca.netdev or netdev
            for attr in ("driver", "driver_version", "firmware", "board_id", "pci_bus_id"):
                if getattr(hca, attr) is None:
                    setattr(hca, attr, getattr(eth, attr))
        else:
            _merge(c, eth)


def _eth_links(c: _Ctx) -> None:
    """Rates of Ethernet ports from ``ethtool <netdev>``: ibstat/sysfs give the rate of RDMA ports
    (RoCE included) and win; a plain Ethernet port's rate is only known from here."""
    by_netdev = {n.netdev: n for n in c.nics.values() if n.netdev}
    for name, s in sorted(c.sections.items()):
        if not name.startswith("ethtool:") or why_missing(c.sections, name):
            continue
        nic = by_netdev.get(name.split(":", 1)[1])
        if nic is None or (nic.link_layer or "").lower() == "infiniband":
            continue
        try:
            link = ethtool_link.parse_ethtool_link(s.text)
        except ValueError as e:
            c.inv.missing[f"nics:{name}"] = f"parse error in {name}: {e}"[:_MAX_REASON]
            continue
        if nic.rate_gbps is None:
            nic.rate_gbps = link.speed_gbps
        if nic.state is None and link.link_detected is not None:
            nic.state = "Active" if link.link_detected else "Down"


def _nics_done(c: _Ctx) -> None:
    c.inv.nics = list(c.nics.values())
    if not c.inv.nics:
        reasons = [r for r in (why_missing(c.sections, n) for n in ("ibstat", "sysfs-ib", "ethtool-i")) if r]
        c.inv.missing["nics"] = "; ".join(reasons) or "no network adapters found"


def _counters(c: _Ctx) -> None:
    text = c.text("ib-counters")
    if text is not None:
        c.inv.counters.extend(port_counters.parse_ib_counters(text))
    for name, s in sorted(c.sections.items()):
        if name.startswith("ethtool-S:") and not why_missing(c.sections, name):
            try:  # one odd device must not lose the other ports' counters
                pc = port_counters.parse_ethtool_s(s.text, name.split(":", 1)[1])
            except ValueError as e:
                c.inv.missing[f"counters:{name}"[:80]] = f"parse error in {name}: {e}"[:_MAX_REASON]
                continue
            if pc.counters:
                c.inv.counters.append(pc)
    if not c.inv.counters:
        c.miss("counters", "ib-counters")
        c.inv.missing.setdefault("counters", "no port reported counters")


def _neighbors(c: _Ctx) -> None:
    text = c.text("lldp")
    if text is not None:
        names = {n.netdev: n.name for n in c.inv.nics if n.netdev and n.netdev != n.name}
        for n in lldp_json.parse_lldp_json(text):
            n.local_port = names.get(n.local_port, n.local_port)  # report the HCA (mlx5_0), not its netdev
            c.inv.neighbors.append(n)
    for tool, parse in (("iblinkinfo", iblinkinfo.parse_iblinkinfo),
                        ("ibnetdiscover", ibnetdiscover.parse_ibnetdiscover)):
        fabric = c.text(tool)
        if fabric is None or not fabric.strip():
            continue
        guids = {g: n.name for n in c.inv.nics for g in (n.node_guid, n.port_guid) if g}
        hosts = [h for h in (c.inv.hostname, c.inv.host) if h]
        c.inv.neighbors.extend(neighbors_from_links(parse(fabric), hosts, guids, source=tool))
    if not c.inv.neighbors:
        reasons = [r for r in (why_missing(c.sections, "lldp"),
                               why_missing(c.sections, "iblinkinfo" if "iblinkinfo" in c.sections
                                           else "ibnetdiscover")) if r]
        c.inv.missing["neighbors"] = "; ".join(reasons) or "no LLDP or InfiniBand neighbour reported"


def _ofed(c: _Ctx) -> None:
    text = c.text("ofed")
    c.inv.ofed_version = ofed.parse_ofed_info(text) if text else None
    if text is None:
        c.miss("ofed_version", "ofed")
    elif not c.inv.ofed_version:
        c.inv.missing["ofed_version"] = "ofed_info printed no MLNX_OFED version"


def _nccl_system(c: _Ctx) -> None:
    text = c.text("nccl-system")
    c.inv.nccl_version_system = nccl_system.parse_nccl_system(text) if text else None
    if text is None:
        c.miss("nccl_version_system", "nccl-system")
    elif not c.inv.nccl_version_system:
        c.inv.missing["nccl_version_system"] = "no version in libnccl name or nccl.h"


def _python(c: _Ctx) -> None:
    text = c.text("python")
    if text is None:
        for key in ("python_version", "torch_version", "nccl_version_torch", "nccl4py"):
            c.miss(key, "python")
        return
    env = python_env.parse_python_env(text)
    c.inv.python_version, c.inv.torch_version = env.python, env.torch
    c.inv.nccl_version_torch = env.torch_nccl
    if env.torch is not None:  # what the ranks' torch can do: the backend follows it (planner)
        c.inv.torch_cuda_build = env.torch_cuda if env.torch_cuda not in (None, "None") else None
        if env.torch_cuda_available in ("True", "False"):
            c.inv.torch_cuda_available = env.torch_cuda_available == "True"
        if env.torch_gpus is not None and env.torch_gpus.isdigit() and len(env.torch_gpus) < 6:
            c.inv.torch_gpus = int(env.torch_gpus)
    if env.torch is None:
        c.inv.missing["torch_version"] = env.torch_error or "torch not importable"
    if env.torch_nccl is None and env.torch is None:
        c.inv.missing["nccl_version_torch"] = "torch not importable"
    elif env.torch_nccl is None:
        detail = f" ({env.torch_nccl_error})" if env.torch_nccl_error else ""
        c.inv.missing["nccl_version_torch"] = f"torch {env.torch} has no NCCL{detail}"[:_MAX_REASON]
    _nccl4py(c, env)


def _nccl4py(c: _Ctx, env: python_env.PythonEnv) -> None:
    """Whether the NCCL engine can run there: the planner gives a run the nccl engine only when
    every host's python imports nccl4py's bindings (an installed but broken nccl4py counts as none)."""
    c.inv.nccl4py_version = env.nccl4py
    if env.nccl4py_import == "ok":
        c.inv.nccl4py = True
    elif env.nccl4py_error is not None:
        c.inv.nccl4py = False
        installed = f"nccl4py {env.nccl4py} is installed but " if env.nccl4py else ""
        c.inv.missing["nccl4py"] = f"{installed}does not import: {env.nccl4py_error}"[:_MAX_REASON]


def _last_line(text: str) -> str:
    line = next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")
    return line[:_MAX_REASON]


def _nccl(c: _Ctx) -> None:
    """NCCL's own view: a failed init still logs which networks it tried (``NET/IB : No device
    found``), so a log with NCCL lines is read whatever the exit code; the reason goes to missing."""
    s = c.sections.get("nccl-debug")
    if s is None or s.rc in (124, 127) or (s.rc != 0 and "NCCL INFO" not in s.text):
        c.miss("nccl", "nccl-debug")
        return
    if s.rc != 0:  # the Python traceback's last line says why NCCL did not come up
        c.inv.missing["nccl"] = f"NCCL init failed (rc={s.rc}): {_last_line(s.text)}"[:_MAX_REASON]
    info = nccl_debug.parse_nccl_debug(s.text)
    view = NcclView(version=info.version, network=info.network, net_devices=info.interfaces)
    topo = c.text("nccl-topo")
    if topo is not None:
        try:  # a bad dump must not lose the log's facts
            view.nic_gdr = {n.name: n.gdr for n in nccl_topo_xml.parse_nccl_topo_xml(topo).nics
                            if n.name and n.gdr is not None}
        except ValueError as e:
            c.inv.missing["nccl:topo"] = f"parse error in nccl-topo: {e}"[:_MAX_REASON]
    if view.version is None and view.network is None:
        c.inv.missing.setdefault("nccl", "NCCL printed no version or network (NCCL_DEBUG=INFO log)")
        return
    c.inv.nccl = view


# (what the step fills, the section named in a parse error, the step)
STEPS: list[tuple[str, str, Callable[[_Ctx], None]]] = [
    ("hostname", "uname", _host),
    ("machine_id", "machine-id", _machine_id),
    ("other_runs", "netbench-runs", _other_runs),
    ("os", "os-release", _os),
    ("cpu_model", "lscpu", _cpu),
    ("numa_nodes", "numactl", _numa),
    ("gpus", "nvidia-smi-q-x", _gpus),
    ("driver_version", "proc-driver", _proc_driver),
    ("topo", "nvidia-smi-topo", _topo),
    ("nvlinks", "nvidia-smi-nvlink", _nvlink),
    ("nics", "ibstat", _ib_nics),
    ("nics", "ethtool-i", _eth_nics),
    ("nics", "ethtool", _eth_links),
    ("nics", "nics", _nics_done),
    ("counters", "ib-counters", _counters),
    ("mtu", "net-mtu", _mtu),
    ("neighbors", "lldp", _neighbors),
    ("ofed_version", "ofed", _ofed),
    ("nccl_version_system", "nccl-system", _nccl_system),
    ("python_version", "python", _python),
    ("nccl", "nccl-debug", _nccl),
]


def build_inventory(host: str, sections: dict[str, Section], labels: dict | None = None) -> NodeInventory:
    """Run every step over the sections. Status is ``partial`` when the probe output was cut short
    (no ``end`` section) or a step could not parse its section."""
    inv = NodeInventory(host=host, labels={str(k): str(v) for k, v in (labels or {}).items()},
                        collected_at=datetime.now(UTC).isoformat(timespec="seconds"))
    ctx = _Ctx(sections=sections, inv=inv)
    failed = False
    for key, section, step in STEPS:
        try:
            step(ctx)
        except Exception as e:  # noqa: BLE001 - a parser bug must cost one field, not the node
            failed = True
            inv.missing[key] = f"parse error in {section}: {type(e).__name__}: {e}"[:_MAX_REASON]
    if "end" not in sections:
        inv.status = "partial"
        inv.error = "probe output ended early (no end section)"
    elif failed:
        inv.status = "partial"
    return inv
