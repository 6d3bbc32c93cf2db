"""nccl-tests' table on stdout, so people and their scripts read netbench like nccl-tests.

One line per size with the out-of-place and in-place measurements side by side; a variant a
collective does not have (torch's broadcast is in place only) shows as ``N/A``. The closing summary
(``netbench.run.execute.summarize``, from ``netbench.reports.ceilings``) gives large-message bus bandwidth
against its ceiling, then nccl-tests' own closing lines ("Out of bounds values", then "Avg bus
bandwidth" for each collective: ``avg_busbw_lines``) for the scripts that read them. Numbers are
formatted as nccl-tests' ``common.cu`` formats them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from netbench.common.text import quote_untrusted

HEADER = (  # nccl-tests prints these lines exactly so

    "#                                                              out-of-place                       in-place\n"  # noqa: E501
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n"  # noqa: E501
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)"  # noqa: E501
)


def in_table(row: dict[str, Any]) -> bool:
    """A row the table shows: not a pair's or a rail's (those many small groups have their own
    summary, slowest first)."""
    return row.get("pattern") not in ("pair", "rail")


def _time(v: float | None, width: int = 8) -> str:
    """A time in us as nccl-tests prints it: %.0f from 10,000 us, %.1f from 100 us, else %.2f (never
    an exponent: 100,000 us is ``100000``)."""
    if v is None:
        return "N/A".rjust(width)
    return f"{v:{width}.{0 if v >= 1e4 else 1 if v >= 100 else 2}f}"


def _bw(v: float | None, width: int = 7) -> str:
    """A bandwidth in GB/s as nccl-tests prints it: %.2f."""
    return "N/A".rjust(width) if v is None else f"{v:{width}.2f}"


def _half(row: dict[str, Any] | None) -> str:
    if row is None:
        return f"{'N/A':>8} {'N/A':>7} {'N/A':>7} {'N/A':>7}"
    wrong = row.get("wrong")
    return (
        f"{_time(row.get('time_us'))} {_bw(row.get('algbw_GBps'))} {_bw(row.get('busbw_GBps'))} "
        f"{('N/A' if wrong is None else str(wrong)):>7}"
    )


def format_line(oop: dict[str, Any] | None, ip: dict[str, Any] | None) -> str:
    base = oop or ip
    assert base is not None
    redop = base.get("op") or "none"
    root = base.get("root")
    return (
        f"{base['bytes']:>12} {base['count']:>13} {base['dtype']:>9} {redop:>7} "
        f"{(-1 if root is None else root):>7} {_half(oop)}  {_half(ip)}"
    )


def _loop_note(row: dict[str, Any]) -> str:
    """Under a section's title, when the NCCL engine's eager loop ran in Python, not in C
    (``collectives/native_loop``): its small sizes read high, and why it did (the rank's words,
    untrusted: quoted)."""
    if row.get("loop") != "python":
        return ""
    why = (row.get("extra") or {}).get("loop_reason")
    return ("\n# loop: python, not C: small sizes read up to 2 us an operation high"
            + (f" ({quote_untrusted(why, 160)})" if why else ""))


@dataclass
class TablePrinter:
    """Prints rows as they stream in, one line per size once both variants are in (or skipped)."""

    write: Callable[[str], None]
    modes: list[bool] = field(default_factory=lambda: [False, True])
    _pending: dict[tuple, dict[bool, dict[str, Any]]] = field(default_factory=dict)
    _title: tuple | None = None

    def add(self, row: dict[str, Any], has_oop: bool, has_ip: bool, notes: list[str] | None = None) -> None:
        """One row; ``notes``: why a variant of its collective is not measured (printed once per
        section, under its title, so an N/A column is explained where it is read)."""
        if row.get("status") != "ok":
            self.write(
                f"# {row.get('collective')} {row.get('pattern')} {'+'.join(row.get('hosts') or [])}: "
                f"{row.get('status')}: {row.get('error')}"
            )
            return
        engine = row.get("engine") or "torch"
        title = (row["collective"], row["pattern"], tuple(row.get("hosts") or []), row["ranks"], engine)
        if title != self._title:
            self._title = title
            where = " ".join(row.get("hosts") or [])
            self.write(
                f"#\n# {row['collective']}  pattern={row['pattern']}  ranks={row['ranks']}  "
                f"backend={row['backend']}  engine={engine}  hosts={where}\n#"
                + "".join(f"\n# N/A: {note}" for note in notes or ())
                + _loop_note(row)
                + f"\n{HEADER}"
            )
        key = (row.get("group"), row["collective"], engine, row["bytes"])
        got = self._pending.setdefault(key, {})
        got[bool(row["in_place"])] = row
        want = [m for m in self.modes if (has_ip if m else has_oop)]
        if all(m in got for m in want):
            self.write(format_line(got.get(False), got.get(True)))
            del self._pending[key]


def avg_busbw_lines(rows: list[dict[str, Any]]) -> list[str]:
    """nccl-tests' closing "# Avg bus bandwidth" line: the mean busbw over every line of a
    collective's table, both modes. nccl-tests runs one collective a binary, so a run of several
    gives each collective its own line, in the order measured, named after the value (where
    nccl-tests puts OK or FAILED: the value stays the 6th field): a mean of them all together
    is nobody's number. One collective's line is nccl-tests' own, byte for byte."""
    by: dict[str, list[float]] = {}
    for r in rows:
        bw = r.get("busbw_GBps")
        if r.get("status") == "ok" and in_table(r) and isinstance(bw, (int, float)):
            by.setdefault(str(r.get("collective")), []).append(bw)
    named = len(by) > 1
    return [f"# Avg bus bandwidth    : {sum(v) / len(v):g} {c if named else ''}"
            for c, v in by.items()]
