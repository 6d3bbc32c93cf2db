"""Everything a rule may look at, loaded once: rows, inventory, env, run info, topology, policy,
baseline, preflight's re-test evidence, and the analyses computed from them (``reports.analyses``).
Rules read it and return findings; they never open files themselves, which is what lets tests build
a context from constructed data (``AnalysisContext.from_data``), analyses included.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netbench.collectives.arrivals import ArrivalRecord, load_arrivals
from netbench.inventory.topology import build_switch_map, hop_class, require_placed
from netbench.reports.learned import PREFIX as LEARNED
from netbench.reports.learned import learn_leaves
from netbench.reports.pairrows import PairRows
from netbench.reports.pairstore import Split, split_frame
from netbench.reports.policy import Policy
from netbench.reports.runcheck import Doubt, file_schema_doubts, run_doubts, schema_doubt
from netbench.reports.siteadvice import SiteAdvice, advice_for

from netbench.common.naming import natural_key
from netbench.common.rundir import (
    COUNTERS_JSONL,
    ENV_JSON,
    INVENTORY_JSONL,
    RESULTS_JSONL,
    RUN_JSON,
    RunDir,
    Unreadable,
)

if TYPE_CHECKING:
    import pandas as pd
    from netbench.reports.analyses import Analyses, RetestEvidence
    from netbench.reports.lastgood import LastGood
    from netbench.reports.pairmodel import PairModel

    from netbench.common.rundir import JsonlRead, JsonRead


def rows_frame(rows: list[dict[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """Rows as a DataFrame with every column the rules use present (missing ones filled)."""
    import pandas as pd

    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame.from_records(rows)
    defaults: dict[str, Any] = {
        "collective": None,
        "pattern": None,
        "hosts": None,
        "ranks": None,
        "bytes": None,
        "dtype": None,
        "in_place": False,
        "time_us": None,
        "rank_time_us": None,
        "busbw_GBps": None,
        "algbw_GBps": None,
        "wrong": None,
        "status": "ok",
        "error": None,
        "group": None,
        "round": None,
        "engine": "torch",
    }
    for col, value in defaults.items():
        if col not in df.columns:
            df[col] = value
    df["status"] = _fill(df["status"], "ok")
    df["engine"] = _fill(df["engine"], "torch")  # rows from before engines were torch's
    return df


def records(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of a frame as dicts, a missing value None as in the file, never the frame's NaN (which is
    truthy: a row without a group would be group "nan", and a finding would name "nan")."""
    return rows.astype(object).where(rows.notna(), None).to_dict("records")


def _fill(col: pd.Series, value: str) -> pd.Series:
    """``col`` with its nulls set to ``value``; a categorical column (the columnar reader's strings)
    gets ``value`` as a category first."""
    import pandas as pd

    if not col.isna().any():
        return col
    if isinstance(col.dtype, pd.CategoricalDtype) and value not in col.cat.categories:
        col = col.cat.add_categories([value])
    return col.fillna(value)


@dataclass
class Baseline:
    rows: pd.DataFrame
    env: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    inventory: list[dict[str, Any]] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)  # what could not be read, and why
    doubts: list[Doubt] = field(default_factory=list)  # what was read but cannot be vouched for

    @property
    def row_dicts(self) -> list[dict[str, Any]]:
        return records(self.rows)


