"""``netbench history`` (issue 49) on the real command line: a run added once however often it is
added (and by the run itself), a damaged or foreign run refused in one line, a store folder that is a
link never written through, and ``changes`` finding a planted firmware regression on a small
simulated history and naming the firmware, with nothing found on a healthy one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic import make_fleet, write_run_dir

from netbench.history.store import HistoryStore
from netbench.sim.nightly import Event, History, write_history


def netbench(*args: str, store: Path | str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"NETBENCH_HISTORY": str(store)}
    return subprocess.run([sys.executable, "-m", "netbench", *args], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small measured run (8 nodes, every pair) and a store for it."""
    base = tmp_path_factory.mktemp("hist")
    return write_run_dir(make_fleet(8, 2, noise=0.02, seed=3), base / "run"), base / "store"


def test_a_run_is_in_the_history_once_however_often_it_is_added(sim_run: tuple[Path, Path]) -> None:
    out, store = sim_run
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    first = netbench("history", "add", str(out), store=store)
    assert first.returncode == 0 and f"added run {run_id}" in first.stdout, first.stderr
    again = netbench("history", "add", str(out), store=store)
    assert again.returncode == 0 and f"replaced run {run_id}" in again.stdout
    listed = netbench("history", "list", "--format", "json", store=store)
    runs = json.loads(listed.stdout)["runs"]
    assert [r["run_id"] for r in runs] == [run_id] and runs[0]["hosts"] == 8
    assert HistoryStore(store).table("nodes").num_rows == 8
    assert not [p for p in store.rglob("*") if p.name.startswith(".")]  # no temporary left behind


def test_a_simulated_sweep_adds_itself_after_its_verdict(tmp_path: Path) -> None:
    out, store = tmp_path / "run", tmp_path / "store"
    sim = ("simulate", "--nodes", "8", "--leaves", "2", "--pattern", "pairwise", "--pair-sizes", "1G",
           "--confirm-budget", "0", "--no-report")
    res = netbench(*sim, "--out", str(out), "--history", str(store), store="off")  # the option wins
    assert res.returncode == 0, res.stderr  # --no-report: the counts alone, every row came back
    assert HistoryStore(store).run_ids() == [json.loads((out / "run.json").read_text())["run_id"]]
    off = netbench(*sim, "--out", str(tmp_path / "run2"), "--no-history", store=store)
    assert off.returncode == 0 and "history" not in off.stderr and len(HistoryStore(store).run_ids()) == 1


def test_a_damaged_or_foreign_run_is_refused_in_one_line(sim_run: tuple[Path, Path], tmp_path: Path) -> None:
    out, _ = sim_run
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for f in out.iterdir():
        if f.is_file():
            (damaged / f.name).write_bytes(f.read_bytes())
    (damaged / "results.parquet").mkdir()
    (damaged / "results.parquet" / "part-000000.parquet").write_bytes(b"PAR1 not parquet at all")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "run.json").write_text('{"hello": "world"}')
    for bad in (damaged, foreign):
        res = netbench("history", "add", str(bad), store=tmp_path / "store")
        assert res.returncode == 2, res.stderr
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
        assert str(bad) in res.stderr
    assert HistoryStore(tmp_path / "store").run_ids() == []


def test_a_store_folder_that_is_a_link_is_never_written_through(sim_run: tuple[Path, Path],
                                                                  tmp_path: Path) -> None:
    out, _ = sim_run
    store, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    store.mkdir()
    elsewhere.mkdir()
    (store / "nodes").symlink_to(elsewhere)
    res = netbench("history", "add", str(out), store=store)
    assert res.returncode == 2 and "symbolic link" in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert list(elsewhere.iterdir()) == []


def _history(store: Path, events: list[Event]) -> None:
    h = History(nodes=32, nights=24, noise=0.03, shape="normal", seed=5, events=events)
    write_history(h, HistoryStore(store))


@pytest.fixture(scope="module")
def regressed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 nights of 32 nodes: a NIC firmware rollout to 6 nodes on night 14 costs each 10%; a
    benign rollout to 6 others on night 9; one node's part goes bad (8%) on night 18 with no change."""
    store = tmp_path_factory.mktemp("regressed") / "store"
    _history(store, [
        Event("tied", 14, tuple(f"node{i:04d}" for i in range(1, 7)), 0.10, "nic_firmware", "28.41.1000"),
        Event("benign", 9, tuple(f"node{i:04d}" for i in range(11, 17)), 0.0, "driver_version", "580.105.08"),
        Event("untied", 18, ("node0020",), 0.08),
    ])
    return store


