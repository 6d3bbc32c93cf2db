"""Preflight's outputs: the report, the JSON/JUnit/Prometheus/CSV files and the terminal summary."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from netbench.common.rundir import atomic_write
from netbench.preflight.options import PreflightResult

if TYPE_CHECKING:
    from netbench.history.hook import HistoryStage


def _size(n: int) -> str:
    from netbench.collectives.sizes import format_size

    return format_size(n)


def _write_report(rundir: Any, ctx: Any, findings: list[Any], html: bool, history: HistoryStage | None = None
                  ) -> Path | None:
    """findings.json and report.html of the final analysis (re-test verdicts already in its findings;
    ``history``: the run's history stage, for report.html's history section)."""
    from netbench.reports.report import write_outputs as write_report_files

    return write_report_files(rundir.path, ctx, findings, html=html,
                              history=history.section if history is not None else None)


def with_history(history: HistoryStage, ctx: Any, findings: list[Any], info: dict[str, Any]) -> None:
    """``info["history"]`` (run.json's and the JSON report's ``preflight`` block): for each node a
    warning or failure names, how it measured in its last good run (``ctx.last_good``, which the
    analysis judged: ``reports/rules/last_good.py``, information or warnings, never a drain)."""
    from netbench.reports.engine import named_nodes

    if not ctx.last_good:
        return
    named = named_nodes(findings)
    info["history"] = {"store": str(history.root), "compared": len(ctx.last_good),
                       "nodes": {g.host: g.to_json() for g in ctx.last_good if g.host in named}}


def _checks() -> list[str]:
    from netbench.reports.export.json_out import CHECKS

    return list(CHECKS)


def situation(result: PreflightResult) -> str:
    """How the preflight ended, for the one exit-status table (``reports.verdict.exit_code``): its
    verdict, or the stop (the signal; a full disk) that left it without one."""
    from netbench.reports.verdict import DISK_FULL

    stop = result.info.get("interrupted")
    return (stop.get("signal") or DISK_FULL) if stop else result.verdict


def json_report(result: PreflightResult) -> dict[str, Any]:
    """``netbench.report/1`` (docs/output-json.md): the one JSON shape, its drain and check lists the
    one drain rule's over the hosts checked, plus a ``preflight`` block (budget, stage times,
    suspects, re-tests)."""
    from netbench.reports.export.json_out import to_report

    doc = to_report(result.findings, result.rundir.read_run(), checks=_checks(), hosts=result.hosts)
    doc.update(preflight=result.info)
    stop = result.info.get("interrupted")
    if stop:  # no verdict, and no check passed, on what was not measured; the drain list: established
        doc.update(verdict="interrupted", exit_code=result.exit_code, error=stop["error"], interrupted=stop,
                   headline=f"INTERRUPTED: {stop['error']}")
        doc["checks"]["passed"] = []
    return doc


def check_output_paths(paths: dict[str, str | None]) -> None:
    """Refuse, before minutes of measuring, an output file whose directory does not exist:
    ``{"--json": "pf.json", ...}`` -> UsageError naming the option (one line, exit 2)."""
    from netbench.common.errors import UsageError

    for option, path in paths.items():
        if path and not Path(path).expanduser().resolve().parent.is_dir():
            raise UsageError(f"{option} {path}: directory {Path(path).parent} does not exist")


def write_outputs(
    result: PreflightResult,
    *,
    json_path: str | None = None,
    junit_path: str | None = None,
    junit_warn_as_failure: bool = False,
    prometheus_path: str | None = None,
    csv_path: str | None = None,
    drain_list: str | None = None,
) -> None:
    """The files a caller asked for, each written atomically."""
    from netbench.reports.export import csv as csv_out
    from netbench.reports.export import json_out, junit, prometheus

    run = result.rundir.read_run()
    if drain_list:
        atomic_write(drain_list, "".join(h + "\n" for h in result.drain))
    if json_path:
        atomic_write(json_path, json_out.dumps(json_report(result)))
    stop = result.info.get("interrupted")
    if stop:  # JUnit: one failing case, as a run that could not finish; Prometheus left alone (stale)
        if junit_path:
            atomic_write(junit_path, junit.to_junit([_stopped_finding(stop["error"])], [], run))
        if csv_path:
            atomic_write(csv_path, csv_out.rows_to_csv(result.rundir.read_rows()))
        return
    if junit_path:
        atomic_write(
            junit_path, junit.to_junit(result.findings, _checks(), run, warn_as_failure=junit_warn_as_failure)
        )
    if prometheus_path:
        atomic_write(
            prometheus_path, prometheus.to_prometheus(result.rundir.read_rows(), result.findings, run)
        )
    if csv_path:
        atomic_write(csv_path, csv_out.rows_to_csv(result.rundir.read_rows()))


def _stopped_finding(why: str) -> Any:
    from netbench.common.findings import Finding

    return Finding(rule="preflight", severity="fail", subject_kind="run", subject="preflight",
                   title=f"netbench preflight did not finish: {why}")


def write_error_outputs(
    message: str,
    *,
    json_path: str | None = None,
    junit_path: str | None = None,
    drain_list: str | None = None,
) -> None:
    """Could not run: the JSON says ``verdict: error`` (exit 3), JUnit one failing case, the drain
    list is emptied (a stale one must not be acted on). Prometheus/CSV are left alone: a stale
    textfile is what the staleness alert is for."""
    from netbench.common.findings import Finding
    from netbench.reports.export import json_out, junit

    if drain_list:
        atomic_write(drain_list, "")
    if json_path:
        atomic_write(json_path, json_out.dumps(json_out.to_report([], {}, could_run=False, error=message)))
    if junit_path:
        f = Finding(
            rule="preflight",
            severity="fail",
            subject_kind="run",
            subject="preflight",
            title=f"netbench preflight could not run: {message}",
        )
        atomic_write(junit_path, junit.to_junit([f], [], {}))


def format_summary(result: PreflightResult, stream: TextIO | None = None) -> str:
    """The verdict block for stderr (stdout carries only the drain list): what hosts reported shown
    as text (``terminal_safe``), the verdict words in colour when ``stream`` is a terminal."""
    from netbench.common.text import coloured, terminal_safe

    return coloured(terminal_safe(_summary(result)), stream or sys.stderr)


def _summary(result: PreflightResult) -> str:
    from netbench.reports.summary import format_summary as summary

    stop = result.info.get("interrupted")
    if stop:
        drained = (f"drain {len(result.drain)} node(s) the inventory had already failed: "
                   f"{', '.join(result.drain)}" if result.drain else "no node established as failing")
        return (f"preflight INTERRUPTED ({stop['error']}) after {result.info['elapsed_s']:.1f} s: no verdict "
                f"on what was not measured; {drained}; run directory {result.rundir.path}")
    lines = [summary(result.findings, "text", result.rundir.read_run(), 10)]
    past = result.info.get("history", {}).get("nodes", {})
    for host, g in list(past.items())[:10]:  # each node drained or warned about, in its last good run
        lines.append(f"history: {host} last good run {str(g['started'])[:10]} ({g['run_id']}): "
                     f"{g['then_GBps']:.3g} GB/s at {g['size']}; now {g['now_GBps']:.3g} GB/s "
                     f"({g['change_pct']:+.0f}%)")
    if result.check:
        lines.append(
            "check (links/switches, not drained): " + ", ".join(c.replace("|", " - ") for c in result.check)
        )
    lines.append(
        f"preflight {result.verdict.upper()} in {result.info['elapsed_s']:.1f} s of a "
        f"{result.info['budget_s']:g} s budget; drain {len(result.drain)} node(s); run directory "
        f"{result.rundir.path}"
    )
    if result.report_html:
        lines.append(f"report: {result.report_html}")
    return "\n".join(lines)


def drain_reasons(result: PreflightResult) -> dict[str, str]:
    """Each node to drain -> the title of the first failing finding that drains it (worst first)."""
    from netbench.reports.verdict import drain_reasons as reasons

    return reasons(result.findings, result.drain)


def drain_in_slurm(result: PreflightResult, dry_run: bool = False) -> list[str]:
    """``--drain``: drain every node of the drain list in Slurm; one line per node saying what was
    done (or why it could not be), for stderr. Only ever called when the user asked for it. The
    reason names the run and its report, so ``sinfo -R`` leads back to the evidence. ``dry_run``
    (``--drain --dry-run``): the ``scontrol`` command lines instead, run nothing."""
    import shlex

    from netbench.sites.slurm.scontrol import SlurmError, drain_command, drain_node

    html = result.report_html
    where = f"run {result.rundir.run_id}" + (f" report {Path(html).resolve()}" if html else "")
    lines = []
    for host, why in drain_reasons(result).items():
        try:
            if dry_run:
                lines.append(shlex.join(drain_command(host, why, where)))
                continue
            reason = drain_node(host, why, where)
        except SlurmError as exc:
            lines.append(f"netbench: could not drain {host}: {exc}")
            continue
        lines.append(f"netbench: drained {host} in Slurm (Reason={reason!r})")
    return lines