@dataclass
class AnalysisContext:
    split: Split
    """The rows as held (``reports.pairstore``): every pair row of two hosts as columns
    (``pairs``), every other row, and the pair rows that are not plain, as a frame (``rest``)."""
    inventory: list[dict[str, Any]] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)
    policy: Policy = field(default_factory=Policy)
    topology: dict[str, str] | None = None  # uplinks from a --topology file or run.json
    baseline: Baseline | None = None
    run_dir: Path | None = None
    given_rows: pd.DataFrame | None = field(default=None, repr=False)
    """Every row as a frame, where they were given as one (``from_data``, or read line by line)."""
    retests: RetestEvidence | None = None  # re-tests of the suspects, an input (else run.json's)
    last_good: tuple[LastGood, ...] = ()
    """Each node against its last good run in the fleet history, an input (preflight's history stage,
    ``netbench.history.lastgood``): none without a history."""
    given_analyses: Analyses | None = field(default=None, repr=False)  # see ``analyses``
    counters: list[dict[str, Any]] = field(default_factory=list)
    """counters.jsonl: port counter snapshots before and after the run (``reports.counters``)."""
    arrivals: list[ArrivalRecord] = field(default_factory=list)
    """arrivals.jsonl: who arrived last at each world/ring point (``reports.arrivals``)."""
    unreadable: list[Unreadable] = field(default_factory=list)
    """Lines, files and fields the readers left out (this run's and the baseline's): the
    ``unreadable`` rule reports them, so a verdict is never given on data that was not read."""
    doubts: list[Doubt] = field(default_factory=list)
    """What was read but cannot be vouched for (``common.runcheck``: mixed runs, unknown schemas,
    run.json against the rows; this run's and the baseline's): the ``rundir`` rule reports them."""

    # -- construction -----------------------------------------------------------------------------
    @classmethod
    def from_data(
        cls,
        rows: list[dict[str, Any]] | pd.DataFrame,
        inventory: list[dict[str, Any]] | None = None,
        env: dict[str, Any] | None = None,
        run: dict[str, Any] | None = None,
        policy: Policy | None = None,
        topology: dict[str, str] | None = None,
        baseline: Baseline | None = None,
        retests: RetestEvidence | None = None,
        analyses: Analyses | None = None,
        counters: list[dict[str, Any]] | None = None,
        arrivals: list[ArrivalRecord] | None = None,
    ) -> AnalysisContext:
        """``analyses``: hand-made results for a test of one rule (otherwise computed from the rows)."""
        return cls(
            counters=list(counters or []),
            arrivals=list(arrivals or []),
            split=split_frame(frame := rows_frame(rows)),
            given_rows=frame,
            inventory=[_inv_dict(n) for n in inventory or []],
            env=env or {"hosts": {}},
            run=run or {},
            policy=policy or Policy(),
            topology=topology,
            baseline=baseline,
            retests=retests,
            given_analyses=analyses,
        )

    @classmethod
    def load(
        cls,
        run_dir: str | Path,
        baseline: str | Path | None = None,
        policy: Policy | None = None,
        topology: dict[str, str] | None = None,
        retests: RetestEvidence | None = None,
    ) -> AnalysisContext:
        with gc_paused():
            return cls._load(run_dir, baseline, policy, topology, retests)

    @classmethod
    def _load(
        cls,
        run_dir: str | Path,
        baseline: str | Path | None,
        policy: Policy | None,
        topology: dict[str, str] | None,
        retests: RetestEvidence | None,
    ) -> AnalysisContext:
        rd = RunDir.open(run_dir)
        base = None
        if baseline is not None:
            base = _load_baseline(RunDir.open(baseline))
        rows, inventory, env, run = _read_run_dir(rd)
        ctx = cls.from_data(
            rows.data if rows.split is None else [], inventory.records, env.data, run.data, policy, topology,
            base, retests
        )
        if rows.split is not None:  # read column by column: every row is read again only if asked
            ctx.split, ctx.given_rows = rows.split, None
        if topology is not None:  # one naming none of the run's hosts must not replace the run's own
            require_placed(topology, ctx.hosts, "--topology")
        ctx.run_dir = rd.path
        counters = rd.load_counters()
        ctx.counters = counters.records
        arrivals = load_arrivals(rd)
        ctx.arrivals = [ArrivalRecord.from_dict(r) for r in arrivals.records]
        ctx.unreadable = (rows.unreadable + inventory.unreadable + env.unreadable + run.unreadable
                          + counters.unreadable + arrivals.unreadable)
        ctx.doubts = _doubts(rd, ctx.split, len(rows.unreadable), run.data, env.data, counters.records,
                             inventory.records, ctx.row_hosts)
        if ctx.topology is None:
            ctx.topology = _topology_from_run(run.data, ctx.unreadable, rd.path / RUN_JSON)
        if ctx.retests is None and run.data.get("retests") is not None:
            from netbench.reports.analyses import RetestEvidence

            try:
                ctx.retests = RetestEvidence.from_json(run.data["retests"])
            except ValueError as exc:
                where = str(rd.path / RUN_JSON)
                ctx.unreadable.append(Unreadable(where, None, f"field 'retests': {exc}; ignored"))
        if base is not None:
            ctx.unreadable += base.unreadable
            ctx.doubts += base.doubts
        return ctx

    # -- lookups ----------------------------------------------------------------------------------
    @cached_property
    def switches(self) -> dict[str, str]:
        """Uplinks: host -> leaf switch (topology, then switch= labels, then discovered neighbours),
        switch -> parent (topology); netbench.inventory.topology says why one map."""
        known = build_switch_map(self.inventory, self.topology, self.hosts)
        return known or learn_leaves(self.pairs)

    @property
    def leaves_learned(self) -> bool:
        """Whether ``switches`` are leaves learned from the pairs (``reports.learned``): nothing
        placed a host."""
        return any(v.startswith(LEARNED) for v in self.switches.values())

    def hop_class(self, a: str, b: str) -> str:
        return hop_class(a, b, self.switches)

    @cached_property
    def site(self) -> SiteAdvice:
        """What to do about a host in the words of the site the run was on (run.json's launcher)."""
        return advice_for(self.run.get("launcher"))

    @cached_property
    def hosts(self) -> list[str]:
        """Every host named by the inventory or the rows, inventory order first."""
        seen: dict[str, None] = {n["host"]: None for n in self.inventory if n.get("host")}
        envh = (self.env or {}).get("hosts") or {}
        for h in envh:
            seen.setdefault(h, None)
        for h in sorted(self.row_hosts - seen.keys(), key=natural_key):
            seen.setdefault(h, None)
        return list(seen)

    @cached_property
    def lost_hosts(self) -> frozenset[str]:
        """Hosts the run lost (run.json's ``down_hosts`` and its faults' hosts): their pairs say what
        happened to them, never anything about their partners or the links between."""
        run = self.run
        faults = run.get("faults") if isinstance(run.get("faults"), list) else []
        down = run.get("down_hosts") if isinstance(run.get("down_hosts"), list) else []
        return frozenset({f["host"] for f in faults if isinstance(f, dict) and isinstance(f.get("host"), str)}
                         | {h for h in down if isinstance(h, str)})

    @property
    def pairs(self) -> PairRows:
        """Every pair row of two hosts, as columns (the plain ones are nowhere else)."""
        return self.split.pairs

    @property
    def rest(self) -> pd.DataFrame:
        """Every row but the plain pair rows (``reports.pairstore``)."""
        return self.split.rest

    @property
    def row_count(self) -> int:
        """How many rows were read."""
        return len(self.split.rest) + self.split.pairs.plain

    @cached_property
    def rows(self) -> pd.DataFrame:
        """Every row as a frame, every field: read again from the run directory where the rows were
        read column by column (what the analysis holds leaves the plain pair rows' other fields
        out). Only for what needs those fields: the HTML's embedded rows, ``--engine both``'s
        timing tables, headlines per pair, a baseline's comparison."""
        if self.given_rows is not None:
            return self.given_rows
        from netbench.reports.rowtable import read_files_frame

        assert self.run_dir is not None  # a context without given rows was loaded from one
        rd = RunDir.open(self.run_dir)
        frame = read_files_frame(rd.row_files())
        return rows_frame(frame if frame is not None else rd.load_rows().records)

    @cached_property
    def row_hosts(self) -> frozenset[str]:
        """The hosts the rows name."""
        return _row_hosts(self.rest) | frozenset(self.pairs.names)

    @cached_property
    def in_pairs(self) -> Any:
        """Which rows of ``rest`` are also in ``pairs`` (its failed and wrong pair rows of two hosts)."""
        import numpy as np

        rest = self.rest
        if rest.empty:
            return np.zeros(0, dtype=bool)
        hosts = rest["hosts"].to_numpy(dtype=object)
        two = np.fromiter((isinstance(h, list) and len(h) == 2 for h in hosts), dtype=bool, count=len(hosts))
        return two & (rest["pattern"] == "pair").to_numpy()

    @cached_property
    def all_ok_rows(self) -> pd.DataFrame:
        """Every measured row but the pair rows of two hosts (``pairs``' ok ones), of every engine
        (``--engine both`` measures each point twice)."""
        rest = self.rest
        return _where(rest, (rest["status"] == "ok").to_numpy() & ~self.in_pairs)

    @cached_property
    def engines(self) -> frozenset[str]:
        """The engines of the measured rows (the distinct values, not a Python object per row)."""
        import numpy as np

        pairs = self.pairs
        codes = np.unique(pairs.engine[pairs.ok])
        named = {pairs.engines[c] for c in codes.tolist() if c >= 0}
        return frozenset(self.all_ok_rows["engine"].unique()) | named

    @cached_property
    def judged_engine(self) -> str:
        """The engine whose rows the diagnosis judges: NCCL called directly where the run has it
        (nccl-tests' numbers), else torch. One engine, so no point is counted twice."""
        return "nccl" if "nccl" in self.engines else "torch"

    @cached_property
    def ok_rows(self) -> pd.DataFrame:
        """The measured rows the rules judge: those of ``judged_engine`` (but the pair rows of two
        hosts: ``judged_pairs``)."""
        rows = self.all_ok_rows
        return _where(rows, (rows["engine"] == self.judged_engine).to_numpy())

    @cached_property
    def whole_ok_rows(self) -> pd.DataFrame:
        """Every measured row of ``judged_engine``, pair rows included, every field (``rows``: read
        again where they were read column by column)."""
        rows = self.rows
        return _where(rows, ((rows["status"] == "ok") & (rows["engine"] == self.judged_engine)).to_numpy())

    @cached_property
    def judged_pairs(self) -> Any:
        """Which of ``pairs`` the rules judge: measured (ok), by ``judged_engine``."""
        return self.pairs.ok & self.pairs.engine_is(self.judged_engine)

    @property
    def analyses(self) -> Analyses:
        """The shared analyses of these inputs, computed once, on first use (or given to from_data)."""
        if self.given_analyses is None:
            from netbench.reports.analyses import analyse

            self.given_analyses = analyse(self)
        return self.given_analyses

    @property
    def pair_model(self) -> PairModel | None:
        """The robust pair/node model over large-message pair busbw (None without pair rows)."""
        return self.analyses.pair_model

    def large_sizes(self, sizes: list[int]) -> list[int]:
        """The sizes that count as large: >= large_min_bytes, else the largest; at most N of them."""
        t = self.policy.thresholds
        sizes = sorted(set(int(s) for s in sizes))
        large = [s for s in sizes if s >= t.large_min_bytes] or sizes[-1:]
        return large[-t.large_sizes_max :]


