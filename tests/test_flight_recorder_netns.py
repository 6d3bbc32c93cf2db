"""A real hang on real test hosts, and its Flight Recorder dumps imported (issue 27).

Three namespaced hosts each run one rank of a real torch gloo process group
(tests/data/flight_recorder/make_hang.py): the rank on the last host stops before collective 6, the
others enter it and time out; every rank dumps its Flight Recorder buffer into a folder named by its
host (its own hostname: the host's UTS namespace). ``netbench import flight-recorder`` must name that
rank and that host, and the report must fail on it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.netns

MAKE = Path(__file__).parent / "data" / "flight_recorder" / "make_hang.py"


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_hung_rank_and_its_host_are_named(netns_factory, tmp_path: Path, fmt: str) -> None:
    net = netns_factory(3)
    master = f"{net.host('h0').addr}:29561"
    dumps = tmp_path / "dumps"
    extra = ["--json"] if fmt == "json" else []
    procs = [net.popen(h, [sys.executable, str(MAKE), str(r), "3", master, str(dumps), *extra],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r, h in enumerate(net.names)]
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
    assert sorted(p.name for p in dumps.iterdir()) == ["h0", "h1", "h2"]
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "netbench", "import", "flight-recorder", str(dumps), "--out",
                          str(out)], capture_output=True, text=True, timeout=120)
    assert "never entered by rank 2 on h2" in res.stdout, res.stdout + res.stderr
    assert res.returncode == 2  # the report fails on it
    found = [f for f in json.loads((out / "findings.json").read_text())["findings"]
             if f["rule"] == "collective_never_entered"]
    assert len(found) == 1 and found[0]["subject"] == "h2" and found[0]["severity"] == "fail"
    assert found[0]["evidence"]["ranks_missing"] == [2] and found[0]["evidence"]["collective_seq"] == 6
