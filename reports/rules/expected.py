"""Busbw below what the policy expects (``[[expect.busbw]]``): an absolute floor per collective,
pattern, hop class and size, for sites that know what their fabric should deliver. Without such
entries this rule says nothing: the peer-relative rules never need a fixed guess.
"""

from __future__ import annotations

from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule, size_label
from netbench.reports.stats import sig3

from netbench.common.findings import Finding

_LIST = 20


def check(ctx: AnalysisContext) -> list[Finding]:
    out: list[Finding] = []
    if not ctx.policy.expect.busbw:
        return out
    rows = ctx.whole_ok_rows  # pair rows too, with their hosts
    rows = rows[rows["busbw_GBps"].notna()]
    for exp in ctx.policy.expect.busbw:
        sel = rows[(rows["collective"] == exp.collective) & (rows["bytes"].astype(int) >= exp.min_bytes)]
        if exp.pattern:
            sel = sel[sel["pattern"] == exp.pattern]
        if sel.empty:
            continue
        klass = sel["hosts"].map(
            lambda hs: ctx.hop_class(hs[0], hs[1]) if isinstance(hs, list) and len(hs) == 2 else "any"
        )
        if exp.hop_class != "any":
            sel = sel[klass == exp.hop_class]
        below = sel[sel["busbw_GBps"].astype(float) < exp.busbw_GBps]
        if below.empty:
            continue
        worst = below.sort_values("busbw_GBps").head(_LIST)
        groups = below["hosts"].map(
            lambda hs: "|".join(hs) if isinstance(hs, list) and len(hs) <= 4 else f"{len(hs)} hosts"
        )
        n_groups = groups.nunique()
        out.append(
            Finding(
                rule="below_expected",
                severity="warn",
                subject_kind="run",
                subject=f"{exp.collective} {exp.pattern or ''} {exp.hop_class}".strip(),
                title=(
                    f"{len(below)} of {len(sel)} {exp.collective} measurements ({n_groups} groups) below the "
                    f"policy's {exp.busbw_GBps:g} GB/s at >= {size_label(exp.min_bytes)}"
                ),
                evidence={
                    "expected_busbw_GBps": exp.busbw_GBps,
                    "min_bytes": exp.min_bytes,
                    "pattern": exp.pattern,
                    "hop_class": exp.hop_class,
                    "measured_rows": len(sel),
                    "below_rows": len(below),
                    "median_busbw_GBps": sig3(float(sel["busbw_GBps"].astype(float).median())),
                    "worst": [
                        {
                            "hosts": "|".join(r["hosts"])
                            if len(r["hosts"]) <= 4
                            else f"{len(r['hosts'])} hosts",
                            "bytes": int(r["bytes"]),
                            "busbw_GBps": sig3(float(r["busbw_GBps"])),
                        }
                        for r in worst.to_dict("records")
                    ],
                },
                action="If most measurements are below, the expectation or the fabric's configuration is off "
                "(NCCL_ALGO, IB/RoCE settings); if a few, see the slow pair/node findings.",
                hosts=sorted({h for hs in worst["hosts"] if len(hs) <= 4 for h in hs}),
            )
        )
    return out


RULE = Rule(name="expected", ids=ids("below_expected"), check=check, doc=__doc__ or "")