def _where(df: pd.DataFrame, mask: Any) -> pd.DataFrame:
    """``df[mask]``, but ``df`` itself when every row is kept: the usual case, and a copy of 1.6 M
    rows is 400 MB."""
    return df if mask.all() else df[mask]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while building millions of rows: it would rescan them again and again
    (a full collection per ~25% growth) and costs more than the parse itself. Nothing here makes
    cycles, so nothing is lost; the previous state is restored."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _inv_dict(node: Any) -> dict[str, Any]:
    return node.to_dict() if hasattr(node, "to_dict") else dict(node)


def _read_run_dir(rd: RunDir) -> tuple[Rows, JsonlRead, JsonRead, JsonRead]:
    """rows, inventory, env and run of a run directory, each checked against its contract."""
    from netbench.inventory.model import NodeInventory

    from netbench.common.shape import problem

    inventory = rd.load_inventory(lambda node: problem(node, NodeInventory))
    return _read_rows(rd), inventory, rd.load_env(), rd.load_run()


@dataclass
class Rows:
    """The rows as read: a frame (read column by column) or records (line by line), and the rows
    left out."""

    data: pd.DataFrame | list[dict[str, Any]]
    unreadable: list[Unreadable]
    split: Split | None = None  # read column by column, split (``reports.pairstore``)


