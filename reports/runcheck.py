"""What a run directory's reader checks beyond each line and file: that the files are of a schema
this netbench writes, that the rows are one run's, and that run.json agrees with them (its row
count, hosts and world size). Each thing it cannot vouch for is a ``Doubt``, named by the finding id
the report gives it (never below ``warn``: no PASS on it); ``compare`` and ``baseline save`` read
the same list. The data itself is still read (readers tolerate newer files): a doubt says why the
verdict on it cannot be a clean one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench.common.rows import SCHEMA as ROW_SCHEMA
from netbench.common.rundir import (
    COUNTERS_JSONL,
    COUNTERS_SCHEMA,
    ENV_JSON,
    ENV_SCHEMA,
    RESULTS_JSONL,
    RESULTS_PARQUET,
    RUN_JSON,
    RUN_SCHEMA,
)

if TYPE_CHECKING:
    from netbench.reports.pairstore import Split

MIXED_RUNS = "mixed_runs"
SCHEMA_UNKNOWN = "schema_unknown"
RUN_MISMATCH = "run_mismatch"
KINDS = (MIXED_RUNS, SCHEMA_UNKNOWN, RUN_MISMATCH)

ENDED_EARLY = ("interrupted", "failed", "running", "starting")
"""run.json statuses of a run that did not measure its whole plan: stopped, failed, or never able
to record its end (SIGKILL, the OOM killer, a power cut; or still under way)."""

SCHEMAS = {
    RUN_JSON: RUN_SCHEMA, ENV_JSON: ENV_SCHEMA, RESULTS_JSONL: ROW_SCHEMA, COUNTERS_JSONL: COUNTERS_SCHEMA,
}
"""The schema this netbench writes (and reads) in each run-directory file that carries one."""

MAX_NAMED = 5
"""Run ids or host names quoted in a doubt's reason (the count is always complete)."""


@dataclass(frozen=True)
class Doubt:
    """Something its reader read but cannot vouch for: ``kind`` is the finding id (one of KINDS)."""

    kind: str
    file: str
    reason: str


def schema_doubt(path: Path, found: Counter[Any], known: str) -> Doubt | None:
    """A doubt when records of ``path`` (``found``: schema -> records) name a schema other than
    ``known`` (one without a ``schema`` is taken as ``known``: hand-made and older files)."""
    counts: Counter[str] = Counter()
    for s, n in found.items():
        if s is not None and s == s and s != known:  # NaN (a frame's missing value): none
            counts[str(s)[:60]] += n
    if not counts:
        return None
    said = ", ".join(f"{s!r} ({n} record(s))" for s, n in counts.most_common(MAX_NAMED))
    return Doubt(SCHEMA_UNKNOWN, str(path), f"schema {said}, not the {known!r} this netbench reads; read "
                 "as if it were, so fields may mean something else")


def file_schema_doubts(run_dir: Path, records: dict[str, Counter[Any]]) -> list[Doubt]:
    """``schema_doubt`` of each file named in ``records`` (file name -> its records' schemas)."""
    out = [schema_doubt(run_dir / name, found, SCHEMAS[name]) for name, found in records.items()]
    return [d for d in out if d is not None]


def _named(items: Iterable[str]) -> str:
    items = sorted(items)
    more = f" and {len(items) - MAX_NAMED} more" if len(items) > MAX_NAMED else ""
    return ", ".join(items[:MAX_NAMED]) + more


def run_doubts(
    run_dir: Path, run: dict[str, Any], split: Split, lines_left_out: int, named: frozenset[str]
) -> list[Doubt]:
    """Rows of more than one run; run.json counting more rows than results.jsonl holds (read or left
    out: ``lines_left_out``), listing other hosts than the rows name (or far more), or a world
    smaller than a group of the rows. ``split``: the rows as the reader kept them (``pairstore``: the
    plain pair rows counted in its tally); ``named``: the hosts its rows name (read once)."""

    store = run_dir / RESULTS_PARQUET
    results = str(store if store.is_dir() else run_dir / RESULTS_JSONL)
    run_json = str(run_dir / RUN_JSON)
    out: list[Doubt] = []
    rows = split.rest
    n_rows = len(rows) + split.pairs.plain
    ids: Counter[str] = Counter()
    if len(rows):
        ids.update({str(k): int(v) for k, v in rows["run_id"].value_counts().items() if v})
    ids.update(split.tally.run_ids)
    own = run.get("run_id")
    if len(ids) > 1 or (ids and isinstance(own, str) and own not in ids):
        said = ", ".join(f"{k} ({n} rows)" for k, n in ids.most_common(MAX_NAMED))
        whose = f"; run.json is {own}" if isinstance(own, str) else ""
        out.append(Doubt(MIXED_RUNS, results, f"rows of {len(ids)} run(s): {said}{whose}. Rows of "
                         "different runs are judged together as if one run measured them"))
    counted = run.get("rows")
    if type(counted) is int and counted > n_rows + lines_left_out:
        out.append(Doubt(RUN_MISMATCH, results, f"holds {n_rows + lines_left_out} row(s), run.json "
                         f"counts {counted}: rows are missing"))
    elif not n_rows and not lines_left_out and Path(results).exists() and \
            run.get("status") not in ENDED_EARLY and not run.get("telemetry"):
        # an inventory-only run has no results.jsonl; an imported job's telemetry has no rows
        out.append(Doubt(RUN_MISMATCH, results, f"holds no row, though run.json says the run "
                         f"{str(run.get('status') or 'has no status')[:40]}: nothing measured is judged"))
    listed = run.get("hosts")
    if isinstance(listed, list) and all(isinstance(h, str) for h in listed) and listed and n_rows:
        extra = named - set(listed)
        if extra:
            out.append(Doubt(RUN_MISMATCH, run_json, f"the rows name {len(extra)} host(s) run.json does not "
                             f"list: {_named(extra)}"))
        down = run.get("down_hosts")
        expected = set(listed) - set(down if isinstance(down, list) else [])
        if run.get("status") == "completed" and len(named & expected) < len(expected) / 2:
            out.append(Doubt(RUN_MISMATCH, run_json, f"lists {len(expected)} host(s) that stayed up, the "
                             f"rows name only {len(named & expected)}: missing {_named(expected - named)}"))
    world = run.get("world_size")
    if type(world) is int and world > 0 and n_rows:
        own = rows["ranks"].max() if len(rows) else -1
        most = max(own if own == own else -1, split.tally.ranks)
        if most >= 0 and int(most) > world:
            out.append(Doubt(RUN_MISMATCH, run_json, f"world_size is {world}, but a row's group has "
                             f"{int(most)} ranks"))
    return out
