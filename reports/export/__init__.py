"""Exporters: pure functions from rows / findings / run metadata to text for other systems
(JUnit XML for CI, Prometheus text for node_exporter's textfile collector, CSV, JSON).

Each module does one format and never touches the disk; the commands decide where text goes.
"""
