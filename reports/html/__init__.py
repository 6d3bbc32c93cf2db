"""The HTML incident report: ONE self-contained file, verdict first, then the evidence.

Whoever opens it days later, offline, from a ticket, must see: the verdict; which node or link is
bad and by how much against which peers; the busbw curves (with the baseline); the pair heatmap by
switch; where the bad nodes sit; the firmware beside the fleet's majority; the software versions;
and the raw rows. plotly.js is inlined by default (``plotlyjs="cdn"`` makes the file small but
needs the network to show plots).

Security: everything a host reported (hostnames, labels, firmware strings, errors) is untrusted.
Text goes through ``html.escape``; data for the scripts is one JSON block whose ``<``, ``>``, ``&``
are written as ``\\u003c`` etc., so ``</script>`` in a firmware string cannot end the block; the
page's script only ever sets ``textContent``. Plotly text is escaped too (it understands a few tags).

The page is assembled in ``page`` (``render_html``) from one module per part: ``findings`` (the
verdict banner, the findings table, the glossary, ``findings_record``), ``curves`` (busbw against
size), ``heatmap`` (the pair heatmap and its drill-down), ``fleet`` (topology, inventory, ceilings,
counters, environment, engines), ``history`` (the fleet history's section, inline SVG, from the
``HistorySection`` the application hands it), ``rows`` (the embedded raw rows) and ``text`` (escaping,
JSON).
Each module's limits (``HEATMAP_FULL_MAX``, ``EMBED_AUTO_BYTES``, ...) live beside the code that reads
them, and only there: lowering one (a test does) means setting it on that module.
"""

from netbench.reports.html.findings import findings_record
from netbench.reports.html.page import render_html
from netbench.reports.html.rows import EMBED_ROWS, rows_csv_gz
from netbench.reports.html.text import e, safe_json

__all__ = ["EMBED_ROWS", "e", "findings_record", "render_html", "rows_csv_gz", "safe_json"]
