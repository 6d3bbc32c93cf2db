"""``sudo python3 benchmarks/readme_demo.py`` (issue 47, point 8): with a python3 that lacks
netbench and torch (Debian's own) it printed a traceback for each command and exited 0. Now it hands
over to the checkout's .venv (the README's set-up) or says in one line what is missing, exit 2."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def checkout(tmp: Path, venv: bool) -> Path:
    """The demo and the test hosts' module in a copy of the checkout's layout, with a .venv or none."""
    (tmp / "benchmarks").mkdir()
    (tmp / "tests").mkdir()
    shutil.copy(ROOT / "benchmarks" / "readme_demo.py", tmp / "benchmarks")
    shutil.copy(ROOT / "tests" / "netns.py", tmp / "tests")
    if venv:  # this test's own venv, which has netbench and torch
        assert sys.prefix != sys.base_prefix, "run the tests from the checkout's venv"
        (tmp / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    return tmp / "benchmarks" / "readme_demo.py"


def bare_python(script: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The demo under a python without site-packages (-S): no netbench, no torch, as a system's own."""
    return subprocess.run([sys.executable, "-S", str(script)], capture_output=True, text=True, timeout=60,
                          cwd=script.parent, env={**os.environ, **(env or {})})


def test_without_netbench_it_says_so_in_one_line_exit_2(tmp_path: Path) -> None:
    res = bare_python(checkout(tmp_path, venv=False))
    assert res.returncode == 2 and res.stdout == ""
    (line,) = res.stderr.splitlines()
    assert line.startswith("readme_demo: ") and "has no netbench and torch" in line
    assert "sudo " in line and ".venv/bin/python benchmarks/readme_demo.py" in line  # what to run instead


def test_it_hands_over_to_the_checkouts_venv(tmp_path: Path) -> None:
    """The venv's python goes on, up to the test hosts' own check: with no ``ip`` command on PATH
    (an empty one), that check's one line, exit 2, nothing built."""
    empty = tmp_path / "empty"
    empty.mkdir()
    res = bare_python(checkout(tmp_path, venv=True), {"PATH": str(empty)})
    assert res.returncode == 2 and res.stdout == "", res.stderr
    assert res.stderr == "readme_demo: cannot build the test hosts: needs the 'ip' command\n"
