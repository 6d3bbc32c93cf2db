"""``netbench history changes`` (issue 49) under what made it cry wolf on simulated t3 histories: half
a leaf slowed by two rollouts (the pair model's sum of node effects fits no such leaf: its healthy
nodes jumped, slowed ones read healthy), and a link's wild single measurements at a history's end.
Both on the real command line over stores the simulator writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from netbench.history.store import HistoryStore
from netbench.sim.nightly import Event, History, write_history


def changes(store: Path, kind: str) -> list[dict[str, object]]:
    env = os.environ | {"NETBENCH_HISTORY": str(store)}
    res = subprocess.run([sys.executable, "-m", "netbench", "history", "changes", "--kind", kind, "--format",
                          "json"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["changes"]


@pytest.fixture(scope="module")
def half_a_leaf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """32 nodes on 2 leaves, 24 nights: a firmware rollout slows 4 of leaf01's nodes 15% on night 6,
    a driver rollout 4 more of them 8% on night 14: half the leaf slow, as in seeds 312 and 317."""
    store = tmp_path_factory.mktemp("leaf") / "store"
    h = History(nodes=32, nights=24, noise=0.03, shape="normal", seed=7, events=[
        Event("tied", 6, tuple(f"node{i:04d}" for i in range(1, 5)), 0.15, "nic_firmware", "28.41.1000"),
        Event("tied", 14, tuple(f"node{i:04d}" for i in range(5, 9)), 0.08, "driver_version", "580.105.08"),
    ])
    write_history(h, HistoryStore(store))
    return store


def test_half_a_leaf_slowed_is_found_node_by_node_and_its_healthy_mates_stay(half_a_leaf: Path) -> None:
    found = changes(half_a_leaf, "node")
    by_node = {c["entity"]: c for c in found}
    said = [(c["entity"], c["first_bad"]) for c in found]
    assert sorted(by_node) == [f"node{i:04d}" for i in range(1, 9)], said
    for i in range(1, 9):
        c = by_node[f"node{i:04d}"]
        night, loss, cause = (6, 15, "nic_firmware") if i <= 4 else (14, 8, "driver_version")
        assert c["first_bad"].endswith(f"n{night:03d}") and c["likely_cause"] == cause, c
        assert abs(-c["shift_pct"] - loss) < 2.5, c  # each node's own loss, not the leaf's mixture


def _set_link(store: Path, a: str, b: str, values: list[float]) -> None:
    """Write ``values`` (log, a run each, oldest first) as link a-b's residual in every run's file."""
    files = sorted((store / "links").glob("*.parquet"))
    assert len(files) == len(values)
    for f, v in zip(files, values, strict=True):
        t = pq.read_table(f)
        ends = zip(t.column("a").to_pylist(), t.column("b").to_pylist(), strict=True)
        hit = np.array([x == a and y == b for x, y in ends])
        resid = pa.array(np.where(hit, v, t.column("resid").to_numpy(zero_copy_only=False)), pa.float32())
        pq.write_table(t.set_column(t.schema.get_field_index("resid"), "resid", resid), f)


def test_two_wild_nights_at_the_end_are_no_link_change_and_a_real_step_is(tmp_path: Path) -> None:
    """A t3 law's single measurements: 2.9% wide, with nights of -27% (a seed-302 link's last four
    nights, once reported as a -18% change). A 30% step 6 nights from the end is found."""
    store = tmp_path / "store"
    write_history(History(nodes=16, nights=30, noise=0.03, shape="normal", seed=3), HistoryStore(store))
    rng = np.random.default_rng(1)
    quiet = list(0.029 * rng.standard_t(3, 30))
    _set_link(store, "node0003", "node0012", [*quiet[:26], -0.105, -0.272, -0.268, -0.05])
    _set_link(store, "node0002", "node0009", [*quiet[:24], *(q - 0.357 for q in quiet[24:])])
    found = changes(store, "link")
    assert [(c["entity"], c["first_bad"][-4:]) for c in found] == [("node0002,node0009", "n024")], found


def test_a_store_written_before_the_partner_levels_is_still_read(tmp_path: Path) -> None:
    """A store whose nodes files have no ``level`` column (written before it existed): its nodes are
    searched on their effects, and a part that went bad is found as before."""
    store = tmp_path / "store"
    h = History(nodes=16, nights=20, noise=0.03, shape="normal", seed=4,
                events=[Event("untied", 12, ("node0007",), 0.10)])
    write_history(h, HistoryStore(store))
    for f in (store / "nodes").glob("*.parquet"):
        pq.write_table(pq.read_table(f).drop_columns(["level"]), f)
    found = changes(store, "node")
    assert [(c["entity"], c["first_bad"][-4:]) for c in found] == [("node0007", "n012")], found


def test_show_tells_a_node_s_loss_on_the_figure_its_change_was_found_on(half_a_leaf: Path) -> None:
    """``history show node`` reads each run's figure as ``changes`` does (the lower of the partner level
    and the model's effect): node0005's 8% loss, not the effect's mixture of half a leaf."""
    env = os.environ | {"NETBENCH_HISTORY": str(half_a_leaf)}
    res = subprocess.run([sys.executable, "-m", "netbench", "history", "show", "node", "node0005", "--format",
                          "json"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    runs = sorted(json.loads(res.stdout)["runs"], key=lambda r: r["run_id"])
    before = np.median([r["figure"] for r in runs[8:14]])
    after = np.median([r["figure"] for r in runs[16:]])
    assert abs(100 * (np.exp(after - before) - 1) + 8) < 2.5, (before, after)
    shown = subprocess.run([sys.executable, "-m", "netbench", "history", "show", "node", "node0005"],
                           capture_output=True, text=True, env=env, timeout=300)
    assert shown.returncode == 0 and "not judged" not in shown.stdout, shown.stdout[-2000:]
