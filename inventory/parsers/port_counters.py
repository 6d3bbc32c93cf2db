"""Port counters: ``/sys/class/infiniband/<dev>/ports/<n>/{counters,hw_counters}/<name>`` as the
probe dumps them (``mlx5_0/ports/1/counters/symbol_error: 0``), and ``ethtool -S <netdev>``
(``NIC statistics:`` then ``     rx_errors: 0`` lines).

Values must be plain non-negative integers: anything else (a sysfs read error, ``N/A``) is skipped,
not guessed. Names are kept as the tool gives them; names are checked against a conservative
pattern so a hostile device cannot smuggle markup or control characters into a report.

Which counters mean a broken link is decided here too (``is_error``, ``is_flap``), once, for the
reader that keeps only what matters of ``ethtool -S`` (an mlx5 port prints several hundred
counters, per queue; a fleet's run directory should not carry them all) and for the report's
deltas (``reports.counters``). The InfiniBand error set follows the IBTA PortCounters as Linux
names them in sysfs, plus the mlx5 ``hw_counters`` that mean lost or refused packets (not the
congestion signals ``roce_adp_retrans`` or ``out_of_sequence``, which a busy healthy fabric shows).
Ethernet names made of error words count (``rx_crc_errors_phy``, ``rx_errors``, ``tx_discards_phy``),
never ``*_corrected*`` or an XDP program's own counters. A flap is ``link_downed`` or ``link_down*``.
"""

from __future__ import annotations

import re

from netbench.inventory.model import PortCounters

_IB = re.compile(r"(?:^|/)([A-Za-z0-9_.:-]+)/ports/(\d+)/(counters|hw_counters)/([A-Za-z0-9_.-]+)$")
_NAME = re.compile(r"^[A-Za-z0-9_.:\[\]-]{1,80}$")
_VALUE = re.compile(r"^\d{1,20}$")
_MAX_COUNTERS = 1000  # per port: a real mlx5 has a few hundred ethtool counters

IB_ERRORS = frozenset({
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
    "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_discards",
    "port_xmit_constraint_errors", "port_rcv_constraint_errors", "local_link_integrity_errors",
    "excessive_buffer_overrun_errors", "VL15_dropped",
    "local_ack_timeout_err", "rnr_nak_retry_err", "packet_seq_err", "out_of_buffer",
    "req_cqe_error", "resp_cqe_error",
})
_ETH_ERROR = re.compile(r"(?:^|_)(?:errors?|err|crc|discards?|drops?|dropped|fcs|missed)(?:_|$)")
_ETH_NOT = re.compile(r"corrected|xdp")
_FLAP = re.compile(r"^link_downed$|(?:^|_)link_down")
_ETH_TOTALS = frozenset({"rx_packets", "tx_packets", "rx_bytes", "tx_bytes"})


def is_error(name: str, source: str) -> bool:
    if source == "sysfs-ib":
        return name in IB_ERRORS
    return bool(_ETH_ERROR.search(name)) and not _ETH_NOT.search(name)


def is_flap(name: str) -> bool:
    return bool(_FLAP.search(name))


def parse_ib_counters(text: str) -> list[PortCounters]:
    ports: dict[str, PortCounters] = {}
    for line in text.splitlines():
        path, sep, value = line.partition(": ")
        m = _IB.search(path.strip())
        if not sep or not m or not _VALUE.match(value.strip()):
            continue
        port = f"{m.group(1)}/{m.group(2)}"
        pc = ports.setdefault(port, PortCounters(port=port, source="sysfs-ib"))
        # counters/ and hw_counters/ share no names on mlx5; should they, the port counter wins
        if len(pc.counters) < _MAX_COUNTERS and (m.group(3) == "counters" or m.group(4) not in pc.counters):
            pc.counters[m.group(4)] = int(value.strip())
    return list(ports.values())


def parse_ethtool_s(text: str, netdev: str) -> PortCounters:
    """``ethtool -S``: its error and link-down counters and the port's packet/byte totals. Raises
    ValueError when the text is not its output or ``netdev`` is not a device name (``no stats
    available`` is a device without statistics: an empty record, not an error)."""
    if not _NAME.match(netdev):
        raise ValueError("not a network device name")
    pc = PortCounters(port=netdev, source="ethtool")
    if "no stats available" in text.lower():
        return pc
    if not any(line.strip().endswith("statistics:") for line in text.splitlines()):
        raise ValueError("not ethtool -S output (no 'statistics:' header)")
    for line in text.splitlines():
        name, sep, value = line.strip().partition(": ")
        if not (sep and _NAME.match(name) and _VALUE.match(value.strip())):
            continue
        if len(pc.counters) >= _MAX_COUNTERS:
            break
        if is_error(name, "ethtool") or is_flap(name) or name in _ETH_TOTALS:
            pc.counters[name] = int(value.strip())
    return pc
