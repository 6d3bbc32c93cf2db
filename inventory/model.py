"""The inventory data model: what netbench knows about one node.

Every field is optional because every tool on a node is optional; when a value is missing the
probe records *why* in ``NodeInventory.missing`` (field name -> reason) so a report can say
"firmware unknown: ibstat not installed" instead of showing a silent blank.

These dataclasses are the contract between the parsers (``inventory.parsers``), the collectors
(local probe, SSH), ``inventory.jsonl`` in the run directory, and the report rules.
Loading is tolerant: unknown keys are ignored so newer files load in older code.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

SCHEMA = "netbench.inventory/1"

T = TypeVar("T")


def _from_dict(cls: type[T], data: dict[str, Any] | None) -> T | None:
    """Build a flat dataclass from a dict, ignoring keys it does not know."""
    if data is None:
        return None
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class GPU:
    """One GPU as nvidia-smi reports it."""

    index: int
    name: str | None = None
    uuid: str | None = None
    serial: str | None = None  # None when N/A, REDACTED or all zeros
    pci_bus_id: str | None = None  # normalised lower case, e.g. "00000000:18:00.0"
    vbios: str | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    memory_total_mib: int | None = None
    numa_node: int | None = None
    # NVSwitch fabric registration (HGX/DGX: nvidia-fabricmanager). "Completed"/"Success" is the only
    # state in which NVLink through the NVSwitches carries traffic; "In Progress", "Not Started" or a
    # failed status means NCCL falls back to PCIe or fails inside the node. None: no NVSwitch fabric
    # (nvidia-smi says N/A) or not reported.
    fabric_state: str | None = None
    fabric_status: str | None = None


@dataclass
class NVLink:
    """State of one NVLink of one GPU (``nvidia-smi nvlink --status`` or ``-q``)."""

    gpu: int
    link: int
    up: bool
    speed_GBps: float | None = None


@dataclass
class TopoMatrix:
    """``nvidia-smi topo -m``: relations between GPUs and NICs plus CPU/NUMA affinity.

    ``relations[a][b]`` is the legend code (X, NV12, PIX, PXB, PHB, NODE, SYS, SOC).
    ``nic_names`` maps the matrix label (NIC0) to the device name (mlx5_0).
    """

    devices: list[str] = field(default_factory=list)
    relations: dict[str, dict[str, str]] = field(default_factory=dict)
    nic_names: dict[str, str] = field(default_factory=dict)
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    numa_affinity: dict[str, str] = field(default_factory=dict)
    gpu_numa_id: dict[str, str] = field(default_factory=dict)


@dataclass
class NIC:
    """A network adapter port: an HCA port (InfiniBand/RoCE) or an Ethernet netdev."""

    name: str  # mlx5_0, or the netdev name (ens1f0np0) for plain Ethernet
    port: int | None = None
    netdev: str | None = None
    driver: str | None = None
    driver_version: str | None = None
    firmware: str | None = None
    board_id: str | None = None  # PSID, e.g. MT_0000000838
    hca_type: str | None = None  # MT4129
    link_layer: str | None = None  # InfiniBand | Ethernet
    state: str | None = None  # Active | Down | Init ... (word, no number)
    phys_state: str | None = None  # LinkUp | Polling | Disabled ...
    rate_gbps: float | None = None
    max_rate_gbps: float | None = None
    pci_bus_id: str | None = None
    pcie_speed: str | None = None
    pcie_width: int | None = None
    node_guid: str | None = None  # 0xa088c20300e3142a (ibstat form); matches fabric discovery output
    port_guid: str | None = None


@dataclass
class SwitchNeighbor:
    """The switch port a local NIC is cabled to (from LLDP or InfiniBand discovery)."""

    local_port: str  # NIC or netdev name on this node
    switch: str | None = None  # switch system name / node description
    switch_port: str | None = None
    switch_id: str | None = None  # chassis id / GUID
    source: str | None = None  # lldp | ibnetdiscover | iblinkinfo | label | topology


@dataclass
class PortCounters:
    """One port's counters as read once: ``port`` is ``mlx5_0/1`` (sysfs InfiniBand) or the netdev
    (``ethtool -S``); ``counters`` maps the tool's own names to values. Comparing two readings of the
    same port (before and after a run) gives what happened on the link during it."""

    port: str
    source: str  # sysfs-ib | ethtool
    counters: dict[str, int] = field(default_factory=dict)


@dataclass
class NcclView:
    """What NCCL itself found on this node when one rank initialised a communicator on GPU 0 (the
    probe's ``nccl-debug`` and ``nccl-topo`` sections: ``NCCL_DEBUG=INFO`` and
    ``NCCL_TOPO_DUMP_FILE``). The versions and NICs elsewhere in the record say what is installed;
    this says what the ranks' NCCL will use, e.g. TCP sockets on a node whose HCAs are up."""

    version: str | None = None  # the libnccl that loaded (torch's own unless preloaded), 2.28.9
    network: str | None = None  # IB | Socket | a net plugin's name; Socket: no usable RDMA device
    net_devices: list[str] = field(default_factory=list)  # what NCCL sends on: mlx5_0:1, eth0
    # NIC (NCCL's name) -> GPU Direct RDMA possible; False: traffic is staged through host memory
    # (nvidia-peermem not loaded, PCIe path across the CPU), a fraction of the link's rate.
    nic_gdr: dict[str, bool] = field(default_factory=dict)


