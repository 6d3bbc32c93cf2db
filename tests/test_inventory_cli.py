"""`netbench inventory` without SSH: this machine, bad input (exit 2 with FILE:LINE), --help speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from netbench.cli import cli


def test_local_inventory_writes_run_dir(tmp_path: Path) -> None:
    args = ["inventory", "--out", str(tmp_path / "run"), "--json", "--python", "/usr/bin/python3"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    recs = json.loads(r.stdout)
    assert len(recs) == 1 and recs[0]["status"] in ("ok", "partial") and recs[0]["os"]
    lines = (tmp_path / "run" / "inventory.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["host"] == recs[0]["host"]
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["command"] == "inventory" and run["launcher"] == "local" and run["status"] == "ok"


def test_bad_hosts_file_is_exit_2_with_line(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("node01 slots=8\nnode02 switch=leaf;reboot\n")
    r = subprocess.run([sys.executable, "-m", "netbench", "inventory", "--hosts", str(hosts), "--out",
                        str(tmp_path / "run")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip() == f"netbench: error: {hosts}:2: character(s) ';' not allowed in label switch="
    assert "Traceback" not in r.stderr and not (tmp_path / "run").exists()


def test_missing_files_are_exit_2(tmp_path: Path) -> None:
    for args in (["--hosts", str(tmp_path / "nope")], ["--topology", str(tmp_path / "nope.conf")]):
        r = CliRunner().invoke(cli, ["inventory", *args, "--out", str(tmp_path / "r")])
        assert r.exit_code == 2 and "not found" in r.stderr


def test_help_is_fast_and_has_an_example() -> None:
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "netbench", "inventory", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "netbench inventory --hosts hosts.txt" in r.stdout
    assert "paramiko" not in r.stderr and "inventory.collect" not in r.stderr  # heavy imports stay lazy
