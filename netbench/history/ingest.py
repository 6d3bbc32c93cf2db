"""A run directory as the history's tables (``RunTables``): what a later query needs, so it never
refits an old run.

The analysis's own pair model (``reports.pairmodel``) gives each node's effect (log busbw against
the fleet, its partners), each measured pair's busbw at each large size and residual (the link's
own share), and the hop classes; a switch's effect is the median deviation of the cross-switch pairs
of its hosts from their class (an uplink's slowness, which no node effect carries). The fleet's
headline is the median busbw per collective, pattern and size. Findings come from findings.json,
each host's environment from env.json and inventory.jsonl, flattened to ``field -> value``.

A run that is damaged (unreadable rows or run.json, mixed runs, an unknown schema) or foreign (no
run.json of netbench's, no rows) is refused (``RefusedRun``), as ``netbench report`` refuses it: a
history is only as good as what went in.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from netbench.common.errors import UsageError
from netbench.common.jsonread import read_json_object
from netbench.common.rundir import FINDINGS_JSON, RUN_JSON, RUN_SCHEMA

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext
    from netbench.reports.pairmodel import PairModel

#: a run id becomes a file name in the store: netbench's own shape, nothing that could climb out
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
#: env.json keys that say nothing about what a host was measured with
_NOT_ENV = {"schema", "simulated", "hostname", "netbench"}
#: NodeInventory fields whose change can explain a slowdown
ANALYSED = object()  # tables_of's model: the context's own analysis's
ROWS = 512  # rows of the pair matrix taken at a time for the partner levels
_INV_FIELDS = ("driver_version", "ofed_version", "kernel", "os", "nccl_version_torch", "cuda_version")


class RefusedRun(UsageError):
    """A run directory the history will not take: damaged or not netbench's (one line, exit 2)."""


@dataclass(frozen=True)
class RunTables:
    """One run as the store keeps it: each a table of columns, one file per table and run."""

    run_id: str
    started: str
    runs: pa.Table
    nodes: pa.Table
    links: pa.Table
    switches: pa.Table
    fleet: pa.Table
    findings: pa.Table
    env: pa.Table

    def tables(self) -> dict[str, pa.Table]:
        return {"nodes": self.nodes, "links": self.links, "switches": self.switches, "fleet": self.fleet,
                "findings": self.findings, "env": self.env, "runs": self.runs}

    def finished(self, run: dict[str, Any]) -> RunTables:
        """These tables with the catalog's row as run.json says now (``run``): a run made its tables
        at its report, and its status and end are written after it."""
        runs = self.runs
        for name in ("ended", "command", "status"):
            runs = runs.set_column(runs.schema.get_field_index(name), name,
                                   pa.array([str(run.get(name) or "")], pa.string()))
        return replace(self, runs=runs)


def read_run(path: str | Path) -> RunTables:
    """The tables of the run directory at ``path``; ``RefusedRun`` for one that is damaged or foreign."""
    from netbench.reports.context import AnalysisContext

    path = Path(path)
    if not path.is_dir():
        raise RefusedRun(f"{path}: not a run directory")
    run = read_json_object(path / RUN_JSON)
    if run.unreadable or not str(run.data.get("schema", "")).startswith(RUN_SCHEMA.split("/")[0] + "/"):
        raise RefusedRun(f"{path}: no readable run.json of netbench's: not a run directory netbench made")
    try:
        ctx = AnalysisContext.load(path)
    except (OSError, ValueError) as exc:
        raise RefusedRun(f"{path}: cannot be read: {exc}") from None
    check_whole(ctx, path)
    from netbench.reports.analyses import pair_analysis

    # the pair model alone, not the report's whole analysis: its headlines read every row again as
    # a frame (at 4,096 nodes 8.4 M rows of every field), and the history keeps none of them
    model, _ = pair_analysis(ctx)
    return tables_of(ctx, _findings(path), model)


def check_whole(ctx: AnalysisContext, path: Path) -> None:
    """``RefusedRun`` for an analysed run the history will not take: rows or files that could not be
    read, data in doubt, nothing measured."""
    problems = [f"{u.file}{f':{u.line}' if u.line else ''}: {u.reason}" for u in ctx.unreadable]
    problems += [f"{d.file}: {d.reason}" for d in ctx.doubts]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise RefusedRun(f"{path}: damaged run, not added to the history: {problems[0]}{more}")
    if not ctx.row_count:
        raise RefusedRun(f"{path}: no measured rows: nothing to add to the history")


