"""Link and configuration health from the inventory: the causes behind slow nodes.

NIC rate below its maximum, the policy or its peers; HCA ports down where peers have them up;
GPU PCIe width below its maximum (a GPU that trained at x8 halves its host bandwidth); fewer GPUs
than expected or than peers; NVLinks down; hosts the inventory could not reach. PCIe *generation*
below maximum is only info: idle GPUs drop their link speed to save power and nvidia-smi shows that.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule
from netbench.reports.stats import majority

from netbench.common.findings import Finding

_UP = {"active", "up", "linkup"}


def _few(items: list[str], n: int = 4) -> str:
    return ", ".join(items[:n]) + (" ..." if len(items) > n else "")


def _ok_nodes(ctx: AnalysisContext) -> list[dict[str, Any]]:
    return [n for n in ctx.inventory if n.get("status") in (None, "ok", "partial")]


def check(ctx: AnalysisContext) -> list[Finding]:
    out: list[Finding] = []
    nodes = _ok_nodes(ctx)
    for n in ctx.inventory:
        if n.get("status") not in (None, "ok", "partial", "cannot_run"):  # reached: rules.host_checks
            out.append(
                Finding(
                    rule="node_unreachable",
                    severity="warn",
                    subject_kind="node",
                    subject=n["host"],
                    title=f"{n['host']}: inventory failed ({n.get('status')})",
                    evidence={"status": n.get("status"), "error": n.get("error")},
                    action=ctx.site.about(n["host"]).unreachable,
                    hosts=[n["host"]],
                )
            )
    out += _gpu_count(ctx, nodes)
    out += _nics(ctx, nodes)
    out += _pcie(nodes)
    out += _nvlink(ctx, nodes)
    return out


def _gpu_count(ctx: AnalysisContext, nodes: list[dict[str, Any]]) -> list[Finding]:
    counts = {n["host"]: len(n.get("gpus") or []) for n in nodes}
    if not counts:
        return []
    expected = ctx.policy.expect.gpus_per_node
    peers = majority(list(counts.values()))
    want = expected if expected is not None else peers
    out = []
    for host, c in counts.items():
        if c < want:
            source = "policy" if expected is not None else "fleet majority"
            out.append(
                Finding(
                    rule="gpu_count_low",
                    severity="fail",
                    subject_kind="node",
                    subject=host,
                    title=f"{host}: {c} GPUs visible, {source} expects {want}",
                    evidence={"gpus": c, "expected": want, "source": source, "fleet_majority": peers},
                    action=(
                        f"Drain {host}: a GPU fell off the bus or the driver lost it "
                        "(check dmesg for Xid 79 / 'fallen off the bus', nvidia-smi -q, reseat)."
                    ),
                    hosts=[host],
                )
            )
    return out


def _nics(ctx: AnalysisContext, nodes: list[dict[str, Any]]) -> list[Finding]:
    out: list[Finding] = []
    expected = ctx.policy.expect.link_rate_gbps
    # which NIC names are up on most peers: a port down where peers have it up is a fault,
    # a port down everywhere is simply not cabled (e.g. a second management port)
    up_count: Counter[str] = Counter()
    rate_by_name: dict[str, list[float]] = {}
    for n in nodes:
        for nic in n.get("nics") or []:
            if (nic.get("state") or "").lower() in _UP:
                up_count[nic["name"]] += 1
                if nic.get("rate_gbps"):
                    rate_by_name.setdefault(nic["name"], []).append(float(nic["rate_gbps"]))
    n_nodes = len(nodes)
    for n in nodes:
        host = n["host"]
        for nic in n.get("nics") or []:
            name = nic.get("name")
            state = (nic.get("state") or "").lower()
            phys = (nic.get("phys_state") or "").lower()
            down = (state and state not in _UP) or (phys and phys not in _UP)
            if down:
                if up_count[name] > n_nodes / 2:
                    out.append(
                        Finding(
                            rule="port_down",
                            severity="fail",
                            subject_kind="node",
                            subject=host,
                            title=f"{host}: {name} port is {nic.get('state')}/{nic.get('phys_state')} "
                            f"(up on {up_count[name]} of {n_nodes} nodes)",
                            evidence={
                                "nic": name,
                                "state": nic.get("state"),
                                "phys_state": nic.get("phys_state"),
                                "peers_up": up_count[name],
                                "nodes": n_nodes,
                            },
                            action=(
                                f"Check cable/transceiver and switch port of {host}"
                                f" {name}: a rail is missing."
                            ),
                            hosts=[host],
                        )
                    )
                continue
            rate = nic.get("rate_gbps")
            if not rate:
                continue
            rate = float(rate)
            reasons = []
            if nic.get("max_rate_gbps") and rate < float(nic["max_rate_gbps"]):
                reasons.append(f"its maximum {nic['max_rate_gbps']:g} Gb/s")
            if expected and rate < expected:
                reasons.append(f"the policy's {expected:g} Gb/s")
            peer = majority(rate_by_name.get(name, []))
            if peer and rate < peer:
                reasons.append(f"the fleet's {peer:g} Gb/s on {name}")
            if reasons:
                out.append(
                    Finding(
                        rule="nic_rate_low",
                        severity="warn",
                        subject_kind="node",
                        subject=host,
                        title=f"{host}: {name} runs at {rate:g} Gb/s, below " + " and ".join(reasons),
                        evidence={
                            "nic": name,
                            "rate_gbps": rate,
                            "max_rate_gbps": nic.get("max_rate_gbps"),
                            "policy_gbps": expected,
                            "fleet_majority_gbps": peer,
                        },
                        action=f"Re-seat or replace the cable/transceiver of {host} {name}; check its "
                        "auto-negotiation and switch port speed.",
                        hosts=[host],
                    )
                )
    return out


def _pcie(nodes: list[dict[str, Any]]) -> list[Finding]:
    out = []
    # a NIC's PCIe width against the same NIC on its peers (sysfs has no "max" for it)
    nic_widths: dict[str, list[int]] = {}
    for n in nodes:
        for nic in n.get("nics") or []:
            if nic.get("pcie_width"):
                nic_widths.setdefault(nic["name"], []).append(int(nic["pcie_width"]))
    for n in nodes:
        host = n["host"]
        narrow, slow = [], []
        for nic in n.get("nics") or []:
            peer = majority(nic_widths.get(nic.get("name"), []))
            if nic.get("pcie_width") and peer and int(nic["pcie_width"]) < peer:
                narrow.append(f"{nic['name']} x{nic['pcie_width']} (peers x{peer})")
        for g in n.get("gpus") or []:
            w, wm = g.get("pcie_width_current"), g.get("pcie_width_max")
            if w and wm and w < wm:
                narrow.append(f"GPU{g.get('index')} x{w}/x{wm}")
            gen, gm = g.get("pcie_gen_current"), g.get("pcie_gen_max")
            if gen and gm and gen < gm:
                slow.append(f"GPU{g.get('index')} gen{gen}/gen{gm}")
        if narrow:
            out.append(
                Finding(
                    rule="pcie_degraded",
                    severity="warn",
                    subject_kind="node",
                    subject=host,
                    title=f"{host}: PCIe link narrower than its maximum ({', '.join(narrow)})",
                    evidence={"gpus": narrow},
                    hosts=[host],
                    action=(
                        "A link that trained narrow halves host<->GPU bandwidth: reseat the GPU/riser, "
                        "check `lspci -vv` LnkSta, then the slot."
                    ),
                )
            )
        if slow:
            out.append(
                Finding(
                    rule="pcie_gen_low",
                    severity="info",
                    subject_kind="node",
                    subject=host,
                    title=f"{host}: PCIe generation below maximum ({_few(slow)})",
                    evidence={"gpus": slow},
                    hosts=[host],
                    action="Idle GPUs lower their PCIe speed to save power; re-check under load first.",
                )
            )
    return out


def _nvlink(ctx: AnalysisContext, nodes: list[dict[str, Any]]) -> list[Finding]:
    if not ctx.policy.expect.nvlinks_up:
        return []
    out = []
    for n in nodes:
        down = [
            f"GPU{link.get('gpu')} link {link.get('link')}"
            for link in n.get("nvlinks") or []
            if link.get("up") is False
        ]
        if down:
            host = n["host"]
            out.append(
                Finding(
                    rule="nvlink_down",
                    severity="fail",
                    subject_kind="node",
                    subject=host,
                    title=f"{host}: {len(down)} NVLink(s) down ({_few(down)})",
                    evidence={"down": down, "total_links": len(n.get("nvlinks") or [])},
                    action=(
                        f"Drain {host}: intra-node traffic falls back to PCIe; check `nvidia-smi nvlink -s` "
                        "and Xid errors, then the baseboard/NVSwitch."
                    ),
                    hosts=[host],
                )
            )
    return out


RULE = Rule(
    name="link_health",
    ids=ids(
        "node_unreachable",
        "gpu_count_low",
        "port_down",
        "nic_rate_low",
        "pcie_degraded",
        "pcie_gen_low",
        "nvlink_down",
    ),
    check=check,
    doc=__doc__ or "",
)
