"""Screenshots of a report in headless Chromium: the top (verdict, findings with their evidence open)
and the pairs' heatmap (both views where the page has them). docs/screenshots/ holds those of the
64- and 512-node fabrics before and after issue 30 (README there says how they were made).

    python benchmarks/report_screenshots.py REPORT.html PREFIX [jpg|png]
"""
import os
import sys

from playwright.sync_api import sync_playwright

path, prefix = sys.argv[1], sys.argv[2]
EXT = sys.argv[3] if len(sys.argv) > 3 else "jpg"
FMT = {"type": "jpeg", "quality": 70} if EXT == "jpg" else {"type": "png"}
with sync_playwright() as p:
    b = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"])
    pg = b.new_page(viewport={"width": 1400, "height": 1000})
    pg.goto("file://" + path)
    pg.wait_for_function("[...document.querySelectorAll('.plot')].every(d => d.querySelector('.main-svg'))",
                         timeout=120_000)
    pg.evaluate("document.querySelectorAll('details.ev').forEach(d => d.open = true)")  # evidence shown
    top = pg.evaluate("(() => { const r = document.querySelector('#findings').getBoundingClientRect();"
                      " return r.bottom + window.scrollY; })()")
    pg.screenshot(path=f"{prefix}-top.{EXT}", **FMT, full_page=True,
                  clip={"x": 0, "y": 0, "width": 1400, "height": min(top + 10, 3000)})
    pg.locator("#heatmap").screenshot(path=f"{prefix}-heatmap.{EXT}", **FMT)
    ratio = pg.locator("#heatmap-plot .updatemenu-button", has_text="ratio to expected")
    if ratio.count():
        ratio.click()
        pg.wait_for_timeout(1500)
        pg.locator("#heatmap").screenshot(path=f"{prefix}-heatmap-ratio.{EXT}", **FMT)
    print(path, "->", prefix, "size MB", round(os.path.getsize(path) / 1e6, 1))
    b.close()
