"""The rows written columnar: results.parquet, a directory of Parquet parts (issue 48).

Why: at 4,096 nodes x 3 pair sizes a run holds 25 M rows; as JSON lines that is 27 GB, as
compressed columns (the repeated fields dictionary-coded, the hosts a code each, the times
byte-stream-split) under 1 GB, and a reader takes only the columns it needs.

How a run keeps what it measured (``netbench.common.rundir.RESULTS_PARQUET``):

- rows are written to parts ``part-000001.parquet``, ``part-000002.parquet`` ... in order, each
  written under a hidden name, fsync'd, then renamed: a part is whole once its name exists. That is
  the layout of a Parquet dataset (Spark's, pyarrow's): ``pandas.read_parquet("results.parquet")``
  reads the rows whole.
- a row that comes one at a time (a real run: the coordinator's ``on_row``) is first appended to the
  tail of the part being filled, ``_part-NNNNNN.jsonl``, one JSON line fsync'd before the call
  returns, exactly as results.jsonl was: a run killed (kill -9, a power cut) keeps every row
  measured, in the tail. When the part fills (``part_rows``) or the writer closes (the run's end,
  a signal, a full disk: ``close`` is in the caller's ``finally``), the tail's rows become the part
  and the tail is removed. A part wins over a tail of its number (killed between the two), so no
  row is read twice. A tail whose rows Arrow cannot type is kept as it is (JSON lines): the readers
  read it like any part, so a row is never lost to the conversion.
- rows that come in batches of columns (``netbench simulate``: a phase at once) skip the tail and
  are flushed as a part when ``part_rows`` are buffered or ``FLUSH_S`` passed since the last part,
  and at close.

A later launch of the same run (sweep's re-tests) opens a writer again: it goes on with the next
part number. ``extra`` (an object of anything) is kept as its JSON text.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench.common.interrupts import DiskFull, disk_full
from netbench.common.jsonread import JsonlRead, Unreadable, open_regular, read_jsonl
from netbench.common.jsontext import dumps
from netbench.common.rows import ResultRow
from netbench.common.rundir import PART_NAME, RESULTS_PARQUET, ResultWriter, RunDir, part_records

if TYPE_CHECKING:
    import pyarrow as pa

PART_ROWS = 1 << 14
"""Rows of a part when rows come one at a time: the tail (a few hundred bytes a row as JSON) stays
a few MB, and the rows buffered for the part as dicts a few tens of MB."""
BATCH_PART_ROWS = 1 << 20
"""Rows of a part when they come as columns (``write_table``): 25 parts at 4,096 nodes x 3 sizes."""
FLUSH_S = 30.0
"""Columns buffered longer than this go to a part even when it is not full: a kill loses at most
this much of a simulation (a real run's rows are in their tail at once)."""
FLOAT_COLUMNS = ("time_us", "time_us_min", "time_us_max", "algbw_GBps", "busbw_GBps", "ts", "setup_s",
                 "setup_wait_s")
"""Measured floats: byte-stream split before compression (their exponents and high bytes repeat),
a fifth smaller than plain; everything else is dictionary-coded (a run repeats its values)."""


ROW_BATCH = 1 << 13
"""Rows a batch of ``iter_rows``: ~5 KB each as records, ~40 MB a batch."""

_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ResultRow) if f.default is not dataclasses.MISSING}


def row_schema() -> pa.Schema:
    """The arrow schema of a stored row: the row contract's (``reports.rowtable``, from ``ResultRow``'s
    hints), ``extra`` as JSON text."""
    import pyarrow as pa
    from netbench.reports.rowtable import contract_schema

    schema = contract_schema()
    return schema.set(schema.get_field_index("extra"), pa.field("extra", pa.string()))


