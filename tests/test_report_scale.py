"""The report's large-fleet paths give what the plain ones give: the rows (results.parquet's parts, an
older run's results.jsonl) read column by column
(pyarrow) vs line by line, headlines summarised column-wise vs row by row, the natural order of
names, and the heatmap that aggregates per switch past HEATMAP_FULL_MAX hosts. Speed and memory are
measured in benchmarks/bench_scale.py, never here."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from netbench.reports.ceilings import large_message_summary
from netbench.reports.engine import analyze, load_context, run_rules
from netbench.reports.html import heatmap
from netbench.reports.rowtable import listed_hosts, read_files_frame, read_rows_frame
from rowfiles import rows_of

from netbench.common.naming import natural_key
from netbench.common.rundir import RunDir
from netbench.sim.fabric import FabricSpec, Fault
from netbench.sim.options import SimOptions
from netbench.sim.run import simulate


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory):  # noqa: ANN001, ANN201
    out = tmp_path_factory.mktemp("scale") / "run"
    spec = FabricSpec(nodes=24, leaves=3, oversubscription=2.0)
    simulate(SimOptions(spec, (Fault.parse("node:node0005=0.6"),), seed=3, out=str(out)))
    # the rows also as an older run's results.jsonl, beside results.parquet (the rows the readers
    # take): the JSON-lines cases below read and damage that file (issue 48)
    from click.testing import CliRunner

    from netbench.cli import cli

    exported = CliRunner().invoke(cli, ["export", str(out), "--format", "jsonl", "--out", str(out)])
    assert exported.exit_code == 0, exported.output
    return out


def _same(a, b) -> bool:  # noqa: ANN001
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)
    return a == b


@pytest.mark.parametrize("layout", ["results.jsonl", "results.parquet"])
def test_columnar_rows_equal_the_line_reader_s(sim_run, layout):
    rd = RunDir.open(sim_run)
    frame = read_rows_frame(sim_run / layout) if layout == "results.jsonl" else \
        read_files_frame(rd.row_files())
    assert frame is not None
    records = rd.load_rows().records
    assert len(frame) == len(records)
    for got, want in zip(frame.to_dict("records"), records, strict=True):
        for key, value in want.items():
            if key in ("extra", "schema"):
                continue
            if key == "rank_time_us" and want["pattern"] == "pair":
                assert got[key] is None  # kept only where a rule reads them (world/ring/intra)
                continue
            assert _same(got[key], value) or (value is None and pd.isna(got[key])), (key, got[key], value)


def test_columnar_rows_read_in_many_blocks_equal_one_block_s(sim_run, tmp_path, monkeypatch):
    """Small blocks: the columns are filled batch by batch, and a string column whose values are
    all distinct (here ``error``) switches to being encoded at the end; the frame is still the one
    a single block gives (which the test above holds against the line reader): same columns,
    dtypes, categories and values."""
    rows = rows_of(sim_run)
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps({**r, "error": f"message {i}"}) + "\n" for i, r in enumerate(rows)))
    whole = read_rows_frame(path)
    monkeypatch.setattr("netbench.reports.rowtable.BLOCK_BYTES", 128 << 10)
    parts = read_rows_frame(path)
    assert whole is not None and parts is not None
    assert isinstance(parts["error"].dtype, pd.CategoricalDtype) and parts["error"].nunique() == len(rows)
    pd.testing.assert_frame_equal(parts, whole, check_exact=True, check_categorical=True)
    assert parts["hosts"].tolist() == whole["hosts"].tolist()
    assert parts["error"].tolist() == [f"message {i}" for i in range(len(rows))]


@pytest.mark.parametrize(
    "line",
    [
        b'{"busbw_GBps": NaN}',
        b'{"run_id": "x", "collec',
        b"[1, 2]",
        b"\xff\xfe",
    ],
)
def test_columnar_reader_gives_up_on_any_doubtful_line(sim_run, tmp_path, line):
    lines = (sim_run / "results.jsonl").read_bytes().splitlines()
    path = tmp_path / "results.jsonl"
    path.write_bytes(b"\n".join([*lines[:3], line, *lines[3:]]) + b"\n")
    assert read_rows_frame(path) is None


@pytest.mark.parametrize("content", [b"null\n", b"  \n null\n{}\n"])
def test_a_file_starting_with_null_goes_to_the_line_reader_in_this_process(tmp_path, content):
    """pyarrow 26's JSON reader dies with SIGSEGV on such a file: it must never be handed one (this
    test would take the whole pytest process down)."""
    path = tmp_path / "results.jsonl"
    path.write_bytes(content)
    assert read_rows_frame(path) is None


@pytest.mark.parametrize(
    ("field", "value"), [("bytes", 1.5), ("bytes", None), ("hosts", "a"), ("busbw_GBps", 1e300)]
)
def test_columnar_reader_gives_up_on_a_field_outside_the_contract(sim_run, tmp_path, field, value):
    lines = (sim_run / "results.jsonl").read_text().splitlines()
    row = json.loads(lines[5])
    row[field] = value
    lines[5] = json.dumps(row)
    path = tmp_path / "results.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert read_rows_frame(path) is None


def test_report_findings_are_the_same_through_either_reader(sim_run, monkeypatch):
    fast = [(f.rule, f.severity, f.subject, f.title) for f in analyze(sim_run)]
    monkeypatch.setattr("netbench.reports.rowtable.read_files_frame", lambda paths: None)
    slow = [(f.rule, f.severity, f.subject, f.title) for f in analyze(sim_run)]
    assert any(f[0] == "slow_node" and f[2] == "node0005" for f in fast)
    assert fast == slow


@pytest.mark.parametrize("seed", range(4))
def test_columnwise_headline_summary_equals_the_row_by_row_one(seed):
    rng = random.Random(seed)
    rows = [
        {
            "collective": rng.choice(["all_reduce", "all_gather"]),
            "pattern": rng.choice(["pair", "ring", "world"]),
            "group": rng.choice([None, "g1", "g2", f"p{i % 7}"]),
            "engine": rng.choice([None, "torch", "nccl", ""]),
            "backend": rng.choice(["nccl", "", None]),
            "ranks": rng.randint(1, 16),
            "hosts": rng.choice([["a", "b"], ["b", "c"], ["c", "a", "d"], None]),
            "bytes": rng.choice([1, 2, 4, 8, 16, 32]),
            "busbw_GBps": rng.choice([None, rng.random()]),
            "algbw_GBps": rng.random(),
            "wrong": rng.choice([None, 0, 1]),
            "status": rng.choice(["ok", "ok", "error", None]),
        }
        for i in range(300)
    ]
    by_row = large_message_summary([{k: v for k, v in r.items() if v is not None} for r in rows])
    by_column = large_message_summary(pd.DataFrame(rows))

    def rounded(summary):  # noqa: ANN001, ANN202
        return [{k: round(v, 9) if isinstance(v, float) else v for k, v in s.items()} for s in summary]

    assert by_row and rounded(by_column) == rounded(by_row)


def test_natural_order_of_switches_and_hosts():
    names = ["leaf10", "leaf2", "leaf1", "spine", "leaf02b", "gpu10", "gpu9", "gpu9a"]
    assert sorted(names, key=natural_key) == [
        "gpu9", "gpu9a", "gpu10", "leaf1", "leaf2", "leaf02b", "leaf10", "spine",
    ]


def test_heatmap_past_the_full_size_is_hosts_by_switch(sim_run, monkeypatch):
    monkeypatch.setattr(heatmap, "HEATMAP_FULL_MAX", 10)
    ctx = load_context(sim_run)
    fig, matrices = heatmap._heatmap_figure(ctx, [])
    assert fig is not None and list(matrices) == ["__NB_Z__"]
    trace = fig["data"][0]
    assert trace["x"] == ["leaf01", "leaf02", "leaf03"] and len(trace["y"]) == 24
    cells = json.loads(matrices["__NB_Z__"])
    assert len(cells) == 24 and all(len(row) == 3 for row in cells)
    slow = trace["y"].index("node0005")
    # the 0.6x node is a dark row: below every other host with its own leaf's hosts
    own = [row[i // 8] for i, row in enumerate(cells)]  # 8 hosts a leaf, in natural order
    assert own[slow] == min(own) and own[slow] < 0.8 * sorted(own)[len(own) // 2]


def test_ratio_view_shows_a_slow_node_whatever_the_oversubscription(sim_run):
    """The "ratio to expected" heatmap (issue 30). Under 2:1 the node capped at 0.6 is slow with its
    own leaf only (across the spine every pair is held to 0.5 by the uplink), and in raw busbw its
    leaf pairs (0.6 of the NIC) look no darker than any healthy cross-spine pair (0.5). Against what
    each pair's class and load predict, its pairs are the one dark row; findings' cells are marked."""
    ctx = load_context(sim_run)
    findings = run_rules(ctx)
    fig, matrices = heatmap._heatmap_figure(ctx, findings)
    assert [t.get("z") for t in fig["data"][:2]] == ["__NB_Z__", "__NB_R__"] and not fig["data"][1]["visible"]
    labels = [b["label"] for b in fig["layout"]["updatemenus"][0]["buttons"]]
    assert labels == ["busbw", "ratio to expected"]
    ratio = np.array(json.loads(matrices["__NB_R__"]), dtype=float)
    busbw = np.array(json.loads(matrices["__NB_Z__"]), dtype=float)
    hosts = fig["data"][0]["y"]
    slow = hosts.index("node0005")
    leaf = np.array([i // 8 for i in range(len(hosts))])
    same = leaf[:, None] == leaf[None, :]
    healthy = np.ones(len(hosts), bool)
    healthy[slow] = False
    its_leaf_pairs = same[slow] & np.isfinite(busbw[slow])
    cross = ~same & healthy[:, None] & healthy[None, :]
    assert np.nanmedian(busbw[slow][its_leaf_pairs]) > np.nanmedian(busbw[cross])  # raw: not the darkest
    assert np.nanmedian(ratio[slow][its_leaf_pairs]) < 0.7 < 0.9 < np.nanmin(np.nanmedian(
        np.where(same, ratio, np.nan)[healthy], axis=1))  # ratio: the one dark row
    marks = fig["data"][-1]
    assert marks["type"] == "scatter"
    assert ("node0005", "node0005") in set(zip(marks["x"], marks["y"], strict=True))


def test_refit_from_a_model_s_matrices_equals_one_from_the_rows(sim_run):
    """The refit without slow uplinks takes the first model's matrices (``like``) instead of building
    them again from the rows: the model must be the same either way."""
    import dataclasses

    import numpy as np
    from netbench.reports.pairmodel import fit_pair_model

    ctx = load_context(sim_run)
    first = fit_pair_model(ctx)
    assert first is not None

    def leaf_one_uplink(hosts):  # noqa: ANN001, ANN202 - pairs with one end under the first leaf
        under = np.array([ctx.switches.get(h) == ctx.switches.get(hosts[0]) for h in hosts])
        return under[:, None] ^ under[None, :]

    again = fit_pair_model(ctx, exclude=leaf_one_uplink)
    reused = fit_pair_model(ctx, exclude=leaf_one_uplink, like=first)
    assert again is not None and reused is not None
    assert np.isnan(again.resid[0, -1])  # a pair left out: this refit differs from the first fit
    for f in dataclasses.fields(again):
        a, b = getattr(again, f.name), getattr(reused, f.name)
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), f.name
        else:
            assert a == b or (a != a and b != b), f.name


@pytest.mark.parametrize("block", [1 << 20, 1, 2])
def test_listed_hosts_numbers_the_hosts_of_list_rows_only(monkeypatch, block):
    monkeypatch.setattr("netbench.reports.rowtable.ROWS_BLOCK", block)  # rows numbered a block at a time
    col = pd.Series([["b", "a"], None, ("c", "d"), ["a", "e", "b"], ["e", "b"], "f"])
    names, rows, codes = listed_hosts(col)
    assert names == ["b", "a", "e"] and rows.tolist() == [0, 3, 4]
    assert [names[c] for c in codes] == ["b", "a", "a", "e", "b", "e", "b"]
    names, rows, codes = listed_hosts(col, length=2)
    assert names == ["b", "a", "e"] and rows.tolist() == [0, 4]
    assert [names[c] for c in codes] == ["b", "a", "e", "b"]


def test_a_512_node_report_stays_attachable(tmp_path):
    """Issue 30: at 512 nodes the rows (390k) were 13 MB of a 19 MB report.html; by default (auto)
    they stay in results.jsonl only and the report is under 10 MB, saying so."""
    out = tmp_path / "sim512"
    fabric = ["--nodes", "512", "--leaves", "16", "--oversubscription", "2", "--confirm-budget", "0",
              "--no-report"]
    made = subprocess.run([sys.executable, "-m", "netbench", "simulate", *fabric, "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr
    judged = subprocess.run([sys.executable, "-m", "netbench", "report", str(out)],
                            capture_output=True, text=True, timeout=600)
    assert judged.returncode in (0, 1), judged.stderr
    page = (out / "report.html").read_text()
    assert len(page.encode()) < 10_000_000
    assert 'id="nb-rows-csv-gz"' not in page and "not embedded" in page


def test_past_the_both_views_size_the_heatmap_carries_the_ratio_alone(sim_run, monkeypatch):
    """Each matrix is ~4 MB of JSON at 1,024 hosts: past HEATMAP_BOTH_MAX only the view that shows
    faults whatever the oversubscription goes into the report."""
    monkeypatch.setattr(heatmap, "HEATMAP_BOTH_MAX", 10)
    fig, matrices = heatmap._heatmap_figure(load_context(sim_run), [])
    assert list(matrices) == ["__NB_R__"] and fig["data"][0]["z"] == "__NB_R__"
    assert "updatemenus" not in fig["layout"]
    assert "what its hop class and load predict" in fig["layout"]["title"]["text"]


def test_past_the_full_size_the_switch_view_is_a_ratio_and_the_drill_down_starts_at_the_findings(
        sim_run, monkeypatch):
    """node0005 is 0.6x: in the hosts x switches aggregate its row is the red one at its own switch,
    marked; the drill-down's first switch pair is its switch with itself, at host resolution."""
    monkeypatch.setattr(heatmap, "HEATMAP_FULL_MAX", 10)
    ctx = load_context(sim_run)
    findings = run_rules(ctx)
    fig, matrices = heatmap._heatmap_figure(ctx, findings)
    agg = np.array(json.loads(matrices["__NB_Z__"]), dtype=float)
    hosts = fig["data"][0]["y"]
    assert agg.shape == (24, 3) and "x what hop class and load predict" in fig["layout"]["title"]["text"]
    slow = hosts.index("node0005")
    assert agg[slow, 0] < 0.7 < np.nanmin(np.delete(agg[:, 0], slow))
    marks = fig["data"][-1]
    assert (fig["data"][0]["x"][0], "node0005") in set(zip(marks["x"], marks["y"], strict=True))
    drill = heatmap._drill_figure(ctx, findings)
    assert drill is not None and 1 <= len(drill["data"]) <= heatmap.DRILL_MAX
    first = drill["data"][0]
    assert "slow_node node0005" in drill["layout"]["updatemenus"][0]["buttons"][0]["label"]
    assert first["y"] == first["x"] == hosts[:8]
    row = np.array([np.nan if v is None else v for v in first["z"][slow]], dtype=float)
    assert np.nanmedian(row) < 0.7
    monkeypatch.setattr(heatmap, "HEATMAP_FULL_MAX", 1024)
    assert heatmap._drill_figure(ctx, findings) is None  # whole matrix on the page: nothing to drill
