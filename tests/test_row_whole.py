"""A row is written whole or not at all (issue 45, 11): a disk that fills while a row is appended
leaves the rows before it and none of it, on a real tmpfs that runs out of room."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_os_refusals import mounted, root_only

from netbench.common.interrupts import DiskFull
from netbench.common.rundir import ResultWriter


@root_only
@pytest.mark.parametrize("many", [False, True])
def test_a_row_that_does_not_fit_leaves_nothing_of_itself(tmp_path: Path, many: bool) -> None:
    row = {"collective": "all_reduce", "hosts": ["a", "b"], "note": "x" * 900}
    with mounted(tmp_path / "small", "-o", "size=64k") as small:
        writer = ResultWriter(small / "rows.jsonl")
        written = 0
        with pytest.raises(DiskFull):
            for k in range(1000):
                if many:
                    writer.write_many([{**row, "k": k}, {**row, "k": k, "second": True}])
                    written += 2
                else:
                    writer.write({**row, "k": k})
                    written += 1
        writer.close()
        text = (small / "rows.jsonl").read_text()
        assert text.endswith("\n")
        kept = [json.loads(line) for line in text.splitlines()]
        assert len(kept) == written == writer.count > 0  # every call that returned, none of the last
