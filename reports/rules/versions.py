"""Outdated or mismatched firmware and drivers, per component.

A node is judged per component (GPU driver, VBIOS, NIC/HCA firmware and driver, OFED, NCCL, CUDA)
against the policy minimum, the fleet's majority and the fleet's newest, with version strings of
every shape compared by ``inventory.versions``. Firmware lines differ per model (ConnectX-7 runs
28.x, ConnectX-6 20.x), so NICs are compared within their HCA type and VBIOS within its GPU model.
Two HCAs of one node on different firmware are reported on their own: that is a half-done update.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from netbench.inventory.versions import compare_versions
from netbench.inventory.versions import parse_version as _parse_version
from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule

from netbench.common.findings import Finding

LABELS = {
    "driver": "GPU driver",
    "vbios": "GPU VBIOS",
    "nic_firmware": "NIC firmware",
    "nic_driver": "NIC driver",
    "ofed": "OFED",
    "nccl": "NCCL",
    "cuda": "CUDA",
    "torch": "torch",
}

#: what the ranks of one job must share: a newer minority is not a rollout to wait out but ranks whose
#: collectives may not even agree on a wire format, so it warns as an older one does
MUST_MATCH = ("torch", "nccl")


def component_values(ctx: AnalysisContext) -> Iterator[tuple[str, str | None, str, str, str]]:
    """(component, model group, host, instance, version) for every version the inventory/env has."""
    env_hosts = (ctx.env or {}).get("hosts") or {}
    for node in ctx.inventory:
        host = node.get("host")
        if not host or node.get("status") not in (None, "ok", "partial"):
            continue
        if node.get("driver_version"):
            yield "driver", None, host, "", str(node["driver_version"])
        cuda = node.get("cuda_version") or (env_hosts.get(host) or {}).get("cuda")
        if cuda:
            yield "cuda", None, host, "", str(cuda)
        if node.get("ofed_version"):
            yield "ofed", None, host, "", str(node["ofed_version"])
        torch = node.get("torch_version") or (env_hosts.get(host) or {}).get("torch")
        if torch:
            yield "torch", None, host, "", str(torch)
        nccl = (env_hosts.get(host) or {}).get("nccl") or node.get("nccl_version_torch")
        if nccl:
            yield "nccl", None, host, "", str(nccl)
        for g in node.get("gpus") or []:
            if g.get("vbios"):
                yield "vbios", g.get("name"), host, f"GPU{g.get('index')}", str(g["vbios"])
        for nic in node.get("nics") or []:
            model = nic.get("hca_type") or nic.get("board_id") or nic.get("driver")
            if nic.get("firmware"):
                yield "nic_firmware", model, host, str(nic.get("name")), str(nic["firmware"])
            if nic.get("driver_version"):
                yield "nic_driver", nic.get("driver"), host, str(nic.get("name")), str(nic["driver_version"])


@lru_cache(maxsize=4096)
def parse_version(v: str) -> Any:
    """Cached: a fleet repeats the same few version strings thousands of times."""
    return _parse_version(v)


def _key(v: str) -> Any:
    return parse_version(v)  # Versions hash/compare by meaning: 13.0 == 13.0.0


def check(ctx: AnalysisContext) -> list[Finding]:
    per: dict[tuple[str, str | None], dict[str, dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
    for comp, model, host, inst, ver in component_values(ctx):
        if parse_version(ver).known:
            per[(comp, model)][host][inst] = ver
    out: list[Finding] = []
    for (comp, model), hosts in per.items():
        out += _mismatch(comp, model, hosts)
        node_value = {
            h: min(v.values(), key=_key) for h, v in hosts.items()
        }  # a node is as old as its oldest
        out += _fleet(ctx, comp, model, node_value)
    return out


def _name(comp: str, model: str | None) -> str:
    return LABELS[comp] + (f" ({model})" if model else "")


def _mismatch(comp: str, model: str | None, hosts: dict[str, dict[str, str]]) -> list[Finding]:
    if comp not in ("nic_firmware", "nic_driver", "vbios"):
        return []
    out = []
    for host, inst in hosts.items():
        distinct = {str(_key(v).key): v for v in inst.values()}
        if len(distinct) < 2:
            continue
        out.append(
            Finding(
                rule="firmware_mismatch",
                severity="warn",
                subject_kind="node",
                subject=host,
                title=(
                    f"{host}: {_name(comp, model)}"
                    f" differs between devices ({', '.join(sorted(distinct.values()))})"
                ),
                evidence={"component": comp, "model": model, "per_device": dict(sorted(inst.items()))},
                action=f"Finish the {LABELS[comp]} update on {host} so every device runs the same version.",
                hosts=[host],
            )
        )
    return out


def _fleet(ctx: AnalysisContext, comp: str, model: str | None, value: dict[str, str]) -> list[Finding]:
    out: list[Finding] = []
    groups: dict[Any, list[str]] = defaultdict(list)  # by meaning, first spelling kept
    spelled: dict[Any, str] = {}
    for host, v in value.items():
        k = _key(v)
        groups[k].append(host)
        spelled.setdefault(k, v)
    counts = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]), reverse=False)
    majority_key = counts[0][0] if len(counts) == 1 or len(counts[0][1]) > len(counts[1][1]) else None
    newest_key = max(groups)
    minimum = ctx.policy.versions.minimum_for(comp, model)
    name = _name(comp, model)
    fleet = {spelled[k]: len(h) for k, h in counts}
    for k, hosts in groups.items():
        v = spelled[k]
        hosts = sorted(hosts)
        base = {
            "component": comp,
            "model": model,
            "version": v,
            "fleet_versions": fleet,
            "hosts_count": len(hosts),
        }
        subject_kind, subject = ("node", hosts[0]) if len(hosts) == 1 else ("component", f"{name} {v}")
        who = hosts[0] if len(hosts) == 1 else f"{len(hosts)} nodes"
        if minimum and compare_versions(v, minimum) < 0:
            out.append(
                Finding(
                    rule="version_below_minimum",
                    severity="fail",
                    subject_kind=subject_kind,
                    subject=subject,
                    title=f"{who}: {name} {v} is below the policy minimum {minimum}",
                    evidence={**base, "policy_minimum": minimum, "hosts": hosts},
                    action=(
                        f"Update {LABELS[comp]} to {minimum}"
                        f" or newer (fleet's newest: {spelled[newest_key]})."
                    ),
                    hosts=hosts,
                )
            )
        elif majority_key is not None and k < majority_key:
            out.append(
                Finding(
                    rule="outdated_firmware",
                    severity="warn",
                    subject_kind=subject_kind,
                    subject=subject,
                    title=f"{who}: {name} {v} is behind the fleet majority {spelled[majority_key]}",
                    evidence={
                        **base,
                        "fleet_majority": spelled[majority_key],
                        "fleet_newest": spelled[newest_key],
                        "hosts": hosts,
                    },
                    action=(
                        f"Update {LABELS[comp]} on {who} to {spelled[majority_key]}"
                        ", like the rest of the fleet."
                    ),
                    hosts=hosts,
                )
            )
        elif majority_key is None and k < newest_key and len(counts) > 1:
            out.append(
                Finding(
                    rule="outdated_firmware",
                    severity="warn",
                    subject_kind=subject_kind,
                    subject=subject,
                    title=(
                        f"{who}: {name} {v} is behind the fleet's newest {spelled[newest_key]} (no majority)"
                    ),
                    evidence={**base, "fleet_newest": spelled[newest_key], "hosts": hosts},
                    action=f"Bring {LABELS[comp]} to one version across the fleet.",
                    hosts=hosts,
                )
            )
        elif majority_key is not None and k > majority_key and comp in MUST_MATCH:
            out.append(_mixed(name, comp, base, spelled[majority_key], who, hosts, subject_kind, subject))
    if majority_key is not None and majority_key < newest_key and comp not in MUST_MATCH:
        ahead = sorted(h for k, hs in groups.items() if k > majority_key for h in hs)
        out.append(
            Finding(
                rule="version_behind_newest",
                severity="info",
                subject_kind="component",
                subject=name,
                title=(
                    f"{name}: fleet majority runs {spelled[majority_key]}, {len(ahead)} node(s) run newer "
                    f"(up to {spelled[newest_key]})"
                ),
                evidence={
                    "component": comp,
                    "model": model,
                    "fleet_versions": fleet,
                    "newer_hosts": ahead[:50],
                },
                action="A rollout in progress? Mixed versions across ranks are worth avoiding for one job.",
            )
        )
    return out


def _mixed(name: str, comp: str, base: dict[str, Any], majority: str, who: str, hosts: list[str],
           subject_kind: str, subject: str) -> Finding:
    return Finding(
        rule="version_mixed",
        severity="warn",
        subject_kind=subject_kind,
        subject=subject,
        title=f"{who}: {name} {base['version']} differs from the fleet majority {majority}",
        evidence={**base, "fleet_majority": majority, "hosts": hosts},
        action=f"Run one {LABELS[comp]} on every host of a job: install {majority} on {who}, or the "
        "newer one everywhere.",
        hosts=hosts,
    )


RULE = Rule(
    name="versions",
    ids=ids("version_below_minimum", "outdated_firmware", "firmware_mismatch", "version_behind_newest",
            "version_mixed"),
    check=check,
    doc=__doc__ or "",
)
