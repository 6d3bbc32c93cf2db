"""``--k8s-idle-only`` and ``--k8s-skip-tested-within``: which of the chosen nodes a run takes, as
Oracle's active health checks choose theirs: only idle nodes, and not those tested within a period.

Idle: no pod but netbench's own (``RUN_LABEL``) requests nvidia.com/gpu on the node and has not ended
(a Pending pod bound to the node counts: the kubelet holds its GPUs for it). A busy node's netbench pod
would wait for GPUs or be refused by the kubelet, and the run would name the node as not tested; left
out, it is said as busy and the next run tries it again.

Tested: the node's ``netbench.io/verdict`` is ``pass`` and its ``netbench.io/last-run`` (both written by
``--k8s-label``, ``remedy``) is within the period. A ``suspect`` or ``fail`` node is re-tested every
run: suspect includes a node the run could not test, and a clean run is what lifts a taint. A
last-run label that is not a past time netbench wrote (an edit, a clock far ahead) counts as never
tested. Every node left out is named, one line a group; nothing left is ``error`` (exit 3: nothing
measured).
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from netbench.common.errors import NetbenchError
from netbench.sites.k8s.pods import GPU_RESOURCE, LAST_RUN_LABEL, RUN_LABEL, VERDICT_LABEL, NodeInfo, quote

STAMP = "%Y%m%dT%H%M%SZ"  # remedy's netbench.io/last-run
AHEAD_S = 300.0
"""A last-run this far ahead of this machine's clock is no time netbench wrote (clocks of one cluster
agree within seconds)."""
SHOWN = 20  # nodes named in a group's line; the rest counted


@dataclass(frozen=True)
class Selection:
    take: list[NodeInfo]
    busy: dict[str, str] = field(default_factory=dict)
    """Node -> the pod holding its GPUs (``pod 'namespace/name'``, quoted: the API's words)."""
    recent: dict[str, str] = field(default_factory=dict)
    """Node -> its last-run stamp, within the period."""
    unreadable: dict[str, str] = field(default_factory=dict)
    """Node -> a last-run value that is not a past time (the node is tested)."""


def _requests(pod: Mapping[str, Any], resource: str) -> bool:
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            res = c.get("resources") if isinstance(c, Mapping) else None
            for part in ("requests", "limits"):  # an extended resource's request defaults to its limit
                want = (res or {}).get(part) if isinstance(res, Mapping) else None
                count = want.get(resource) if isinstance(want, Mapping) else None
                if count is not None and str(count).strip() not in ("", "0"):
                    return True
    return False


def gpu_holders(pods: Sequence[Mapping[str, Any]], resource: str = GPU_RESOURCE) -> dict[str, str]:
    """Node -> the first pod on it (not netbench's, not ended) requesting ``resource``."""
    out: dict[str, str] = {}
    for pod in pods:
        meta = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
        labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
        status = pod.get("status") if isinstance(pod.get("status"), Mapping) else {}
        node = (pod.get("spec") or {}).get("nodeName") if isinstance(pod.get("spec"), Mapping) else None
        if (not isinstance(node, str) or RUN_LABEL in labels or status.get("phase") in ("Succeeded", "Failed")
                or not _requests(pod, resource)):
            continue
        out.setdefault(node, "pod " + quote(f"{meta.get('namespace')}/{meta.get('name')}", 150))
    return out


def last_run_age(value: str | None, now: float) -> float | None:
    """Seconds since a last-run stamp; None when it is not one netbench wrote, or ahead of now."""
    try:
        stamp = calendar.timegm(time.strptime(value or "", STAMP))
    except ValueError:
        return None
    age = now - stamp
    return None if age < -AHEAD_S else max(age, 0.0)


def select(nodes: Sequence[NodeInfo], pods: Sequence[Mapping[str, Any]] | None,
           within_s: float | None, now: float) -> Selection:
    """``pods`` None: no idle check; ``within_s`` None: no tested-within check."""
    holders = gpu_holders(pods) if pods is not None else {}
    take: list[NodeInfo] = []
    busy: dict[str, str] = {}
    recent: dict[str, str] = {}
    unreadable: dict[str, str] = {}
    for n in nodes:
        if n.name in holders:
            busy[n.name] = holders[n.name]
            continue
        stamp = n.labels.get(LAST_RUN_LABEL)
        if within_s is not None and stamp is not None:
            age = last_run_age(stamp, now)
            if age is None:
                unreadable[n.name] = quote(stamp, 40)
            elif age < within_s and n.labels.get(VERDICT_LABEL) == "pass":
                recent[n.name] = stamp
                continue
        take.append(n)
    return Selection(take, busy, recent, unreadable)


def span(seconds: float) -> str:
    """24h, 90m, 45s: a period as it was most likely given."""
    s = int(seconds)
    for unit, size in (("h", 3600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"{s // size}{unit}"
    return f"{s}s"


def _names(group: Mapping[str, str]) -> str:
    shown = [f"{name} ({why})" for name, why in list(group.items())[:SHOWN]]
    more = len(group) - SHOWN
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def lines(sel: Selection, within_s: float | None) -> list[str]:
    """One line a group of nodes left out (or tested despite an unreadable label)."""
    out = []
    if sel.busy:
        out.append(f"# kubernetes: {len(sel.busy)} node(s) left out, busy (another pod requests "
                   f"{GPU_RESOURCE} there; --k8s-idle-only): {_names(sel.busy)}")
    if sel.recent and within_s is not None:
        out.append(f"# kubernetes: {len(sel.recent)} node(s) left out, passed within {span(within_s)} "
                   f"({LAST_RUN_LABEL}; --k8s-skip-tested-within): {_names(sel.recent)}")
    if sel.unreadable:
        out.append(f"# kubernetes: {len(sel.unreadable)} node(s) tested: their {LAST_RUN_LABEL} is not a "
                   f"past time netbench wrote: {_names(sel.unreadable)}")
    return out


def nothing_left(sel: Selection, chosen: int, within_s: float | None) -> NetbenchError:
    """No node left to test: ``error`` (exit 3, docs/exit-status.md: nothing measured), one line."""
    parts = []
    if sel.busy:
        parts.append(f"{len(sel.busy)} busy")
    if sel.recent and within_s is not None:
        parts.append(f"{len(sel.recent)} passed within {span(within_s)}")
    return NetbenchError(f"kubernetes: nothing left to test: of the {chosen} node(s) chosen, "
                         f"{', '.join(parts)}: nothing measured", exit_code=3)
