from __future__ import annotations

import pytest
from netbench.collectives.sizes import format_size, parse_size, size_sweep


@pytest.mark.parametrize(
    "text,value",
    [
        ("8", 8),
        ("64K", 65536),
        ("1M", 1 << 20),
        ("8G", 8 << 30),
        ("1m", 1 << 20),
        ("2KB", 2048),
        ("4KiB", 4096),
        (" 16 ", 16),
    ],
)
def test_parse_size_binary_suffixes(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("bad", ["", "abc", "-1", "1X", "1.5", "K"])
def test_parse_size_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="bad size"):
        parse_size(bad)


def test_size_sweep_like_nccl_tests() -> None:
    assert size_sweep(8, 64, 2) == [8, 16, 32, 64]
    assert size_sweep(8, 100, 4) == [8, 32]
    assert size_sweep(1024, 1024, 2) == [1024]
    with pytest.raises(ValueError, match="larger than"):
        size_sweep(2048, 1024)


def test_format_size_round_trips() -> None:
    for v in [8, 1000, 1 << 10, 3 << 20, 8 << 30]:
        assert parse_size(format_size(v)) == v