def _read_rows(rd: RunDir) -> Rows:
    """Column by column when every row is plainly a good row (``reports.rowtable``: 1.6 M rows in
    seconds; results.parquet's parts or an older run's results.jsonl), else line by line, which
    names each row left out. Only regular files are opened directly (a FIFO would block); anything
    else goes to the line reader, which refuses it."""
    from netbench.reports.pairstore import read_split

    files = rd.row_files()
    if files and all(p.is_file() and not p.is_symlink() for p in files):
        split = read_split(files)
        if split is not None:
            split.rest = rows_frame(split.rest)
            return Rows([], [], split)
    read = rd.load_rows()
    return Rows(read.records, read.unreadable)


def _load_baseline(bd: RunDir) -> Baseline:
    rows, inventory, env, run = _read_run_dir(bd)
    frame = rows_frame(rows.data) if rows.split is None else _whole(bd)
    return Baseline(
        rows=frame,
        env=env.data,
        run=run.data,
        path=str(bd.path),
        inventory=inventory.records,
        unreadable=rows.unreadable + inventory.unreadable + env.unreadable + run.unreadable,
        doubts=_doubts(bd, split_frame(frame), len(rows.unreadable), run.data, env.data, [],
                       inventory.records, _row_hosts(frame)),
    )


def _whole(rd: RunDir) -> pd.DataFrame:
    """Every row of a run directory as one frame (a baseline's: compared row by row)."""
    from netbench.reports.rowtable import read_files_frame

    frame = read_files_frame(rd.row_files())
    return rows_frame(frame if frame is not None else rd.load_rows().records)


