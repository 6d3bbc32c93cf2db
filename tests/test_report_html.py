"""The HTML report in a real headless Chromium: renders, shows the findings, runs no host data."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from netbench.reports.html import safe_json
from netbench.reports.report import report_run
from rowfiles import rows_of
from synthetic import host_names, make_fleet, write_run_dir

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
EVIL_FW = "<script>window.__pwned = 'firmware'</script>"
EVIL_LABEL = "<img src=x onerror=\"window.__pwned='label'\">"
EVIL_HOSTNAME = "</script><script>window.__pwned='hostname'</script>"
EVIL_ERROR = "<script>window.__pwned='error'</script>"


def _hostile_run(root: Path) -> Path:
    hosts = host_names(16)
    fleet = make_fleet(
        16, 2, slow_nodes={hosts[4]: 0.75}, slow_links={(hosts[1], hosts[12]): 0.6}, noise=0.03, seed=21
    )
    inv = {n["host"]: n for n in fleet.inventory}
    inv[hosts[7]]["nics"][0]["firmware"] = EVIL_FW
    inv[hosts[7]]["hostname"] = EVIL_HOSTNAME
    inv[hosts[9]]["labels"]["switch"] = EVIL_LABEL  # a host label shown in the topology and heatmap
    for row in fleet.rows:
        if row["hosts"] == [hosts[2], hosts[15]] or row["hosts"] == [hosts[15], hosts[2]]:
            row.update(status="error", error=EVIL_ERROR, busbw_GBps=None, time_us=None)
    fleet.env["hosts"][hosts[3]]["env"]["NCCL_DEBUG"] = EVIL_FW
    return write_run_dir(fleet, root / "run")


def test_safe_json_cannot_close_a_script_block():
    text = safe_json({"fw": "</script><script>alert(1)</script>", "amp": "a&b", "ls": "\u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text)["fw"] == "</script><script>alert(1)</script>"


def test_host_data_is_escaped_in_the_file(tmp_path):
    run = _hostile_run(tmp_path)
    done = report_run(run)
    findings, path = done.findings, done.html
    text = path.read_text()
    for evil in (EVIL_FW, EVIL_LABEL, EVIL_HOSTNAME, EVIL_ERROR):
        assert evil not in text
    assert "&lt;script&gt;window.__pwned = &#x27;firmware&#x27;&lt;/script&gt;" in text
    doc = json.loads((run / "findings.json").read_text())
    assert doc["verdict"] == "FAIL" and len(doc["findings"]) == len(findings)


def test_cdn_variant_is_small_and_inline_is_self_contained(tmp_path):
    run = write_run_dir(make_fleet(8, 2, seed=22), tmp_path / "run")
    inline = report_run(run).html
    size_inline = inline.stat().st_size
    assert "https://" not in inline.read_text().split('<script type="application/json"')[0]
    cdn = report_run(run, plotlyjs="cdn").html
    assert cdn.stat().st_size < size_inline - 4_000_000
    assert 'src="https://cdn.plot.ly/plotly-' in cdn.read_text()


browser = pytest.mark.skipif(
    not os.path.exists(CHROMIUM) or shutil.which("chromium") is None,
    reason="needs Debian chromium at /usr/bin/chromium",
)


@pytest.fixture(scope="module")
def page_of():
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)

        def open_page(path: Path, **kw):
            ctx = b.new_context(accept_downloads=True, viewport={"width": 1400, "height": 1000}, **kw)
            pg = ctx.new_page()
            problems: list[str] = []
            pg.on(
                "console",
                lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None,
            )
            pg.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
            pg.goto(path.as_uri())
            pg.wait_for_function(
                "document.querySelectorAll('.plot').length > 0 && "
                "[...document.querySelectorAll('.plot')].every(d => d.querySelector('.main-svg'))",
                timeout=20_000,
            )
            return pg, problems

        yield open_page
        b.close()


@browser
@pytest.mark.browser
def test_report_renders_without_errors_and_runs_no_host_data(tmp_path, page_of):
    run = _hostile_run(tmp_path)
    done = report_run(run)
    findings, path = done.findings, done.html
    pg, problems = page_of(path)
    assert problems == []
    # every plot rendered: one busbw curve per collective + the heatmap
    plots = pg.eval_on_selector_all(".plot", "els => els.map(e => e.id)")
    assert "heatmap-plot" in plots and any(p.startswith("curve-") for p in plots)
    assert pg.locator(".js-plotly-plot .main-svg").count() >= len(plots)
    assert pg.locator("#heatmap-plot .hm, #heatmap-plot image").count() >= 1
    # verdict first, findings present
    assert pg.locator("#verdict .word").inner_text() == "FAIL"
    assert pg.locator("#findings-table tbody tr").count() == len(findings)
    # the header counts the rows as the log and run.json do: the failed ones are not measurements
    lines = rows_of(run)
    failed = sum(r["status"] != "ok" for r in lines)
    assert failed and (f"rows: {len(lines)}, {len(lines) - failed} measured, {failed} failed"
                       in pg.inner_text("header .meta"))
    body = pg.inner_text("body")
    assert "slow_node" in body and "slow_pair" in body and host_names(16)[4] in body
    # the injected scripts/handlers never ran and read as text
    assert pg.evaluate("window.__pwned") is None
    text = pg.evaluate("document.body.textContent")  # evidence inside closed <details> too
    for evil in (EVIL_FW, EVIL_LABEL, EVIL_ERROR):
        assert evil in text, evil
    assert EVIL_FW in body and EVIL_LABEL in body  # visible: inventory cell, topology box
    assert pg.evaluate("document.querySelectorAll('img[src=x]').length") == 0
    pg.screenshot(path=str(tmp_path / "report.png"), full_page=True)


@browser
@pytest.mark.browser
def test_sorting_filter_and_csv_download(tmp_path, page_of):
    run = _hostile_run(tmp_path)
    path = report_run(run).html
    pg, problems = page_of(path)
    # sort findings by rule name
    pg.click("#findings-table thead th:nth-child(2)")
    rules = pg.eval_on_selector_all(
        "#findings-table tbody tr td:nth-child(2)", "t => t.map(x => x.textContent)"
    )
    assert rules == sorted(rules)
    pg.uncheck("input[data-sev-filter=info]")
    assert pg.locator("#findings-table tbody tr.sev-info:visible").count() == 0
    # the raw rows download as CSV (decompressed in the browser) with every row
    with pg.expect_download() as dl:
        pg.click("#dl-csv")
    csv_text = Path(dl.value.path()).read_text()
    lines = csv_text.strip().splitlines()
    n_rows = len(rows_of(run))
    assert lines[0].startswith("run_id,collective,backend,pattern,hosts")
    assert len(lines) - 1 == n_rows
    with pg.expect_download() as dl:
        pg.click("#dl-csv-gz")
    assert gzip.decompress(Path(dl.value.path()).read_bytes()).decode() == csv_text
    assert problems == []


@browser
@pytest.mark.browser
@pytest.mark.parametrize("embed", ["no", "auto"])
def test_rows_left_out_of_the_report_say_where_they_are(tmp_path, page_of, monkeypatch, embed):
    """--embed-rows no, or auto past its size: no second copy of results.jsonl in the file, no row
    buttons, a note saying where the rows are; the page works and findings still download."""
    from netbench.reports.html import rows

    run = _hostile_run(tmp_path)
    embedded = report_run(run).html.stat().st_size
    monkeypatch.setattr(rows, "EMBED_AUTO_BYTES", 1000)  # this run's rows are more than that
    path = report_run(run, embed_rows=embed).html
    assert path.stat().st_size < embedded
    assert 'id="nb-rows-csv-gz"' not in path.read_text()
    pg, problems = page_of(path)
    assert pg.locator("#dl-csv, #dl-csv-gz").count() == 0
    note = pg.inner_text("#data .note")
    assert "not embedded" in note and "results.jsonl in the run directory holds every row" in note
    with pg.expect_download() as dl:
        pg.click("#dl-findings")
    assert json.loads(Path(dl.value.path()).read_text())["verdict"] == "FAIL"
    assert problems == []


STATISTICAL_WORDS = ("robust_z", "z_threshold", "tests_family_wise", "cell_median_busbw_GBps", "round_load",
                     "class_effect_ratio", "hop_class", "noise_sigma_pct", "node_effect", "p_value")


def test_every_statistical_word_of_the_evidence_is_explained():
    from netbench.reports.glossary import TERMS

    assert all(TERMS[k][1] for k in STATISTICAL_WORDS)


@browser
@pytest.mark.browser
def test_evidence_reads_as_a_table_with_the_words_explained(tmp_path, page_of):
    """Issue 30: evidence was a raw JSON dump. Now a table of what was compared, labels explained on
    hover and in a glossary at the end, the raw JSON behind its own toggle."""
    run = _hostile_run(tmp_path)
    done = report_run(run)
    findings, path = done.findings, done.html
    pg, problems = page_of(path)
    i = next(i for i, f in enumerate(findings) if f.rule == "slow_pair" and "robust_z" in f.evidence)
    row = pg.locator(f"#finding-{i}")
    row.locator("details.ev > summary").click()
    th = row.locator("dl.evtable dt", has_text="robust z")
    assert th.count() == 1 and "median absolute deviation" in th.get_attribute("title")
    shown = row.locator("dl.evtable").inner_text()
    assert "z bar" in shown and "hop class" in shown and "robust_z" not in shown
    assert not row.locator("details.raw pre").is_visible()
    row.locator("details.raw > summary").click()
    assert '"robust_z":' in row.locator("details.raw pre").inner_text()
    glossary = pg.inner_text("#glossary")
    for label in ("robust z", "z bar", "tests corrected for", "hop class"):
        assert label in glossary
    assert problems == []


@browser
@pytest.mark.browser
def test_heatmap_switches_to_the_ratio_view_with_findings_marked(tmp_path, page_of):
    run = _hostile_run(tmp_path)
    path = report_run(run).html
    pg, problems = page_of(path)
    data = "document.getElementById('heatmap-plot').data"
    assert pg.evaluate(f"{data}.map(t => t.visible === false ? 0 : 1)") == [1, 0, 1]
    assert pg.evaluate(f"{data}[2].x.length") >= 2  # the slow link's two cells at least
    pg.locator("#heatmap-plot .updatemenu-button", has_text="ratio to expected").click()
    pg.wait_for_function(f"{data}[1].visible === true")
    assert pg.evaluate(f"{data}.map(t => t.visible === false ? 0 : 1)") == [0, 1, 1]
    assert "what its hop class and load predict" in pg.text_content("#heatmap-plot .gtitle")
    assert problems == []


@browser
@pytest.mark.browser
def test_prints_legibly(tmp_path, page_of):
    run = write_run_dir(make_fleet(8, 2, seed=23), tmp_path / "run")
    path = report_run(run).html
    pg, problems = page_of(path)
    pg.emulate_media(media="print")
    assert pg.evaluate("getComputedStyle(document.querySelector('nav.toc')).display") == "none"
    assert pg.evaluate("getComputedStyle(document.querySelector('#dl-csv')).display") == "none"
    pdf = pg.pdf(landscape=True)
    assert pdf[:4] == b"%PDF" and len(pdf) > 20_000
    assert problems == []


@browser
@pytest.mark.browser
def test_past_the_full_size_the_switch_view_drills_down_to_the_findings_switches(tmp_path, page_of,
                                                                                 monkeypatch):
    """Past HEATMAP_FULL_MAX hosts (1,024; 8 here) the heatmap is hosts x switches and a second plot
    holds switch pairs at host resolution, the findings' first: a menu picks one."""
    from netbench.reports.html import heatmap

    monkeypatch.setattr(heatmap, "HEATMAP_FULL_MAX", 8)
    run = _hostile_run(tmp_path)
    done = report_run(run)
    pg, problems = page_of(done.html)
    inventory = (run / "inventory.jsonl").read_text().splitlines()
    switches = {json.loads(x)["labels"].get("switch") for x in inventory}
    assert pg.evaluate("document.getElementById('heatmap-plot').data[0].x.length") == len(switches) > 1
    drill = "document.getElementById('heatmap-drill-plot').data"
    labels = pg.evaluate("document.getElementById('heatmap-drill-plot').layout.updatemenus[0].buttons"
                         ".map(b => b.label)")
    slow = host_names(16)[4]
    [k] = [k for k, t in enumerate(labels) if f"slow_node {slow}" in t]
    assert slow in pg.evaluate(f"{drill}[{k}].y")
    assert pg.evaluate(f"{drill}.map(t => t.visible === false ? 0 : 1)")[0] == 1
    n = pg.evaluate(f"{drill}.length")
    assert n >= 2
    pg.locator("#heatmap-drill-plot .updatemenu-header-group").click()
    pg.locator("#heatmap-drill-plot .updatemenu-item-text").nth(2).click()  # 0: the header; 2: the 2nd entry
    pg.wait_for_function(f"{drill}[1].visible === true")
    assert pg.evaluate(f"{drill}.map(t => t.visible === false ? 0 : 1)") == [0, 1] + [0] * (n - 2)
    assert problems == []


