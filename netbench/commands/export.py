"""``netbench export RUN_DIR``: a run in another tool's format (today nccl-tests' -J JSON)."""

from __future__ import annotations

import click


@click.command(
    short_help="Write a run as nccl-tests -J JSON (per-iteration keys included).",
    epilog="""\b
One file per group, collective and engine (an nccl-tests run is one binary on one communicator),
JSON format v3 with -I's out_of_place_per_iter / in_place_per_iter; per_process_max_times_us only
for runs swept with --per-iter. NVIDIA's tools/analyze_perf_json.py reads them.
Examples:
  netbench export latest --out nccl-json/
  python3 analyze_perf_json.py nccl-json/ring-all_reduce-torch.json --straggler
""",
)
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--out", "out", type=click.Path(file_okay=False), required=True,
              help="Folder to write the files into (made if missing).")
def command(run_dir: str, out: str) -> None:
    """Write RUN_DIR's rows as nccl-tests -J JSON files, one per group, collective and engine."""
    import json
    import re
    from pathlib import Path

    from netbench.common.arrivals import PER_ITER_GZ, ArrivalRecord, read_samples
    from netbench.common.errors import UsageError
    from netbench.common.rundir import RunDir, resolve_run
    from netbench.reports.export.nccl_tests_json import documents

    try:
        run = RunDir.open(resolve_run(run_dir))
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    rows = run.read_rows()
    arrivals = [ArrivalRecord.from_dict(r) for r in run.load_arrivals().records]
    samples = {}
    for key, arrive, done in read_samples(run.path / PER_ITER_GZ):
        samples[(key.get("group"), key.get("collective"), key.get("bytes"), key.get("in_place"),
                 key.get("engine"))] = (arrive, done)
    docs = documents(rows, arrivals, samples)
    if not docs:
        raise UsageError(f"{run_dir}: no measured rows to export")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for (group, coll, engine), doc in docs.items():
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{group}-{coll}-{engine}")[:120] + ".json"
        (folder / name).write_text(json.dumps(doc, indent=1) + "\n")
        click.echo(f"{folder / name}: {len(doc['results'])} size(s)")
