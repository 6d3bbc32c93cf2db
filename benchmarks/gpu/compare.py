"""Side by side: nccl-tests and netbench on the same GPUs, time per operation and their ratio.

Reads a results folder written by ``run_h200.sh``: nccl-tests logs ``nt_<tag>_<coll>_g<G>.txt`` (G = -G
graph launches, 0 = none) and netbench run directories ``nb_<tag>_g<G>*`` (rows of either layout; G 0: plain,
else --cuda-graph). Prints, per (tag, collective, graph), the time of each tool for out-of-place and
in-place and ratio = netbench / nccl-tests, then a verdict against the goals: within 3 % for sizes
>= 1 MiB, and within 1 us at 8 B with graphs.

Run: python benchmarks/gpu/compare.py RESULTS_DIR [--all-sizes] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from netbench.collectives.sizes import format_size

from netbench.common.rundir import RunDir
from netbench.importers.nccl_tests import parse_text

KEY_SIZES = [8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30, 8 << 30]
_NT = re.compile(r"^nt_(?P<tag>[\w-]+?)_(?P<coll>all_reduce|all_gather|reduce_scatter|broadcast|sendrecv)"
                 r"_g(?P<g>\d+)\.txt$")
_NB = re.compile(r"^nb_(?P<tag>[\w-]+?)_g(?P<g>\d+)\w*$")


def load(folder: Path) -> tuple[dict, dict, dict]:
    """({(tag, coll, graph, in_place, bytes): us} for nccl-tests, the same for netbench, versions)."""
    nt: dict = {}
    nb: dict = {}
    info: dict = {}
    for f in sorted(folder.iterdir()):
        m = _NT.match(f.name)
        if m:
            for test in parse_text(f.read_text(errors="replace"), source=f.name):
                info.setdefault("nccl-tests", test.nccl_tests_version)
                info.setdefault("nccl (nccl-tests)", test.nccl_version)
                for r in test.rows:
                    if r.get("time_us") is not None:
                        nt[(m["tag"], m["coll"], int(m["g"]) > 0, r["in_place"], r["bytes"])] = r["time_us"]
        m = _NB.match(f.name)
        if m and (f / "run.json").exists() and "smoke" not in f.name:
            env = f / "env.json"
            if env.exists():
                for host in json.loads(env.read_text()).values():
                    if isinstance(host, dict) and host.get("nccl"):
                        info.setdefault("nccl (netbench)", host["nccl"])
                        info.setdefault("torch", host.get("torch"))
            for r in RunDir(f, "").read_rows():  # results.parquet, or an older run's results.jsonl
                if r.get("status") == "ok" and r.get("pattern") == "world":
                    tag = f"{m['tag']} [{r.get('engine', 'torch')}]"  # one table per netbench engine
                    nb[(tag, r["collective"], int(m["g"]) > 0, r["in_place"], r["bytes"])] = r["time_us"]
    engines = {k[0].rsplit(" [", 1)[1] for k in nb}
    nt = {(f"{k[0]} [{e}", *k[1:]): v for k, v in nt.items() for e in engines}
    return nt, nb, info


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.3f}" if a is not None and b else "-"


def _t(v: float | None) -> str:
    return "-" if v is None else (f"{v:.2f}" if v < 1000 else f"{v:.0f}")


def tables(nt: dict, nb: dict, all_sizes: bool) -> tuple[list[str], list[str]]:
    out: list[str] = []
    verdict: list[str] = []
    combos = sorted({k[:3] for k in nt} & {k[:3] for k in nb})
    for tag, coll, graph in combos:
        combo = (tag, coll, graph)
        sizes = sorted({k[4] for k in nt if k[:3] == combo} | {k[4] for k in nb if k[:3] == combo})
        out += [f"\n**{tag} {coll}{' (CUDA graph)' if graph else ''}** — time per operation (us), "
                "ratio = netbench / nccl-tests\n",
                "| size | oop nccl-tests | oop netbench | ratio | in-place nccl-tests | in-place netbench "
                "| ratio |",
                "|---:|---:|---:|---:|---:|---:|---:|"]
        worst = {False: (0.0, None), True: (0.0, None)}
        for s in sizes:
            cells = []
            for ip in (False, True):
                a, b = nb.get((tag, coll, graph, ip, s)), nt.get((tag, coll, graph, ip, s))
                cells += [_t(b), _t(a), _ratio(a, b)]
                if a is not None and b and s >= (1 << 20) and abs(a / b - 1) > worst[ip][0]:
                    worst[ip] = (abs(a / b - 1), s)
            if all_sizes or s in KEY_SIZES:
                out.append(f"| {format_size(s)} | " + " | ".join(cells) + " |")
        for ip in (False, True):
            dev, at = worst[ip]
            name = "in-place" if ip else "out-of-place"
            ok = "OK" if dev <= 0.03 else "MISS"
            line = (f"{tag} {coll}{' graph' if graph else ''} {name}: worst |ratio-1| >= 1 MiB = "
                    f"{dev * 100:.1f} %")
            line += f" (at {format_size(at)}) {ok}" if at else " OK"
            if graph:
                a, b = nb.get((tag, coll, graph, ip, 8)), nt.get((tag, coll, graph, ip, 8))
                if a is not None and b is not None:
                    verdict_8 = "OK" if a - b <= 1.0 else "MISS"
                    line += f"; 8 B: netbench {a:.2f} us vs nccl-tests {b:.2f} us ({verdict_8})"
            verdict.append(line)
    return out, verdict


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", type=Path)
    ap.add_argument("--all-sizes", action="store_true")
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args()
    nt, nb, info = load(args.folder)
    out, verdict = tables(nt, nb, args.all_sizes)
    full, _ = tables(nt, nb, True)
    text = "\n".join([", ".join(f"{k} {v}" for k, v in info.items()), *out, "", *(f"- {v}" for v in verdict)])
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
        args.markdown.with_suffix(".full.md").write_text("\n".join(full) + "\n")


if __name__ == "__main__":
    main()
