"""Synthetic fleets with planted faults, for tests and benchmarks of the analysis.

Not a stand-in for measuring: it is the ground truth the detection benchmark scores against
(a node k% slow, a link k% slow, noise), which no real fleet can give us. The rows follow the
result-row contract and nccl-tests' conventions (busbw = algbw x 2(n-1)/n for all_reduce), the
inventory follows NodeInventory, so the analysis sees exactly what a real run would write.

Bandwidth model: time = latency + bytes / bw_peak, so small sizes are latency-bound and large ones
approach the peak. A pair's peak is the fabric peak x its hop class (cross-spine pairs share
uplinks) x the slower of its two nodes x the link's own factor; noise multiplies each measurement
by N(1, noise) (``noise`` is the coefficient of variation: 0.05 = 5%).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from netbench.collectives.pairs import circle_rounds

DEFAULT_PAIR_SIZES = (64 << 20, 256 << 20, 1 << 30)
DEFAULT_RING_SIZES = tuple(1024 << i for i in range(20))  # 1K .. 512M: 20 sizes


@dataclass
class SyntheticFleet:
    hosts: list[str]
    switches: dict[str, str]
    rows: list[dict[str, Any]]
    inventory: list[dict[str, Any]]
    env: dict[str, Any]
    run: dict[str, Any]
    slow_nodes: dict[str, float] = field(default_factory=dict)  # host -> bandwidth factor (0.8 = 20% slow)
    slow_links: dict[tuple[str, str], float] = field(default_factory=dict)  # sorted pair -> factor
    stragglers: dict[str, float] = field(default_factory=dict)  # host -> extra time fraction


def host_names(n: int) -> list[str]:
    width = max(3, len(str(n)))
    return [f"gpu{i + 1:0{width}d}" for i in range(n)]


def leaf_of(i: int, n_nodes: int, n_leaves: int) -> str:
    return f"leaf{i * n_leaves // n_nodes + 1:02d}"


def plant_faults(
    hosts: list[str],
    n_slow_nodes: int,
    n_slow_links: int,
    seed: int = 0,
    node_factor: float = 0.8,
    link_factor: float = 0.7,
) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """Pick slow nodes and slow links at random; links avoid slow nodes so every fault is one thing."""
    rng = np.random.default_rng(seed)
    nodes = [hosts[i] for i in rng.choice(len(hosts), size=n_slow_nodes, replace=False)]
    rest = [h for h in hosts if h not in nodes]
    links: dict[tuple[str, str], float] = {}
    while len(links) < n_slow_links and len(rest) >= 2:
        a, b = (rest[i] for i in rng.choice(len(rest), size=2, replace=False))
        links[tuple(sorted((a, b)))] = link_factor  # type: ignore[index]
    return {h: node_factor for h in nodes}, links


def _node(host: str, switch: str, gpus: int) -> dict[str, Any]:
    return {
        "host": host,
        "status": "ok",
        "error": None,
        "labels": {"switch": switch},
        "hostname": host,
        "os": "Ubuntu 22.04.4 LTS",
        "kernel": "5.15.0-119-generic",
        "gpus": [
            {
                "index": g,
                "name": "NVIDIA H200",
                "uuid": f"GPU-{host}-{g}",
                "pci_bus_id": f"00000000:{0x18 + g:02x}:00.0",
                "vbios": "96.00.A5.00.01",
                "pcie_gen_current": 5,
                "pcie_gen_max": 5,
                "pcie_width_current": 16,
                "pcie_width_max": 16,
                "memory_total_mib": 143771,
            }
            for g in range(gpus)
        ],
        "driver_version": "580.159.04",
        "cuda_version": "13.0",
        "nvlinks": [
            {"gpu": g, "link": k, "up": True, "speed_GBps": 26.562}
            for g in range(min(gpus, 2))
            for k in range(2)
        ],
        "nics": [
            {
                "name": f"mlx5_{k}",
                "port": 1,
                "driver": "mlx5_core",
                "driver_version": "24.10-1.1.4",
                "firmware": "28.39.1002",
                "board_id": "MT_0000000838",
                "hca_type": "MT4129",
                "link_layer": "InfiniBand",
                "state": "Active",
                "phys_state": "LinkUp",
                "rate_gbps": 400.0,
                "max_rate_gbps": 400.0,
                "pcie_width": 16,
            }
            for k in range(max(gpus, 1))
        ],
        "neighbors": [],
        "ofed_version": "MLNX_OFED_LINUX-24.10-1.1.4.0",
        "nccl_version_torch": "2.28.9",
        "python_version": "3.11.2",
        "torch_version": "2.13.0",
        "missing": {},
        "schema": "netbench.inventory/1",
    }


def make_fleet(
    n_nodes: int = 16,
    n_leaves: int = 2,
    gpus_per_node: int = 8,
    pair_sizes: tuple[int, ...] | list[int] = DEFAULT_PAIR_SIZES,
    ring_sizes: tuple[int, ...] | list[int] = DEFAULT_RING_SIZES,
    slow_nodes: dict[str, float] | None = None,
    slow_links: dict[tuple[str, str], float] | None = None,
    stragglers: dict[str, float] | None = None,
    noise: float = 0.05,
    spine_factor: float = 0.85,
    peak_GBps: float = 360.0,  # large-message busbw of a healthy same-leaf pair: 90% of 8 x 400G NICs
    latency_us: float = 20.0,
    collective: str = "all_reduce",
    pair_rank_times: bool = True,
    ring_order: list[str] | None = None,
    seed: int = 0,
    run_id: str = "20261129T000000Z-synth",
) -> SyntheticFleet:
    """A fleet of ``n_nodes`` on ``n_leaves`` leaves: every pair at ``pair_sizes``, a world ring at
    ``ring_sizes``, inventory and env that agree with each other and with the rows."""
    rng = np.random.default_rng(seed)
    hosts = host_names(n_nodes)
    switches = {h: leaf_of(i, n_nodes, n_leaves) for i, h in enumerate(hosts)}
    slow_nodes = dict(slow_nodes or {})
    slow_links = {tuple(sorted(k)): v for k, v in (slow_links or {}).items()}
    stragglers = dict(stragglers or {})
    node_f = np.array([slow_nodes.get(h, 1.0) for h in hosts])
    index = {h: i for i, h in enumerate(hosts)}
    rows: list[dict[str, Any]] = []
    ranks_pair = 2 * gpus_per_node
    bus_pair = 2 * (ranks_pair - 1) / ranks_pair
    base = {
        "run_id": run_id,
        "collective": collective,
        "backend": "nccl",
        "dtype": "float",
        "op": "sum",
        "in_place": False,
        "iters": 20,
        "warmup": 5,
        "wrong": 0,
        "status": "ok",
        "error": None,
        "device": "cuda",
        "schema": "netbench.result/1",
    }
    for rnd, pairs in enumerate(circle_rounds(hosts)):
        for a, b in pairs:
            ia, ib = index[a], index[b]
            peak = peak_GBps * min(node_f[ia], node_f[ib]) * slow_links.get(tuple(sorted((a, b))), 1.0)
            if switches[a] != switches[b]:
                peak *= spine_factor
            for nbytes in pair_sizes:
                rows.append(
                    _row(
                        base,
                        "pair",
                        [a, b],
                        ranks_pair,
                        rnd,
                        nbytes,
                        bus_pair,
                        peak,
                        latency_us,
                        noise,
                        rng,
                        pair_rank_times,
                        {},
                        gpus_per_node,
                        group=f"pair:{a}|{b}",
                    )
                )
    order = ring_order or hosts
    ranks_world = n_nodes * gpus_per_node
    if n_nodes > 1 and ring_sizes:
        bus_world = 2 * (ranks_world - 1) / ranks_world
        peak = peak_GBps * float(node_f.min()) * (spine_factor if n_leaves > 1 else 1.0)
        for nbytes in ring_sizes:
            rows.append(
                _row(
                    base,
                    "world",
                    list(order),
                    ranks_world,
                    None,
                    nbytes,
                    bus_world,
                    peak,
                    latency_us,
                    noise,
                    rng,
                    True,
                    stragglers,
                    gpus_per_node,
                    group="world",
                )
            )
    inventory = [_node(h, switches[h], gpus_per_node) for h in hosts]
    env = {
        "schema": "netbench.env/1",
        "hosts": {
            h: {
                "python": "3.11.2",
                "torch": "2.13.0",
                "nccl": "2.28.9",
                "cuda": "13.0",
                "env": {"NCCL_ALGO": "Ring", "NCCL_IB_HCA": "mlx5", "NCCL_SOCKET_IFNAME": "ens1f0"},
            }
            for h in hosts
        },
    }
    run = {
        "schema": "netbench.run/1",
        "run_id": run_id,
        "argv": ["netbench", "sweep", "--hosts", "hosts.txt"],
        "started": "2026-11-29T00:00:00+00:00",
        "ended": "2026-11-29T00:20:00+00:00",
        "launcher": "ssh",
        "status": "ok",
        "netbench_version": "0.1.0",
        "hosts": n_nodes,
    }
    return SyntheticFleet(hosts, switches, rows, inventory, env, run, slow_nodes, slow_links, stragglers)  # type: ignore[arg-type]


def _row(
    base: dict[str, Any],
    pattern: str,
    hosts: list[str],
    ranks: int,
    rnd: int | None,
    nbytes: int,
    bus: float,
    peak: float,
    lat: float,
    noise: float,
    rng: np.random.Generator,
    rank_times: bool,
    stragglers: dict[str, float],
    gpus: int,
    group: str,
) -> dict[str, Any]:
    t = (lat + nbytes * bus / (peak * 1e3)) * max(0.05, 1 + noise * rng.standard_normal())
    per_rank = None
    if rank_times:
        jitter = 1 + 0.005 * np.abs(rng.standard_normal(ranks))
        per_rank = t * jitter
        for h, extra in stragglers.items():
            if h in hosts:
                k = hosts.index(h)
                per_rank[k * gpus : (k + 1) * gpus] *= 1 + extra
        per_rank = [round(float(x), 3) for x in per_rank]
    algbw = nbytes / 1e3 / t
    return {
        **base,
        "pattern": pattern,
        "hosts": hosts,
        "ranks": ranks,
        "round": rnd,
        "bytes": nbytes,
        "count": nbytes // 4,
        "time_us": round(t, 3),
        "time_us_min": round(t * 0.99, 3),
        "time_us_max": round(t * 1.01, 3),
        "rank_time_us": per_rank,
        "algbw_GBps": round(algbw, 4),
        "busbw_GBps": round(algbw * bus, 4),
        "group": group,
    }


def write_run_dir(fleet: SyntheticFleet, path: str | Path) -> Path:
    """Write the fleet as a run directory (run.json, env.json, inventory.jsonl, results.jsonl)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "run.json").write_text(json.dumps(fleet.run, indent=2) + "\n")
    (path / "env.json").write_text(json.dumps(fleet.env, indent=2) + "\n")
    with (path / "inventory.jsonl").open("w") as fh:
        for n in fleet.inventory:
            fh.write(json.dumps(n) + "\n")
    with (path / "results.jsonl").open("w") as fh:
        dumps = json.JSONEncoder(separators=(", ", ": ")).encode
        fh.writelines(dumps(r) + "\n" for r in fleet.rows)
        fh.flush()
        os.fsync(fh.fileno())
    return path
