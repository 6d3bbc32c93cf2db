"""nccl-tests ``-J`` JSON (JSON_FILE_VERSION 1-3 in src/util.cu): one file, one run of one ``*_perf``
binary, checked as a table row is."""

from __future__ import annotations

import math
from typing import Any

from netbench.common.errors import UsageError
from netbench.importers.nccl_tests.model import (
    REDOPS,
    NcclTest,
    Problem,
    RankLine,
    collective_from_filename,
    collective_name,
    nccl_version_from_code,
)
from netbench.importers.nccl_tests.table import Reading, Refused, check_sizes


def _json_num(value: Any) -> float | None:
    """A finite number, else None ("nan", null, Infinity and 1e999 are not measurements)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer of hundreds of digits
            return None
        return number if math.isfinite(number) else None
    return None


def _measured(body: dict[str, Any], key: str, what: str) -> float | None:
    """A time, bandwidth or count of a ``results`` entry: None where nccl-tests wrote none (absent,
    null: ``nwrong`` of an unchecked size), else a finite number not below zero; anything else is
    ``Refused`` with the value named (1e400 and NaN are values, not a time nccl-tests did not print;
    nccl-tests writes a NaN as "nan")."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if value == "nan":
            raise Refused(f"{what} is not finite", "nan")
        raise Refused(f"{what} is not a number", repr(value)[:40])
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits
        raise Refused(f"{what} is not finite", f"{str(value)[:20]}... ({len(str(value))} digits)") from None
    if not math.isfinite(number):
        raise Refused(f"{what} is not finite", str(value))
    if number < 0:
        raise Refused(f"{what} is negative", str(value))
    return number


def parse_json(data: dict[str, Any], source: str = "<json>") -> NcclTest:
    """One ``-J`` file: one run of one ``*_perf`` binary. A value of the wrong type anywhere (a
    string size, a list where an object belongs) is the user's input: UsageError naming the file."""
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise UsageError(f"{source}: JSON without a 'results' list is not nccl-tests -J output")
    try:
        return _parse_json(data, source)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError) as exc:
        what = f"missing key {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
        raise UsageError(f"{source}: not nccl-tests -J output as expected ({what})") from None


def _parse_json(data: dict[str, Any], source: str) -> NcclTest:
    args = data.get("args") or []
    # argv[0] as exec'd, or with a note after it (netbench's export: "all_reduce_perf (netbench torch
    # engine, group world)")
    program = str(args[0]) if args else ""
    name = (collective_name(program) or collective_name(program.split(" ", 1)[0])) if args \
        else collective_from_filename(source)
    if args and name is None:  # a damaged file's one run: nothing to import
        raise UsageError(f"{source}: args[0] {str(args[0])[:80]!r} is no nccl-tests program "
                         "(all_reduce_perf, ...): damaged -J output, not imported")
    test = NcclTest(source=source, collective=name)
    code = data.get("nccl_version")
    if isinstance(code, int):
        test.nccl_version = nccl_version_from_code(code)
    cfg = data.get("config") or {}
    test.config = {
        "nthread": _count(cfg, "nthreads"), "ngpus": _count(cfg, "ngpus"),
        "min_bytes": cfg.get("minimum_bytes"), "max_bytes": cfg.get("maximum_bytes"),
        "warmup_iters": cfg.get("warmup_iters"), "iters": cfg.get("iterations"),
        "agg_iters": cfg.get("aggregated_iterations"), "validation": cfg.get("validation"),
        "graph": cfg.get("graph"), "json_version": data.get("version"),
    }
    for key in ("step_factor", "step_bytes"):
        if key in cfg:
            test.config[key] = cfg[key]
    for d in cfg.get("devices") or []:
        test.ranks.append(RankLine(
            rank=int(d.get("rank", len(test.ranks))), host=str(d.get("hostname", "")),
            device=int(d.get("device", 0)),
            bus_id=str(d.get("device_hex", "")), device_name=str(d.get("device_info", "")),
            group=_json_int(d["group"]) if d.get("group") is not None else None,
            pid=_json_int(d["pid"]) if d.get("pid") is not None else None,
        ))
    for entry in data.get("env") or []:
        if isinstance(entry, str) and entry.startswith("NCCL_") and "=" in entry:
            k, v = entry.split("=", 1)
            test.env[k] = v
    reading = Reading(test, example_of=lambda i, where: where)
    for i, res in enumerate(data["results"]):
        root = str(res.get("root", "")).strip()
        base = {"bytes": _json_int(res["size"]), "count": _json_int(res["count"]),
                "dtype": res.get("type", ""), "op": res.get("redop"), "root": root or None, "line": i}
        try:
            rows = _json_rows(res, base)
            _check_json_row(base, rows, len(test.ranks) or None)
        except Refused as exc:
            reading.refuse(exc, i, f"results[{i}]: {exc.detail}", last=False)
            continue
        reading.add_rows(rows, i, f"results[{i}]")
    reading.closed = True  # -J is written whole, at the end of the run
    reading.finish()
    oob = data.get("out_of_bounds") or {}
    if isinstance(oob.get("count"), int):
        test.out_of_bounds = oob["count"]
    avg = data.get("average_bus_bandwidth") or data.get("average_bus_bandwidith") or {}  # typo before 2026-02
    test.avg_busbw_GBps = _json_num(avg.get("bandwidth", avg.get("bandwidith")))
    test.errors = [e for e in data.get("errors") or [] if e]
    if test.errors:  # what the run's failure lines said, kept by -J
        failure = Problem("failure", "the log says the run failed",
                          example=f"errors[0]: {str(test.errors[0])[:120]}")
        for k in range(len(test.errors)):
            failure.add(k)
        test.problems.append(failure)
    return test


