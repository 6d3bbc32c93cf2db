"""inventory.versions: every version shape the inventory sees, and ordering laws (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from netbench.inventory.versions import compare_versions, max_version, parse_version


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("580.159.04", "580.65.06", 1),  # numeric, not lexical: 159 > 65
        ("535.161.08", "535.161.8", 0),  # leading zeros
        ("28.39.1002", "28.41.1000", -1),
        ("28.39.1002", "28.39.3560 (MT_0000000838)", -1),  # ethtool's firmware-version with PSID
        ("96.00.A5.00.1A", "96.00.74.00.0D", 1),  # VBIOS hex fields
        ("96.00.99.00.01", "96.00.A5.00.1A", -1),  # 0x99 < 0xA5
        ("MLNX_OFED_LINUX-23.10-1.1.9.0", "MLNX_OFED_LINUX-23.07-0.5.1.2:", 1),
        ("MLNX_OFED_LINUX-23.10-1.1.9.0 (OFED-23.10-1.1.9):", "23.10-1.1.9.0", 0),
        ("NCCL version 2.28.9+cuda13.0", "2.28.9", 0),  # +local is build metadata
        ("2.28.9+cuda13.0", "2.28.3+cuda12.9", 1),
        ("13.0", "13.0.0", 0),
        ("13.0", "12.9", 1),
        ("V13.0.88", "13.0", 1),
        ("2.13.0rc1", "2.13.0", -1),
        ("2.13.0.dev20260101", "2.13.0", -1),
        ("6.1.106-116.188.amzn2023.x86_64", "6.1.106", 1),
        ("", "0.1", -1),  # unknown sorts below any version
        ("N/A", "", 0),
    ],
)
def test_compare_versions(a: str, b: str, expected: int) -> None:
    assert compare_versions(a, b) == expected
    assert compare_versions(b, a) == -expected


def test_parse_version_fields() -> None:
    v = parse_version("NCCL version 2.28.9+cuda13.0")
    assert v.core == "2.28.9" and v.local == "cuda13.0" and v.known
    assert [f[1] for f in parse_version("96.00.A5.00.1A").key] == [0x96, 0, 0xA5, 0, 0x1A]
    assert parse_version("MLNX_OFED_LINUX-23.10-1.1.9.0").core == "23.10-1.1.9.0"
    assert not parse_version(None).known and not parse_version("REDACTED").known
    assert parse_version("0.0").known


def test_version_objects_sort_and_hash() -> None:
    fw = ["28.41.1000", "28.39.1002", "28.43.2566", "28.39.1002"]
    assert sorted(fw, key=parse_version) == ["28.39.1002", "28.39.1002", "28.41.1000", "28.43.2566"]
    assert max_version(fw) == "28.43.2566" and max_version([]) is None
    assert parse_version("13.0") == parse_version("13.0.0")
    assert len({parse_version("13.0"), parse_version("13"), parse_version("13.0.0")}) == 1


parts = st.lists(st.integers(min_value=0, max_value=100_000), min_size=1, max_size=6)


def _dotted(p: list[int]) -> str:
    return ".".join(map(str, p))


def _trim(p: list[int]) -> list[int]:
    p = list(p)
    while p and p[-1] == 0:
        p.pop()
    return p


@given(parts, parts)
def test_numeric_versions_order_like_int_tuples(a: list[int], b: list[int]) -> None:
    ta, tb = _trim(a), _trim(b)
    n = max(len(ta), len(tb))
    ta, tb = ta + [0] * (n - len(ta)), tb + [0] * (n - len(tb))
    assert compare_versions(_dotted(a), _dotted(b)) == (ta > tb) - (ta < tb)


@given(
    parts,
    st.sampled_from(["MLNX_OFED_LINUX-", "NCCL version ", "V", "release ", ""]),
    st.sampled_from(["", "+cuda13.0", " (MT_0000000838)", ":"]),
)
def test_prefix_and_suffix_noise_is_ignored(p: list[int], prefix: str, suffix: str) -> None:
    assert compare_versions(prefix + _dotted(p) + suffix, _dotted(p)) == 0


@given(st.lists(st.text(alphabet="0123456789.-+abcrAF_ ", max_size=12), min_size=3, max_size=3))
def test_total_order_laws(xs: list[str]) -> None:
    a, b, c = xs
    assert compare_versions(a, a) == 0
    assert compare_versions(a, b) == -compare_versions(b, a)
    if compare_versions(a, b) <= 0 and compare_versions(b, c) <= 0:
        assert compare_versions(a, c) <= 0
