"""Where the shared fixtures of real command output live.

CI runs the repository in a fresh clone with ``shared/`` beside it, so the fixtures are at
``<repo>/../shared/fixtures``; ``NETBENCH_FIXTURES`` overrides that (a path to the ``fixtures`` dir).

A missing fixture is an error with its path, never a skip or an empty parametrization: a parser
test that quietly runs on nothing passes while proving nothing (docs/development.md, "Tests").
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
    """Path of one fixture file or folder, e.g. ``fixture("h200-node/nvidia-smi-q-x.txt")``."""
    path = fixtures_dir() / rel
    if not path.exists():
        raise FileNotFoundError(f"fixture {rel} not found at {path} (set NETBENCH_FIXTURES)")
    return path


def read_fixture(rel: str) -> str:
    """Text of one fixture, read as bytes and decoded leniently (files are kept byte-for-byte)."""
    return fixture(rel).read_bytes().decode("utf-8", errors="replace")


def fixture_files(subdir: str) -> list[Path]:
    """All files under a fixture folder, sorted (for tests that must cover every file); a missing
    or empty folder raises, so a parametrization over it can never be silently empty."""
    files = sorted(p for p in fixture(subdir).rglob("*") if p.is_file())
    if not files:
        raise FileNotFoundError(f"fixture folder {subdir} at {fixtures_dir() / subdir} holds no files")
    return files
