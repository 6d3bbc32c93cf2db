"""Baseline store and the baseline/compare commands, on real imported nccl-tests runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixtures_path import fixture

from netbench.cli import cli
from netbench.common.errors import UsageError
from netbench.importers.nccl_tests import import_logs
from netbench.run.baselines import BaselineStore, default_root

H200 = fixture("nccl-tests-h200-1gpu")


@pytest.fixture
def run_dir(tmp_path) -> Path:
    run, _ = import_logs([H200 / "all_reduce.txt"], tmp_path / "run")
    return run.path


def slowed(run_dir: Path, dest: Path, factor: float, min_bytes: int) -> Path:
    """A copy of run_dir whose sizes >= min_bytes took ``factor`` times as long."""
    dest.mkdir()
    for f in ("run.json", "env.json", "inventory.jsonl"):
        (dest / f).write_bytes((run_dir / f).read_bytes())
    with (run_dir / "results.jsonl").open() as src, (dest / "results.jsonl").open("w") as out:
        for line in src:
            row = json.loads(line)
            if row["bytes"] >= min_bytes:
                row["time_us"] *= factor
            out.write(json.dumps(row) + "\n")
    return dest


def test_default_root(monkeypatch, tmp_path):
    monkeypatch.delenv("NETBENCH_BASELINES", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_root() == tmp_path / "netbench" / "baselines"
    monkeypatch.setenv("NETBENCH_BASELINES", str(tmp_path / "b"))
    assert default_root() == tmp_path / "b"


def test_save_resolve_list_delete(run_dir, tmp_path):
    store = BaselineStore(tmp_path / "store")
    dest = store.save(run_dir, "nightly").path
    names = sorted(p.name for p in dest.iterdir())
    assert names == ["env.json", "inventory.jsonl", "results.jsonl", "run.json"]
    assert store.resolve("nightly") == dest and store.resolve(run_dir) == run_dir
    [info] = store.list()
    assert info.name == "nightly" and info.rows == 62
    with pytest.raises(UsageError):
        store.save(run_dir, "nightly")
    store.save(run_dir, "nightly", overwrite=True)
    for bad in ("../x", ".hidden", "a/b", "", "x" * 65):
        with pytest.raises(UsageError):
            store.save(run_dir, bad)
    with pytest.raises(UsageError):
        store.save(tmp_path, "empty")  # not a run directory
    store.delete("nightly")
    assert store.list() == []
    with pytest.raises(UsageError):
        store.resolve("nightly")


def test_compare_exit_codes(run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("NETBENCH_BASELINES", str(tmp_path / "store"))
    runner = CliRunner()
    assert runner.invoke(cli, ["baseline", "save", str(run_dir), "--name", "base"]).exit_code == 0
    assert "base" in runner.invoke(cli, ["baseline", "list"]).output

    same = runner.invoke(cli, ["compare", str(run_dir), "--baseline", "base"])
    assert same.exit_code == 0, same.output
    assert "0 of 62 sizes regressed" in same.output and "environment differences: none" in same.output

    slow = slowed(run_dir, tmp_path / "slow", 1.5, 1 << 20)
    res = runner.invoke(cli, ["compare", str(slow), "--baseline", "base", "--format", "json"])
    assert res.exit_code == 2  # issue 47: a regression is a failure, as everywhere in the tool
    data = json.loads(res.output)
    regressed = [s for s in data["sizes"] if s["regressed"]]
    assert {s["bytes"] for s in regressed} == {1 << k for k in range(20, 34)}
    assert all(s["time_ratio"] == pytest.approx(1.5) for s in regressed)
    assert data["fingerprint"]["baseline"]["nccl"] == "2.28.3"

    lenient = runner.invoke(cli, ["compare", str(slow), "--baseline", str(run_dir), "--threshold", "0.6",
                                  "--format", "markdown"])
    assert lenient.exit_code == 0 and "| what | size |" in lenient.output

    missing = runner.invoke(cli, ["compare", str(slow), "--baseline", "nope"])
    assert missing.exit_code == 2 and "no baseline" in missing.output
    assert runner.invoke(cli, ["baseline", "delete", "base"]).exit_code == 0
    assert runner.invoke(cli, ["baseline", "delete", "base"]).exit_code == 2


@pytest.mark.parametrize("damage", [b"[1, 2]", b"\xff\xfe{", b'{"run_id": 5, "started": []}'])
def test_a_damaged_baseline_is_listed_and_compared_not_a_crash(run_dir, tmp_path, monkeypatch, damage):
    monkeypatch.setenv("NETBENCH_BASELINES", str(tmp_path / "store"))
    dest = BaselineStore(tmp_path / "store").save(run_dir, "nightly").path
    (dest / "run.json").write_bytes(damage)
    with (dest / "results.jsonl").open("ab") as fh:
        fh.write(b'{"bytes": NaN}\n\xff\xfe\n')
    res = CliRunner().invoke(cli, ["baseline", "list"])
    assert res.exit_code == 0 and "nightly" in res.output, res.output
    res = CliRunner().invoke(cli, ["compare", str(run_dir), "--baseline", "nightly"])
    assert res.exit_code == 0, res.output
    assert f"netbench: warning: {dest}/results.jsonl:63: non-finite number NaN; left out" in res.output
    assert f"{dest}/results.jsonl:64: not UTF-8 text" in res.output
