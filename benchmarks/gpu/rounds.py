"""nccl-tests beside netbench over alternated rounds (``run_h200.sh i28``): medians, spreads, goals.

    python benchmarks/gpu/rounds.py RESULTS_DIR [--markdown FILE]

Reads nccl-tests logs ``nt_1gpu-r<i>_<coll>_g<G>.txt`` and netbench rows ``nb_<variant>_r<i>.jsonl``
(or ``nb_<variant>_r<i>/results.jsonl``): variant ``rot`` (the default, rotating buffers), ``hot``
(--hot-buffers), ``py`` (NETBENCH_NATIVE_LOOP=python: the binding's loop in Python, not the C one)
and ``rotG`` (--cuda-graph). For each collective and size: the median over rounds of
each tool's out-of-place time, netbench - nccl-tests, each tool's spread (max - min over rounds), and
issue 28's goals: eager within 1 us or 5 %, 1-16 MiB within 3 %, graphs within 0.2 us or 2 %.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path

from netbench.importers.nccl_tests import parse_text

_NT = re.compile(r"^nt_1gpu-r(\d+)_(\w+?)_g(\d+)\.txt$")
_NB = re.compile(r"^nb_(rot|hot|py|rotG)_r(\d+)(\.jsonl)?$")
COLLS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
Key = tuple[str, str, int]  # (tool, collective, bytes): out-of-place times only


def load(folder: Path) -> dict[Key, list[float]]:
    times: dict[Key, list[float]] = defaultdict(list)
    for f in sorted(folder.iterdir()):
        if m := _NT.match(f.name):
            tool = "ntG" if int(m[3]) else "nt"
            for test in parse_text(f.read_text(errors="replace"), source=f.name):
                for r in test.rows:
                    if not r["in_place"] and r.get("time_us") is not None:
                        times[(tool, m[2], r["bytes"])].append(r["time_us"])
        elif m := _NB.match(f.name):
            rows = (f if f.is_file() else f / "results.jsonl").read_text().splitlines()
            for line in rows:
                r = json.loads(line)
                if not r["in_place"] and r.get("status", "ok") == "ok":
                    times[(m[1], r["collective"], r["bytes"])].append(r["time_us"])
    return times


def within(nb: float, nt: float, us: float, pct: float) -> bool:
    return abs(nb - nt) <= us or abs(nb - nt) <= pct / 100 * nt


def table(times: dict[Key, list[float]]) -> list[str]:
    med = {k: statistics.median(v) for k, v in times.items()}
    spread = {k: max(v) - min(v) for k, v in times.items()}
    out = ["| collective | size | nccl-tests us | netbench us | diff | spread nt / nb | goal | hot us "
           "| python loop us | graphs nt / nb us (spread) | graph goal |",
           "|---|---:|---:|---:|---:|---|---|---:|---:|---|---|"]
    for coll in COLLS:
        for size in sorted({k[2] for k in med if k[1] == coll and k[0] in ("nt", "ntG")}):
            nt, nb = med.get(("nt", coll, size)), med.get(("rot", coll, size))
            g_nt, g_nb = med.get(("ntG", coll, size)), med.get(("rotG", coll, size))
            if (nt is None or nb is None) and (g_nt is None or g_nb is None):
                continue
            eager = nt is not None and nb is not None
            mid = (1 << 20) <= size <= (16 << 20)
            ok = eager and within(nb, nt, 1.0, 5.0) and (not mid or within(nb, nt, 0, 3.0))
            hot, py = med.get(("hot", coll, size)), med.get(("py", coll, size))
            graphs = f"{g_nt:.2f} / {g_nb:.2f}" if g_nt is not None and g_nb is not None else "-"
            g_ok = "-" if graphs == "-" else ("yes" if within(g_nb, g_nt, 0.2, 2.0) else "**no**")
            if eager:
                cells = (f"{nt:.2f} | {nb:.2f} | {nb - nt:+.2f} | {spread[('nt', coll, size)]:.2f} / "
                         f"{spread[('rot', coll, size)]:.2f} | {'yes' if ok else '**no**'}")
            else:
                cells = "- | - | - | - | -"
            g_spread = (f" ({spread[('ntG', coll, size)]:.2f} / {spread[('rotG', coll, size)]:.2f})"
                        if graphs != "-" else "")
            out.append(f"| {coll} | {size} | {cells} | {'-' if hot is None else f'{hot:.2f}'} | "
                       f"{'-' if py is None else f'{py:.2f}'} | {graphs}{g_spread} | {g_ok} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--markdown", type=Path)
    args = ap.parse_args()
    lines = table(load(args.folder))
    print("\n".join(lines))
    if args.markdown:
        args.markdown.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
