"""Headline figures against their physical ceiling and published references ("is this normal?").

A headline is the large-message busbw of one (collective, pattern, group, engine): the mean over the
few largest sizes measured, which is what the fabric delivers (nccl-tests' "Avg bus bandwidth" over
every size mostly says how many tiny sizes were swept; nccl-tests issues #294, #71).

Its ceiling follows from the inventory (``inventory.ceilings``): within one node, a GPU's NVLink
(the sum of its links up, one direction) or, without NVLink, its PCIe link; across nodes, the
slowest node's data ports (rate, or the PCIe link the adapter trained at when lower), counting at
most one port per rank on the node, since NCCL drives about one NIC per GPU and gloo one interface.
busbw is defined so that a ring's busbw equals the traffic on its narrowest link (nccl-tests
PERFORMANCE.md), hence "busbw <= ceiling" for ring algorithms. Tree and NVLS move fewer bytes over
the bottleneck than busbw's factor assumes, so they can exceed it; ``exceeds`` says why when one does.
When the inventory does not know the hardware the ceiling is None and ``unknown`` says why.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from netbench.inventory.ceilings import NodeLinks, node_links
from netbench.inventory.model import NodeInventory
from netbench.reports.policy import Reference, build_references

if TYPE_CHECKING:
    import pandas as pd

#: busbw this much above a ceiling is "above" (timing noise and rounding stay quiet)
ABOVE_MARGIN = 1.05
#: headlines are summarised over this many of the largest sizes
TOP_SIZES = 3
TERMINAL_PATTERNS = ("world", "ring", "intra")  # the headlines a terminal prints (pairs have their table)

_NO_INVENTORY = ("the run has no inventory (a local `netbench sweep` probes the hardware only when it "
                 "runs on GPUs, and external launchers' runs do not; "
                 "`netbench sweep --hosts` and `netbench preflight` do)")
_CPU_ONE_HOST = ("CPU ranks on one host: gloo moves the data through loopback and shared memory, "
                 "no network link to measure")


@dataclass(frozen=True)
class Ceiling:
    """The bound of one headline: ``GBps`` and the hardware it follows from, or ``unknown``: why not."""

    GBps: float | None
    basis: str = ""
    unknown: str | None = None
    nic_ports: int = 0  # per_nic references scale by this (the slowest node's ports counted)
    nic_gbps: float | None = None  # their rate when they all share one
    gpu_name: str | None = None  # the nodes' GPU model when they share one (references match on it)
    gpus: int = 0  # GPUs per node, when every node has the same count


@dataclass(frozen=True)
class RefMatch:
    """A reference that applies to a headline, with its range scaled to it (per_nic x ports)."""

    ref: Reference
    low_GBps: float
    high_GBps: float

    def text(self) -> str:
        rng = (f"{self.low_GBps:.0f}" if self.low_GBps == self.high_GBps
               else f"{self.low_GBps:.0f}-{self.high_GBps:.0f}")
        assumed = f"if the nodes are {self.ref.platform}; " if self.ref.scope == "platform" else ""
        return f"{rng} GB/s ({assumed}{self.ref.algo}, {self.ref.id}: {self.source})"

    @property
    def source(self) -> str:
        """The source as shown: without the URL scheme, so the offline report holds no link that a
        reader's tooling would mistake for a resource to fetch (tests/test_report_html.py)."""
        return self.ref.source.replace("https://", "").replace("http://", "")


@dataclass(frozen=True)
class Headline:
    collective: str
    pattern: str
    group: Any
    engine: str
    backend: str
    ranks: int
    hosts: tuple[str, ...]
    sizes: tuple[int, ...]
    busbw_GBps: float
    algbw_GBps: float
    wrong: int
    ceiling: Ceiling
    reference: RefMatch | None = None
    exceeds: str | None = None  # why busbw is above the ceiling, when it is

    @property
    def fraction(self) -> float | None:
        return self.busbw_GBps / self.ceiling.GBps if self.ceiling.GBps else None

    def ceiling_text(self) -> str:
        """``87% of ceiling 400 GB/s (...)`` or ``ceiling unknown: why``, and the reference."""
        c = self.ceiling
        if c.GBps is None:
            text = f"ceiling unknown: {c.unknown}"
        else:
            text = f"{self.fraction:.0%} of ceiling {c.GBps:.1f} GB/s ({c.basis})"
        if self.reference is not None:
            text += f"; reference {self.reference.text()}"
        return text


