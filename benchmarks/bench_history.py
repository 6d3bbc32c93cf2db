"""Fleet history (issue 49): does ``netbench history changes`` find the planted shifts and name the
planted cause, on simulated nightly histories (``netbench.sim.nightly``)?

    python benchmarks/bench_history.py --nodes 256 --nights 90 --histories 20 --noise 0.05
    python benchmarks/bench_history.py --nodes 256 --nights 90 --histories 5 --shape t3
    python benchmarks/bench_history.py --histories 20 --shape t3 --seed 300 --keep /tmp/keep  # write once

``--keep DIR`` keeps each written history (by law, noise, size and seed) and scores a kept one again
without writing it: ``changes`` is a few seconds a history, writing one a minute or more.

Each history's events are drawn from its seed (``plan_events``): 3 firmware/driver/NCCL rollouts to
nodes/16 nodes each that cost 5-15%, 3 untied node losses of 5-15% (one on a node of a benign
rollout, the same night), a fleet-wide NCCL upgrade and a firmware rollout that cost nothing, a
drift of 0.6% a night, two one-night blips of 20% and a link 30% slow. Scored:

- recall: of the planted node losses (tied and untied, >= 5%, lasting to the end: >= 2 nights), the
  share found as a loss on that node within a night of the planted one; links likewise;
- false changes: found changes no planted event explains (a blip is not an event: one found is false);
  a fleet or switch shift within two nights of a planted event is the event seen fleet-wide;
- tied events named: a rollout whose lost hosts' changes name its field as the likely cause (90% of
  them); untied blamed: untied losses that name any cause (must be 0).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from netbench.history.changes import Change
from netbench.history.query import changes
from netbench.history.store import HistoryStore
from netbench.sim.nightly import History, plan_events, write_history


def score(h: History, found: list[Change]) -> tuple[dict[str, int], list[Change]]:
    out = dict.fromkeys(("planted", "recalled", "links", "links_found", "false", "tied", "tied_named",
                         "untied_blamed", "drifts", "drifts_found"), 0)
    explained: set[int] = set()

    def hits(host: str, at: int, kind: str = "node", slack: int = 1) -> list[Change]:
        return [c for c in found if c.kind == kind and c.entity == host and abs(c.split - at) <= slack
                and c.shift_pct < 0]

    for e in h.events:
        if e.kind in ("tied", "untied"):
            found_e = [hits(host, e.night) for host in e.hosts]
            out["planted"] += len(e.hosts)
            out["recalled"] += sum(1 for f in found_e if f)
            explained |= {id(c) for f in found_e for c in f}
            causes = [c.cause for f in found_e for c in f]
            if e.kind == "tied":
                out["tied"] += 1
                named = sum(1 for x in causes if x is not None and x.field == e.field)
                out["tied_named"] += int(bool(causes) and named >= 0.9 * len(causes))
            else:
                out["untied_blamed"] += sum(1 for x in causes if x is not None)
        elif e.kind == "drift":
            seen = [c for c in found
                    if c.kind == "node" and c.entity == e.hosts[0] and c.split >= e.night - 7]
            out["drifts"] += 1
            out["drifts_found"] += int(any(c.shape == "drift" for c in seen))
            explained |= {id(c) for c in seen}
        elif e.kind == "link":
            seen = hits(",".join(sorted(e.hosts)), e.night, "link")
            out["links"] += 1
            out["links_found"] += int(bool(seen))
            explained |= {id(c) for c in seen}
    moved = [e.night for e in h.events if e.kind in ("tied", "untied", "drift")]
    for c in found:
        if c.kind in ("fleet", "switch") and any(abs(c.split - m) <= 2 for m in moved):
            explained.add(id(c))
    false = [c for c in found if id(c) not in explained]
    out["false"] = len(false)
    return out, false


def run(nodes: int, nights: int, histories: int, noise: float, shape: str, seed0: int,
        keep: Path | None = None) -> dict[str, object]:
    totals: dict[str, int] = {}
    write_s = find_s = 0.0
    falses: list[str] = []
    for k in range(histories):
        h = History(nodes, nights, noise, shape, seed0 + k)
        h.events = plan_events(h)
        with tempfile.TemporaryDirectory() as tmp:
            # --keep: the written stores kept (by law, size and seed), so a change to how changes are
            # found is scored again in seconds, not the hour the 20 histories take to write
            where = keep / f"{shape}-{noise}-{nodes}x{nights}-{seed0 + k}" if keep else Path(tmp) / "h"
            store = HistoryStore(where)
            t = time.perf_counter()
            if not (where / "written").exists():
                write_history(h, store)
                (where / "written").touch()
            write_s += time.perf_counter() - t
            t = time.perf_counter()
            found = changes(store)
            find_s += time.perf_counter() - t
            size = store.bytes()
        s, false = score(h, found)
        falses += [f"seed {seed0 + k}: {c.kind} {c.entity} {c.first_bad} {c.shift_pct:+.1f}%" for c in false]
        for key, v in s.items():
            totals[key] = totals.get(key, 0) + v
        print(f"history {k + 1}/{histories}: {json.dumps(s)}", flush=True)
    return {"nodes": nodes, "nights": nights, "histories": histories, "noise": noise, "shape": shape,
            "recall": round(totals["recalled"] / max(totals["planted"], 1), 4),
            "false_changes": totals["false"], "tied_named": f"{totals['tied_named']}/{totals['tied']}",
            "untied_blamed": totals["untied_blamed"],
            "links_found": f"{totals['links_found']}/{totals['links']}",
            "drifts_found_as_drift": f"{totals['drifts_found']}/{totals['drifts']}",
            "write_s_per_history": round(write_s / histories, 1), "changes_s": round(find_s / histories, 2),
            "store_bytes_per_history": size, "false": falses[:20]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--nights", type=int, default=90)
    ap.add_argument("--histories", type=int, default=20)
    ap.add_argument("--noise", type=float, default=0.05)
    ap.add_argument("--shape", default="normal")
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--keep", type=Path, help="keep the written histories here and reuse those found")
    a = ap.parse_args()
    print(json.dumps(run(a.nodes, a.nights, a.histories, a.noise, a.shape, a.seed, a.keep), indent=2))


if __name__ == "__main__":
    main()
