"""The analysis' rows in two parts, so that its memory follows the fleet's pairs, not a frame of
every row (issue 48).

At 4,096 nodes x 3 pair sizes a run holds 25 M rows, all but a few thousand of them pair rows that
measured fine; as a pandas frame (every field of every row) that is 220 B a row after reading and
twice that while the context is built: 6.7 GB and a MemoryError. What the analysis reads of those
rows is a pair's hosts, its size, round, load, hop class, engine, collective and busbw: as
``PairRows``' columns (``reports.pairrows``) 30 B a row, no Python object per row.

So the rows are read (results.parquet's parts column by column, or an older run's results.jsonl
through ``reports.rowtable``) into:

- ``PairRows``: every pair row naming two hosts, in the order read, the failed ones with why;
- a frame of every other row, and of the pair rows that are not *plain*. A plain row is a pair
  row of two hosts, ``ok``, with nothing wrong (``wrong`` null or 0): it is only in ``PairRows``
  (the frame's failed and wrong pair rows are in both, and ``PairRows.plain`` counts the others).

Anything that needs a plain row's other fields (the HTML's embedded rows, ``--engine both``'s
timing tables, headlines per pair) reads the whole frame again (``AnalysisContext.rows``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from netbench.reports.pairrows import PairBuilder, PairRows

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd


@dataclass
class Tally:
    """What the run directory's checks (``reports.runcheck``) count over every row, of the plain
    rows (the frame holds the others): their run ids, schemas and most ranks (-1: none)."""

    run_ids: Counter[str] = field(default_factory=Counter)
    schemas: Counter[str] = field(default_factory=Counter)
    ranks: int = -1

    def add(self, run_ids: dict[Any, int], schemas: dict[Any, int], ranks: Any) -> None:
        self.run_ids.update({str(k): int(v) for k, v in run_ids.items() if v})
        self.schemas.update({k: int(v) for k, v in schemas.items() if v})
        if ranks is not None and ranks == ranks:
            self.ranks = max(self.ranks, int(ranks))


class ClockSteps:
    """How far back each host's row stamps went (``host_checks``' clock_stepped): a row is stamped
    by its group's first host, rows are stored in the order measured, so the most a host's stamp
    fell below its latest before. Fed every row in order, a batch at a time, before the frame
    leaves the plain ones out. Hosts are numbered as met; a batch whose stamps only grow, all at
    or past every host's latest (a run's rows, as written), is one ``maximum.at``."""

    def __init__(self) -> None:
        self.code: dict[str, int] = {}
        self.latest = np.full(0, np.nan)
        self.most_back = np.zeros(0)

    @property
    def back(self) -> dict[str, float]:
        """host -> the most its stamp went back (hosts whose stamps never did are left out)."""
        return {h: float(self.most_back[c]) for h, c in self.code.items() if self.most_back[c] > 0}

    def add(self, first: Any, ts: Any) -> None:
        """``first``: each row's first host (None where it has none), ``ts``: its stamp (NaN: none)."""
        import pandas as pd

        hosts = np.asarray(first, dtype=object)
        ts = np.asarray(ts, dtype=float)
        keep = ~pd.isna(hosts) & ~np.isnan(ts)
        hosts, ts = hosts[keep], ts[keep]
        if not ts.size:
            return
        local, names = pd.factorize(hosts)
        lut = np.array([self.code.setdefault(str(h), len(self.code)) for h in names], dtype=np.int64)
        codes = lut[local]
        if len(self.code) > len(self.latest):
            grow = len(self.code) - len(self.latest)
            self.latest = np.r_[self.latest, np.full(grow, np.nan)]
            self.most_back = np.r_[self.most_back, np.zeros(grow)]
        seen = self.latest[np.isfinite(self.latest)]
        if not (np.diff(ts) >= 0).all() or (seen.size and ts[0] < seen.max()):
            self._back(codes, ts)
        np.fmax.at(self.latest, codes, ts)

    def _back(self, codes: np.ndarray, ts: np.ndarray) -> None:
        """Each row's fall below its host's latest stamp before it, the most kept per host."""
        import pandas as pd

        frame = pd.DataFrame({"host": codes, "ts": ts})
        top = frame.groupby("host", sort=False)["ts"].cummax()
        before = top.groupby(codes, sort=False).shift(1).to_numpy(dtype=float)
        prior = np.fmax(before, self.latest[codes])  # NaN only for a host's first stamp ever
        back = prior - ts
        hit = back > 0
        np.fmax.at(self.most_back, codes[hit], back[hit])

    def add_batch(self, batch: Any) -> None:
        """The rows of an arrow batch (its ``hosts`` and ``ts``)."""
        import pyarrow.compute as pc

        hosts = batch.column("hosts")
        some = pc.greater(pc.list_value_length(hosts), 0).fill_null(False)
        if not pc.any(some).as_py():
            return
        first = pc.list_element(hosts.filter(some), 0).to_numpy(zero_copy_only=False)
        self.add(first, batch.column("ts").filter(some).to_numpy(zero_copy_only=False))

    def add_frame(self, frame: pd.DataFrame) -> None:
        """The rows of a frame (hosts as lists; a row without a list of hosts or a stamp is none's)."""
        if frame.empty or not {"ts", "hosts"} <= set(frame.columns):
            return
        first = [h[0] if isinstance(h, list | tuple) and h else None for h in frame["hosts"]]
        ts = [t if isinstance(t, float | int) else np.nan for t in frame["ts"]]
        self.add([None if h is None else str(h) for h in first], np.array(ts, dtype=float))


