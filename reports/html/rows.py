"""The raw rows in the page: gzip'd CSV for the download buttons, within a size budget (``EMBED_ROWS``)."""

from __future__ import annotations

import base64
import gzip
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from netbench.reports.html.text import e

from netbench.common.rows import CONTRACT_FIELDS
from netbench.common.runrecord import rows_line

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext


# the row contract without per-rank times (kept in results.jsonl), plus the group
CSV_COLUMNS = [c for c in CONTRACT_FIELDS if c != "rank_time_us"] + ["group"]
CSV_LEAN_COLUMNS = [
    "collective",
    "pattern",
    "hosts",
    "ranks",
    "round",
    "bytes",
    "dtype",
    "in_place",
    "time_us",
    "busbw_GBps",
    "wrong",
    "status",
    "error",
]
CSV_FULL_MAX_ROWS = 100_000  # above this, the lean columns (keeps a 1,024-node report under 25 MB)
CSV_GZ_BUDGET = 10_000_000  # compressed bytes of rows embedded in the report at most
EMBED_ROWS = ("auto", "yes", "no")
"""``--embed-rows``: the rows in report.html (a second copy of results.jsonl, there for the download
buttons): ``yes`` up to ``CSV_GZ_BUDGET``; ``no`` never; ``auto`` only when every row fits
``EMBED_AUTO_BYTES``, so a large fleet's report stays small enough to attach to a ticket."""
EMBED_AUTO_BYTES = 2_000_000