def _json_rows(res: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows (out of place, in place) of one ``results`` entry, each value checked."""
    rows = []
    for placement in ("out_of_place", "in_place"):
        body = res.get(placement)
        if not isinstance(body, dict):
            continue
        row = dict(base, in_place=placement == "in_place")
        row["time_us"] = _measured(body, "time" if "time" in body else "cpu_time", "time")
        row["algbw_GBps"] = _measured(body, "alg_bw", "algbw")
        row["busbw_GBps"] = _measured(body, "bus_bw", "busbw")
        wrong = _measured(body, "nwrong", "#wrong")
        if wrong is not None and not wrong.is_integer():
            raise Refused("#wrong is not a whole number", str(body.get("nwrong")))
        row["wrong"] = int(wrong) if wrong is not None else None
        if "cpu_time" in body:
            row["cpu_time"] = True
        per_iter = res.get(f"{placement}_per_iter")
        if isinstance(per_iter, dict):
            row["per_iter"] = {k: v for k, v in per_iter.items() if k != "per_process_max_times_us"}
        rows.append(row)
    return rows


def _count(cfg: dict[str, Any], key: str) -> int:
    """``nthreads`` / ``ngpus`` of the config: a whole number from 1 (absent: 1); the rank count is
    made of them, so anything else is the file's damage (ValueError: the caller's exit 2), found
    before a run directory is made, never while its rows are written."""
    value = cfg.get(key, 1)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1 << 20:
        raise ValueError(f"config.{key} {str(value)[:40]!r} is not a count of threads or GPUs")
    return value


def _json_int(value: Any) -> int:
    """An integer of a -J file within int64 (ValueError, the caller's exit 2, for anything else: a
    string, a fraction nccl-tests never writes where it prints %zu or %d)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{str(value)[:40]!r} is not a whole number")
    number = value
    if not -(1 << 63) <= number < 1 << 63:
        raise ValueError(f"{str(value)[:40]}... is out of range")
    return number


def _check_json_row(base: dict[str, Any], rows: list[dict[str, Any]], ranks: int | None) -> None:
    """The checks of a table row, on one ``results`` entry of a -J file."""
    check_sizes(base["bytes"], base["count"], str(base["dtype"]), ranks)
    if base["op"] is not None and base["op"] not in REDOPS:
        raise Refused("redop is not one nccl-tests prints", str(base["op"]))
