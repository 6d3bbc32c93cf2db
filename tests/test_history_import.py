"""``netbench import`` adds its run to the fleet history from the tables its report already made, as
a sweep does (issue 49): the run directory is not read a second time. Observed through CPython's
audit hook (``open`` events), which watches the real command line and replaces nothing: the import
with its history on reads the run's files exactly as often as with the history off (run.json aside,
read once more for the run's last words), and what it adds
is what ``netbench history add`` reads from the directory. Without a report (``--no-report``) there
are no tables to hand over: the run is read, and the same count says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from netbench.history.store import HistoryStore

LOG = Path(__file__).parent / "data" / "nccl_tests" / "h200-1gpu-json" / "all_reduce_1gpu.txt"
#: ``python -m netbench ARGS`` with every file opened under the run directory ($RUN) counted on stderr
WATCHED = """
import os, runpy, sys
run, opened = os.path.realpath(os.environ["RUN"]), []
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.realpath(os.fsdecode(args[0]))
        mode, flags = args[1], args[2]
        reads = mode.startswith("r") and "+" not in mode if mode else not flags & (os.O_WRONLY | os.O_RDWR)
        if path.startswith(run + os.sep) and reads:
            opened.append(os.path.basename(path))
sys.addaudithook(hook)
sys.argv = ["netbench", *sys.argv[1:]]
try:
    runpy.run_module("netbench", run_name="__main__")
finally:
    print("OPENED " + " ".join(sorted(opened)), file=sys.stderr)
"""


def imported(run: Path, store: Path | str, *more: str) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    env = os.environ | {"NETBENCH_HISTORY": str(store), "RUN": str(run)}
    res = subprocess.run([sys.executable, "-c", WATCHED, "import", "nccl-tests", str(LOG), "--out", str(run),
                          *more], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode in (0, 1), res.stderr[-2000:]
    (said,) = [line for line in res.stderr.splitlines() if line.startswith("OPENED")]
    return said.split()[1:], res


def test_an_import_adds_its_run_without_reading_it_again(tmp_path: Path) -> None:
    store = tmp_path / "store"
    off, _ = imported(tmp_path / "off", "off")
    on, res = imported(tmp_path / "on", store)
    # run.json once more, on purpose: its status and end, written after the report (``RunTables.finished``)
    assert on.count("run.json") == off.count("run.json") + 1, (on, off)
    rest = [name for name in on if name != "run.json"]
    assert "results.jsonl" in rest and rest == [n for n in off if n != "run.json"], (on, off)
    assert "history" not in res.stderr, res.stderr
    run_id = json.loads((tmp_path / "on" / "run.json").read_text())["run_id"]
    assert HistoryStore(store).run_ids() == [run_id]
    # what it added is what the run directory reads as (``history add``, into a store of its own)
    again = tmp_path / "again"
    added = subprocess.run([sys.executable, "-m", "netbench", "history", "add", str(tmp_path / "on")],
                           capture_output=True, text=True, env=os.environ | {"NETBENCH_HISTORY": str(again)},
                           timeout=300)
    assert added.returncode == 0, added.stderr
    for name in ("runs", "findings", "fleet", "env"):
        kept, read = HistoryStore(store).table(name), HistoryStore(again).table(name)
        assert kept.num_rows and kept.to_pylist() == read.to_pylist(), name
    findings = json.loads((tmp_path / "on" / "findings.json").read_text())["findings"]
    assert HistoryStore(store).table("findings").num_rows == len(findings)


def test_without_a_report_the_run_is_read_to_be_added(tmp_path: Path) -> None:
    store = tmp_path / "store"
    off, _ = imported(tmp_path / "off", "off", "--no-report")
    on, _ = imported(tmp_path / "on", store, "--no-report")
    assert on.count("results.jsonl") > off.count("results.jsonl"), (on, off)
    assert len(HistoryStore(store).run_ids()) == 1