def _human(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def _arrow_csv(df: Any, cols: list[str]) -> bytes:
    """Rows as CSV lines without a header, written by pyarrow (6x pandas' to_csv on a large fleet's
    rows). Values as pandas would read them back; booleans spelled true/false, whole floats without
    the ".0"."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    out = df[cols].copy()
    if "hosts" in out:
        out["hosts"] = [" ".join(map(str, h)) if isinstance(h, list) else "" for h in out["hosts"]]
    table = pa.Table.from_pandas(out, preserve_index=False)
    table = table.cast(pa.schema([
        pa.field(f.name, pa.string()) if pa.types.is_dictionary(f.type) else f for f in table.schema
    ]))
    buf = pa.BufferOutputStream()
    pacsv.write_csv(table, buf, pacsv.WriteOptions(include_header=False, quoting_style="needed"))
    return buf.getvalue().to_pybytes()


def _csv_bytes(df: Any, cols: list[str]) -> bytes:
    out = df[cols].copy()
    if "hosts" in out:
        out["hosts"] = [" ".join(map(str, h)) if isinstance(h, list) else "" for h in out["hosts"]]
    buf = io.StringIO()
    out.to_csv(buf, index=False)
    return buf.getvalue().encode("utf-8")


_ROW_BUTTONS = ('<button id="dl-csv">Download rows (CSV)</button>\n'
                '<button id="dl-csv-gz">Download rows (CSV.gz)</button>')


def _rows_script(gz: bytes) -> str:
    if not gz:
        return ""
    data = base64.b64encode(gz).decode("ascii")
    return f'<script type="application/octet-stream" id="nb-rows-csv-gz">{data}</script>'


def _rows_note(gz: bytes, nrows: int, note: str) -> str:
    if not gz:
        return e(note)
    return e(f"{nrows} rows: {note}; embedded compressed ({_human(len(gz))}).")


def _embedded_rows(ctx: AnalysisContext, embed_rows: str) -> tuple[bytes, int, str]:
    """What report.html carries of the rows (``EMBED_ROWS``): (gz bytes, rows, note); no bytes and a
    note saying where the rows are when they are left out."""
    where = "results.jsonl in the run directory holds every row"
    if embed_rows == "no":
        return b"", 0, f"{ctx.row_count} rows, not embedded (--embed-rows no): {where}"
    gz, nrows, note = rows_csv_gz(ctx, CSV_GZ_BUDGET if embed_rows == "yes" else EMBED_AUTO_BYTES)
    if embed_rows == "auto" and nrows < ctx.row_count:
        return b"", 0, (f"{ctx.row_count} rows, more than fit {_human(EMBED_AUTO_BYTES)} compressed, so "
                        f"not embedded (the report stays small enough to attach): {where}; "
                        "netbench report RUN_DIR --embed-rows yes embeds them")
    return gz, nrows, note


def rows_csv_gz(ctx: AnalysisContext, budget: int = CSV_GZ_BUDGET) -> tuple[bytes, int, str]:
    """The raw rows as gzip'd CSV for the download button: (gz bytes, rows included, note).

    Every column but per-rank times, while that fits ``budget`` (compressed). Large fleets (500k
    pair rows) get the measurement columns only (derived ones like algbw and count are recomputable):
    every non-pair row, then pair rows in order, compressed chunk by chunk until the next chunk would
    pass the budget (said in the note), so a 1.6 M-row run formats and compresses only what fits.
    results.jsonl always has everything.
    """
    if ctx.row_count > CSV_FULL_MAX_ROWS:
        return _lean_csv_gz(ctx, budget)
    df = ctx.rows
    cols = [c for c in CSV_COLUMNS if c in df.columns]
    note = "every field except per-rank times (those are in results.jsonl)"
    gz = gzip.compress(_csv_bytes(df, cols), compresslevel=6, mtime=0)
    if len(gz) <= budget:
        return gz, len(df), note
    is_pair = (df["pattern"] == "pair").to_numpy()
    keep_pairs = int(is_pair.sum() * budget / len(gz) * 0.95)
    pair_idx = np.nonzero(is_pair)[0][:keep_pairs]
    sel = df.iloc[np.sort(np.concatenate([np.nonzero(~is_pair)[0], pair_idx]))]
    gz = gzip.compress(_csv_bytes(sel, cols), compresslevel=6, mtime=0)
    return (
        gz,
        len(sel),
        (
            f"{note}; only {len(sel)} of {len(df)} rows (all non-pair rows, the first "
            f"{keep_pairs} pair rows) fit the report's size budget"
        ),
    )


CSV_CHUNK_ROWS = 25_000
"""Pair rows formatted and compressed at a time on a large fleet (~0.4 MB compressed)."""


def _lean_csv_gz(ctx: AnalysisContext, budget: int) -> tuple[bytes, int, str]:
    """The measurement columns of every non-pair row, then of pair rows chunk by chunk while the
    compressed stream stays within ``budget``."""
    import zlib

    rest = ctx.rest
    cols = [c for c in CSV_LEAN_COLUMNS if c in rest.columns]
    note = f"measurement fields ({', '.join(cols)}); every field is in results.jsonl"
    others = rest[(rest["pattern"] != "pair").to_numpy()]
    n_pairs = ctx.row_count - len(others)
    comp = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: a gzip stream (header mtime 0)
    head = ",".join(cols).encode() + b"\n"
    out = [comp.compress(head + _arrow_csv(others, cols))]
    size = len(out[0])
    pairs = 0
    for chunk in _pair_chunks(ctx, cols):
        trial = comp.copy()
        data = trial.compress(_arrow_csv(chunk, cols))
        data += trial.flush(zlib.Z_SYNC_FLUSH)  # its compressed size is known only once flushed
        if size + len(data) > budget:
            break
        comp, size, pairs = trial, size + len(data), pairs + len(chunk)
        out.append(data)
    out.append(comp.flush())
    included = len(others) + pairs
    if pairs < n_pairs:
        note += (
            f"; only {included} of {ctx.row_count} rows (all non-pair rows first, then the first {pairs} "
            "pair rows) fit the report's size budget"
        )
    return b"".join(out), included, note


def _pair_chunks(ctx: AnalysisContext, cols: list[str]) -> Iterator[Any]:
    """The pair rows in order, ``CSV_CHUNK_ROWS`` at a time, as frames of ``cols``: from the frame of
    every row where it was given, else read from the run directory's files as they are needed (the
    analysis holds the plain pair rows' measurements only; a large fleet's report embeds the
    first few chunks)."""
    if ctx.given_rows is not None:
        df = ctx.given_rows
        pair_idx = np.nonzero((df["pattern"] == "pair").to_numpy())[0]
        for lo in range(0, len(pair_idx), CSV_CHUNK_ROWS):
            yield df.iloc[pair_idx[lo : lo + CSV_CHUNK_ROWS]]
        return
    from netbench.reports.rowtable import pair_row_batches

    from netbench.common.rundir import RunDir

    assert ctx.run_dir is not None  # rows not given: read from a run directory
    held: list[Any] = []
    count = 0
    for batch in pair_row_batches(RunDir.open(ctx.run_dir).row_files(), cols):
        held.append(batch)
        count += len(batch)
        while count >= CSV_CHUNK_ROWS:
            yield from _take(held, CSV_CHUNK_ROWS)
            count -= CSV_CHUNK_ROWS
    if count:
        yield from _take(held, count)


def _take(held: list[Any], n: int) -> Iterator[Any]:
    """The first ``n`` rows of the frames ``held`` as one frame (taken off ``held``)."""
    import pandas as pd

    whole = pd.concat(held, ignore_index=True) if len(held) > 1 else held[0]
    held[:] = [whole.iloc[n:].reset_index(drop=True)] if len(whole) > n else []
    yield whole.iloc[:n]


def _rows_line(ctx: AnalysisContext) -> str:
    """What the rows count, as the log and run.json say it: measured (status ok) and failed apart."""
    n = ctx.row_count
    return rows_line(n, int((ctx.rest["status"] != "ok").sum()) if n else 0)