def large_message_summary(
    rows: list[dict[str, Any]] | pd.DataFrame, top: int = TOP_SIZES
) -> list[dict[str, Any]]:
    """Per (collective, pattern, group, engine): mean busbw and algbw over the ``top`` largest sizes.
    A DataFrame (the report's 1.6 M rows) is summarised column-wise, to the same result."""
    if not isinstance(rows, list):
        return _frame_summary(rows, top)
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in map(_no_nan, rows):
        if r.get("status", "ok") == "ok" and r.get("busbw_GBps") is not None:
            key = (r["collective"], r["pattern"], r.get("group"), r.get("engine") or "torch")
            groups.setdefault(key, []).append(r)
    out = []
    for (coll, pattern, group, engine), rs in groups.items():
        sizes = sorted({int(r["bytes"]) for r in rs})[-top:]
        sel = [r for r in rs if int(r["bytes"]) in sizes]
        hosts = dict.fromkeys(h for r in rs for h in (r.get("hosts") or []))
        out.append({
            "collective": coll, "pattern": pattern, "group": group, "engine": engine,
            "backend": next((r.get("backend") for r in rs if r.get("backend")), ""),
            "ranks": max(int(r["ranks"]) for r in rs), "hosts": list(hosts), "sizes": sizes,
            "busbw_GBps": sum(float(r["busbw_GBps"]) for r in sel) / len(sel),
            "algbw_GBps": sum(float(r["algbw_GBps"]) for r in sel) / len(sel),
            "wrong": sum(int(r.get("wrong") or 0) for r in rs),
        })
    return out


def _frame_summary(df: pd.DataFrame, top: int) -> list[dict[str, Any]]:
    """``large_message_summary`` of a DataFrame: numpy group-bys, one Python pass only over the
    rows' host lists (to keep their first-seen order per group)."""
    import numpy as np
    import pandas as pd

    ok = (df["status"].isna() | (df["status"] == "ok")).to_numpy()  # absent status: ok (categoricals too)
    d = df[ok & df["busbw_GBps"].notna().to_numpy()]
    if d.empty:
        return []
    keys = pd.DataFrame({
        "collective": d["collective"].astype(object).to_numpy(),
        "pattern": d["pattern"].astype(object).to_numpy(),
        "group": d["group"].astype(object).to_numpy() if "group" in d else None,
        "engine": d["engine"].astype(object).where(d["engine"].notna() & (d["engine"].astype(object) != ""),
                                                   "torch").to_numpy(),
    })
    gid = keys.groupby(list(keys.columns), sort=False, dropna=False).ngroup().to_numpy()
    n = int(gid.max()) + 1
    nbytes = d["bytes"].astype(np.int64).to_numpy()
    # the ``top`` largest distinct sizes of each group: rank the distinct (group, size) pairs
    pairs, inv = np.unique(np.stack([gid, -nbytes], axis=1), axis=0, return_inverse=True)
    first = np.r_[0, np.nonzero(np.diff(pairs[:, 0]))[0] + 1]  # by group, largest size first
    rank = np.arange(len(pairs)) - np.repeat(first, np.diff(np.r_[first, len(pairs)]))
    chosen = pairs[rank < top]
    sel = (rank < top)[inv.ravel()]
    bus = np.bincount(gid[sel], d["busbw_GBps"].to_numpy(float)[sel], n)
    alg = np.bincount(gid[sel], d["algbw_GBps"].to_numpy(float)[sel], n)
    count = np.bincount(gid[sel], minlength=n)
    ranks = np.zeros(n, dtype=np.int64)
    np.maximum.at(ranks, gid, d["ranks"].astype(np.int64).to_numpy())
    wrong = np.bincount(gid, np.nan_to_num(d["wrong"].to_numpy(float)), n) if "wrong" in d else np.zeros(n)
    sizes: list[list[int]] = [[] for _ in range(n)]
    for g, b in chosen[::-1].tolist():  # ascending sizes
        sizes[g].append(-b)
    hosts: list[dict[str, None]] = [{} for _ in range(n)]
    last: list[Any] = [None] * n
    for g, hs in zip(gid.tolist(), d["hosts"], strict=True):
        if isinstance(hs, list) and hs != last[g]:
            hosts[g].update(dict.fromkeys(hs))
            last[g] = hs
    backend = d["backend"].astype(object).to_numpy()
    first_backend: list[str] = [""] * n
    for g, b in zip(gid.tolist(), backend, strict=True):
        if not first_backend[g] and isinstance(b, str) and b:
            first_backend[g] = b
    out = []
    heads = keys.iloc[np.unique(gid, return_index=True)[1]]  # ngroup numbers groups as first seen
    for g, (coll, pattern, group, engine) in enumerate(heads.itertuples(index=False, name=None)):
        out.append({
            "collective": coll, "pattern": pattern, "group": None if group != group else group,  # NaN
            "engine": engine, "backend": first_backend[g], "ranks": int(ranks[g]), "hosts": list(hosts[g]),
            "sizes": sorted(sizes[g]), "busbw_GBps": float(bus[g] / count[g]),
            "algbw_GBps": float(alg[g] / count[g]), "wrong": int(wrong[g]),
        })
    return out


