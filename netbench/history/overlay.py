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
    """``store`` with ``run`` (None: the store alone) as one of its runs."""

    def __init__(self, store: HistoryStore, run: RunTables | None):
        self.store, self.run = store, run
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
        ids = set(self.store.run_ids()) if self.store.exists() else set()
        return sorted(ids | ({self.run.run_id} if self.run is not None else set()))

    def table(self, name: str, columns: list[str] | None = None, where: ds.Expression | None = None
              ) -> pa.Table:
        """The store's rows of table ``name`` but this run's, then this run's own."""
        if self.run is None:
            return self.store.table(name, columns, where) if self.store.exists() else pa.table({})
        others = pc.field("run_id") != self.run.run_id
        stored = self.store.table(name, columns, others if where is None else others & where) \
            if self.store.exists() else pa.table({})
        mine = self.run.tables()[name]
        if where is not None:
            mine = mine.filter(where)
        if columns is not None:
            mine = mine.select(columns)
        if stored.num_columns == 0:
            return mine
        # an older run's file may lack a column or type it otherwise: unified, missing ones null
        return pa.concat_tables([stored, mine], promote_options="permissive")
