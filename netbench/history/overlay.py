"""The store as a report reads it: every stored run, and the run being reported from its own tables
in place of any stored copy, before it is added (or without adding it: ``netbench report`` only
reads the history). The queries (``history.query``) read it as they read a store."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from netbench.history.ingest import RunTables
from netbench.history.store import CATALOG, HistoryStore


class WithRun:
    """``store`` with ``run`` (None: the store alone) as one of its runs, or without the run
    ``without`` (its past: what a change before it is searched in)."""

    def __init__(self, store: HistoryStore, run: RunTables | None, without: str | None = None):
        self.store, self.run = store, run
        self.without = run.run_id if run is not None else without
        self.root: Path = store.root

    def exists(self) -> bool:
        return self.store.exists() or self.run is not None

    def runs(self) -> pa.Table:
        """The catalog with this run, oldest first."""
        table = self.table(CATALOG)
        if table.num_rows == 0:
            return table
        return table.sort_by([("started", "ascending"), ("run_id", "ascending")])

    def run_ids(self) -> list[str]:
        ids = set(self.store.run_ids()) - {self.without} if self.store.exists() else set()
        return sorted(ids | ({self.run.run_id} if self.run is not None else set()))

    def table(self, name: str, columns: list[str] | None = None, where: ds.Expression | None = None
              ) -> pa.Table:
        """The store's rows of table ``name`` but this run's, then this run's own."""
        kept = where
        if self.without is not None:
            others = pc.field("run_id") != self.without
            kept = others if where is None else others & where
        stored = self.store.table(name, columns, kept) if self.store.exists() else pa.table({})
        if self.run is None:
            return stored
        mine = self.run.tables()[name]
        if where is not None:
            mine = mine.filter(where)
        if columns is not None:
            mine = mine.select(columns)
        if stored.num_columns == 0:
            return mine
        # an older run's file may lack a column or type it otherwise: unified, missing ones null
        return pa.concat_tables([stored, mine], promote_options="permissive")