@dataclass
class OtherRun:
    """Another netbench run live on a host when it was probed: the marker its agent holds there
    (``netbench/agents/marker.py``). Its traffic shares the host's links with this run's."""

    run_id: str | None = None  # None: its agent had not learnt its run id yet
    coordinator: str | None = None  # the address:port of that run's store, where its front runs
    pid: int | None = None  # the agent's process on the host


MIN_TORCH = "2.1"
"""The oldest torch a rank runs on (pyproject's ``torch>=2.1``)."""


@dataclass
class NodeInventory:
    """Everything recorded about one host. ``status`` says whether the probe reached it."""

    host: str
    # ok | partial | unreachable | auth_failed | host_key_refused | timeout | error | cannot_run
    status: str = "ok"
    error: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    collected_at: str | None = None
    probe_seconds: float | None = None
    hostname: str | None = None
    os: str | None = None
    kernel: str | None = None
    cpu_model: str | None = None
    cpu_sockets: int | None = None
    cpu_cores: int | None = None
    numa_nodes: int | None = None
    gpus: list[GPU] = field(default_factory=list)
    driver_version: str | None = None
    cuda_version: str | None = None
    nvlinks: list[NVLink] = field(default_factory=list)
    topo: TopoMatrix | None = None
    nics: list[NIC] = field(default_factory=list)
    neighbors: list[SwitchNeighbor] = field(default_factory=list)
    counters: list[PortCounters] = field(default_factory=list)
    mtu: dict[str, int] = field(default_factory=dict)  # interface -> MTU, those up (net-mtu)
    ofed_version: str | None = None
    nccl_version_system: str | None = None
    nccl_version_torch: str | None = None
    python_version: str | None = None
    torch_version: str | None = None
    torch_cuda_build: str | None = None  # torch.version.cuda; None: a CPU build (or unknown)
    torch_cuda_available: bool | None = None  # what that torch can use; None: not asked
    torch_gpus: int | None = None
    nccl4py: bool | None = None
    """Whether nccl4py's bindings (the NCCL engine, ``collectives/native.py``) import in the ranks'
    python; None: not asked (a record from before the probe asked, or no python section)."""
    nccl4py_version: str | None = None  # the installed nccl4py distribution, importable or not
    nccl: NcclView | None = None  # None: not probed (records before it, no GPU) or NCCL failed: see missing
    machine_id: str | None = None  # /etc/machine-id: with the hostname, one machine under two names
    address: str | None = None
    """The address and port the collector reached the host at (SSH), ``10.0.0.5:22``: two hosts-file
    entries reached at one address are one machine."""
    ranks_python: bool | None = None
    """Whether the python section asked the python the ranks will run (the collector knows which
    it asked); only then does what it says decide that a rank cannot run here (``cannot_run``)."""
    other_runs: list[OtherRun] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)
    schema: str = SCHEMA

    @property
    def ok(self) -> bool:
        """Reached and able to run ranks: a host that is not is left out before any rank starts."""
        return self.status in ("ok", "partial")

    @property
    def cannot_run(self) -> str | None:
        """Why no rank can start here, from what the ranks' own python said (None: nothing known
        against it). The collector turns it into ``status = "cannot_run"`` (``check_can_run``): a
        rank started anyway only "exited with code 1", which names no cause."""
        if not self.ranks_python or self.status not in ("ok", "partial"):
            return None
        if self.python_version is None and "python_version" in self.missing:
            return f"its python cannot run: {self.missing['python_version']}"
        if self.torch_version is None and "torch_version" in self.missing:
            return f"torch is not importable by its python: {self.missing['torch_version']}"
        if self.torch_version is not None:
            from netbench.inventory.versions import compare_versions

            if compare_versions(self.torch_version, MIN_TORCH) < 0:
                return f"torch {self.torch_version} is older than {MIN_TORCH}, the oldest netbench runs on"
        return None

    @property
    def gpus_unusable(self) -> str | None:
        """Why this host's GPUs cannot hold a rank: nvidia-smi lists GPUs that its torch cannot use
        (a CPU build, a driver too old for its CUDA). Only a run on GPUs leaves it out for that
        (``leave_out_unusable``)."""
        if not self.ranks_python or not self.gpus or self.torch_cuda_available is not False:
            return None
        build = " (a CPU build)" if self.torch_cuda_build is None else ""
        return f"nvidia-smi shows {len(self.gpus)} GPU(s) but torch {self.torch_version}{build} sees none"

    def switch(self) -> str | None:
        """The leaf switch of this node: a ``switch=`` label wins, then discovered neighbours."""
        if self.labels.get("switch"):
            return self.labels["switch"]
        for n in self.neighbors:
            if n.switch:
                return n.switch
        return None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeInventory:
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in data.items() if k in names}
        kw["gpus"] = [_from_dict(GPU, g) for g in data.get("gpus") or []]
        kw["nvlinks"] = [_from_dict(NVLink, g) for g in data.get("nvlinks") or []]
        kw["nics"] = [_from_dict(NIC, g) for g in data.get("nics") or []]
        kw["neighbors"] = [_from_dict(SwitchNeighbor, g) for g in data.get("neighbors") or []]
        kw["counters"] = [_from_dict(PortCounters, g) for g in data.get("counters") or []]
        kw["topo"] = _from_dict(TopoMatrix, data.get("topo"))
        kw["nccl"] = _from_dict(NcclView, data.get("nccl"))  # absent in older records: None
        kw["other_runs"] = [_from_dict(OtherRun, r) for r in data.get("other_runs") or []]
        return cls(**kw)


