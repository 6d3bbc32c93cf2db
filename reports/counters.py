"""What the links did during a run: port counter deltas between the snapshots a sweep or preflight
takes before and after its traffic (``counters.jsonl``). Which counters are errors and which mean a
link flap is decided once, in ``inventory/parsers/port_counters.py`` (``is_error``, ``is_flap``).
The file is read back as untrusted data: a port or counter of the wrong shape is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from netbench.inventory.parsers.port_counters import is_error, is_flap


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
            bc, ac = bp.get("counters"), ap.get("counters")
            if not isinstance(bc, dict) or not isinstance(ac, dict):
                continue
            rose, back = {}, []
            for k, v0 in bc.items():
                v1 = ac.get(k)
                if type(v0) is not int or type(v1) is not int:  # bool is an int too
                    continue
                if v1 > v0:
                    rose[k] = v1 - v0
                elif v1 < v0:
                    back.append(k)
            errors = {k: d for k, d in rose.items() if is_error(k, source)}
            flaps = sum(d for k, d in rose.items() if is_flap(k))
            ports.append(PortDelta(host, name, source, rose, errors, flaps, tuple(sorted(back))))
    return CounterDeltas(tuple(ports), compared, missing)
