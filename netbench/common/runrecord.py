"""run.json's fields, as a typed record: the one list of what a run says about itself.

Every writer goes through ``RunDir.write_run(**fields)``, which takes only these names (a misspelt
field is a programming error, raised at once, never a key no reader knows); readers stay tolerant of
unknown and missing fields (older runs, newer writers). The schema is ``rundir.RUN_SCHEMA``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class RunRecord:
    """run.json. Each field is optional: a run fills them as it goes (``status`` first)."""

    schema: str | None = None
    """``netbench.run/1``."""
    run_id: str | None = None
    argv: list[str] | None = None
    """The command line as typed."""
    command: str | None = None
    """sweep | worker | preflight | simulate | inventory | import."""
    status: str | None = None
    """starting | running | completed | failed | interrupted | budget."""
    error: str | None = None
    """Why a run did not complete (one line)."""
    signal: str | None = None
    """The signal that stopped it (SIGINT, SIGTERM, SIGHUP; netbench.common.interrupts), with status
    ``interrupted``; None for a run a full disk stopped (``error`` names the path)."""
    stopped_in: str | None = None
    """The stage a stop came in: inventory | measuring | re-tests | report (the measurements of a run
    stopped in the report are all in: its status stays ``completed``)."""
    netbench_version: str | None = None
    launcher: str | None = None
    """The site: local | ssh | mpi | slurm | torchrun | sim (netbench.sites)."""
    scheduler_job: str | None = None
    """The scheduler's job the run ran in (Slurm's job id)."""
    backend: str | None = None
    device: str | None = None
    hosts: list[str] | None = None
    """The hosts measured, in ring order."""
    world_size: int | None = None
    hosts_file: str | None = None
    host_labels: dict[str, dict[str, str]] | None = None
    topology: dict[str, str] | None = None
    """host -> leaf switch, switch -> parent (netbench.inventory.topology): the one form of the switches."""
    options: dict[str, Any] | None = None
    """The options as asked."""
    started: str | None = None
    ended: str | None = None
    finished: str | None = None
    seconds: float | None = None
    rows: int | None = None
    """Rows: measurements (status ok) and groups that gave none (``rows_failed``)."""
    rows_failed: int | None = None
    """Rows with a status other than ok: a group that timed out, errored or was not run."""
    down_hosts: list[str] | None = None
    left_out: dict[str, str] | None = None
    """Hosts left out before any rank started -> why (their inventory's status and error:
    unreachable, timeout, cannot_run: no torch for the ranks' python ...)."""
    startup_s: float | None = None
    phases: list[dict[str, Any]] | None = None
    faults: list[dict[str, Any]] | None = None
    retests: dict[str, Any] | None = None
    """The re-tests' verdicts (netbench.confirm), read by the report as its evidence."""
    confirm: dict[str, Any] | None = None
    """What sweep's re-test step spent: budget_s, seconds, launches."""
    verdict: str | None = None
    budget_s: float | None = None
    preflight: dict[str, Any] | None = None
    simulate: dict[str, Any] | None = None
    fabric_s: float | None = None
    imported: dict[str, Any] | None = None
    telemetry: dict[str, Any] | None = None
    """What an import read of a real job's telemetry (``netbench import flight-recorder`` /
    ``inspector``): ``flight_recorder`` (who never entered collective N) and ``inspector`` (slow
    ranks), judged by the report's ``telemetry`` rule."""
    sources: list[Any] | None = None
    started_at: str | None = None
    finished_at: str | None = None
    failed_hosts: list[str] | None = None


RUN_FIELDS = frozenset(f.name for f in fields(RunRecord))


def check_fields(names: set[str]) -> None:
    """Raise TypeError for a field run.json does not have (``RunRecord``)."""
    unknown = sorted(names - RUN_FIELDS)
    if unknown:
        raise TypeError(f"run.json has no field {unknown[0]!r} (netbench.common.runrecord.RunRecord)")


def rows_line(rows: int, failed: int) -> str:
    """The row counts as the log, run.json (``rows``, ``rows_failed``) and the report say them: a row
    is a measurement (status ok) or a group that gave none (failed)."""
    return f"rows: {rows}, {rows - failed} measured, {failed} failed (timed out, errored or not run)"
