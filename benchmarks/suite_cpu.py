"""The test suite's CPU per test (issue 43): where CI's two cores go.

CI is CPU-bound (three xdist workers on two cores), so a test's wall time says little about what it
costs the others: one that waits on a timeout costs nothing, a sweep's host agents cost 1.7 CPU s each.
As a pytest plugin, each xdist worker moves itself into a ``cpuacct`` cgroup of its own (cgroup v1,
root), so that everything it starts is counted there: the netbench commands, the test hosts' sshd
(a module's fixture starts them) and the agents and ranks those start. Each test's CPU is the
cgroup's usage across its setup, call and teardown (a module's fixture counts in its first test).

    PYTHONPATH=benchmarks python -m pytest -q -p suite_cpu      # writes $NETBENCH_SUITE_CPU
    python benchmarks/suite_cpu.py [FILE]                        # the files and tests that cost most
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

CGROUPS = Path("/sys/fs/cgroup/cpuacct")
OUT = Path(os.environ.get("NETBENCH_SUITE_CPU", "/tmp/netbench-suite-cpu.tsv"))
_group: Path | None = None


def _usage() -> float:
    assert _group is not None
    return int((_group / "cpuacct.usage").read_text()) / 1e9


def pytest_configure(config: pytest.Config) -> None:
    """A worker's own cgroup (the controller's process, which runs no test, stays where it is)."""
    global _group
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None and config.getoption("numprocesses", None) not in (None, 0):
        return
    _group = CGROUPS / f"netbench-suite-{worker or 'main'}"
    _group.mkdir(exist_ok=True)
    (_group / "cgroup.procs").write_text(str(os.getpid()))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # noqa: ANN201
    if _group is None:
        yield
        return
    cpu, wall = _usage(), time.monotonic()
    yield
    with OUT.open("a") as f:
        f.write(f"{item.nodeid}\t{_usage() - cpu:.2f}\t{time.monotonic() - wall:.2f}\n")


def main(path: Path = OUT, top: int = 25) -> None:
    rows = [line.rstrip("\n").split("\t") for line in path.read_text().splitlines() if line.strip()]
    tests = [(name, float(cpu), float(wall)) for name, cpu, wall in rows]
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for name, cpu, wall in tests:
        f = files[name.split("::")[0]]
        f[0], f[1], f[2] = f[0] + cpu, f[1] + wall, f[2] + 1
    cpu, wall = sum(t[1] for t in tests), sum(t[2] for t in tests)
    print(f"{len(tests)} tests: {cpu:.0f} CPU s, {wall:.0f} s of wall")
    print("\n  CPU s  wall s  tests  file")
    for name, (cpu, wall, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{cpu:7.1f} {wall:7.1f} {n:6d}  {name}")
    print("\n  CPU s  wall s  test")
    for name, cpu, wall in sorted(tests, key=lambda t: -t[1])[:top]:
        print(f"{cpu:7.1f} {wall:7.1f}  {name}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