def tables_of(ctx: AnalysisContext, findings: list[dict[str, Any]] | None = None,
              model: PairModel | None | object = ANALYSED) -> RunTables:
    """The tables of an analysed run (``ctx``): what ``read_run`` reads and the nightly generator
    (``netbench.sim.nightly``) makes through the same analysis. ``model``: the run's pair model where
    the caller fitted it (None: the run has none), ``ANALYSED``: the context's analysis gives it."""
    run_id = str(ctx.run.get("run_id") or "")
    if not RUN_ID.match(run_id):
        raise RefusedRun(f"run.json's run_id {run_id[:40]!r} is not one netbench makes")
    started = str(ctx.run.get("started") or "")
    if not _is_time(started):
        raise RefusedRun(f"run {run_id}: run.json has no start time (started) to place it in the history")
    model = ctx.pair_model if model is ANALYSED else model
    switches = ctx.switches
    nodes, links, sw = _model_tables(ctx, model, switches)
    fleet = _fleet(ctx)
    env = _env(ctx)
    found = pa.table({k: pa.array([str(f.get(k, ""))[:300] for f in findings or []], pa.string())
                      for k in ("rule", "severity", "subject_kind", "subject", "title")})
    runs = pa.table({
        "run_id": [run_id], "started": [started], "ended": [str(ctx.run.get("ended") or "")],
        "command": [str(ctx.run.get("command") or "")], "status": [str(ctx.run.get("status") or "")],
        "hosts": pa.array([len(ctx.hosts)], pa.int32()), "rows": pa.array([ctx.row_count], pa.int64()),
        "collective": [model.collective if model else ""],
        "sizes": [",".join(str(s) for s in model.sizes) if model else ""],
        "path": [str(ctx.run_dir or "")],
    })
    tables = {"nodes": nodes, "links": links, "switches": sw, "fleet": fleet, "findings": found, "env": env}
    return RunTables(run_id, started, runs, **{k: _stamped(t, run_id, started) for k, t in tables.items()})


def _stamped(table: pa.Table, run_id: str, started: str) -> pa.Table:
    """Every table's rows carry their run and its start, so each file reads alone (a warehouse)."""
    n = table.num_rows
    return table.add_column(0, "started", pa.array([started] * n, pa.string())).add_column(
        0, "run_id", pa.array([run_id] * n, pa.string()))


def _model_tables(ctx: AnalysisContext, model: Any, switches: dict[str, str]) -> tuple[pa.Table, ...]:
    empty_nodes = pa.table({"host": pa.array([], pa.string()), "switch": pa.array([], pa.string()),
                            "effect": pa.array([], pa.float32()), "level": pa.array([], pa.float32()),
                            "judged": pa.array([], pa.bool_()),
                            "partners": pa.array([], pa.int32())})
    empty_links = pa.table({"a": pa.array([], pa.string()), "b": pa.array([], pa.string()),
                            "hop_class": pa.array([], pa.string()), "bytes": pa.array([], pa.int64()),
                            "busbw_GBps": pa.array([], pa.float32()), "resid": pa.array([], pa.float32())})
    empty_sw = pa.table({"switch": pa.array([], pa.string()), "effect": pa.array([], pa.float32()),
                         "pairs": pa.array([], pa.int32())})
    if model is None:
        return empty_nodes, empty_links, empty_sw
    hosts = model.hosts
    nodes = pa.table({
        "host": hosts, "switch": [switches.get(h, "") for h in hosts],
        "effect": pa.array(np.where(model.judged, model.node_effect, np.nan), pa.float32()),
        "level": pa.array(np.where(model.judged, partner_level(model), np.nan), pa.float32()),
        "judged": pa.array(model.judged), "partners": pa.array(model.partners.astype(np.int32)),
    })
    ia, ib = np.nonzero(np.triu(np.isfinite(model.y), 1))
    # columns taken from the names by index in Arrow, never a Python string a pair (8.4 M at 4,096)
    names = pa.array(hosts, pa.string())
    cls = model.cls[ia, ib]
    cls = np.where(cls < 0, len(model.classes), cls)  # not measured: the ""
    klass = pa.array([*model.classes, ""], pa.string()).take(pa.array(cls))
    at_a, at_b = pa.array(ia), pa.array(ib)
    per_size = [pa.table({
        "a": names.take(at_a), "b": names.take(at_b), "hop_class": klass,
        "bytes": pa.array(np.full(ia.size, size, np.int64)),
        "busbw_GBps": pa.array(model.bw[k, ia, ib].astype(np.float32)),
        "resid": pa.array(model.resid[ia, ib].astype(np.float32)),
    }) for k, size in enumerate(model.sizes)]  # a pair a size: the store's only per-pair figure
    links = pa.concat_tables(per_size).combine_chunks() if ia.size else empty_links
    return nodes, links, _switch_table(model, switches)


