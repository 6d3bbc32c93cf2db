/* netbench report: plots, sortable tables, filters, downloads. Data comes only from the JSON
   block #nb-data (parsed, never evaluated) and is put into the page as text, never as HTML. */
(function () {
  "use strict";
  var NB = JSON.parse(document.getElementById("nb-data").textContent);

  function renderPlots() {
    var figs = NB.figures || [];
    figs.forEach(function (fig) {
      var el = document.getElementById(fig.id);
      if (!el) return;
      if (typeof Plotly === "undefined") {
        el.textContent = "Plot unavailable: plotly.js did not load (offline with --plotlyjs cdn?). " +
          "Rebuild with: netbench report RUN_DIR --plotlyjs inline";
        return;
      }
      // a short toolbar (zoom, pan, reset, picture), so it does not run into the plot's title
      Plotly.newPlot(el, fig.data, fig.layout, {responsive: true, displaylogo: false,
        modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "zoomIn2d", "zoomOut2d",
                                 "toggleSpikelines", "hoverClosestCartesian", "hoverCompareCartesian"]});
    });
  }

  function cellValue(td) {
    var v = td.getAttribute("data-sort");
    if (v === null) v = td.textContent.trim();
    var n = parseFloat(v);
    return isNaN(n) || !/^-?[\d.]+(e-?\d+)?$/i.test(v) ? v.toLowerCase() : n;
  }

  function makeSortable(table) {
    var ths = table.querySelectorAll("thead th");
    ths.forEach(function (th, idx) {
      th.addEventListener("click", function () {
        var asc = !th.classList.contains("asc");
        ths.forEach(function (o) { o.classList.remove("asc", "desc"); });
        th.classList.add(asc ? "asc" : "desc");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellValue(a.cells[idx]), y = cellValue(b.cells[idx]);
          if (typeof x !== typeof y) { x = String(x); y = String(y); }
          return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }

  function severityFilters() {
    document.querySelectorAll("input[data-sev-filter]").forEach(function (box) {
      box.addEventListener("change", function () {
        var sev = box.getAttribute("data-sev-filter");
        document.querySelectorAll("#findings-table tbody tr.sev-" + sev).forEach(function (tr) {
          tr.style.display = box.checked ? "" : "none";
        });
      });
    });
  }

  function save(blob, name) {
    var a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = name;
    document.body.appendChild(a);
    a.click();
    setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  }

  function gzBytes() {
    var b64 = document.getElementById("nb-rows-csv-gz").textContent.trim();
    var bin = atob(b64), out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  function downloads() {
    var csv = document.getElementById("dl-csv");
    if (csv) csv.addEventListener("click", function () {
      var gz = new Blob([gzBytes()], {type: "application/gzip"});
      if (typeof DecompressionStream === "undefined") { save(gz, NB.csv_name + ".gz"); return; }
      new Response(gz.stream().pipeThrough(new DecompressionStream("gzip"))).blob().then(function (b) {
        save(new Blob([b], {type: "text/csv"}), NB.csv_name);
      });
    });
    var gzb = document.getElementById("dl-csv-gz");
    if (gzb) gzb.addEventListener("click", function () {
      save(new Blob([gzBytes()], {type: "application/gzip"}), NB.csv_name + ".gz");
    });
    var fj = document.getElementById("dl-findings");
    if (fj) fj.addEventListener("click", function () {
      save(new Blob([JSON.stringify(NB.findings_doc, null, 2)], {type: "application/json"}), "findings.json");
    });
  }

  document.querySelectorAll("table.sortable").forEach(makeSortable);
  severityFilters();
  downloads();
  renderPlots();
  window.addEventListener("beforeprint", function () {
    if (typeof Plotly === "undefined") return;
    document.querySelectorAll(".js-plotly-plot").forEach(function (el) { Plotly.Plots.resize(el); });
  });
})();
