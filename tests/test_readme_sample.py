"""The README's sample of ``netbench sweep`` is the default's (issue 47, point 8: it said
"1 collective(s)" where the default runs two): its header counts the default collectives, it has a
table for each, in order, and an "Avg bus bandwidth" line for each, named as a run of several names it."""

from __future__ import annotations

import re
from pathlib import Path

from netbench.collectives.ops import DEFAULT_COLLECTIVES

README = Path(__file__).resolve().parents[1] / "README.md"


def default_sample() -> list[str]:
    """The first code block of the README that starts with netbench's header line."""
    blocks, block = [], None
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            blocks, block = (blocks + [block], None) if block is not None else (blocks, [])
        elif block is not None:
            block.append(line)
    return next(b for b in blocks if b and b[0].startswith("# netbench "))


def test_the_sample_is_the_default_sweeps_output() -> None:
    lines = default_sample()
    want = list(DEFAULT_COLLECTIVES)
    assert f": {len(want)} collective(s) on " in lines[0], lines[0]
    titles = [ln.split()[1] for ln in lines if re.match(r"# \w+  pattern=world ", ln)]
    assert titles == want
    avgs = [ln.split() for ln in lines if ln.startswith("# Avg bus bandwidth    : ")]
    if len(want) > 1:
        assert [a[6] for a in avgs] == want
    else:
        assert len(avgs) == 1 and len(avgs[0]) == 6
