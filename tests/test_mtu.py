"""MTUs: the probe's net-mtu section (inventory/parsers/net_mtu.py) and the mtu rule
(reports/rules/mtu.py). The same on the test hosts, changed mid-run: tests/test_fault_blame_netns.py."""

from __future__ import annotations

from netbench.inventory.parsers.net_mtu import parse_net_mtu
from netbench.reports.context import AnalysisContext
from netbench.reports.rules import mtu

HOSTS = ["n1", "n2", "n3", "n4"]


def test_only_interfaces_up_with_sane_values_are_read() -> None:
    text = "eth0 1500 up\nib0 4092 unknown\neth1 9000 down\nbad;name 1500 up\neth2 99999999 up\neth3 x up\n"
    assert parse_net_mtu(text) == {"eth0": 1500, "ib0": 4092}


def ctx(start: dict[str, dict], after: dict[str, dict] | None = None, failed: tuple = ()) -> AnalysisContext:
    inventory = [{"host": h, "status": "ok", "mtu": m} for h, m in start.items()]
    counters = [{"phase": "after", "host": h, "ports": [], "mtu": m} for h, m in (after or {}).items()]
    rows = [{"pattern": "pair", "hosts": list(p), "status": "timeout", "bytes": 0, "busbw_GBps": None}
            for p in failed]
    return AnalysisContext.from_data(rows, inventory=inventory, counters=counters)


def test_the_odd_host_out_is_named_with_both_values_and_its_failed_pairs() -> None:
    start = {h: {"eth0": 1500} for h in HOSTS} | {"n3": {"eth0": 9000}}
    found = mtu.check(ctx(start, failed=[("n1", "n3")]))
    assert [(f.subject, f.severity, f.evidence["mtu"], f.evidence["fleet_mtu"]) for f in found] == \
        [("n3", "warn", 9000, 1500)]
    assert "n1|n3" in found[0].title and "changed" not in found[0].title


def test_a_change_during_the_run_is_seen_in_the_snapshot_after_it() -> None:
    start = {h: {"eth0": 1500} for h in HOSTS}
    found = mtu.check(ctx(start, after={"n2": {"eth0": 1280}}))
    assert [f.subject for f in found] == ["n2"] and "changed during the run, from 1500" in found[0].title


def test_no_majority_or_hostile_values_say_nothing() -> None:
    assert mtu.check(ctx({"n1": {"eth0": 1500}, "n2": {"eth0": 9000}, "n3": {"eth0": 4000}})) == []
    hostile = {h: {"eth0": 1500} for h in HOSTS} | {"n4": {"eth0": "9000", "x" * 500: 10**30}}
    assert mtu.check(ctx(hostile)) == []
