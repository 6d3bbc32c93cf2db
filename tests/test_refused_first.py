"""A mistyped measurement option is refused before anything starts (one line, exit 2): no host is
contacted, no run directory made, and torch is not imported for it (the plan's records are read
without torch: ``collectives.dtypes``, ``collectives.ops``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import sys
from netbench.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    print("torch" in sys.modules, exc.code, file=sys.stderr)
"""


@pytest.mark.parametrize(("args", "said"), [
    (["-d", "fp33"], "unknown dtype 'fp33'"),
    (["-o", "mean"], "unknown reduction op 'mean'"),
    (["-b", "1M", "-e", "1K"], "min size 1048576 is larger than max size 1024"),
])
def test_a_bad_measurement_option_is_refused_before_any_host_is_tried(
    tmp_path: Path, args: list[str], said: str
) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("nosuch-host-a.invalid\nnosuch-host-b.invalid\n")
    out = tmp_path / "run"
    argv = [sys.executable, "-c", PROBE, "sweep", "--hosts", str(hosts), *args, "--out", str(out)]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    lines = res.stderr.strip().splitlines()
    assert lines[0].startswith(f"netbench: error: {said}"), res.stderr
    assert lines[-1] == "False 2", res.stderr  # exit 2, and no torch imported to say so
    assert "nosuch-host" not in res.stderr and not out.exists()
