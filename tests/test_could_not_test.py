"""Issue 47 (1, 4, 9): a host the run could not test is said as such, a warning, never a drain and
never a PASS: its own set-up (a python without torch, named with the fix), a name that does not
resolve. On a stored run through ``netbench report`` and ``--format json`` (the tests on real SSH
hosts are tests/test_host_checks_netns.py and tests/test_could_not_test_netns.py)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from synthetic import make_fleet, write_run_dir

from netbench.cli import cli


def run_with(tmp_path: Path, host: str, record: dict) -> Path:
    """A healthy 8-host run whose ``host`` the inventory marked as ``record`` says, its rows gone."""
    fleet = make_fleet(8, 1, noise=0.02, seed=3)
    run = write_run_dir(fleet, tmp_path / "run")
    inv = [json.loads(x) for x in (run / "inventory.jsonl").read_text().splitlines()]
    inv = [{**n, **record} if n["host"] == host else n for n in inv]
    (run / "inventory.jsonl").write_text("".join(json.dumps(n) + "\n" for n in inv))
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    kept = [r for r in rows if host not in r.get("hosts", [])]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    return run


def test_a_python_without_torch_is_could_not_test_naming_the_interpreter(tmp_path: Path) -> None:
    run = run_with(tmp_path, "gpu003", {
        "status": "cannot_run", "labels": {"python": "/usr/bin/python3"},
        "error": "torch is not importable by its python: ModuleNotFoundError: No module named 'torch'"})
    res = CliRunner().invoke(cli, ["report", str(run)])
    head = res.output.splitlines()[0]
    assert res.exit_code == 1 and head.startswith("WARN:"), res.output
    assert "Could not test gpu003" in head and "Drain" not in head, head
    assert ("Could not test gpu003: its /usr/bin/python3 has no torch (ModuleNotFoundError: No module "
            "named 'torch'); pass --python or python= in the hosts file") in res.output
    doc = json.loads(CliRunner().invoke(cli, ["report", str(run), "--format", "json"]).output)
    assert doc["drain"] == [] and doc["verdict"] in ("warn", "WARN"), doc.get("verdict")


def test_a_host_that_does_not_resolve_is_could_not_test(tmp_path: Path) -> None:
    run = run_with(tmp_path, "gpu005", {
        "status": "unreachable", "error": "could not resolve hostname gpu005: Name or service not known"})
    res = CliRunner().invoke(cli, ["report", str(run)])
    head = res.output.splitlines()[0]
    assert res.exit_code == 1 and head.startswith("WARN:") and "Could not test gpu005" in head, res.output
    assert "Drain" not in head
