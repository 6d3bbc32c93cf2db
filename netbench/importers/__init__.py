"""Importers: turn other tools' output into netbench run directories, so the same report, compare
and export machinery reads them. One module per tool; each exposes ``parse_file`` and ``import_logs``.
"""
