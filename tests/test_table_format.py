"""The table's numbers as nccl-tests' common.cu prints them (scripts parse both the same way)."""

from __future__ import annotations

from netbench.run.table import format_line, in_table


def row(time_us: float, bw: float, in_place: bool = False) -> dict:
    return {"bytes": 1 << 30, "count": 1 << 28, "dtype": "float", "op": "sum", "root": None,
            "time_us": time_us, "algbw_GBps": bw, "busbw_GBps": bw, "wrong": 0, "in_place": in_place}


def test_times_and_bandwidths_are_formatted_as_nccl_tests_does() -> None:
    """%7.0f from 10,000 us (never an exponent), %7.1f from 100 us, %7.2f below; bandwidths %6.2f."""
    cols = format_line(row(123456.7, 8.696), row(99.994, 0.5)).split()
    assert cols[5:9] == ["123457", "8.70", "8.70", "0"]
    assert cols[9:13] == ["99.99", "0.50", "0.50", "0"]
    assert format_line(row(10000.4, 1.0), row(100.04, 1234.5)).split()[5:11:4] == ["10000", "100.0"]
    assert format_line(row(100.04, 1234.5), None).split()[5:8] == ["100.0", "1234.50", "1234.50"]


def test_the_table_leaves_out_pairs_and_rails() -> None:
    assert in_table({"pattern": "ring"}) and in_table({"pattern": "world"})
    assert not in_table({"pattern": "pair"}) and not in_table({"pattern": "rail"})
