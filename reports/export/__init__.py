"""Exporters: pure functions from rows / findings / run metadata to text for other systems
(JUnit XML for CI, Prometheus text for node_exporter's textfile collector, CSV, JSON, nccl-tests' -J
JSON).

Each module does one format, has an ``EXPORTER`` (``export.base.Exporter``) and never touches the
disk: ``netbench export --format NAME`` takes its choices and --help from ``EXPORTERS`` and writes
every file through one writer. Add a format = add its module and one line here.
"""

from __future__ import annotations

from netbench.reports.export import csv, json_out, jsonl, junit, nccl_tests_json, prometheus
from netbench.reports.export.base import Exporter

_ALL: tuple[Exporter, ...] = (
    nccl_tests_json.EXPORTER,
    csv.EXPORTER,
    json_out.EXPORTER,
    junit.EXPORTER,
    prometheus.EXPORTER,
    jsonl.EXPORTER,
)

#: every exporter by its --format name; the first is ``netbench export``'s default
EXPORTERS: dict[str, Exporter] = {e.name: e for e in _ALL}
if len(EXPORTERS) != len(_ALL):  # a second entry of one name would hide the first
    raise ImportError(f"two exporters share a name: {sorted(e.name for e in _ALL)}")
