"""The run's history stage: report.html's history section, then the run added to the history, on by
default; one warning line at worst, never a cost to the run's verdict or its exit status."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from netbench.common.findings import Finding
    from netbench.history.ingest import RunTables
    from netbench.reports.html.history import HistorySection
    from netbench.reports.lastgood import LastGood

OFF = ("off", "no", "0", "none", "")
#: click's ``meta`` key (shared by a command and the commands it invokes) under which a command that
#: adds its run after invoking ``netbench report`` on it (``netbench import``) hands the report its
#: stage: the report's tables are kept for the add, so the run is not read a second time
META_KEY = "netbench.history.stage"


def chosen_root(choice: str | None = None) -> Path | None:
    """The store runs are added to: ``choice`` (``--history DIR``; ``off``: none), else
    ``$NETBENCH_HISTORY`` (``off``: none), else the default."""
    from netbench.history.store import default_root

    if choice is not None:
        return None if choice.strip().lower() in OFF else Path(choice)
    value = os.environ.get("NETBENCH_HISTORY")
    if value is not None and value.strip().lower() in OFF:
        return None
    return default_root()


def _warn(what: str, root: Path, exc: Exception) -> None:
    print(f"netbench: warning: {what} {root}: {exc}", file=sys.stderr)


@dataclass
class HistoryStage:
    """One run's history (``choice``: ``--history DIR`` / ``--no-history``, ``history.hook.chosen_root``).

    The report calls ``section`` (``reports.report.report_run``'s ``history``): this run's tables are
    made from the report's own analysis, the section is read from the store with them in it
    (``overlay.WithRun``), and they are kept; ``add`` at the run's end writes them with run.json's
    last words, so the run is not read and fitted a second time. A run whose report made none (no
    report, a report that failed) is read from its directory (``ingest.read_run``). ``adds`` False:
    the history is only read (``netbench report``)."""

    choice: str | None = None
    adds: bool = True
    root: Path | None = field(init=False)
    kept: tuple[Path, RunTables] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.root = chosen_root(self.choice)

    def section(self, ctx: Any, findings: list[Finding], html: bool = True) -> HistorySection | None:
        """report.html's history section (None: no history, or no HTML); this run's tables kept."""
        if self.root is None:
            return None
        try:
            tables = self._tables(ctx, findings)
            return self._section(tables, findings) if html else None
        except Exception as exc:  # noqa: BLE001 - the report is whole without its history section
            _warn("no history section from", self.root, exc)
            return None

    def _tables(self, ctx: Any, findings: list[Finding]) -> RunTables | None:
        """This run's tables, as ``history add`` would make them; None for a run it would refuse."""
        from netbench.history.ingest import RefusedRun, check_whole, tables_of

        try:
            check_whole(ctx, Path(ctx.run_dir or "."))
            tables = tables_of(ctx, [f.to_dict() for f in findings])
        except RefusedRun:
            return None  # ``add`` reads it and says why (one line), as ``history add`` would
        if self.adds and ctx.run_dir is not None:
            self.kept = (Path(ctx.run_dir), tables)
        return tables

    def _section(self, tables: RunTables | None, findings: list[Finding]) -> HistorySection | None:
        from netbench.history.overlay import WithRun
        from netbench.history.section import build_section
        from netbench.history.store import HistoryStore

        assert self.root is not None
        store = HistoryStore(self.root)
        if not store.exists():
            return None
        return build_section(WithRun(store, tables), tables.run_id if tables else None, findings)

    def last_good(self, ctx: Any) -> tuple[LastGood, ...]:
        """Each node of the run against its last good run in the history (``history.lastgood``), for
        the analysis (``AnalysisContext.last_good``); none without a history."""
        if self.root is None:
            return ()
        try:
            from netbench.history.lastgood import compare
            from netbench.history.store import HistoryStore

            return tuple(compare(HistoryStore(self.root), ctx, str(ctx.run.get("run_id") or "") or None))
        except Exception as exc:  # noqa: BLE001 - the verdict is whole without the history
            _warn("not compared with the history at", self.root, exc)
            return ()

    def add(self, run_dir: Path) -> None:
        """Add the run at ``run_dir``: the tables its report made, else read from the directory."""
        if self.root is None:
            return
        try:
            from netbench.history.store import HistoryStore

            HistoryStore(self.root).add(self._finished(Path(run_dir)))
        except Exception as exc:  # noqa: BLE001 - the run and its verdict are whole without the history
            _warn("run not added to the history at", self.root, exc)
        finally:
            self.kept = None

    def _finished(self, run_dir: Path) -> RunTables:
        from netbench.common.jsonread import read_json_object
        from netbench.common.rundir import RUN_JSON
        from netbench.history.ingest import read_run

        if self.kept is not None and self.kept[0].resolve() == run_dir.resolve():
            run = read_json_object(run_dir / RUN_JSON)  # its status and end, written after the report
            if not run.unreadable:
                return self.kept[1].finished(run.data)
        return read_run(run_dir)
