"""Shared pytest fixtures. Keep this file small and generic; put helpers in their own modules.

``tests/`` is on ``sys.path`` (no ``__init__.py``), so helpers are imported as top-level modules
(``from netns import TestNetwork``, ``from fixtures_path import fixture``).
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from netns import netns4, netns_factory  # noqa: F401 - real test hosts (network namespaces + sshd)
from slurm import slurm_factory, slurm_pool  # noqa: F401 - a real Slurm cluster on those hosts (fresh, shared)

# the suite's runs stay out of the user's fleet history (tests/test_history*.py give their own store)
os.environ.setdefault("NETBENCH_HISTORY", "off")

HOST_FIXTURES = {"netns4", "netns_factory", "slurm_factory", "slurm_pool"}
"""Fixtures that build real test hosts: a test using one is a ``netns`` test, marked or not."""
LONG_FILES = (
    "test_stalls_netns.py", "test_slurm_real.py", "test_fault_blame_netns.py", "test_signals_netns.py",
    "test_sites.py", "test_mpi_hosts.py", "test_preflight_netns.py", "test_k8s_netns.py",
    "test_host_checks_netns.py", "test_local_sweep.py", "test_cluster_sweep.py",
    "test_sweep_confirm_netns.py", "test_plan_everywhere.py", "test_run_boundary_netns.py",
    "test_group_resources.py", "test_report_html.py", "test_report_scale.py", "test_rails_netns.py",
)
"""The files that take a minute or more on 2 cores (``--durations``, -n 3, 2026-12-03), longest first."""


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests on real test hosts carry the ``netns`` marker (also those that get their hosts through
    a fixture: Slurm, mpirun), so ``-m "not netns"`` leaves them all out. The long files run first
    (LONG_FILES, then the other files with tests on test hosts): with the three workers of
    ``-n 3 --dist loadfile`` (pyproject's addopts) a long file started last would run alone at the
    end while the other worker idles."""
    for item in items:
        if HOST_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.netns)
    on_hosts = Counter(item.path for item in items if item.get_closest_marker("netns"))
    first_seen = {path: k for k, path in enumerate(dict.fromkeys(item.path for item in items))}

    def rank(item: pytest.Item) -> tuple[int, int, int]:
        long = LONG_FILES.index(item.path.name) if item.path.name in LONG_FILES else len(LONG_FILES)
        return long, -on_hosts[item.path], first_seen[item.path]

    items.sort(key=rank)
