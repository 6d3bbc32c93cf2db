"""Regressions against a baseline run, per size: small-message time and large-message busbw.

Sizes up to ``small_max_bytes`` are latency-bound, so they are judged on time (ratio above
regression_time_factor); larger sizes on busbw (ratio below regression_busbw_factor); either only
when the difference is also beyond the two runs' own noise (``reports.compare.worse``). Pair rows
are pooled per size (median ratio over pairs): a single bad pair is slow_pair's business, a fleet
that got slower is this rule's. The environments' differences are listed with every finding, since
"NCCL 2.21 -> 2.23" or a changed NCCL_ALGO is the first explanation to rule out.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from netbench.reports.context import AnalysisContext, records
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule, size_label
from netbench.reports.stats import g3, sig3

from netbench.common.findings import Finding


def env_differences(ctx: AnalysisContext) -> list[tuple[str, str | None, str | None]]:
    """(key, baseline, current) for env.json and the inventory fingerprint (firmware, OFED ...)."""
    from netbench.reports.compare import env_diff, fingerprint

    if ctx.baseline is None:
        return []
    diffs = list(env_diff(ctx.env, ctx.baseline.env))
    cur = fingerprint(ctx.env, ctx.inventory)
    base = fingerprint(ctx.baseline.env, ctx.baseline.inventory)
    for key in ("driver", "cuda", "ofed", "nic_firmware", "gpu_vbios", "gpu", "hosts"):
        if cur.get(key) != base.get(key) and (cur.get(key) or base.get(key)):
            diffs.append((f"inventory.{key}", _s(base.get(key)), _s(cur.get(key))))
    return diffs


def _s(v: Any) -> str | None:
    return None if v is None else str(v)


def check(ctx: AnalysisContext) -> list[Finding]:
    if ctx.baseline is None:
        return []
    from netbench.reports.compare import compare_rows, worse

    t = ctx.policy.thresholds
    cur = _rows_for_compare(ctx.rows)
    base = _rows_for_compare(ctx.baseline.rows)
    comps = compare_rows(cur, base)
    diffs = env_differences(ctx)
    out: list[Finding] = []
    if diffs:
        out.append(
            Finding(
                rule="env_changed",
                severity="info",
                subject_kind="run",
                subject="environment",
                title=f"{len(diffs)} environment difference(s) from the baseline: "
                + ", ".join(k for k, _, _ in diffs[:4])
                + (" ..." if len(diffs) > 4 else ""),
                evidence={"differences": [{"key": k, "baseline": b, "current": c} for k, b, c in diffs]},
                action="Rule these out first when reading regressions.",
            )
        )
    pooled: dict[tuple[str, str, str, bool], dict[int, dict[str, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for c in comps:
        slot = pooled[(c.collective, c.pattern, c.dtype, c.in_place)][c.bytes]
        if c.time_ratio is not None:
            slot["time"].append(c.time_ratio)
        if c.busbw_ratio is not None:
            slot["busbw"].append(c.busbw_ratio)
        if c.noise_log is not None:
            slot["noise"].append(c.noise_log)
        slot["base_t"].append(c.base_time_us)
        slot["cur_t"].append(c.cur_time_us)
        if c.base_busbw_GBps is not None and c.cur_busbw_GBps is not None:
            slot["base_bw"].append(c.base_busbw_GBps)
            slot["cur_bw"].append(c.cur_busbw_GBps)
    # one finding per collective, pattern and dtype: out-of-place and in-place are two views of the
    # same regression (the same fabric, the same sizes), so both modes go into one finding's evidence
    modes: dict[tuple[str, str, str], list[tuple[bool, str, int, dict[str, float]]]] = defaultdict(list)
    for (coll, pattern, dtype, in_place), sizes in sorted(pooled.items()):
        for nbytes, s in sorted(sizes.items()):
            med = {k: statistics.median(v) for k, v in s.items() if v}
            noise = med.get("noise")  # None: neither run measured its own scatter here
            if nbytes <= t.small_max_bytes:
                if worse(med.get("time"), t.regression_time_factor, noise):
                    modes[(coll, pattern, dtype)].append((bool(in_place), "time", nbytes, med))
            elif worse(med.get("busbw"), t.regression_busbw_factor, noise):
                modes[(coll, pattern, dtype)].append((bool(in_place), "busbw", nbytes, med))
    for (coll, pattern, dtype), bad in modes.items():
        worst = max(bad, key=lambda b: b[3]["time"] if b[1] == "time" else 1 / b[3]["busbw"])
        in_place, kind, nbytes, med = worst
        what = (
            f"time x{g3(med['time'])} at {size_label(nbytes)} ({g3(med['base_t'])} -> {g3(med['cur_t'])} us)"
            if kind == "time"
            else f"busbw x{g3(med['busbw'])} at {size_label(nbytes)} "
            f"({g3(med.get('base_bw'))} -> {g3(med.get('cur_bw'))} GB/s)"
        )
        which = sorted({b[0] for b in bad})
        said = " and ".join("in-place" if m else "out-of-place" for m in which)
        if len(which) > 1:
            what += ", in-place" if in_place else ", out-of-place"
        groups = len(pooled[(coll, pattern, dtype, in_place)][nbytes]["time"])
        out.append(
            Finding(
                rule="regression",
                severity="warn",
                subject_kind="run",
                subject=f"{coll} {pattern} {dtype}",
                title=f"{coll} ({pattern}) regressed at {len({b[2] for b in bad})} size(s) vs baseline, "
                f"{said}; worst: {what}",
                evidence={
                    "sizes": [
                        {
                            "bytes": b,
                            "in_place": ip,
                            "judged_on": k,
                            "time_ratio": sig3(m.get("time")),
                            "busbw_ratio": sig3(m.get("busbw")),
                            "base_time_us": sig3(m.get("base_t")),
                            "cur_time_us": sig3(m.get("cur_t")),
                            "base_busbw_GBps": sig3(m.get("base_bw")),
                            "cur_busbw_GBps": sig3(m.get("cur_bw")),
                            "noise_log": sig3(m.get("noise")),
                        }
                        for ip, k, b, m in sorted(bad, key=lambda x: (x[2], x[0]))
                    ],
                    "groups_pooled": groups,
                    "baseline": ctx.baseline.path,
                    "env_differences": [{"key": k, "baseline": b, "current": c} for k, b, c in diffs[:20]],
                },
                action=(
                    "Check the environment differences first (NCCL version/settings, drivers, firmware); "
                    "if none, compare per-pair findings for the nodes or links that got slower."
                ),
            )
        )
    return out


def _rows_for_compare(df) -> list[dict[str, Any]]:  # noqa: ANN001 - a DataFrame
    cols = [
        c
        for c in (
            "collective",
            "pattern",
            "bytes",
            "dtype",
            "in_place",
            "group",
            "hosts",
            "ranks",
            "time_us",
            "time_us_min",
            "time_us_max",
            "busbw_GBps",
            "status",
        )
        if c in df.columns
    ]
    return records(df[cols])


RULE = Rule(
    name="regression", ids=ids("regression", "env_changed"), check=check, doc=__doc__ or ""
)
