"""A real job's telemetry that ``netbench import`` read (run.json's ``telemetry``).

- ``flight_recorder``: the process groups of a hung job whose collective N some ranks never entered
  (PyTorch Flight Recorder dumps, ``netbench.importers.flight_recorder``): those ranks and their
  hosts are what the others wait for (``collective_never_entered``, fail); ranks of the group that
  left no dump are named beside them.
- ``inspector``: ranks whose collectives were slow against the other ranks of the same collective
  (NCCL Inspector logs, ``netbench.importers.inspector``): ``inspector_slow_rank`` (warn).

run.json is untrusted: a record of the wrong shape is skipped, never a crash.
"""

from __future__ import annotations

from typing import Any

from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule
from netbench.reports.stats import g3, sig3

from netbench.common.findings import Finding


def _ints(v: Any) -> list[int]:
    return [x for x in v if isinstance(x, int) and not isinstance(x, bool)] if isinstance(v, list) else []


def _hang(rec: dict[str, Any]) -> Finding | None:
    missing, no_dump = _ints(rec.get("missing")), _ints(rec.get("no_dump"))
    seq = rec.get("seq")
    if not (missing or no_dump) or not isinstance(seq, int):
        return None
    hosts = rec.get("missing_hosts") if isinstance(rec.get("missing_hosts"), list) else []
    named = [
        f"rank {r}" + (f" on {h}" if isinstance(h, str) else "")
        for r, h in zip(missing, (hosts + [None] * len(missing))[: len(missing)], strict=True)
    ]
    coll = str(rec.get("collective", "?"))[:100]
    group = str(rec.get("group", ""))[:100]
    entered = _ints(rec.get("entered"))
    title = (
        f"{', '.join(named) or 'no dumped rank'} never entered collective {seq} ({coll}) of process group "
        f"{group!r}, which {len(entered)} rank(s) entered and wait in"
    )
    if no_dump:
        more = f" and {len(no_dump) - 20} more" if len(no_dump) > 20 else ""
        title += f"; rank(s) {', '.join(map(str, no_dump[:20]))}{more} left no dump"
    subject_hosts = sorted({h for h in hosts if isinstance(h, str)})
    return Finding(
        rule="collective_never_entered",
        severity="fail",
        subject_kind="node" if len(subject_hosts) == 1 else "run",
        subject=subject_hosts[0] if len(subject_hosts) == 1 else f"process group {group!r}",
        title=title,
        evidence={
            "collective_seq": seq,
            "collective": coll,
            "process_group": group,
            "ranks_missing": missing,
            "hosts_missing": subject_hosts,
            "ranks_without_dump": no_dump,
            "ranks_entered": len(entered),
            "sizes": str(rec.get("sizes", ""))[:200],
        },
        action="Look at what the named rank(s) did instead (py-spy dump of the process, its log, its host's "
        "dmesg): a rank stuck in data loading, a different code path, or dead; restart the job without "
        "its host if the host is at fault.",
        hosts=subject_hosts,
    )


def _slow(rec: dict[str, Any]) -> Finding | None:
    host, rank = rec.get("host"), rec.get("rank")
    numbers = all(isinstance(rec.get(k), (int, float)) for k in ("slower", "wait_us"))
    if not isinstance(rank, int) or not numbers:
        return None
    where = f"rank {rank}" + (f" on {host}" if isinstance(host, str) else "")
    return Finding(
        rule="inspector_slow_rank", severity="warn", subject_kind="node" if isinstance(host, str) else "run",
        subject=host if isinstance(host, str) else where,
        title=(f"{where} arrives last: its kernel was the shortest (the others' were running, waiting "
               "for it) "
               f"in {rec.get('collectives_slow')} of {rec.get('collectives')} collectives of communicator "
               f"{str(rec.get('comm'))[:40]}, {g3(rec['wait_us'])} us, {g3(100 * rec['slower'])}% of the "
               "collective (NCCL Inspector)"),
        evidence={k: (sig3(v) if isinstance(v, float) else v) for k, v in rec.items()
                  if k in ("rank", "host", "comm", "collectives", "collectives_slow", "wait_us", "slower",
                           "p_value", "busbw_GBps", "median_busbw_GBps", "source")},
        action=f"Check {where}: what delays its launches (CPU contention, data loading, GPU clocks); its own "
        "busbw looks best because it never waits: the other ranks' low busbw is its doing.",
        hosts=[host] if isinstance(host, str) else [],
    )


def check(ctx: AnalysisContext) -> list[Finding]:
    tel = ctx.run.get("telemetry")
    if not isinstance(tel, dict):
        return []
    out: list[Finding] = []
    fr = tel.get("flight_recorder")
    for rec in (
        fr.get("never_entered", [])
        if isinstance(fr, dict) and isinstance(fr.get("never_entered"), list)
        else []
    ):
        f = _hang(rec) if isinstance(rec, dict) else None
        if f is not None:
            out.append(f)
    ins = tel.get("inspector")
    for rec in (
        ins.get("slow_ranks", []) if isinstance(ins, dict) and isinstance(ins.get("slow_ranks"), list) else []
    ):
        f = _slow(rec) if isinstance(rec, dict) else None
        if f is not None:
            out.append(f)
    return out


RULE = Rule(
    name="telemetry",
    ids=ids("collective_never_entered", "inspector_slow_rank"),
    check=check,
    doc=__doc__ or "",
)
