"""Prometheus text exposition (format 0.0.4) for node_exporter's textfile collector.

Write the text to ``<dir>/netbench.prom.$$`` and rename it to ``netbench.prom`` (the collector
may read a half-written file otherwise). Series (all gauges):

- ``netbench_busbw_gbps`` / ``netbench_time_us`` / ``netbench_algbw_gbps`` with labels
  ``collective, pattern, bytes, dtype, in_place, hosts`` (+ ``group`` when rows have one); several
  rows with the same labels (rounds, repeats) are reduced to their median, because a textfile must
  not repeat a series. ``hosts`` is the sorted host list joined by ``,`` (groups of more than 16
  hosts: ``"<first>..<last> (N hosts)"``, to keep label values bounded).
- ``netbench_findings{severity}``: the number of findings of each severity (0s included, so an
  alert on ``> 0`` resolves when the problem goes away).
- ``netbench_finding{rule, severity, subject_kind, subject}``: 1 per finding.
- ``netbench_run_timestamp_seconds``: when the run finished (started when unfinished).
- ``netbench_run_info{run_id, netbench_version, launcher}``: 1.
Run ids are kept out of the measurement labels so every nightly run updates the same series.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

from netbench.reports.export._common import as_finding, iso_to_epoch, severity_counts
from netbench.reports.export.base import Exporter, ExportFile, RunData

from netbench.common.findings import Finding

_MAX_HOSTS_IN_LABEL = 16
_ROW_METRICS = (
    ("netbench_busbw_gbps", "busbw_GBps",
     "Bus bandwidth in GB/s (1e9 B/s, nccl-tests convention), median of rows."),
    ("netbench_algbw_gbps", "algbw_GBps", "Algorithm bandwidth in GB/s (bytes / time), median of rows."),
    ("netbench_time_us", "time_us",
     "Time per operation in microseconds (average over ranks), median of rows."),
)


def escape_label(value: Any) -> str:
    """Label value escaping per the exposition format: backslash, double quote, line feed."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def _labels(pairs: list[tuple[str, Any]]) -> str:
    return "{" + ",".join(f'{k}="{escape_label(v)}"' for k, v in pairs) + "}"


def hosts_label(hosts: list[str] | None) -> str:
    names = sorted(str(h) for h in hosts or [])
    if len(names) > _MAX_HOSTS_IN_LABEL:
        return f"{names[0]}..{names[-1]} ({len(names)} hosts)"
    return ",".join(names)


def _family(out: list[str], name: str, help_text: str) -> None:
    out.append(f"# HELP {name} {_escape_help(help_text)}")
    out.append(f"# TYPE {name} gauge")


def to_prometheus(
    rows: list[dict[str, Any]], findings: list[Finding | dict[str, Any]], run: dict[str, Any]
) -> str:
    """The textfile (ends with a newline, as the collector requires)."""
    items = [as_finding(f) for f in findings]
    groups: dict[tuple[tuple[str, Any], ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("status", "ok") != "ok":
            continue
        pairs = [("collective", r.get("collective", "")), ("pattern", r.get("pattern", "")),
                 ("bytes", r.get("bytes", "")), ("dtype", r.get("dtype", "")),
                 ("in_place", "true" if r.get("in_place") else "false"),
                 ("hosts", hosts_label(r.get("hosts")))]
        if r.get("group"):
            pairs.append(("group", r["group"]))
        groups[tuple(pairs)].append(r)
    out: list[str] = []
    for name, field, help_text in _ROW_METRICS:
        samples = []
        for pairs, members in groups.items():
            vals = [float(m[field]) for m in members if isinstance(m.get(field), (int, float))]
            if vals:
                samples.append(f"{name}{_labels(list(pairs))} {_value(statistics.median(vals))}")
        if samples:
            _family(out, name, help_text)
            out.extend(samples)
    _family(out, "netbench_findings", "Number of findings of each severity in the latest run.")
    for sev, n in severity_counts(items).items():
        out.append(f"netbench_findings{_labels([('severity', sev)])} {n}")
    if items:
        _family(out, "netbench_finding", "One series per finding of the latest run (value 1).")
        seen = set()
        for f in items:
            pairs = [("rule", f.rule), ("severity", f.severity), ("subject_kind", f.subject_kind),
                     ("subject", f.subject)]
            key = tuple(pairs)
            if key not in seen:  # the same rule on the same subject twice would repeat a series
                seen.add(key)
                out.append(f"netbench_finding{_labels(pairs)} 1")
    stamp = iso_to_epoch(run.get("finished")) or iso_to_epoch(run.get("started"))
    if stamp is not None:
        _family(out, "netbench_run_timestamp_seconds", "Unix time the run finished (or started).")
        out.append(f"netbench_run_timestamp_seconds {_value(stamp)}")
    info = [(k, run[k]) for k in ("run_id", "netbench_version", "launcher") if run.get(k) is not None]
    _family(out, "netbench_run_info", "The latest run's id and netbench version (value 1).")
    out.append(f"netbench_run_info{_labels(info) if info else ''} 1")
    return "\n".join(out) + "\n"


def export(data: RunData) -> list[ExportFile]:
    return [ExportFile("netbench.prom", to_prometheus(data.rows, data.findings, data.meta),
                       f"{len(data.findings)} finding(s)")]


EXPORTER = Exporter(
    name="prometheus",
    files="netbench.prom",
    help="Prometheus text for node_exporter's textfile collector (busbw gauges, findings); of an "
    "analysed run (netbench report).",
    example="netbench export latest --format prometheus --out /var/lib/node_exporter/textfile/",
    render=export,
)