class RowWriter:
    """Appends a run's rows to results.parquet (the module's docstring says how it keeps them)."""

    def __init__(self, rundir: RunDir, part_rows: int | None = None) -> None:
        self.store = rundir.path / RESULTS_PARQUET
        if self.store.is_symlink():  # never write through a link netbench did not make
            raise OSError(f"{self.store} is a symbolic link; the run's rows are not written through it")
        try:
            self.store.mkdir(exist_ok=True)
        except OSError as exc:
            raise disk_full(exc, self.store) or exc from None
        numbers = [int(m[2]) for p in self.store.iterdir() if (m := PART_NAME.fullmatch(p.name))]
        self.index = max(numbers, default=0) + 1
        self.part_rows = part_rows
        self.count = 0
        self._tail: ResultWriter | None = None
        self._records: list[dict[str, Any]] = []
        self._tables: list[Any] = []
        self._buffered = 0
        self._since = time.monotonic()

    def _name(self, tail: bool = False) -> Path:
        return self.store / (f"_part-{self.index:06d}.jsonl" if tail else f"part-{self.index:06d}.parquet")

    def write(self, row: dict[str, Any] | Any) -> None:
        """One row: on disk (its tail line fsync'd) before the call returns; DiskFull when it cannot be."""
        data = row.to_dict() if hasattr(row, "to_dict") else row
        if self._tail is None:
            self._tail = ResultWriter(self._name(tail=True))
        self._tail.write(data)
        self._records.append(data)
        self.count += 1
        if len(self._records) >= (self.part_rows or PART_ROWS):
            self.flush()

    def write_table(self, table: pa.Table) -> None:
        """Rows as columns (the stored schema's, ``row_schema``): buffered, a part when enough."""
        self._tables.append(table)
        self._buffered += table.num_rows
        self.count += table.num_rows
        full = self._buffered >= (self.part_rows or BATCH_PART_ROWS)
        if full or time.monotonic() - self._since >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        """What is buffered, as the next part; its tail removed once the part is whole."""
        self._since = time.monotonic()
        if not self._tables and not self._records:
            return
        tail, self._tail = self._tail, None
        if tail is not None:
            tail.close()
        try:
            table = self._table()
        except (ValueError, TypeError, OverflowError):  # pyarrow's ArrowInvalid/TypeError are these
            table = None  # rows Arrow cannot type: the tail stays, read as JSON lines (never lost)
        self._records, self._tables, self._buffered = [], [], 0
        if table is not None:
            try:
                _write_part(table, self._name())
            except (OSError, DiskFull):
                if tail is None:  # columns only here: the disk's failure is the run's (DiskFull)
                    raise
                table = None  # a full disk at the end of a run: its rows stay in their tail, read as such
            if tail is not None and table is not None:
                tail.path.unlink(missing_ok=True)
        self.index += 1

    def _table(self) -> pa.Table:
        import pyarrow as pa

        tables = list(self._tables)
        if self._records:
            schema = row_schema()
            # a field a row leaves out takes ResultRow's default, as its dict would have it
            records = [_DEFAULTS | r | {"extra": dumps(r.get("extra") or {})} for r in self._records]
            tables.append(pa.Table.from_pylist(records, schema=schema))
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

    def close(self) -> None:
        """The last part (the run's end, a stop): every row is in a part or, failing that, its tail."""
        self.flush()

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write_part(table: pa.Table, path: Path) -> None:
    """``table`` as the Parquet file ``path``: written aside under a hidden name, fsync'd, renamed."""
    import pyarrow.parquet as pq

    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as fh:
            floats = [c for c in FLOAT_COLUMNS if c in table.column_names]
            pq.write_table(table, fh, compression="zstd", use_byte_stream_split=floats,
                           use_dictionary=[c for c in table.column_names if c not in floats],
                           row_group_size=BATCH_PART_ROWS)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:  # the tail stays: its rows are still read
        tmp.unlink(missing_ok=True)
        raise disk_full(exc, path) or exc from None


def iter_rows(rd: RunDir, batch: int = ROW_BATCH) -> Iterator[JsonlRead]:
    """``RunDir.load_rows``' rows, at most ``batch`` at a time and in its order, for a writer of every
    row (``netbench export --format jsonl``): a 4,096-node run's 25 M rows held as records, ~5 KB each,
    would be 140 GB. A part that breaks off part-way keeps the batches read before it."""
    from netbench.common.rows import row_problem

    for path in rd.row_files():
        if path.suffix == ".parquet":
            yield from _part_batches(path, row_problem, batch)
        else:  # an older run's results.jsonl, or a part's tail: read whole, as they always were
            yield read_jsonl(path, row_problem)


def _part_batches(path: Path, check: Callable[[Any], str | None], batch: int) -> Iterator[JsonlRead]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    done = 0
    try:
        with open_regular(path) as fh:
            for got in pq.ParquetFile(fh, pre_buffer=False).iter_batches(batch_size=batch, use_threads=False):
                records = got.to_pylist()
                yield part_records(path, records, done, check)
                done += len(records)
    except (pa.ArrowException, OSError) as exc:
        yield JsonlRead([], [Unreadable(str(path), done + 1 if done else None,
                                        f"not a Parquet part of rows ({exc}); left out")])
