"""report.html's history section (issue 49), its data: the fleet's headline by run with this run in
it, the environment changes the store knows at their dates (the rollout named as the likely cause),
and each finding's entity's past; none without a history, one line when it holds only this run; a
run's own report made before it is added (its tables added after, with run.json's last words); and
every string from the store escaped."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from history_builder import FIRMWARE_NEW, FIRMWARE_OLD, ROLLOUT_NIGHT, netbench, nightly, simulated_run
from netbench.reports.context import AnalysisContext
from netbench.reports.engine import load_context, run_rules
from netbench.reports.html import render_html

from netbench.history.hook import HistoryStage
from netbench.history.store import HistoryStore
from netbench.sim.nightly import Event, History, environment, night_rows


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, History]:
    """10 nights of 20 nodes (a firmware rollout on night 5 costs 5 of them 12%), and a run tonight
    in which node0003, one of the 5, is slower still (0.7 of its NIC)."""
    base = tmp_path_factory.mktemp("section")
    h = nightly(base / "store")
    return base / "store", simulated_run(base / "run", 20, "node:node0003=0.7"), h


def section_of(store: Path, run: Path):  # noqa: ANN201 - reports.html.history.HistorySection
    ctx = load_context(run)
    return HistoryStage(str(store), adds=False).section(ctx, run_rules(ctx))


def test_the_section_holds_the_headline_the_rollout_and_the_finding_s_past(fleet) -> None:  # noqa: ANN001
    store, run, h = fleet
    sec = section_of(store, run)
    assert sec is not None and sec.runs == 11 and sec.store == str(store)
    (series,) = sec.series
    assert series.label == "all_reduce pair 1G" and len(series.points) == 11
    this = json.loads((run / "run.json").read_text())["run_id"]
    assert [p.this_run for p in series.points] == [False] * 10 + [True] and series.points[-1].run_id == this
    assert 170 < series.points[0].busbw_GBps < 190  # the simulator's healthy pair: 180 GB/s
    (mark,) = sec.marks
    assert mark.text.startswith(f"nic_firmware {FIRMWARE_OLD} -> {FIRMWARE_NEW} on 5 hosts") and mark.cause
    assert mark.started[:10] == (h.start + timedelta(days=ROLLOUT_NIGHT)).date().isoformat()
    past = {p.subject: p for p in sec.past}
    line = past["node0003"].text
    assert past["node0003"].severity == "fail"
    last_good = (h.start + timedelta(days=ROLLOUT_NIGHT - 1)).date().isoformat()
    assert line.startswith(f"node0003 was fine until {last_good}")
    assert f"nic_firmware {FIRMWARE_OLD} -> {FIRMWARE_NEW} on 5 hosts" in line and "the likely cause" in line
    assert "at 1G" in line and "this run" in line and "against its level since" in line


def test_no_history_no_section_and_a_history_of_this_run_alone_says_so(fleet, tmp_path: Path) -> None:  # noqa: ANN001
    _, run, _ = fleet
    assert section_of(tmp_path / "none", run) is None and not (tmp_path / "none").exists()  # only read
    res = netbench("history", "add", str(run), store=tmp_path / "alone")
    assert res.returncode == 0, res.stderr
    alone = section_of(tmp_path / "alone", run)
    assert alone is not None and alone.runs == 1 and "only this run" in alone.note and not alone.series
    html = render_html(load_context(run), [], plotlyjs="cdn", history=alone)
    part = html.split('id="history"')[1].split("</section>")[0]
    assert html.count('id="history"') == 1 and "<svg" not in part


def test_a_run_is_reported_with_its_history_then_added_with_its_last_words(fleet, tmp_path: Path) -> None:  # noqa: ANN001
    store, _, _ = fleet
    mine = tmp_path / "store"
    shutil.copytree(store, mine)
    out = tmp_path / "run"
    res = netbench("simulate", "--nodes", "20", "--leaves", "1", "--pattern", "pairwise", "--pair-sizes",
                   "1G", "--confirm-budget", "0", "--fault", "node:node0003=0.7", "--out", str(out),
                   "--history", str(mine))
    assert res.returncode == 2, res.stderr[-2000:]
    run = json.loads((out / "run.json").read_text())
    html = (out / "report.html").read_text()
    assert 'class="this-run"' in html and f"{run['run_id']}: " in html  # its own point, in the chart
    stored = HistoryStore(mine)
    row = [r for r in stored.runs().to_pylist() if r["run_id"] == run["run_id"]]
    assert len(row) == 1 and row[0]["status"] == run["status"] == "completed"
    assert row[0]["ended"] == run["ended"]  # run.json's last words, written after the report
    found = stored.table("findings").to_pylist()
    mine_found = {(f["rule"], f["subject"]) for f in found if f["run_id"] == run["run_id"]}
    assert ("slow_node", "node0003") in mine_found
    assert len(stored.run_ids()) == 11


EVIL_HOST = "<script>window.__pwned='host'</script>"
EVIL_FW = "</script><img src=x onerror=\"window.__pwned='fw'\">"


class Hostile(History):
    """A fleet whose third host reports a name that is markup."""

    @property
    def hosts(self) -> list[str]:
        return [EVIL_HOST if i == 2 else f"node{i + 1:04d}" for i in range(self.nodes)]


def test_every_string_from_the_store_is_escaped(tmp_path: Path) -> None:
    rollout = (EVIL_HOST, "node0004", "node0005", "node0006", "node0007")
    events = [Event("tied", ROLLOUT_NIGHT, rollout, 0.12, "nic_firmware", EVIL_FW)]
    h = nightly(tmp_path / "store", events=events, history=Hostile)
    tonight = Hostile(nodes=h.nodes, nights=h.nights + 1, noise=h.noise, shape=h.shape, seed=h.seed,
                      events=[*events, Event("untied", h.nights, (EVIL_HOST,), 0.3)], start=h.start)
    ctx = AnalysisContext.from_data(
        night_rows(tonight, h.nights, np.random.default_rng(9)),
        env={"hosts": environment(tonight, h.nights)},
        topology={host: tonight.leaf(i) for i, host in enumerate(tonight.hosts)},
        run={"run_id": "20991231T000000Z-evil", "started": datetime.now(UTC).isoformat(),
             "command": "simulate"},
    )
    findings = run_rules(ctx)
    assert any(f.subject == EVIL_HOST for f in findings)
    sec = HistoryStage(str(tmp_path / "store"), adds=False).section(ctx, findings)
    assert sec is not None and any(EVIL_FW in m.text for m in sec.marks)
    assert any(p.subject == EVIL_HOST and EVIL_FW in p.text for p in sec.past)
    html = render_html(ctx, findings, plotlyjs="cdn", history=sec)
    part = html.split('<section id="history">')[1].split("</section>")[0]
    for evil in (EVIL_HOST, EVIL_FW):
        assert evil not in html
    assert "&lt;script&gt;window.__pwned=&#x27;host&#x27;&lt;/script&gt;" in part
    assert "&lt;/script&gt;&lt;img src=x onerror=&quot;window.__pwned=&#x27;fw&#x27;&quot;&gt;" in part
