"""The one natural order for host and switch names: numbers compare as numbers, so leaf2 comes
before leaf10 and gpu9 before gpu10 (plain string order puts them the other way round). Tables,
heatmaps and the pair model's matrix all sort through ``natural_key``."""

from __future__ import annotations

import re

_PARTS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key: each run of digits as (0, its value), each other run as (1, the text); the tags keep
    a number and a word from ever being compared with each other."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in _PARTS.split(name) if p)
