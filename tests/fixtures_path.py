"""Where the shared fixtures of real command output live.

CI runs the repository in a fresh clone with ``shared/`` beside it, so the fixtures are at
``<repo>/../shared/fixtures``; ``NETBENCH_FIXTURES`` overrides that (a path to the ``fixtures`` dir).
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def fixtures_dir() -> Path:
    env = os.environ.get("NETBENCH_FIXTURES")
    path = Path(env) if env else REPO.parent / "shared" / "fixtures"
    if not path.is_dir():
        raise FileNotFoundError(f"fixtures not found at {path} (set NETBENCH_FIXTURES)")
    return path


def fixture(rel: str) -> Path:
    """Path of one fixture, e.g. ``fixture("h200-node/nvidia-smi-q-x.txt")``."""
    return fixtures_dir() / rel


def read_fixture(rel: str) -> str:
    """Text of one fixture, read as bytes and decoded leniently (files are kept byte-for-byte)."""
    return fixture(rel).read_bytes().decode("utf-8", errors="replace")


def fixture_files(subdir: str) -> list[Path]:
    """All files under a fixture folder, sorted (for tests that must cover every file)."""
    return sorted(p for p in (fixtures_dir() / subdir).rglob("*") if p.is_file())