@browser
@pytest.mark.browser
def test_who_arrives_last_draws_the_late_rank_and_names_it(tmp_path, page_of):
    """A real local gloo sweep of 4 ranks where rank 2 issues every timed operation 3 ms late (the
    harness's fault injection): the report's "Who arrives last" section draws the iteration x rank
    heatmap with rank 2's column the late one, and its table names rank 2 a persistent straggler."""
    import subprocess
    import sys

    out = tmp_path / "run"
    env = {**os.environ, "NETBENCH_INJECT": "delay:2:1:3000", "CUDA_VISIBLE_DEVICES": ""}
    argv = [sys.executable, "-m", "netbench", "sweep", "-p", "4", "--backend", "gloo", "-k", "all_reduce",
            "-b", "1K", "-e", "64K", "-f", "4", "-n", "30", "-w", "2", "--in-place", "out", "--out", str(out)]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stdout[-2000:] + r.stderr[-2000:]
    pg, problems = page_of(out / "report.html")
    assert problems == []
    fig = "document.getElementById('arrivals-plot').data[0]"
    assert pg.evaluate(f"{fig}.type") == "heatmap"
    labels, z = pg.evaluate(f"{fig}.x"), pg.evaluate(f"{fig}.z")
    late = labels.index(next(x for x in labels if x.split()[0] == "2"))
    col_sums = [sum(row[c] for row in z) for c in range(len(labels))]
    assert max(range(len(labels)), key=col_sums.__getitem__) == late, (labels, col_sums)
    section = pg.inner_text("#stragglers")
    assert "Who arrives last" in section and "persistent" in section and "rank 2" in section