def partner_level(model: Any) -> np.ndarray:
    """Each node's median over its measured pairs of (log busbw - its pair's hop class median): what
    its pairs got against the fleet's, the figure its history is searched on. The model's node effect
    subtracts each partner's own effect, which assumes the two ends add up; a pair is bounded by its
    slower end, so where half a leaf slowed at once (a rollout) the leaf's pairs fit no sum and its
    healthy nodes' leaf effects jumped 4-7% for a night while slowed ones read healthy (2 of 20
    simulated histories, benchmarks/README.md "Fleet history"). A partner median moves only with the
    node's own pairs: a slow node's all, a healthy node's few with slow partners. Only the pairs
    the model fitted count (a residual): those through a slow uplink are the switch's
    (``reports.analyses``' refit leaves them out), its leaf's nodes did not change."""
    n = len(model.hosts)
    out = np.full(n, np.nan)
    level = np.array([*_class_medians(model), np.nan], dtype=np.float32)  # cls -1 (not measured): NaN
    for lo in range(0, n, ROWS):  # a block of rows at a time: at 4,096 hosts the matrix is 128 MB
        y, cls = model.y[lo:lo + ROWS].astype(np.float32), model.cls[lo:lo + ROWS]
        dev = np.where(np.isfinite(model.resid[lo:lo + ROWS]), y - level[cls], np.nan)
        np.fill_diagonal(dev[:, lo:], np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a node without pairs: NaN
            out[lo:lo + ROWS] = np.nanmedian(dev, axis=1)
    return out  # the history refers it to the run's middle node (``history.query.series``)


def _class_medians(model: Any) -> list[float]:
    """Each hop class's median log busbw over its fitted pairs (each pair once)."""
    upper = np.triu(np.isfinite(model.resid), 1)
    out = []
    for k in range(len(model.classes)):
        v = model.y[upper & (model.cls == k)]
        out.append(float(np.median(v)) if v.size else np.nan)
    return out


def _switch_table(model: Any, switches: dict[str, str]) -> pa.Table:
    """Each leaf's cross-switch pairs: their median log busbw against their class's level. An
    uplink that is slow slows every one of them; one slow node, a few. Read as the leaf's rows of
    the pair matrix against the columns of the other leaves' hosts: each such pair once, and no
    gather of all 8.4 M pairs at 4,096 hosts."""
    level = np.array([model.class_level.get(c, np.nan) for c in model.classes] + [np.nan])
    host_leaf = np.array([switches.get(h, "") for h in model.hosts], dtype=object)
    out: dict[str, list[Any]] = {"switch": [], "effect": [], "pairs": []}
    placed = host_leaf != ""
    for leaf in sorted(set(host_leaf[placed].tolist())):
        rows, cols = np.nonzero(host_leaf == leaf)[0], np.nonzero(placed & (host_leaf != leaf))[0]
        dev = (model.y[rows[:, None], cols] - level[model.cls[rows[:, None], cols]]).ravel()
        dev = dev[np.isfinite(dev)]
        if dev.size >= 3:
            out["switch"].append(str(leaf))
            out["effect"].append(float(np.median(dev)))
            out["pairs"].append(int(dev.size))
    return pa.table({"switch": pa.array(out["switch"], pa.string()),
                     "effect": pa.array(out["effect"], pa.float32()),
                     "pairs": pa.array(out["pairs"], pa.int32())})


def _fleet(ctx: AnalysisContext) -> pa.Table:
    """The median busbw per collective, pattern and size of the run's measured rows: the frame's,
    and the plain pair rows' from their columns (the frame leaves those out, ``reports.pairstore``)."""
    import pandas as pd

    rows = ctx.ok_rows
    cols = ["collective", "pattern", "bytes", "busbw_GBps"]
    parts = [rows[cols]] if len(rows) and all(c in rows.columns for c in cols) else []
    pairs = ctx.pairs
    keep = ctx.judged_pairs & np.isfinite(pairs.busbw) & (pairs.collective >= 0)
    if keep.any():
        names = np.array(pairs.collectives, dtype=object)
        parts.append(pd.DataFrame({"collective": names[pairs.collective[keep]], "pattern": "pair",
                                   "bytes": pairs.nbytes[keep], "busbw_GBps": pairs.busbw[keep]}))
    frame = pd.concat([p.astype({"collective": str, "pattern": str}) for p in parts], ignore_index=True) \
        if parts else None
    if frame is None or not len(frame):
        return pa.table({"collective": pa.array([], pa.string()), "pattern": pa.array([], pa.string()),
                         "bytes": pa.array([], pa.int64()), "busbw_GBps": pa.array([], pa.float32()),
                         "n": pa.array([], pa.int32())})
    g = frame.dropna(subset=["busbw_GBps"]).groupby(["collective", "pattern", "bytes"])["busbw_GBps"]
    med = g.median().reset_index()
    med["n"] = g.size().to_numpy()
    return pa.table({"collective": pa.array(med["collective"].astype(str), pa.string()),
                     "pattern": pa.array(med["pattern"].astype(str), pa.string()),
                     "bytes": pa.array(med["bytes"].astype("int64"), pa.int64()),
                     "busbw_GBps": pa.array(med["busbw_GBps"].astype("float32"), pa.float32()),
                     "n": pa.array(med["n"].astype("int32"), pa.int32())})


def host_environment(env_host: Any, inv: dict[str, Any] | None) -> dict[str, str]:
    """One host's environment as ``field -> value``: env.json's versions and NCCL_* settings, the
    inventory's driver, OFED, kernel, NIC firmware and GPU VBIOS (a NIC's firmware per device, so a
    node whose NICs disagree says so)."""
    out: dict[str, str] = {}
    if isinstance(env_host, dict):
        for k, v in env_host.items():
            if str(k) not in _NOT_ENV and isinstance(v, (str, int, float)) and not isinstance(v, bool):
                out[str(k)[:64]] = str(v)[:128]
    if isinstance(inv, dict):
        for k in _INV_FIELDS:
            if isinstance(inv.get(k), (str, int, float)):
                out[k] = str(inv[k])[:128]
        nics = inv.get("nics") if isinstance(inv.get("nics"), list) else []
        fw = sorted({str(n.get("firmware")) for n in nics if isinstance(n, dict) and n.get("firmware")})
        if fw:
            out["nic_firmware"] = " | ".join(fw)[:128]
        gpus = inv.get("gpus") if isinstance(inv.get("gpus"), list) else []
        vb = sorted({str(g.get("vbios")) for g in gpus if isinstance(g, dict) and g.get("vbios")})
        if vb:
            out["gpu_vbios"] = " | ".join(vb)[:128]
    return out


def _env(ctx: AnalysisContext) -> pa.Table:
    hosts_env = ctx.env.get("hosts") if isinstance(ctx.env.get("hosts"), dict) else {}
    inv = {str(n.get("host")): n for n in ctx.inventory if isinstance(n, dict) and n.get("host")}
    cols: dict[str, list[str]] = {"host": [], "field": [], "value": []}
    for host in sorted(set(map(str, hosts_env)) | set(inv)):
        for k, v in sorted(host_environment(hosts_env.get(host), inv.get(host)).items()):
            cols["host"].append(host)
            cols["field"].append(k)
            cols["value"].append(v)
    return pa.table({k: pa.array(v, pa.string()) for k, v in cols.items()})


def _findings(path: Path) -> list[dict[str, Any]]:
    """findings.json's findings, when the report wrote it; none otherwise (the history keeps the
    figures either way; ``netbench report`` then ``history add`` brings them in)."""
    read = read_json_object(path / FINDINGS_JSON)
    found = read.data.get("findings") if not read.unreadable else None
    return [f for f in found if isinstance(f, dict)] if isinstance(found, list) else []


def _is_time(text: str) -> bool:
    from datetime import datetime

    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True
