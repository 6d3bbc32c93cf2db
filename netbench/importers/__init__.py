"""Importers: turn other tools' output into netbench run directories, so the same report, compare
and export machinery reads them. One module (or package) per tool, each with an ``IMPORTER``
(``importers.base.Importer``); add an importer = add its module and one line here, and
``netbench import`` has its sub-command, flags and --help (``netbench.commands.import_``).
"""

from __future__ import annotations

from netbench.importers import flight_recorder, inspector, nccl_tests
from netbench.importers.base import Importer

_ALL: tuple[Importer, ...] = (
    nccl_tests.IMPORTER,
    flight_recorder.IMPORTER,
    inspector.IMPORTER,
)

#: every importer by its sub-command name, in the order ``netbench import --help`` lists them
IMPORTERS: dict[str, Importer] = {imp.name: imp for imp in _ALL}
if len(IMPORTERS) != len(_ALL):  # a second entry of one name would hide the first
    raise ImportError(f"two importers share a name: {sorted(i.name for i in _ALL)}")
