"""plan.json, compact (schema ``netbench.plan/2``, issue 48): the plan a run's ranks got, with its
pairwise rounds as pairs of positions in one host table, not 8M repeated group records.

At 4,096 nodes the record form (``WorkerPlan.json_chunks``, ``netbench.plan/1``) was 2.25 GB: each
pair group wrote its id, both host names and its 16 ranks, round after round. Here::

    {"schema": "netbench.plan/2", "run_id": ..., "backend": ..., "device": ..., "world_size": ...,
     "op_timeout_s": ..., "ahead": ..., "rail_ifaces": [...],
     "hosts": [host names], "rank_hosts": [position, count, ...]   each global rank's host, in runs,
     "specs": [the distinct SweepSpecs],
     "phases": [
       {"index": 0, "name": "ring", "spec": 0, "groups": [{"id", "pattern", "hosts": runs of positions,
         "ranks" only where they are not every rank (or rank ``rail``) of those hosts, "round", ...}]},
       {"index": 1, "name": "pairwise round 1", "spec": 1, "round": 1,
        "pairs": A, "load": A or null, "tier": A or null}]}

where ``A`` is an array of little-endian 32-bit integers, zlib-compressed, in base64: ``pairs`` the
two hosts' positions of each pair (a0, b0, a1, b1, ...; a pair's group is every rank of both
hosts, its id ``pair:`` and the two names sorted), ``load`` each pair's load and ``tier`` its hop
class as a tier (``inventory.topology.tier_name``), -1 where the plan has none. As numbers in JSON
the rounds were a tenth of the record form; packed they are a hundredth (a run of 4,096 nodes
keeps ~30 MB of plan), which a 1 GB run directory needs. ``read_plan`` reads both schemas back
into a ``WorkerPlan``; the ranks still get their plan through the store as before
(``WorkerPlan.parts``).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
from netbench.collectives.plan import (
    _COMPACT,
    PairGroups,
    Phase,
    SweepSpec,
    WorkerPlan,
    _group_of,
    _group_text,
    _HostTable,
    _pair_index,
)
from netbench.collectives.plangroups import PairHosts

COMPACT_SCHEMA = "netbench.plan/2"
RECORDS_SCHEMA = "netbench.plan/1"
_PLAN_FIELDS = ("run_id", "backend", "device", "world_size", "op_timeout_s", "ahead", "rail_ifaces")


def pack(values: np.ndarray) -> str:
    """Integers as base64 of their zlib-compressed little-endian 32-bit bytes."""
    return base64.b64encode(zlib.compress(np.asarray(values, dtype="<i4").tobytes(), 6)).decode("ascii")


def unpack(text: str) -> np.ndarray:
    """``pack``'s integers back (ValueError for text that is not such an array)."""
    try:
        raw = zlib.decompress(base64.b64decode(text.encode("ascii"), validate=True))
    except (zlib.error, ValueError, UnicodeError) as exc:
        raise ValueError(f"not a packed integer array ({exc})") from None
    if len(raw) % 4:
        raise ValueError("not a packed integer array (a partial 32-bit integer)")
    return np.frombuffer(raw, dtype="<i4").astype(np.int64)


def plan_file_chunks(plan: WorkerPlan) -> Iterator[str]:
    """plan.json's object without its ``schema`` (``RunDir.write_plan`` puts it first), a phase a
    line, in pieces: never the whole plan as one string."""
    table = _HostTable.of(plan)
    pos = {h: i for i, h in enumerate(table.hosts)}
    specs: dict[str, int] = {}
    phase_spec = []
    for phase in plan.phases:
        spec = json.dumps(dataclasses.asdict(phase.spec), separators=_COMPACT)
        phase_spec.append(specs.setdefault(spec, len(specs)))
    head = {f: getattr(plan, f) for f in _PLAN_FIELDS}
    head |= {"hosts": table.hosts, "rank_hosts": table.rank_runs(), "specs": [json.loads(s) for s in specs]}
    yield json.dumps(head, separators=_COMPACT)[:-1] + ',"phases":['
    mapped: dict[int, np.ndarray | None] = {}
    for k, phase in enumerate(plan.phases):
        said: dict[str, Any] = {"index": phase.index, "name": phase.name, "spec": phase_spec[k]}
        index = _pair_index(phase.groups, pos, table, mapped)
        if index is not None:
            assert isinstance(phase.groups, PairGroups)
            grp = phase.groups
            said |= {"round": grp.round, "pairs": pack(index.reshape(-1)),
                     "load": None if grp.load is None else pack(grp.load),
                     "tier": None if grp.tier is None else pack(grp.tier)}
            text = json.dumps(said, separators=_COMPACT)
        else:
            groups = ",".join(_group_text(g, pos, table) for g in phase.groups)
            text = json.dumps(said, separators=_COMPACT)[:-1] + f',"groups":[{groups}]}}'
        yield ("\n" if k == 0 else ",\n") + text
    yield "]}"


def read_plan(text: str) -> WorkerPlan:
    """plan.json (or confirm-plan.json) as the ``WorkerPlan`` it records, of either schema;
    ValueError for a document that is not one (untrusted: it came from a file)."""
    try:
        d = json.loads(text)
        if not isinstance(d, dict):
            raise ValueError("not a JSON object")
        if d.get("schema") == RECORDS_SCHEMA:
            return WorkerPlan.from_json(json.dumps({k: v for k, v in d.items() if k != "schema"}))
        if d.get("schema") != COMPACT_SCHEMA:
            said = str(d.get("schema"))[:40]
            raise ValueError(f"schema {said!r} is neither {RECORDS_SCHEMA} nor {COMPACT_SCHEMA}")
        return _compact_plan(d)
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise ValueError(f"not a plan ({type(exc).__name__}: {exc})") from None


def _compact_plan(d: dict[str, Any]) -> WorkerPlan:
    hosts: list[str] = d["hosts"]
    runs = d["rank_hosts"]
    rank_pos = [runs[k] for k in range(0, len(runs), 2) for _ in range(runs[k + 1])]
    ranks: list[list[int]] = [[] for _ in hosts]
    for r, p in enumerate(rank_pos):
        ranks[p].append(r)
    table = PairHosts(hosts, ranks)
    specs = [SweepSpec(**s) for s in d["specs"]]
    phases = []
    for p in d["phases"]:
        if "pairs" in p:
            index = unpack(p["pairs"]).reshape(-1, 2)
            if index.size and (index.min() < 0 or index.max() >= len(hosts)):
                raise ValueError(f"phase {p['index']}: a pair names a host position outside the host table")
            load = unpack(p["load"]) if p.get("load") is not None else None
            tier = unpack(p["tier"]).astype(np.int8) if p.get("tier") is not None else None
            groups: Any = PairGroups(p["round"], table, index, load, tier)
        else:
            groups = [_group_of(g, hosts, ranks) for g in p["groups"]]
        phases.append(Phase(index=p["index"], name=p["name"], groups=groups, spec=specs[p["spec"]]))
    return WorkerPlan(phases=phases, rank_hosts=[hosts[p] for p in rank_pos],
                      **{f: d[f] for f in _PLAN_FIELDS})
