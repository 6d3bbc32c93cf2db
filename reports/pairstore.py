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
from netbench.reports.pairrows import NO_ROUND, NOT_RECORDED, Failure, PairRows

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

    got = read_files_builder(paths, PairBuilder)
    return None if got is None else got[1].finish(got[0])


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


_PAIR_COLUMNS = ("hosts", "status", "wrong", "round", "bytes", "busbw_GBps", "load", "hop_class", "engine",
                 "collective", "run_id", "schema", "ranks", "error", "blame", "ran")
"""What a pair row is kept of (and what a failed one says of why)."""


class PairBuilder:
    """``PairRows`` filled from arrow batches of rows (the stored schema's columns), each column
    allocated once for at most ``capacity`` rows (pages never written are never resident)."""

    def __init__(self, capacity: int) -> None:
        import pyarrow as pa

        self.n = 0
        self.cols = {
            "a": np.empty(capacity, np.int32), "b": np.empty(capacity, np.int32),
            "round": np.empty(capacity, np.int32), "nbytes": np.empty(capacity, np.int64),
            "busbw": np.empty(capacity, np.float64), "ok": np.empty(capacity, bool),
            "load": np.empty(capacity, np.int16), "hop": np.empty(capacity, np.int8),
            "engine": np.empty(capacity, np.int8), "collective": np.empty(capacity, np.int8),
        }
        self.names: list[str] = []
        self.known = pa.array([], type=pa.string())
        self.coded: dict[str, dict[str, int]] = {"hop": {}, "engine": {}, "collective": {}}
        self.failed: dict[int, Failure] = {}
        self.plain = 0
        self.tally = Tally()
        self.clock = ClockSteps()

    def add(self, batch: Any) -> Any:
        """Take the batch's pair rows; return the mask (a numpy bool array) of its plain rows."""
        import pyarrow as pa
        import pyarrow.compute as pc

        self.clock.add_batch(batch)
        hosts = batch.column("hosts")
        listed = pc.equal(pc.list_value_length(hosts), 2).fill_null(False)
        # the names of every row of two hosts, in order, as ``rowtable.listed_hosts`` numbers them
        codes = self._hosts(pc.list_flatten(hosts.filter(listed))).reshape(-1, 2)
        two = pc.equal(batch.column("pattern"), "pair").fill_null(False)
        two = pc.and_(two, listed).to_numpy(zero_copy_only=False)
        at = np.flatnonzero(two)
        plain = np.zeros(len(two), dtype=bool)
        if not at.size:
            return plain
        codes = codes[two[listed.to_numpy(zero_copy_only=False)]]
        rows = batch.select(_PAIR_COLUMNS)
        rows = rows if at.size == len(two) else rows.take(pa.array(at))
        status = rows.column("status")
        ok = pc.equal(status, "ok").fill_null(False).to_numpy(zero_copy_only=False)
        wrong = pc.greater(rows.column("wrong").fill_null(0), 0).to_numpy(zero_copy_only=False)
        mine = ok & ~wrong
        plain[at] = mine
        self.plain += int(mine.sum())
        if mine.any():
            kept = rows.filter(pa.array(mine))
            counts = {name: pc.value_counts(kept.column(name)).to_pylist() for name in ("run_id", "schema")}
            self.tally.add(*({d["values"]: d["counts"] for d in counts[k]} for k in ("run_id", "schema")),
                           pc.max(kept.column("ranks")).as_py())
        lo, hi = self.n, self.n + len(at)
        c = self.cols
        c["a"][lo:hi] = codes[:, 0]
        c["b"][lo:hi] = codes[:, 1]
        c["round"][lo:hi] = rows.column("round").fill_null(NO_ROUND).to_numpy(zero_copy_only=False)
        c["nbytes"][lo:hi] = rows.column("bytes").fill_null(0).to_numpy(zero_copy_only=False)
        c["busbw"][lo:hi] = rows.column("busbw_GBps").to_numpy(zero_copy_only=False)  # null: NaN
        c["ok"][lo:hi] = ok
        load = rows.column("load").fill_null(NOT_RECORDED).to_numpy(zero_copy_only=False)
        if load.size and load.max() > np.iinfo(np.int16).max:  # pairs through one uplink: a few thousand
            raise ValueError("a load past int16")  # the line reader takes the run
        c["load"][lo:hi] = load
        for name, column in (("hop", "hop_class"), ("engine", "engine"), ("collective", "collective")):
            values = rows.column(column)
            if name == "engine":  # rows from before engines were torch's (``context.rows_frame``)
                values = values.fill_null("torch")
            c[name][lo:hi] = self._code(name, values)
        for i in np.flatnonzero(~ok).tolist():  # the failed rows: few
            row = {k: rows.column(k)[i].as_py() for k in ("hosts", "status", "error", "blame", "ran")}
            self.failed[lo + i] = Failure.of(row)
        self.n = hi
        return plain

    def _hosts(self, values: Any) -> np.ndarray:
        """Each name's code, a new name numbered in order of first appearance."""
        import pyarrow as pa
        import pyarrow.compute as pc

        codes = pc.index_in(values, value_set=self.known)
        if codes.null_count:
            new = pc.unique(values.filter(codes.is_null()))
            self.names += new.to_pylist()
            self.known = pa.concat_arrays([self.known, new])
            codes = pc.index_in(values, value_set=self.known)
        return codes.to_numpy(zero_copy_only=False)

    def _code(self, name: str, values: Any) -> np.ndarray:
        """A string column's values as codes (NOT_RECORDED where null), numbered as first seen."""
        enc = values.dictionary_encode()
        index = self.coded[name]
        lut = np.array([index.setdefault(v, len(index)) for v in enc.dictionary.to_pylist()] or [0])
        if len(index) > np.iinfo(np.int8).max:  # hop classes, engines, collectives: a handful
            raise ValueError(f"more than {np.iinfo(np.int8).max} values of {name}")  # the line reader's
        if not enc.indices.null_count:
            return lut[enc.indices.to_numpy()]
        codes = enc.indices.fill_null(0).to_numpy(zero_copy_only=False)
        return np.where(enc.indices.is_null().to_numpy(zero_copy_only=False), NOT_RECORDED, lut[codes])

    def finish(self, rest: pd.DataFrame) -> Split:
        n, c = self.n, self.cols
        names = {k: list(v) for k, v in self.coded.items()}
        if not n or c["nbytes"][:n].max() <= np.iinfo(np.int32).max:  # sizes up to 2 GB: 4 bytes a row
            c["nbytes"] = c["nbytes"][:n].astype(np.int32)
        # views of the columns as allocated: the pages past ``n`` were never written, never resident
        out = PairRows(self.names, c["a"][:n], c["b"][:n], c["round"][:n], c["nbytes"][:n], c["busbw"][:n],
                       c["ok"][:n], c["load"][:n], c["hop"][:n], names["hop"], self.failed, c["engine"][:n],
                       names["engine"], c["collective"][:n], names["collective"], self.plain)
        self.cols = {}
        return Split(rest, out, self.tally, self.clock)