def load_baseline(path: str | Path) -> Baseline:
    """A run directory read as ``report --baseline`` reads it, with what could not be read and what
    cannot be vouched for: ``compare`` and ``baseline save`` judge runs through this too."""
    return _load_baseline(RunDir.open(path))


def _doubts(
    rd: RunDir, split: Split, rows_left_out: int, run: dict[str, Any], env: dict[str, Any],
    counters: list[dict[str, Any]], inventory: list[dict[str, Any]], named: frozenset[str],
) -> list[Doubt]:
    """``common.runcheck``'s checks of a run directory as read: schemas, one run, run.json's counts."""
    from netbench.inventory.model import SCHEMA as INVENTORY_SCHEMA

    rows = split.rest
    found = Counter(n.get("schema") for n in inventory)
    nodes = schema_doubt(rd.path / INVENTORY_JSONL, found, INVENTORY_SCHEMA)
    schemas = {
        RUN_JSON: Counter([run.get("schema")]),
        ENV_JSON: Counter([env.get("schema")]),
        RESULTS_JSONL: Counter(rows["schema"].value_counts().to_dict() if "schema" in rows.columns else {})
        + split.tally.schemas,
        COUNTERS_JSONL: Counter(c.get("schema") for c in counters),
    }
    return ([nodes] if nodes else []) + file_schema_doubts(rd.path, schemas) + run_doubts(
        rd.path, run, split, rows_left_out, named)


def _row_hosts(rows: pd.DataFrame) -> frozenset[str]:
    """The hosts ``rows`` name (every row's ``hosts`` list), read once: at 8 M rows this is seconds."""
    from netbench.reports.rowtable import listed_hosts

    return frozenset(listed_hosts(rows["hosts"])[0]) if len(rows) else frozenset()


def _topology_from_run(
    run: dict[str, Any], unreadable: list[Unreadable], path: Path
) -> dict[str, str] | None:
    """run.json may carry the topology the sweep used: a host -> switch table or switch -> hosts
    (or a topology file's path). One of another shape is ignored and named in ``unreadable``."""
    topo = run.get("topology") or (run.get("options") or {}).get("topology")
    if isinstance(topo, dict) and topo:
        if all(isinstance(hs, list) and all(isinstance(h, str) for h in hs) for hs in topo.values()):
            return {h: str(sw) for sw, hs in topo.items() for h in hs}
        if all(isinstance(sw, str) for sw in topo.values()):
            from netbench.inventory.topology import MAX_TIERS, depth

            if depth(topo) > MAX_TIERS + 1:  # + 1: a host's own entry, under its leaf
                why = f"field 'topology' is more than {MAX_TIERS} tiers deep; ignored"
                unreadable.append(Unreadable(str(path), None, why))
                return None
            return dict(topo)
    elif isinstance(topo, str):  # a path: used when it is still there (reports move between machines)
        if "\0" not in topo and Path(topo).is_file():
            from netbench.inventory.topology import TopologyError, load_topology

            try:
                return load_topology(topo).uplinks()
            except TopologyError as exc:
                unreadable.append(Unreadable(str(path), None, f"topology file it names: {exc}; ignored"))
        return None
    elif not topo:
        return None
    unreadable.append(
        Unreadable(str(path), None, "field 'topology' is neither switch -> hosts nor host -> switch; ignored")
    )
    return None