def read_split(paths: list[Path]) -> Split | None:
    """The rows of ``paths`` (``RunDir.row_files``) read column by column (``reports.rowtable``),
    split; None where that reader would not vouch for them (the line reader's turn)."""
    from netbench.reports.rowtable import read_files_builder

    got = read_files_builder(paths, SplitBuilder)
    return None if got is None else got[1].split(got[0])


def plain_mask(frame: pd.DataFrame) -> np.ndarray:
    """Which rows of ``frame`` are plain (the module's docstring)."""
    if frame.empty or not {"pattern", "hosts", "status"} <= set(frame.columns):
        return np.zeros(len(frame), dtype=bool)
    hosts = frame["hosts"].to_numpy(dtype=object)
    two = np.fromiter((isinstance(h, list) and len(h) == 2 for h in hosts), dtype=bool, count=len(hosts))
    out = two & (frame["pattern"] == "pair").to_numpy() & (frame["status"] == "ok").to_numpy()
    if "wrong" in frame.columns:
        import pandas as pd

        out &= ~(pd.to_numeric(frame["wrong"], errors="coerce").fillna(0).to_numpy() > 0)
    return out


@dataclass
class Split:
    """A run's rows as the analysis holds them (the module's docstring)."""

    rest: pd.DataFrame  # every row but the plain ones
    pairs: PairRows  # every pair row of two hosts; ``pairs.plain`` of them are not in ``rest``
    tally: Tally
    clock: ClockSteps


def split_frame(frame: pd.DataFrame) -> Split:
    """Rows given as a frame (``from_data``, or read line by line), split."""
    pairs = PairRows.from_frame(frame)
    plain = plain_mask(frame)
    pairs.plain = int(plain.sum())
    tally = Tally()
    if plain.any():
        mine = frame[plain]
        tally.add(mine["run_id"].value_counts().to_dict() if "run_id" in frame.columns else {},
                  mine["schema"].value_counts().to_dict() if "schema" in frame.columns else {},
                  mine["ranks"].max())
    clock = ClockSteps()
    clock.add_frame(frame)
    rest = frame if not plain.any() else frame[~plain].reset_index(drop=True)
    return Split(rest, pairs, tally, clock)


class SplitBuilder(PairBuilder):
    """``PairBuilder`` that also takes, of every row, what ``Split`` counts: the clock steps, and
    the plain rows' tally (the frame leaves them out)."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.tally = Tally()
        self.clock = ClockSteps()

    def add(self, batch: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        self.clock.add_batch(batch)
        plain = super().add(batch)
        if plain.any():
            kept = batch.select(["run_id", "schema", "ranks"]).filter(pa.array(plain))
            counts = {k: pc.value_counts(kept.column(k)).to_pylist() for k in ("run_id", "schema")}
            self.tally.add(*({d["values"]: d["counts"] for d in counts[k]} for k in ("run_id", "schema")),
                           pc.max(kept.column("ranks")).as_py())
        return plain

    def split(self, rest: pd.DataFrame) -> Split:
        return Split(rest, self.finish(), self.tally, self.clock)
