"""Shared pytest fixtures. Keep this file small and generic; put helpers in their own modules.

``tests/`` is on ``sys.path`` (no ``__init__.py``), so helpers are imported as top-level modules
(``from netns import TestNetwork``, ``from fixtures_path import fixture``).
"""

from __future__ import annotations

from netns import netns4, netns_factory  # noqa: F401 - real test hosts (network namespaces + sshd)
from slurm import slurm_factory, slurm_pool  # noqa: F401 - a real Slurm cluster on those hosts (fresh, shared)