def _no_nan(row: dict[str, Any]) -> dict[str, Any]:
    """A row from a DataFrame has NaN where a field was absent; NaN != NaN would split groups."""
    return {k: v for k, v in row.items() if not (isinstance(v, float) and v != v)}


def bundled_references() -> list[Reference]:
    text = resources.files("netbench.reports").joinpath("assets/references.toml").read_text(encoding="utf-8")
    return build_references(tomllib.loads(text).get("reference", []), "references.toml reference")


def references(policy_refs: list[Reference] | None = None) -> list[Reference]:
    """The bundled table with the policy's entries added; a policy entry replaces one of its id."""
    merged = {r.id: r for r in bundled_references()}
    merged.update({r.id: r for r in policy_refs or []})
    return list(merged.values())


def links_by_host(inventory: list[dict[str, Any]] | list[NodeInventory]) -> dict[str, NodeLinks]:
    """Each reachable node's bounds (unreachable ones are absent: their ceiling is unknown)."""
    out = {}
    for node in inventory:
        inv = node if isinstance(node, NodeInventory) else NodeInventory.from_dict(node)
        if inv.ok:
            out[inv.host] = node_links(inv)
    return out


def ceiling_of(summary: dict[str, Any], nodes: dict[str, NodeLinks], have_inventory: bool) -> Ceiling:
    hosts = list(summary["hosts"])
    cpu = summary["backend"] == "gloo"
    if len(hosts) <= 1:
        if cpu:
            return Ceiling(None, unknown=_CPU_ONE_HOST)
        if not have_inventory:
            return Ceiling(None, unknown=_NO_INVENTORY)
        node = nodes.get(hosts[0]) if hosts else None
        if node is None:
            return Ceiling(None, unknown=f"no inventory of host {hosts[0] if hosts else '?'} (unreachable?)")
        if node.nvlink_GBps:
            gen = f" {node.nvlink_generation}" if node.nvlink_generation else ""
            return Ceiling(node.nvlink_GBps, gpu_name=node.gpu_name, basis=(
                f"NVLink{gen}: {node.nvlink_links} links up = {node.nvlink_GBps:.0f} GB/s per GPU and "
                f"direction on {node.host}, the GPU with the least"))
        if node.gpu_pcie_GBps:
            return Ceiling(node.gpu_pcie_GBps, gpu_name=node.gpu_name, basis=(
                f"no NVLink ({node.nvlink_unknown}): GPUs exchange over PCIe, the narrowest GPU link "
                f"{node.gpu_pcie_GBps:.1f} GB/s on {node.host}"))
        return Ceiling(None, unknown=f"{node.host}: no NVLink ({node.nvlink_unknown}), no GPU PCIe link")
    if not have_inventory:
        return Ceiling(None, unknown=_NO_INVENTORY)
    per_host = max(1, int(summary["ranks"]) // len(hosts))
    ports = 1 if cpu else per_host
    bounds: list[tuple[float, NodeLinks]] = []
    for h in hosts:
        node = nodes.get(h)
        if node is None:
            return Ceiling(None, unknown=f"no inventory of host {h} (unreachable?)")
        bw = node.nic_GBps(ports)
        if bw is None:
            why = f"{h}: no NIC rate ({node.nic_unknown})"
            return Ceiling(None, unknown=why, **_shared_gpus(hosts, nodes))
        bounds.append((bw, node))
    bw, slowest = min(bounds, key=lambda b: b[0])
    used = min(ports, len(slowest.nics))
    why = (f"slowest node {slowest.host}: {slowest.nic_text(ports)} = {bw:.1f} GB/s"
           if len(hosts) > 1 else f"{slowest.nic_text(ports)}")
    if used < len(slowest.nics):
        why += (f"; {'gloo uses one interface' if cpu else f'{per_host} rank(s) per node drive'} "
                f"at most {used} of its {len(slowest.nics)} ports")
    rates = {n.rate_gbps for n in slowest.nics}
    return Ceiling(bw, basis=why, nic_ports=used, nic_gbps=rates.pop() if len(rates) == 1 else None)


def _shared_gpus(hosts: list[str], nodes: dict[str, NodeLinks]) -> dict[str, Any]:
    """The GPU model and count every one of ``hosts`` has (what a platform reference matches on),
    or nothing when a node is unknown or they differ."""
    seen = {(n.gpu_name, n.gpus) for n in (nodes.get(h) for h in hosts) if n is not None}
    if len(seen) != 1 or any(nodes.get(h) is None for h in hosts):
        return {}
    name, count = seen.pop()
    return {"gpu_name": name, "gpus": count} if name and count else {}


def _gpus_match(ref: Reference, gpu_name: str | None) -> bool:
    return not ref.gpu or bool(gpu_name) and any(g.upper() in str(gpu_name).upper() for g in ref.gpu)


def match_reference(summary: dict[str, Any], ceiling: Ceiling, refs: list[Reference]) -> RefMatch | None:
    """The first reference for this collective and shape: intra (one node, ``gpus`` ranks, GPU model),
    per_nic (across nodes, the slowest node's port rate, scaled by its ports counted), or platform
    (across nodes whose NICs are unknown, every one with the reference's GPU model and count, a
    GPU a rank: what an imported log says of its nodes)."""
    hosts = summary["hosts"]
    for ref in refs:
        if ref.collective != summary["collective"] or summary["backend"] != "nccl":
            continue
        if ref.scope == "intra" and len(hosts) == 1 and ceiling.GBps is not None:
            if (not ref.gpus or ref.gpus == summary["ranks"]) and _gpus_match(ref, ceiling.gpu_name):
                return RefMatch(ref, ref.low_GBps, ref.high_GBps)
        elif ref.scope == "per_nic" and len(hosts) > 1 and ceiling.nic_gbps == ref.nic_gbps:
            return RefMatch(ref, ref.low_GBps * ceiling.nic_ports, ref.high_GBps * ceiling.nic_ports)
        elif (ref.scope == "platform" and len(hosts) > 1 and ceiling.GBps is None and ceiling.gpus == ref.gpus
              and summary["ranks"] == ref.gpus * len(hosts) and _gpus_match(ref, ceiling.gpu_name)):
            return RefMatch(ref, ref.low_GBps, ref.high_GBps)
    return None


def _exceeds(summary: dict[str, Any], ceiling: Ceiling) -> str | None:
    if ceiling.GBps is None or summary["busbw_GBps"] <= ceiling.GBps * ABOVE_MARGIN:
        return None
    hosts = summary["hosts"]
    if summary["collective"] == "all_reduce" and summary["backend"] == "nccl" and len(hosts) == 1:
        return ("above the NVLink rate: NVLink SHARP (NVLS) reduces inside the NVSwitch, so each GPU sends "
                "its data once instead of the 2(n-1)/n times busbw's ring factor assumes")
    if summary["collective"] == "all_reduce" and summary["backend"] == "nccl" and len(hosts) == 2:
        return ("above the NIC rate: on two nodes NCCL picks Tree (or NVLS tree), which sends each byte over "
                "the network about once instead of the 2(n-1)/n times busbw's ring factor assumes; "
                "set NCCL_ALGO=Ring to measure the fabric (nccl-tests issue #196)")
    return ("above the inventory's bound: the group used links the inventory did not count (see its "
            "ports left out), or the algorithm moved fewer bytes over them than busbw's factor assumes")


def headlines(rows: list[dict[str, Any]] | pd.DataFrame,
              inventory: list[dict[str, Any]] | list[NodeInventory], refs: list[Reference],
              patterns: tuple[str, ...] | None = None) -> list[Headline]:
    """Every headline of the rows with its ceiling, reference and, when above, why. ``patterns``:
    only those (the terminal shows world/ring/intra; pairs are summarised per pair elsewhere).
    Without an inventory no pair has a ceiling, and a headline per pair (500k at 1,024 nodes) would
    say only that: pairs are left out then."""
    nodes = links_by_host(inventory)
    if not inventory and not isinstance(rows, list):
        rows = rows[(rows["pattern"] != "pair").to_numpy()]
    elif not inventory:
        rows = [r for r in rows if r.get("pattern") != "pair"]
    out = []
    for s in large_message_summary(rows):
        if patterns is not None and s["pattern"] not in patterns:
            continue
        if s["ranks"] < 2:  # busbw is 0 by definition: nothing crossed a link
            continue
        ceiling = ceiling_of(s, nodes, bool(inventory))
        out.append(Headline(
            collective=s["collective"], pattern=s["pattern"], group=s["group"], engine=s["engine"],
            backend=s["backend"], ranks=s["ranks"], hosts=tuple(s["hosts"]), sizes=tuple(s["sizes"]),
            busbw_GBps=s["busbw_GBps"], algbw_GBps=s["algbw_GBps"], wrong=s["wrong"], ceiling=ceiling,
            reference=match_reference(s, ceiling, refs), exceeds=_exceeds(s, ceiling),
        ))
    return out


def headline_lines(lines: list[Headline] | tuple[Headline, ...], patterns: tuple[str, ...]) -> list[str]:
    """The terminal's closing lines for the headlines of ``patterns`` (world, ring, intra: pairs are
    summarised per pair elsewhere): busbw, then its ceiling and reference, then why it is above."""
    from netbench.collectives.sizes import format_size

    shown = [h for h in lines if h.pattern in patterns]
    engines = {h.engine for h in shown}
    out = []
    for h in shown:
        sizes = ", ".join(format_size(b) for b in h.sizes)
        who = f" [{h.engine}]" if len(engines) > 1 else ""
        out.append(f"# {h.collective + who:<15} large-message busbw {h.busbw_GBps:8.3f} GB/s "
                   f"(algbw {h.algbw_GBps:.3f}; mean of the {len(h.sizes)} largest sizes: {sizes})")
        out.append(f"#   {h.ceiling_text()}")
        if h.exceeds:
            out.append(f"#   {h.exceeds}")
    return out
