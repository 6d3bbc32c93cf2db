"""report.html's history section in a real headless Chromium (issue 49): ``netbench report RUN
--history STORE`` on a small nightly history with a firmware rollout draws the fleet's headline by
run as inline SVG with the rollout marked at its date, tells the finding's node's past in one line,
and the page logs no error; ``--no-history`` leaves the section out."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from history_builder import FIRMWARE_NEW, FIRMWARE_OLD, netbench, nightly, simulated_run

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

browser = pytest.mark.skipif(not os.path.exists(CHROMIUM) or shutil.which("chromium") is None,
                             reason="needs Debian chromium at /usr/bin/chromium")


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("histhtml")
    nightly(base / "store")
    run = simulated_run(base / "run", 20, "node:node0003=0.7")
    res = netbench("report", str(run), "--history", str(base / "store"))  # plotly inline: offline
    assert res.returncode == 2, res.stderr  # node0003 fails: slow
    return run / "report.html"


@browser
@pytest.mark.browser
def test_the_history_section_renders_with_the_rollout_marked(reported: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = b.new_page(viewport={"width": 1400, "height": 1000})
        problems: list[str] = []
        pg.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type == "error" else None)
        pg.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
        pg.goto(reported.as_uri())
        every_plot = "[...document.querySelectorAll('.plot')].every(d => d.querySelector('.main-svg'))"
        pg.wait_for_function(every_plot, timeout=20_000)
        assert pg.is_visible("nav.toc a[href='#history']")
        chart = pg.query_selector("#history figure.history-chart svg")
        assert chart is not None and chart.bounding_box()["width"] > 300
        assert pg.inner_text("#history figure.history-chart figcaption").startswith("all_reduce pair 1G")
        assert len(pg.query_selector_all("#history svg circle")) == 11  # 10 nights and this run
        assert len(pg.query_selector_all("#history svg circle.this-run")) == 1
        marks = pg.query_selector_all("#history svg g.env-mark.cause")
        assert len(marks) == 1
        box = marks[0].bounding_box()
        assert box is not None and box["height"] > 100  # a line across the chart, at the rollout's date
        assert FIRMWARE_NEW in marks[0].query_selector("title").text_content()
        listed = pg.inner_text("#history ol.history-marks")
        assert f"nic_firmware {FIRMWARE_OLD} -> {FIRMWARE_NEW} on 5 hosts" in listed
        assert "likely cause" in listed
        past = pg.inner_text("#history ul.history-past")
        assert "node0003 was fine until" in past and f"{FIRMWARE_OLD} -> {FIRMWARE_NEW}" in past
        assert problems == [], problems
        b.close()


def test_no_history_leaves_the_section_out(reported: Path) -> None:
    res = netbench("report", str(reported.parent), "--plotlyjs", "cdn", "--no-history",
                   store=reported.parent.parent / "store")
    assert res.returncode == 2, res.stderr
    assert 'id="history"' not in reported.read_text()