CANNOT_RUN = "cannot_run"
"""The status of a host that was reached but where no rank can run (``NodeInventory.cannot_run``)."""


def check_can_run(node: NodeInventory) -> NodeInventory:
    """Mark ``node`` ``cannot_run`` (with the cause as its error) when its ranks' python cannot run a
    rank; the collectors call it on every record, so every site and preflight leave it out."""
    why = node.cannot_run
    if why is not None:
        node.status, node.error = CANNOT_RUN, why
    return node


def leave_out_unusable(nodes: list[NodeInventory], backend: str | None) -> list[NodeInventory]:
    """Mark ``cannot_run`` the hosts whose GPUs their torch cannot use when the run is on GPUs: NCCL
    asked for, or (no backend asked) every host shows GPUs and some host's torch uses them, so the
    backend will be NCCL without the others. Where no host's torch can, the backend's choice says
    so for the whole run (planner.choose_backend). Returns the hosts marked."""
    live = [n for n in nodes if n.ok]
    if backend == "gloo" or not any(n.torch_cuda_available for n in live):
        return []
    if backend != "nccl" and not all(n.gpus for n in live):
        return []
    marked = []
    for n in live:
        why = n.gpus_unusable
        if why is not None:
            n.status, n.error = CANNOT_RUN, why
            marked.append(n)
    return marked


def same_machine(nodes: list[NodeInventory]) -> tuple[NodeInventory, NodeInventory, str] | None:
    """The first two records that are one machine under two names, and why: reached at the same
    address, or the same hostname and machine-id. None when every record is its own machine.
    Hostname alone is not enough (clones keep ``localhost``), nor machine-id alone (cloned images
    and containers share one)."""
    seen: dict[tuple[str, str], NodeInventory] = {}
    for n in nodes:
        keys = []
        if n.address:
            keys.append(("address", n.address))
        if n.hostname and n.machine_id:
            keys.append(("hostname and machine-id", f"{n.hostname} {n.machine_id}"))
        for key in keys:
            first = seen.setdefault(key, n)
            if first is not n:
                return first, n, f"same {key[0]} {key[1]}"
    return None


@dataclass(frozen=True)
class SharedRun:
    """Another netbench run found live on some of this run's hosts (their ``other_runs``)."""

    run_id: str | None
    coordinator: str | None
    hosts: tuple[str, ...]

    def line(self) -> str:
        """One line for the run's output (the values were checked by the parser)."""
        which = f"run {self.run_id or '(id not known yet)'}" + (
            f" from {self.coordinator}" if self.coordinator else "")
        more = len(self.hosts) - 8
        shown = ", ".join(self.hosts[:8]) + (f" and {more} more" if more > 0 else "")
        return (f"another netbench run is on {len(self.hosts)} of these host(s) ({shown}): {which}; "
                "its traffic shares their links with this run's")


def shared_runs(nodes: list[NodeInventory] | list[dict[str, Any]]) -> list[SharedRun]:
    """The other runs live on ``nodes`` (records or their dicts, as inventory.jsonl holds them), one
    per run with its hosts. A run is told by its coordinator (one address:port per live run), so
    an agent that had not learnt its run id yet still counts with its run's other hosts."""
    found: dict[str | None, SharedRun] = {}
    for n in nodes:
        rec = n if isinstance(n, NodeInventory) else NodeInventory.from_dict(n)
        for r in rec.other_runs:
            key = r.coordinator or r.run_id
            was = found.get(key, SharedRun(r.run_id, r.coordinator, ()))
            hosts = was.hosts if rec.host in was.hosts else (*was.hosts, rec.host)
            found[key] = SharedRun(was.run_id or r.run_id, was.coordinator, hosts)
    return list(found.values())