def test_changes_finds_the_rollout_and_names_the_firmware(regressed: Path) -> None:
    res = netbench("history", "changes", "--kind", "node", "--format", "json", store=regressed)
    assert res.returncode == 0, res.stderr
    found = json.loads(res.stdout)["changes"]
    tied = [c for c in found if c["entity"] in {f"node{i:04d}" for i in range(1, 7)}]
    assert len(tied) == 6 and all(c["first_bad"].endswith("n014") and c["shape"] == "step" for c in tied)
    # 10% planted, as the pair model sees it (pairs of two slowed nodes are slowed once)
    assert all(c["likely_cause"] == "nic_firmware" and -12 < c["shift_pct"] < -6 for c in tied)
    part = [c for c in found if c["entity"] == "node0020"]
    assert len(part) == 1 and part[0]["likely_cause"] is None and part[0]["first_bad"].endswith("n018")
    assert len(found) == 7, [c["entity"] for c in found]
    text = netbench("history", "changes", store=regressed).stdout
    assert "6 hosts moved nic_firmware 28.39.1002 -> 28.41.1000 and 6 of them lost" in text
    assert "the nic_firmware change is the likely cause" in text


def test_show_a_node_as_a_table_and_as_markdown(regressed: Path) -> None:
    res = netbench("history", "show", "node", "node0003", store=regressed)
    assert res.returncode == 0, res.stderr
    night = next(line for line in res.stdout.splitlines() if "n014" in line)
    assert "nic_firmware 28.39.1002 -> 28.41.1000" in night and "step -" in night
    md = netbench("history", "show", "node", "node0003", "--format", "markdown", store=regressed).stdout
    assert md.startswith("| started | run | vs fleet |") and md.count("\n") >= 25
    link = netbench("history", "show", "link", "node0012,node0003", store=regressed)  # either order
    assert link.returncode == 0 and link.stdout.count(" at 1G (") == 24, link.stdout
    missing = netbench("history", "show", "node", "node9999", store=regressed)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


def test_a_healthy_history_has_no_change(tmp_path: Path) -> None:
    _history(tmp_path / "store", [Event("blip", 12, ("node0007",), 0.2)])  # one noisy night is no change
    res = netbench("history", "changes", store=tmp_path / "store")
    assert res.returncode == 0 and res.stdout.strip() == "no persistent change in the history", res.stdout


def test_since_takes_an_age_and_refuses_anything_else(regressed: Path) -> None:
    res = netbench("history", "changes", "--since", "1d", "--format", "json", store=regressed)
    assert res.returncode == 0 and json.loads(res.stdout)["changes"] == []  # the history is of September
    bad = netbench("history", "changes", "--since", "30x", store=regressed)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_a_drift_is_told_apart_from_a_step(tmp_path: Path) -> None:
    """An optic degrading 1% a night from night 10 is a drift; a part failing on night 14, a step."""
    h = History(nodes=32, nights=30, noise=0.03, shape="normal", seed=5, events=[
        Event("drift", 10, ("node0009",), 0.01), Event("untied", 14, ("node0020",), 0.08)])
    write_history(h, HistoryStore(tmp_path / "store"))
    res = netbench("history", "changes", "--format", "json", store=tmp_path / "store")
    found = {c["entity"]: c for c in json.loads(res.stdout)["changes"]}
    assert set(found) == {"node0009", "node0020"}, sorted(found)
    assert found["node0009"]["shape"] == "drift" and found["node0009"]["shift_pct"] < -12
    assert 8 <= int(found["node0009"]["first_bad"][-3:]) <= 13
    assert found["node0020"]["shape"] == "step" and found["node0020"]["first_bad"].endswith("n014")


def test_an_import_adds_itself_and_a_broken_store_costs_it_one_warning(tmp_path: Path) -> None:
    log = Path(__file__).parent / "data" / "nccl_tests" / "h200-1gpu-json" / "all_reduce_1gpu.txt"
    (tmp_path / "a-file").write_text("not a folder")
    imp = ("import", "nccl-tests", str(log), "--out")
    broken = netbench(*imp, str(tmp_path / "one"), store=tmp_path / "a-file")
    fine = netbench(*imp, str(tmp_path / "two"), store=tmp_path / "store")
    assert broken.returncode == fine.returncode == 0, broken.stderr
    said = [line for line in broken.stderr.splitlines() if "history" in line]
    assert len(said) == 1 and said[0].startswith("netbench: warning: run not added to the history"), said
    assert (tmp_path / "one" / "findings.json").is_file()  # the run and its report are whole
    assert len(HistoryStore(tmp_path / "store").run_ids()) == 1
