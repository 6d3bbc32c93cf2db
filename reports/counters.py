"""What the links did during a run: port counter deltas between the snapshots a sweep or preflight
takes before and after its traffic (``counters.jsonl``; ``inventory/parsers/port_counters.py``).

Error counters are named, not guessed from every number: the InfiniBand PortCounters that mean a
bad cable, transceiver or port (IBTA PortCounters: SymbolErrorCounter, LinkErrorRecoveryCounter,
LinkDownedCounter, PortRcvErrors, ... as Linux names them in sysfs), the mlx5 RDMA ``hw_counters``
that mean lost or refused packets (not the congestion signals such as ``roce_adp_retrans`` or
``out_of_sequence``, which a busy healthy fabric shows too), and Ethernet ``ethtool -S`` names made
of error words (``rx_crc_errors_phy``, ``rx_errors``, ``tx_discards_phy``; never ``*_corrected*``
or the XDP program's own counters). A link flap is ``link_downed`` or a ``link_down*`` counter rising.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

IB_ERRORS = frozenset({
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
    "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_discards",
    "port_xmit_constraint_errors", "port_rcv_constraint_errors", "local_link_integrity_errors",
    "excessive_buffer_overrun_errors", "VL15_dropped",
    # mlx5 hw_counters: packets lost or refused end to end
    "local_ack_timeout_err", "rnr_nak_retry_err", "packet_seq_err", "out_of_buffer",
    "req_cqe_error", "resp_cqe_error",
})
_ETH_ERROR = re.compile(r"(?:^|_)(?:errors?|err|crc|discards?|drops?|dropped|fcs|missed)(?:_|$)")
_ETH_NOT = re.compile(r"corrected|xdp")
_FLAP = re.compile(r"^link_downed$|(?:^|_)link_down")


def is_error(name: str, source: str) -> bool:
    if source == "sysfs-ib":
        return name in IB_ERRORS
    return bool(_ETH_ERROR.search(name)) and not _ETH_NOT.search(name)


def is_flap(name: str) -> bool:
    return bool(_FLAP.search(name))


@dataclass(frozen=True)
class PortDelta:
    """One port over the run: every counter that rose, the error ones, and counters that went back
    (reset or wrapped: their delta is unknown, so they are named rather than judged)."""

    host: str
    port: str
    source: str
    rose: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    flaps: int = 0
    went_back: tuple[str, ...] = ()


@dataclass(frozen=True)
class CounterDeltas:
    ports: tuple[PortDelta, ...] = ()
    hosts_compared: int = 0
    missing: dict[str, str] = field(default_factory=dict)  # host -> why it has no delta


def _snapshot(recs: list[dict[str, Any]], phase: str, last: bool) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for rec in recs:
        if rec.get("phase") == phase and (last or rec["host"] not in out):
            out[rec["host"]] = rec
    return out


def _ports(rec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(p.get("port")): p for p in rec.get("ports") or [] if isinstance(p, dict)}


def counter_deltas(snapshots: list[dict[str, Any]]) -> CounterDeltas:
    """Per host, the first 'before' against the last 'after' (preflight may measure in stages)."""
    before, after = _snapshot(snapshots, "before", False), _snapshot(snapshots, "after", True)
    ports: list[PortDelta] = []
    missing: dict[str, str] = {}
    compared = 0
    for host in sorted(set(before) | set(after)):
        b, a = before.get(host), after.get(host)
        if b is None or a is None:
            missing[host] = f"no {'before' if b is None else 'after'} snapshot"
            continue
        if not b.get("ports") or not a.get("ports"):
            missing[host] = str((a if not a.get("ports") else b).get("error") or "no port counters read")
            continue
        compared += 1
        a_ports = _ports(a)
        for name, bp in _ports(b).items():
            ap = a_ports.get(name)
            if ap is None:
                continue
            source = str(bp.get("source") or "")
            bc, ac = bp.get("counters") or {}, ap.get("counters") or {}
            rose, back = {}, []
            for k, v0 in bc.items():
                v1 = ac.get(k)
                if not isinstance(v0, int) or not isinstance(v1, int):
                    continue
                if v1 > v0:
                    rose[k] = v1 - v0
                elif v1 < v0:
                    back.append(k)
            errors = {k: d for k, d in rose.items() if is_error(k, source)}
            flaps = sum(d for k, d in rose.items() if is_flap(k))
            ports.append(PortDelta(host, name, source, rose, errors, flaps, tuple(sorted(back))))
    return CounterDeltas(tuple(ports), compared, missing)
