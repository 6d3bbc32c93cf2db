"""The inventory as a terminal table, with the cells that differ from the fleet marked.

Why mark against the majority: on a healthy fleet every node runs the same driver and NIC
firmware, so the node that does not is the finding. A cell is marked (``*``, and red on a tty) when
its column has a clear majority value (strictly more common than any other) and the cell differs.
Every value came from a remote host: control characters are replaced before printing, so a
hostile ``hostname`` cannot move the cursor or recolour the terminal.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from netbench.inventory.model import NodeInventory

from netbench.common.jsontext import dumps

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MARK = "*"
MISSING = "-"


def clean(value: object, limit: int = 60) -> str:
    """Printable, single-line, bounded text of an untrusted value."""
    text = _CONTROL.sub("?", str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def gpus_cell(n: NodeInventory) -> str | None:
    if not n.gpus:
        return None
    names = Counter((g.name or "GPU").removeprefix("NVIDIA ").strip() for g in n.gpus)
    return ", ".join(f"{c}x {name}" for name, c in sorted(names.items()))


def nic_fw_cell(n: NodeInventory) -> str | None:
    fws = sorted({nic.firmware for nic in n.nics if nic.firmware})
    return ",".join(fws) or None


def nccl4py_cell(n: NodeInventory) -> str | None:
    """The NCCL engine: its version where the ranks' python imports it, ``no`` where it does not
    (one such host makes a run's ``--engine auto`` time through torch everywhere: planner)."""
    if n.nccl4py is None:
        return None
    return (n.nccl4py_version or "yes") if n.nccl4py else "no"


@dataclass(frozen=True)
class Column:
    """A table column: its title, how to read the value, and whether it is compared with the fleet."""

    title: str
    value: Callable[[NodeInventory], str | None]
    compare: bool = True


COLUMNS: list[Column] = [
    Column("GPUs", gpus_cell),
    Column("driver", lambda n: n.driver_version),
    Column("CUDA", lambda n: n.cuda_version),
    Column("NIC firmware", nic_fw_cell),
    Column("nccl4py", nccl4py_cell),
    Column("switch", lambda n: n.switch(), compare=False),
]


def majority(values: Sequence[str | None]) -> tuple[bool, str | None]:
    """(has a strict majority, the value). Ties mean there is no "normal" to compare against."""
    counts = Counter(values).most_common(2)
    if not counts:
        return False, None
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return False, None
    return True, counts[0][0]


def differing(nodes: Sequence[NodeInventory]) -> dict[str, set[str]]:
    """host -> titles of its cells that differ from the majority of the reachable hosts."""
    live = [n for n in nodes if n.ok]
    out: dict[str, set[str]] = {n.host: set() for n in nodes}
    if len(live) < 2:
        return out
    for col in COLUMNS:
        if not col.compare:
            continue
        values = [col.value(n) for n in live]
        has, normal = majority(values)
        if not has:
            continue
        for n, v in zip(live, values, strict=True):
            if v != normal:
                out[n.host].add(col.title)
    return out


def render_table(nodes: Sequence[NodeInventory], color: bool = False) -> str:
    """Fixed-width table: host, status, GPUs, driver, CUDA, NIC firmware, nccl4py, switch, note."""
    import click

    marks = differing(nodes)
    header = ["host", "status"] + [c.title for c in COLUMNS] + ["note"]
    rows: list[list[tuple[str, str]]] = []  # (text, style) per cell
    for n in nodes:
        row = [(clean(n.host, 40), ""), (n.status, "" if n.ok else "fail")]
        for col in COLUMNS:
            v = col.value(n) if n.ok else None
            text = clean(v) if v is not None else MISSING
            if col.title in marks[n.host]:
                row.append((f"{text}{MARK}", "diff"))
            else:
                row.append((text, ""))
        note = n.error or ""
        if n.ok and n.missing and not note:
            note = f"missing: {', '.join(sorted(n.missing))}"
        row.append((clean(note, 80), ""))
        rows.append(row)
    widths = [max([len(h)] + [len(r[i][0]) for r in rows]) for i, h in enumerate(header)]
    styles = {"fail": {"fg": "red", "bold": True}, "diff": {"fg": "yellow", "bold": True}}

    def fmt(cells: list[tuple[str, str]]) -> str:
        parts = []
        for (text, style), w in zip(cells, widths, strict=True):
            padded = text.ljust(w)
            parts.append(click.style(padded, **styles[style]) if color and style else padded)
        return "  ".join(parts).rstrip()

    lines = [fmt([(h, "") for h in header])]
    lines += [fmt(r) for r in rows]
    ok = sum(n.ok for n in nodes)
    summary = f"{len(nodes)} host(s): {ok} inventoried"
    failed = Counter(n.status for n in nodes if not n.ok)
    if failed:
        summary += ", " + ", ".join(f"{c} {s}" for s, c in sorted(failed.items()))
    lines.append("")
    lines.append(summary)
    if any(marks.values()):
        lines.append(f"{MARK} differs from the majority of the reachable hosts")
    return "\n".join(lines)


def render_json(nodes: Sequence[NodeInventory]) -> str:
    """The records as one JSON array (the same dicts as inventory.jsonl)."""
    return dumps([n.to_dict() for n in nodes], indent=2, default=str)
