"""A pair's load and hop class are facts of the plan, recorded in its rows, not re-derived.

The planner works each pair group's ``load`` and ``hop_class`` out once, from the switches it
scheduled with (``GroupSpec``); the coordinator writes them into every row of the group it stores,
the simulator into the rows it writes; the re-test loop (``confirm``) and the pair model read them
from the rows and work them out (``common.pairrows.pair_facts``) only for rows without them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
from netbench.collectives.planfile import read_plan
from netbench.inventory.topology import hop_class
from netbench.reports.engine import load_context
from netbench.reports.pairrows import NOT_RECORDED, PairRows
from rowfiles import rows_of

from netbench.common.rows import ResultRow
from netbench.run.options import PairOptions
from netbench.sim.confirm import confirm_on_fabric
from netbench.sim.fabric import FabricSpec, Fault
from netbench.sim.options import SimOptions
from netbench.sim.run import simulate


def _rows(run: Path) -> list[dict[str, Any]]:
    return rows_of(run)


def _planned(plan_file: Path) -> dict[tuple[int, str], tuple[int | None, str | None]]:
    """(round, group id) -> the (load, hop_class) the plan recorded for that pair group."""
    plan = read_plan(plan_file.read_text())  # compact or not (issue 48)
    return {(g.round, g.id): (g.load, g.hop_class)
            for p in plan.phases for g in p.groups if g.pattern == "pair"}


def _write(run: Path, rows: list[dict[str, Any]]) -> None:
    """The rows as an older run's results.jsonl, in place of the run's own."""
    shutil.rmtree(run / "results.parquet", ignore_errors=True)
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_sweeps_pair_rows_and_its_retests_carry_what_the_plan_recorded(tmp_path: Path) -> None:
    """The simulator's sweep rows (written column by column) and the re-test rows (the real
    coordinator, ``RetestLaunch`` through the simulated launcher, whose ranks send no facts) carry
    each pair group's load and hop class exactly as plan.json / confirm-plan.json hold them."""
    spec = FabricSpec(nodes=16, leaves=2, oversubscription=2.0)
    opts = SimOptions(spec, (Fault.parse("node:node0005=0.6"),), seed=1, out=str(tmp_path / "run"),
                      noise=0.05, pairs=PairOptions(pair_sizes=[1 << 30]))
    res = simulate(opts)
    run = res.rundir.path
    planned = _planned(run / "plan.json")
    switches = json.loads((run / "run.json").read_text())["topology"]
    assert {h for _, h in planned.values()} == {"leaf", "spine"}
    for (_, gid), (load, klass) in planned.items():  # the planner's hop class is topology.hop_class
        a, b = gid.removeprefix("pair:").split("|")
        assert klass == hop_class(a, b, switches) and load is not None
    sweep_rows = [r for r in _rows(run) if r["pattern"] == "pair"]
    assert sweep_rows and all(
        (r["load"], r["hop_class"]) == planned[(r["round"], r["group"])] for r in sweep_rows
    )
    assert {r["load"] for r in sweep_rows if r["hop_class"] == "spine"} - {0}  # loads, not just zeros

    done, _ = confirm_on_fabric(opts, res, 60.0, lambda s: None)
    assert done.retests["node0005"].verdict == "confirmed"
    retest_plan = _planned(run / "confirm-plan.json")  # the last re-test launch's plan
    retests = [r for r in _rows(run) if r["pattern"] == "pair" and (r["round"], r["group"]) in retest_plan
               and r["round"] > max(rnd for rnd, _ in planned)]
    assert retests
    assert all((r["load"], r["hop_class"]) == retest_plan[(r["round"], r["group"])] for r in retests)
    assert {r["hop_class"] for r in retests} <= {"leaf", "spine"} and None not in {r["load"] for r in retests}


def test_the_pair_model_and_the_retest_loop_use_the_recorded_facts(tmp_path: Path) -> None:
    """Rows without the facts (an older run) are modelled as the plan recorded them (the fallback
    works them out the planner's way); a row whose recorded load or hop class differs from what the
    switches say is modelled with the recorded one."""
    spec = FabricSpec(nodes=32, leaves=4, tiers=3, pods=2, oversubscription=2.0)
    res = simulate(SimOptions(spec, (), seed=3, pairs=PairOptions(pair_schedule="circle"),
                              out=str(tmp_path / "run")))
    run = res.rundir.path
    rows = _rows(run)
    recorded = load_context(run).pair_model
    assert recorded is not None and recorded.load is not None

    old = [{k: v for k, v in r.items() if k not in ("load", "hop_class")} for r in rows]
    _write(run, old)
    derived = load_context(run).pair_model
    assert derived is not None and derived.load is not None
    assert np.array_equal(derived.load, recorded.load)
    assert derived.classes == recorded.classes and np.array_equal(derived.cls, recorded.cls)
    switches = load_context(run).switches
    for facts in (PairRows.from_records(rows), PairRows.from_records(old)):  # the re-test loop's reader
        load, hop, names = facts.facts(switches, facts.ok & (facts.busbw > 0))
        pair_load = {(r["round"], r["group"]): int(n) for r, n in zip(
            (r for r in rows if r["pattern"] == "pair"), load.tolist(), strict=True)}
        assert pair_load == {(r["round"], r["group"]): r["load"] for r in rows if r["pattern"] == "pair"}
        assert [names[k] for k in hop.tolist()] == [r["hop_class"] for r in rows if r["pattern"] == "pair"]
    assert (PairRows.from_records(old).load == NOT_RECORDED).all()

    # one cross-pod pair's rows say another load and class than the switches would give
    i, j = next((i, j) for i in range(len(recorded.hosts)) for j in range(i + 1, len(recorded.hosts))
                if recorded.classes[recorded.cls[i, j]] == "core")
    a, b = recorded.hosts[i], recorded.hosts[j]
    was = int(recorded.load[i, j])
    edited = [dict(r, load=was + 5, hop_class="tier-4") if sorted(r["hosts"]) == sorted([a, b]) else r
              for r in rows]
    _write(run, edited)
    m = load_context(run).pair_model
    assert m is not None and m.load is not None
    x, y = m.index[a], m.index[b]
    assert int(m.load[x, y]) == was + 5 and m.classes[m.cls[x, y]] == "tier-4"
    rest = np.ones_like(m.load, dtype=bool)
    rest[[x, y], [y, x]] = False
    assert np.array_equal(m.load[rest], recorded.load[rest])  # every other pair as recorded
    facts = PairRows.from_records(edited)
    load, hop, names = facts.facts(switches, facts.ok)
    mine = np.array([sorted(p) == sorted([a, b]) for p in facts.pairs()])
    assert (load[mine] == was + 5).all() and {names[k] for k in hop[mine].tolist()} == {"tier-4"}


def test_a_row_without_the_facts_still_reads() -> None:
    """The two fields are optional: a row of an older run (or an imported log) is a good row."""
    from netbench.common.rows import row_problem

    row = ResultRow(run_id="r", collective="all_reduce", backend="gloo", pattern="pair", hosts=["a", "b"],
                    ranks=2, round=1, bytes=8, count=2, dtype="float", op="sum", in_place=False, iters=1,
                    warmup=0, time_us=1.0, time_us_min=1.0, time_us_max=1.0, rank_time_us=[1.0, 1.0],
                    algbw_GBps=1.0, busbw_GBps=1.0, wrong=0).to_dict()
    assert row_problem({k: v for k, v in row.items() if k not in ("load", "hop_class")}) is None
    assert row_problem(dict(row, load=3, hop_class="spine")) is None
    assert row_problem(dict(row, load="3")) is not None
