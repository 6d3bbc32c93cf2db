"""netbench's rows in nccl-tests' ``-J`` JSON (JSON_FILE_VERSION 3, src/util.cu), per-iteration keys
included (``-I 1``: ``out_of_place_per_iter`` / ``in_place_per_iter``), so NVIDIA's
``tools/analyze_perf_json.py`` and whatever else reads nccl-tests JSON reads netbench's runs.

One document per (group, collective, engine): an nccl-tests run is one binary over one communicator.
``*_per_iter`` comes from the point's arrivals record (common.arrivals: the per-iteration time is the
slowest rank's own elapsed time, as nccl-tests reduces its processes); ``per_process_max_times_us``
(a list per rank, one time per iteration) only when the run kept every sample (``--per-iter``): a
netbench rank is one GPU, so each "process" row is that rank's own time, not a maximum over GPUs.
Values as nccl-tests writes them: booleans as "true"/"false" strings in ``config``, ``root`` -1 when
not rooted, ``nwrong`` null when not checked.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import numpy as np
from netbench.collectives.arrivals import PER_ITER_KEYS, ArrivalRecord, per_iter_summary
from netbench.reports.export.base import Exporter, ExportFile, RunData, file_name

JSON_FILE_VERSION = 3
_TYPES = {"float": "float", "half": "half", "bfloat16": "bfloat16", "double": "double", "int8": "int8",
          "uint8": "uint8", "int32": "int32", "int64": "int64"}


def _placement(row: dict[str, Any]) -> dict[str, Any]:
    return {"time": row.get("time_us"), "alg_bw": row.get("algbw_GBps"), "bus_bw": row.get("busbw_GBps"),
            "nwrong": row.get("wrong")}


def documents(
    rows: list[dict[str, Any]],
    arrivals: list[ArrivalRecord],
    samples: dict[tuple, tuple[np.ndarray, np.ndarray]] | None = None,
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(group, collective, engine) -> its nccl-tests -J document. ``samples``: a point's key
    (ArrivalRecord.key()) -> (arrive, done) [iters, ranks], from per_iter.jsonl.gz."""
    per_key = {a.key(): a for a in arrivals}
    runs: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("status") == "ok":
            runs[(str(r.get("group")), str(r.get("collective")), str(r.get("engine") or "torch"))].append(r)
    out = {}
    for (group, coll, engine), rs in runs.items():
        by_size: dict[tuple, dict[bool, dict[str, Any]]] = defaultdict(dict)
        for r in sorted(rs, key=lambda r: r["bytes"]):
            by_size[(r["bytes"], r["count"], r["dtype"], r.get("op"), r.get("root"))][bool(r["in_place"])] = r
        results = []
        for (size, count, dtype, op, root), places in by_size.items():
            res: dict[str, Any] = {"size": size, "count": count, "type": _TYPES.get(dtype, dtype),
                                   "redop": op or "none", "root": root if root is not None else -1}
            for in_place, name in ((False, "out_of_place"), (True, "in_place")):
                row = places.get(in_place)
                if row is None:
                    continue
                res[name] = _placement(row)
                rec = per_key.get((row.get("group"), coll, size, in_place, engine))
                if rec is not None:
                    per_iter = {k: rec.per_iter[k] for k in PER_ITER_KEYS}
                    got = (samples or {}).get(rec.key())
                    if got is not None:  # the summary from the same samples, so times_us is their max
                        arrive, done = got
                        own = np.round(done - arrive, 1)
                        per_iter = per_iter_summary(own.max(axis=1))
                        per_iter["per_process_max_times_us"] = own.T.tolist()
                    res[f"{name}_per_iter"] = per_iter
            results.append(res)
        first = rs[0]
        out[(group, coll, engine)] = {
            "version": JSON_FILE_VERSION,
            "args": [f"{coll}_perf (netbench {engine} engine, group {group})"],
            "config": {"nthreads": 1, "ngpus": 1, "minimum_bytes": min(r["bytes"] for r in rs),
                       "maximum_bytes": max(r["bytes"] for r in rs), "iterations": first.get("iters"),
                       "warmup_iters": first.get("warmup"), "aggregated_iterations": 1,
                       "per_iter_timing": "true" if any(f"{p}_per_iter" in x for x in results
                                                        for p in ("out_of_place", "in_place")) else "false",
                       "per_iter_skip": 0, "devices": [{"rank": i, "hostname": h} for i, h in
                                                       enumerate(_rank_hosts(first))]},
            "results": results,
        }
    return out


def _rank_hosts(row: dict[str, Any]) -> list[str]:
    hosts, n = row.get("hosts") or [], int(row.get("ranks") or 0)
    if not hosts or n % len(hosts):
        return []
    per = n // len(hosts)
    return [hosts[r // per] for r in range(n)]


def export(data: RunData) -> list[ExportFile]:
    """A file per (group, collective, engine), named after them."""
    docs = documents(data.rows, data.arrivals, data.samples)
    return [ExportFile(file_name(group, coll, engine, suffix=".json"), json.dumps(doc, indent=1) + "\n",
                       f"{len(doc['results'])} size(s)") for (group, coll, engine), doc in docs.items()]


EXPORTER = Exporter(
    name="nccl-tests-json",
    files="<group>-<collective>-<engine>.json, one per group, collective and engine",
    help="nccl-tests -J JSON v3 (-I's out_of_place_per_iter / in_place_per_iter; per_process_max_times_us "
    "only for runs swept with --per-iter): NVIDIA's tools/analyze_perf_json.py reads them.",
    example="netbench export latest --out nccl-json/",
    render=export,
)
