"""The fleet's sections: topology (hosts by switch, flagged ones marked), inventory beside the fleet's
majority, ceilings, port counters, environment, and the two engines side by side."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from netbench.collectives.sizes import format_size
from netbench.reports.html.text import e

from netbench.common.findings import SEVERITY_RANK, Finding
from netbench.common.naming import natural_key

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext


INVENTORY_FULL_MAX = 16  # above this many hosts, the deviating ones are listed first


def _host_severity(findings: list[Finding]) -> dict[str, tuple[str, list[str]]]:
    out: dict[str, tuple[str, list[str]]] = {}
    for f in findings:
        if f.severity == "info" or f.subject_kind == "pair":
            continue
        for h in f.hosts:
            sev, titles = out.get(h, ("info", []))
            if SEVERITY_RANK[f.severity] > SEVERITY_RANK[sev]:
                sev = f.severity
            out[h] = (sev, titles + [f.title])
    return out


def _topology(ctx: AnalysisContext, findings: list[Finding]) -> str:
    hosts = ctx.hosts
    if not hosts:
        return "<p class='note'>No hosts.</p>"
    marks = _host_severity(findings)
    by_sw: dict[str, list[str]] = {}
    for h in hosts:
        by_sw.setdefault(ctx.switches.get(h) or "switch unknown", []).append(h)
    bad_switch = {f.subject: f.severity for f in findings if f.subject_kind == "switch"}
    leaves = []
    for sw in sorted(by_sw, key=lambda s: (s == "switch unknown", natural_key(s))):
        chips = []
        worst = "info"
        for h in sorted(by_sw[sw], key=natural_key):
            sev, titles = marks.get(h, ("", []))
            if sev and SEVERITY_RANK.get(sev, 0) > SEVERITY_RANK[worst]:
                worst = sev
            tip = "; ".join(titles[:3])
            chips.append(f'<span class="chip {e(sev)}" title="{e(tip)}">{e(h)}</span>')
        cls = bad_switch.get(sw) or (worst if worst != "info" else "")
        n_bad = sum(1 for h in by_sw[sw] if h in marks)
        leaves.append(
            f'<div class="leaf {e(cls)}"><h3><span>{e(sw)}</span><span class="note">{len(by_sw[sw])} hosts'
            f"{f', {n_bad} flagged' if n_bad else ''}</span></h3>{''.join(chips)}</div>"
        )
    links = [f for f in findings if f.subject_kind == "pair" and f.severity != "info"]
    link_html = ""
    if links:
        items = []
        for f in links[:100]:
            a, _, b = f.subject.partition("|")
            ratio = f.evidence.get("ratio_to_expected")
            klass = f.evidence.get("hop_class", "")
            items.append(
                f'<span class="link" title="{e(f.title)}">{e(a)} &harr; {e(b)}'
                f"{f' ({e(klass)}, x{e(ratio)})' if ratio else ''}</span>"
            )
        link_html = f'<div class="links"><strong>Bad links:</strong> {"".join(items)}</div>'
    m = ctx.pair_model
    spine_note = "spine"
    if m is not None and m.class_ratio("spine", "leaf"):
        spine_note += (
            f" &mdash; cross-spine pairs at {m.class_ratio('spine', 'leaf'):.2f}x of same-leaf pairs"
        )
    spine = f'<div class="spine">{spine_note}</div>' if len(by_sw) > 1 else ""
    legend = (
        '<div class="legend"><span class="chip fail">host</span> failure &nbsp; '
        '<span class="chip warn">host</span> warning &nbsp; <span class="chip">host</span> fine '
        "(hover a host for its findings)</div>"
    )
    return f"{legend}{spine}<div class='leaves'>{''.join(leaves)}</div>{link_html}"


def _inventory(ctx: AnalysisContext) -> str:
    from netbench.inventory.versions import compare_versions

    if not ctx.inventory:
        return "<p class='note'>No inventory was recorded for this run.</p>"
    env_hosts = (ctx.env or {}).get("hosts") or {}
    cols = [
        ("gpus", "GPUs", False),
        ("gpu_model", "GPU", False),
        ("driver", "driver", True),
        ("cuda", "CUDA", True),
        ("vbios", "VBIOS", True),
        ("nic_fw", "NIC firmware", True),
        ("ofed", "OFED", True),
        ("nccl", "NCCL", True),
        ("nic_rate", "NIC ports", False),
    ]
    table = []
    for n in ctx.inventory:
        gpus = n.get("gpus") or []
        nics = n.get("nics") or []
        rates = Counter(f"{nic.get('rate_gbps'):g}G" if nic.get("rate_gbps") else "?" for nic in nics)
        table.append(
            {
                "host": n.get("host"),
                "switch": ctx.switches.get(n.get("host") or ""),
                "status": n.get("status"),
                "gpus": str(len(gpus)),
                "gpu_model": ", ".join(sorted({str(g.get("name")) for g in gpus if g.get("name")})),
                "driver": n.get("driver_version"),
                "cuda": n.get("cuda_version") or (env_hosts.get(n.get("host")) or {}).get("cuda"),
                "vbios": ", ".join(sorted({str(g.get("vbios")) for g in gpus if g.get("vbios")})),
                "nic_fw": ", ".join(sorted({str(x.get("firmware")) for x in nics if x.get("firmware")})),
                "ofed": n.get("ofed_version"),
                "nccl": (env_hosts.get(n.get("host")) or {}).get("nccl") or n.get("nccl_version_torch"),
                "nic_rate": " ".join(f"{k}x{v}" for v, k in sorted(rates.items())) if nics else "",
            }
        )
    ok_rows = [r for r in table if r["status"] in (None, "ok", "partial")]
    majority = {
        c: (Counter(r[c] for r in ok_rows if r[c]).most_common(1) or [(None, 0)])[0][0] for c, _, _ in cols
    }

    def cell(r: dict[str, Any], c: str, is_version: bool) -> tuple[str, bool]:
        v, maj = r[c], majority[c]
        if not v or maj is None or v == maj or r["status"] not in (None, "ok", "partial"):
            return f"<td>{e(v)}</td>", False
        older = False
        if is_version and "," not in v and "," not in maj:
            older = compare_versions(v, maj) < 0
        elif c == "gpus":
            older = int(v) < int(maj)
        else:
            older = True  # mixed within a node, or a different model/rate than the fleet
        cls = "outdated" if older else "newer"
        return f'<td class="{cls}" title="fleet majority: {e(maj)}">{e(v)}</td>', True

    def render(rows: list[dict[str, Any]], table_id: str) -> str:
        body = []
        for r in rows:
            cells = [cell(r, c, isv) for c, _, isv in cols]
            st = r["status"]
            st_cls = "" if st in (None, "ok", "partial") else ' class="bad-status"'
            body.append(
                f"<tr><td class='mono'>{e(r['host'])}</td><td>{e(r['switch'])}</td><td{st_cls}>{e(st)}</td>"
                + "".join(c for c, _ in cells)
                + "</tr>"
            )
        head = "".join(f"<th>{e(t)}</th>" for _, t, _ in cols)
        maj = "".join(f"<td>{e(majority[c])}</td>" for c, _, _ in cols)
        return (
            f'<div class="tablewrap"><table id="{table_id}" class="sortable inv"><thead><tr><th>host</th>'
            f"<th>switch</th><th>status</th>{head}</tr></thead><tbody>"
            f'<tr class="majority"><td>fleet majority</td><td></td><td></td>{maj}</tr>'
            f"{''.join(body)}</tbody></table></div>"
        )

    def deviates(r: dict[str, Any]) -> bool:
        return r["status"] not in (None, "ok", "partial") or any(cell(r, c, v)[1] for c, _, v in cols)

    legend = (
        "<p class='note'>Cells differing from the fleet majority are marked: "
        "<span class='sev fail'>older</span> red, newer or different amber; hover a cell for the majority."
        "</p>"
    )
    if len(table) <= INVENTORY_FULL_MAX:
        return legend + render(table, "inventory-table")
    dev = [r for r in table if deviates(r)]
    return (
        legend
        + f"<p class='note'>{len(dev)} of {len(table)} hosts differ from the fleet majority:</p>"
        + render(dev, "inventory-table")
        + f"<details><summary>All {len(table)} hosts</summary>{render(table, 'inventory-all')}</details>"
    )


def _ceilings(ctx: AnalysisContext) -> str:
    """Each headline (pairs are in the heatmap) with its % of ceiling or why that is unknown, the
    published reference it matches, and why it is above its links' rate when it is."""
    lines = [h for h in ctx.analyses.headlines if h.pattern != "pair"]
    if not lines:
        return "<p class='note'>No group of two or more ranks measured bandwidth.</p>"
    body = []
    for h in lines:
        c = h.ceiling
        ceiling = (f"{c.GBps:.1f} GB/s<br><span class='note'>{e(c.basis)}</span>" if c.GBps is not None
                   else f"unknown: {e(c.unknown)}")
        share = f"{h.fraction:.0%}" if h.fraction is not None else "&ndash;"
        ref = "&ndash;"
        if h.reference is not None:
            r = h.reference
            rng = f"{r.low_GBps:.0f}" if r.low_GBps == r.high_GBps else f"{r.low_GBps:.0f}-{r.high_GBps:.0f}"
            ref = (f"{rng} GB/s ({e(r.ref.algo)})<br><span class='note'>{e(r.ref.note)} &mdash; "
                   f"{e(r.source)}</span>")
        why = f"<br><span class='note'>{e(h.exceeds)}</span>" if h.exceeds else ""
        where = " ".join(h.hosts) if len(h.hosts) <= 4 else f"{len(h.hosts)} hosts"
        body.append(
            f"<tr><td>{e(h.collective)}</td><td>{e(h.pattern)}</td><td class='mono'>{e(where)}</td>"
            f"<td>{h.ranks}</td><td>{e(h.engine)}</td><td>{h.busbw_GBps:.2f}</td>"
            f"<td>{share}{why}</td><td>{ceiling}</td><td>{ref}</td></tr>"
        )
    return (
        "<p class='note'>Large-message busbw (mean of the largest sizes) against the physical ceiling the "
        "inventory gives: across nodes the slowest node's NIC ports (rate, or their PCIe link when lower), "
        "within a node a GPU's NVLinks. Ring algorithms stay below it; Tree and NVLS can exceed it.</p>"
        "<div class='tablewrap'><table id='ceilings-table'><thead><tr><th>collective</th><th>pattern</th>"
        "<th>hosts</th><th>ranks</th><th>engine</th><th>busbw GB/s</th><th>of ceiling</th><th>ceiling</th>"
        f"<th>published reference</th></tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def _counters(ctx: AnalysisContext) -> str:
    """Per port, the counters that rose between the snapshots before and after the run; error
    counters first. Hosts without a pair of snapshots are named with why."""
    d = ctx.analyses.counters
    if not ctx.counters:
        return ("<p class='note'>No port counter snapshots in this run (taken by <code>sweep</code> "
                "and <code>preflight</code> over SSH or as Kubernetes pods, before and after the "
                "traffic).</p>")
    body = []
    for p in sorted(d.ports, key=lambda p: (-len(p.errors) - p.flaps, p.host, p.port)):
        if not p.rose and not p.went_back:
            continue
        errs = ", ".join(f"{k} +{v}" for k, v in sorted(p.errors.items())) or "none"
        other = ", ".join(f"{k} +{v}" for k, v in sorted(p.rose.items())[:12] if k not in p.errors)
        back = (f"<br><span class='note'>went back (reset?): {e(', '.join(p.went_back))}</span>"
                if p.went_back else "")
        body.append(f"<tr><td class='mono'>{e(p.host)}</td><td class='mono'>{e(p.port)}</td>"
                    f"<td>{e(p.source)}</td><td>{e(errs)}</td><td class='mono'>{e(other)}{back}</td></tr>")
    missing = "".join(f"<li>{e(h)}: {e(why)}</li>" for h, why in sorted(d.missing.items()))
    return (
        f"<p class='note'>{d.hosts_compared} host(s) compared, {len(d.ports)} port(s); only ports whose "
        "counters changed are listed.</p><div class='tablewrap'><table id='counters-table'><thead><tr>"
        "<th>host</th><th>port</th><th>source</th><th>errors during the run</th><th>other counters that rose"
        f"</th></tr></thead><tbody>{''.join(body) or '<tr><td colspan=5>no counter changed</td></tr>'}"
        "</tbody></table></div>" + (f"<p>Not compared:</p><ul>{missing}</ul>" if missing else "")
    )


def _environment(ctx: AnalysisContext) -> str:
    from netbench.reports.compare import flatten_env

    run = ctx.run or {}
    info = [
        ("run id", run.get("run_id")),
        ("command", " ".join(map(str, run.get("argv") or [])) or None),
        ("started", run.get("started") or run.get("start")),
        ("ended", run.get("ended") or run.get("end")),
        ("launcher", run.get("launcher")),
        ("netbench", run.get("netbench_version") or run.get("version")),
        ("status", run.get("status")),
        ("policy", ctx.policy.source or "defaults"),
    ]
    rows = "".join(f"<tr><th>{e(k)}</th><td class='mono'>{e(v)}</td></tr>" for k, v in info if v is not None)
    flat = flatten_env(ctx.env or {})
    nccl = [(k, v) for k, v in flat.items() if "NCCL_" in k]
    other = [(k, v) for k, v in flat.items() if "NCCL_" not in k]
    env_rows = "".join(
        f"<tr><td class='mono'>{e(k)}</td><td class='mono'>{e(v)}</td></tr>" for k, v in nccl + other
    )
    out = (
        f"<div class='grid2'><div class='tablewrap'><table><tbody>{rows}</tbody></table></div>"
        f"<div class='tablewrap'><table id='env-table'><thead><tr><th>setting (hosts.*: every host)</th>"
        f"<th>value</th></tr></thead><tbody>{env_rows or '<tr><td colspan=2>no env.json</td></tr>'}"
        "</tbody></table></div></div>"
    )
    if ctx.baseline is not None:
        from netbench.reports.rules.regression import env_differences

        diffs = env_differences(ctx)
        drows = "".join(
            f"<tr><td class='mono'>{e(k)}</td><td class='mono'>{e(b)}</td><td class='mono'>{e(c)}</td></tr>"
            for k, b, c in diffs
        )
        out += (
            f"<h3>Differences from the baseline ({e(ctx.baseline.path)})</h3><div class='tablewrap'><table>"
            f"<thead><tr><th>key</th><th>baseline</th><th>this run</th></tr></thead><tbody>"
            f"{drows or '<tr><td colspan=3>none</td></tr>'}</tbody></table></div>"
        )
    return out


def _engines(ctx: AnalysisContext) -> str:
    """Both engines side by side per size (``--engine both``): the torch overhead as a number."""
    if ctx.engines < {"nccl", "torch"}:
        return ""
    rows = ctx.rows[(ctx.rows["status"] == "ok").to_numpy()]  # pair rows' times too: every field
    keys = [k for k in ("collective", "in_place", "cuda_graph", "bytes") if k in rows.columns]
    wide = rows.pivot_table(index=keys, columns="engine", values="time_us", aggfunc="median").dropna()
    parts = []
    for head, part in wide.groupby(level=keys[:-1]):
        coll, in_place, *graph = head
        title = f"{coll}, {'in-place' if in_place else 'out-of-place'}{', CUDA graph' if any(graph) else ''}"
        body = "".join(
            f"<tr><td>{e(format_size(int(idx[-1])))}</td><td>{r['nccl']:.2f}</td>"
            f"<td>{r['torch']:.2f}</td><td>{r['torch'] - r['nccl']:+.2f}</td>"
            f"<td>{r['torch'] / r['nccl']:.2f}</td></tr>"
            for idx, r in part.iterrows()
            if r["nccl"] > 0
        )
        parts.append(
            f"<h3>{e(title)}</h3><div class='tablewrap'><table><thead><tr><th>size</th><th>nccl (us)</th>"
            f"<th>torch (us)</th><th>torch &minus; nccl (us)</th><th>torch / nccl</th></tr></thead>"
            f"<tbody>{body}</tbody></table></div>"
        )
    return (
        "<section id='engines'><h2>Engines side by side</h2><p class='note'>Time per operation (median "
        "over groups) through NCCL called directly (nccl4py) and through torch's process group. The "
        f"diagnosis above judges the {e(ctx.judged_engine)} rows.</p>{''.join(parts)}</section>"
    )
