"""What the run could and could not measure, by how it issued the operations.

- ``single_rank``: every group had one rank. Nothing crossed a link, so busbw is 0 by definition and
  algbw is this device's copy rate (nccl-tests prints the same for ``-g 1``); the report says so
  rather than leave a PASS that reads as "the fabric is fine".
- ``engine_overhead``: a run with both engines (``--engine both``) measured each point through NCCL
  directly and through torch's process group; the difference at small sizes is torch's host cost
  per operation, the number a PyTorch user needs to read a training job's collectives.
"""

from __future__ import annotations

from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule, size_label
from netbench.reports.stats import g3, sig3

from netbench.common.findings import Finding

SMALL_BYTES = 1 << 20  # up to here an operation's time is mostly host and launch cost, not data


def _single_rank(ctx: AnalysisContext) -> list[Finding]:
    rows = ctx.ok_rows
    if ctx.judged_pairs.any() or rows.empty or rows["ranks"].max() > 1:  # a pair of hosts: 2 ranks or more
        return []
    return [
        Finding(
            rule="single_rank",
            severity="info",
            subject_kind="run",
            subject="run",
            title="One rank: nothing crossed a link, so this run says nothing about the fabric",
            evidence={"rows": len(rows), "collectives": sorted(rows["collective"].dropna().unique())},
            action=(
                "Bus bandwidth is 0 by definition with one rank, and algbw is this device's copy rate. "
                "Run on two or more GPUs, or with --hosts, to measure links."
            ),
        )
    ]


def _engine_overhead(ctx: AnalysisContext) -> list[Finding]:
    if ctx.engines < {"nccl", "torch"}:
        return []
    rows = ctx.rows[(ctx.rows["status"] == "ok").to_numpy()]  # pair rows' times too: every field
    small = rows[(rows["bytes"] <= SMALL_BYTES) & rows["time_us"].notna()]
    keys = ["collective", "in_place", "bytes", "group", "cuda_graph"]
    keys = [k for k in keys if k in small.columns]
    wide = small.pivot_table(index=keys, columns="engine", values="time_us", aggfunc="median").dropna()
    if wide.empty or not {"nccl", "torch"} <= set(wide.columns):
        return []
    wide["extra_us"] = wide["torch"] - wide["nccl"]
    per = []
    for (coll, in_place), part in wide.groupby(level=["collective", "in_place"]):
        per.append(
            {
                "collective": coll,
                "in_place": bool(in_place),
                "sizes": len(part),
                "nccl_us_median": sig3(float(part["nccl"].median())),
                "torch_us_median": sig3(float(part["torch"].median())),
                "torch_extra_us_median": sig3(float(part["extra_us"].median())),
            }
        )
    extra = float(wide["extra_us"].median())
    return [
        Finding(
            rule="engine_overhead",
            severity="info",
            subject_kind="run",
            subject="engines",
            title=(
                f"torch's process group adds {g3(extra)} us per operation over NCCL called directly "
                f"(median over sizes up to {size_label(SMALL_BYTES)})"
            ),
            evidence={"by_collective": per, "judged_engine": ctx.judged_engine},
            action=(
                "A PyTorch job pays this per collective call; small-message figures of the nccl engine "
                "are the ones comparable with nccl-tests. CUDA graphs remove most of it."
            ),
        )
    ]


def check(ctx: AnalysisContext) -> list[Finding]:
    return _single_rank(ctx) + _engine_overhead(ctx)


RULE = Rule(name="engines", ids=ids("single_rank", "engine_overhead"), check=check, doc=__doc__ or "")
