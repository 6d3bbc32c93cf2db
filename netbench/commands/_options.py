"""Options every measuring command shares (``sweep``, ``worker``), declared once.

nccl-tests' flags where it has them (-b -e -f -n -w -d -o -c -G), so its users need no new habits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from netbench.defaults import OP_TIMEOUT_S
from netbench.params import DURATION, SIZE, CsvList


def _size(text: str) -> int:
    from netbench.collectives.sizes import parse_size

    return parse_size(text)


def _coll(name: str) -> str:
    from netbench.collectives.ops import get_collective

    return get_collective(name).name


_SHARED = [
    click.option(
        "--collectives",
        "-c",
        "collectives",
        type=CsvList(_coll),
        default="all_reduce,all_gather",
        show_default=True,
        help="Comma list: all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, sendrecv.",
    ),
    click.option(
        "--min-bytes", "-b", type=SIZE, default=None, help="Smallest size (K/M/G binary). Default 8 B."
    ),
    click.option(
        "--max-bytes",
        "-e",
        type=SIZE,
        default=None,
        help="Largest size. Default 64M (gloo), 8G capped by free GPU memory (NCCL).",
    ),
    click.option(
        "--factor",
        "-f",
        type=click.IntRange(2, 1 << 20),
        default=2,
        show_default=True,
        help="Multiply the size by this each step.",
    ),
    click.option(
        "--iters",
        "-n",
        type=click.IntRange(1, 10**9),
        default=20,
        show_default=True,
        help="Timed iterations per size.",
    ),
    click.option(
        "--warmup",
        "-w",
        type=click.IntRange(0, 10**9),
        default=5,
        show_default=True,
        help="Untimed warm-up iterations per size.",
    ),
    click.option(
        "--dtype",
        "-d",
        default="float",
        show_default=True,
        help="float, half, bfloat16, double, int8, uint8, int32, int64 (or fp32, bf16, fp16).",
    ),
    click.option("--op", "-o", default="sum", show_default=True, help="Reduction: sum, prod, max, min, avg."),
    click.option(
        "--check/--no-check",
        default=True,
        show_default=True,
        help="Untimed pass that counts wrong result elements.",
    ),
    click.option(
        "--in-place",
        "in_place",
        type=click.Choice(["both", "out", "in"]),
        default="both",
        show_default=True,
        help="Out-of-place, in-place, or both.",
    ),
    click.option(
        "--root",
        type=click.IntRange(min=0),
        default=0,
        show_default=True,
        help="Root rank of broadcast and reduce.",
    ),
    click.option(
        "--backend",
        type=click.Choice(["gloo", "nccl"]),
        default=None,
        help="Force a backend (default: nccl when CUDA GPUs are visible, else gloo).",
    ),
    click.option(
        "--cuda-graph", is_flag=True, help="Capture the timed loop in a CUDA graph (nccl-tests -G)."
    ),
    click.option(
        "--engine",
        type=click.Choice(["auto", "nccl", "torch", "both"]),
        default="auto",
        show_default=True,
        help="GPU operations through NCCL directly (nccl4py, as nccl-tests) or through torch's process "
        "group (what a training job sees); both: each point twice, side by side. auto: nccl when "
        "every host's python imports nccl4py, else torch on every host. CPU ranks always use torch (gloo).",
    ),
    click.option(
        "--timeout",
        "timeout_s",
        type=DURATION,
        default=OP_TIMEOUT_S,
        show_default=True,
        help="A collective (or rank) silent this long has failed.",
    ),
    click.option(
        "--out",
        type=click.Path(file_okay=False),
        default=None,
        help="Run directory (default netbench-runs/<UTC time>-<id>); refused if it holds a run "
        "already; {id} in it becomes the run id (a fresh directory per run).",
    ),
    click.option(
        "--report/--no-report",
        default=True,
        show_default=True,
        help="Write findings.json and report.html at the end.",
    ),
]


# how pairs are measured: read by the plan builder wherever the plan is built (sweep, worker rank 0)
_PAIRS = [
    click.option(
        "--pair-batch",
        type=click.IntRange(min=1),
        default=None,
        help="At most K pairs at once (default: whole rounds of disjoint pairs).",
    ),
    click.option(
        "--pair-schedule",
        type=click.Choice(["auto", "circle", "topology"]),
        default="auto",
        show_default=True,
        help="Which pairs run together. topology: leaf against leaf, so every round puts the same "
        "number of pairs through a leaf's uplink (pairs within a leaf fill the idle slots); circle: "
        "the circle method, blind to switches; auto: topology when --topology or switch= labels place "
        "every host.",
    ),
    click.option(
        "--uplink-pairs",
        type=click.IntRange(min=1),
        default=None,
        help="Topology schedule: at most K pairs of a round through one uplink (more rounds, less load).",
    ),
    click.option(
        "--pair-sizes",
        type=CsvList(_size),
        default=None,
        help="Sizes for pairs (default 1M,4M,16M gloo; 64M,256M,1G NCCL).",
    ),
    click.option(
        "--pair-collectives",
        type=CsvList(_coll),
        default=None,
        help="Collectives for pairs (default: --collectives).",
    ),
]


def _apply(options: list[Callable[..., Any]], f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(options):  # in the order listed, as --help shows them
        f = option(f)
    return f


def measurement_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The measurement every measuring command shares."""
    return _apply(_SHARED, f)


def pair_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """How pairs are measured (sweep --hosts, and worker ranks with --pattern pairwise)."""
    return _apply(_PAIRS, f)
