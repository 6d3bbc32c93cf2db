"""Slurm hostlist expressions: expansion rules, errors, and compress/expand round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from netbench.inventory.hostlist import MAX_HOSTS, compress_hostlist, expand_hostlist


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("node[01-03,10]", ["node01", "node02", "node03", "node10"]),
        ("gpu-[1-3]", ["gpu-1", "gpu-2", "gpu-3"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
        ("n[08-10]", ["n08", "n09", "n10"]),
        ("hpc[001-002],gpu[1-2],login", ["hpc001", "hpc002", "gpu1", "gpu2", "login"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("a[1-2]b", ["a1b", "a2b"]),
        ("single", ["single"]),
        ("circe-n[017-018,021-022]", ["circe-n017", "circe-n018", "circe-n021", "circe-n022"]),
    ],
)
def test_expand(expr: str, names: list[str]) -> None:
    assert expand_hostlist(expr) == names


@pytest.mark.parametrize(
    ("expr", "why"),
    [("", "empty"), ("n[1-3", "unbalanced"), ("n1-3]", "unbalanced"), ("n[3-1]", "backwards"),
     ("n[a-b]", "bad range"), ("n[[1]]", "nested"), ("a,,b", "empty name"), ("n[]", "bad range"),
     (f"n[0-{MAX_HOSTS}]", "more than")],
)
def test_expand_errors(expr: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        expand_hostlist(expr)


def test_compress_examples() -> None:
    assert compress_hostlist(["node01", "node02", "node03", "node10", "gpu1"]) == "node[01-03,10],gpu1"
    assert compress_hostlist(["n9", "n10", "n11"]) == "n[9-11]"
    assert compress_hostlist(["x", "x", "n1"]) == "x,n1"
    assert compress_hostlist(["r1-ib", "r2-ib"]) == "r[1-2]-ib"


names_st = st.lists(
    st.builds(lambda p, n, w: f"{p}{str(n).zfill(w)}", st.sampled_from(["n", "gpu-", "a1b"]),
              st.integers(0, 300), st.integers(1, 4)),
    min_size=1, max_size=40,
)


@given(names_st)
def test_compress_round_trip(names: list[str]) -> None:
    back = expand_hostlist(compress_hostlist(names))
    assert sorted(back) == sorted(set(names)) and len(back) == len(set(names))
