"""Compare a run with a baseline: per-size ratios, environment differences, fingerprints.

Pure functions over the run-directory data (rows as dicts, env.json, inventory dicts) so the
``netbench compare`` command, the regression rule and tests share one implementation.

Matching is "like with like": rows are paired on collective, pattern, bytes, dtype and in_place,
and on the group and rank count where both sides record them. A ``world`` row's group defaults to
no group, so a baseline taken on another allocation of the same size still compares; pair/intra
rows without a ``group`` id are grouped by their sorted host list. Several rows for one key (rounds,
repeats) are reduced to their median, which one noisy repeat cannot drag.

A difference is a regression only when it is larger than the noise of the two runs, not when one
sample of a size happens to be 10 % off one sample of the baseline (two runs of the same build on a
busy machine differ by more than that). Each side's noise comes from what it measured: the scatter
of a curve's times around its neighbouring sizes (sizes are log-spaced, so a smooth curve is
locally straight in log-log and the residual is noise), its repeats, and the spread between its
ranks (``time_us_min``/``time_us_max``). The combined noise of a ratio is ``noise_log`` (a standard
deviation of log(ratio)); ``is_regression`` asks for the policy's factor AND ``z`` of those.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from netbench.common.jsontext import dumps

_BaseKey = tuple[str, str, int, str, bool]
_SubKey = tuple[str | None, int | None]  # (group, ranks)
_Index = dict[_BaseKey, dict[_SubKey, list[dict[str, Any]]]]


@dataclass
class SizeComparison:
    """One message size of one collective/pattern/group, current against baseline (medians)."""

    collective: str
    pattern: str
    bytes: int
    dtype: str
    in_place: bool
    group: str | None
    base_time_us: float
    cur_time_us: float
    base_busbw_GBps: float | None
    cur_busbw_GBps: float | None
    time_ratio: float | None  # cur / base: > 1 is slower; None when the baseline time is 0
    busbw_ratio: float | None  # cur / base: < 1 is slower; None when either busbw is 0 or None
    noise_log: float | None = None  # std. dev. of log(ratio) from both runs' own scatter; None: unknown

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def _group_of(row: dict[str, Any]) -> str | None:
    """The row's group id; pair-like rows without one are identified by their hosts."""
    group = row.get("group")
    if group:
        return str(group)
    hosts = row.get("hosts") or []
    if row.get("pattern") != "world" and hosts:
        return "|".join(sorted(str(h) for h in hosts))
    return None


def _index(rows: Iterable[dict[str, Any]]) -> _Index:
    """Usable rows (status ok, a time measured) by base key, then by (group, ranks)."""
    out: _Index = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row.get("status", "ok") != "ok" or row.get("time_us") is None:
            continue
        try:
            key: _BaseKey = (
                str(row["collective"]), str(row.get("pattern") or "world"), int(row["bytes"]),
                str(row.get("dtype") or ""), bool(row.get("in_place", False)),
            )
        except (KeyError, TypeError, ValueError):
            continue  # a row without its dimensions cannot be matched; skip rather than fail
        ranks = row.get("ranks")
        out[key][(_group_of(row), int(ranks) if isinstance(ranks, int) else None)].append(row)
    return out


def _matches(cur: _SubKey, base: _SubKey) -> bool:
    """Group and ranks must agree where both sides have them."""
    return all(c is None or b is None or c == b for c, b in zip(cur, base, strict=True))


def _median(values: Iterable[Any]) -> float | None:
    nums = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.median(nums) if nums else None


_CurveKey = tuple[str, str, str, bool, str | None]  # collective, pattern, dtype, in_place, group
MIN_CURVE_POINTS = 5  # fewer sizes than this say too little about a curve's scatter


def _log_times(rows: list[dict[str, Any]]) -> list[float]:
    return [math.log(float(r["time_us"])) for r in rows if _positive(r.get("time_us"))]


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _mad_sigma(values: list[float]) -> float:
    """Robust standard deviation (1.4826 x median absolute deviation)."""
    med = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - med) for v in values)


def curve_noise(index: _Index) -> dict[_CurveKey, float]:
    """Per curve, the scatter of log(time) of one size around its two neighbours.

    r_i = log t_i - (log t_(i-1) + log t_(i+1)) / 2 is 0 on any locally straight (log-log) curve and
    has variance 1.5 sigma^2 when every point carries noise sigma; a robust spread of r over the
    curve gives sigma. Kinks (the latency floor meeting the bandwidth slope) are few and the median
    ignores them."""
    curves: dict[_CurveKey, dict[int, float]] = defaultdict(dict)
    for (coll, pattern, nbytes, dtype, in_place), groups in index.items():
        for (group, _ranks), rows in groups.items():
            logs = _log_times(rows)
            if logs:
                curves[(coll, pattern, dtype, in_place, group)][nbytes] = statistics.median(logs)
    out: dict[_CurveKey, float] = {}
    for key, by_size in curves.items():
        ys = [by_size[b] for b in sorted(by_size)]
        if len(ys) < MIN_CURVE_POINTS:
            continue
        resid = [ys[i] - (ys[i - 1] + ys[i + 1]) / 2 for i in range(1, len(ys) - 1)]
        out[key] = _mad_sigma(resid) / math.sqrt(1.5)
    return out


def _point_noise(rows: list[dict[str, Any]], curve_sigma: float | None) -> float | None:
    """Noise of one size's median time on one side: the largest of the curve's scatter, the repeats'
    spread and half the log-spread between ranks; None when none of them was measured."""
    parts = [] if curve_sigma is None else [curve_sigma]
    logs = _log_times(rows)
    if len(logs) >= 3:
        parts.append(_mad_sigma(logs))
    spreads = [
        0.5 * math.log(r["time_us_max"] / r["time_us_min"])
        for r in rows
        if _positive(r.get("time_us_max")) and _positive(r.get("time_us_min"))
        and r["time_us_max"] >= r["time_us_min"] and int(r.get("ranks") or 1) > 1
    ]
    if spreads:
        parts.append(statistics.median(spreads))
    return max(parts) if parts else None


def compare_rows(current: list[dict[str, Any]], baseline: list[dict[str, Any]]) -> list[SizeComparison]:
    """Pair every measured size of ``current`` with the same size in ``baseline``.

    Sizes present on one side only are left out (nothing to compare). When the current side has a
    group and the baseline has exactly that group, only it is used; otherwise every baseline row
    whose group/ranks do not contradict the current one is pooled.
    """
    cur_idx, base_idx = _index(current), _index(baseline)
    cur_noise, base_noise = curve_noise(cur_idx), curve_noise(base_idx)
    out: list[SizeComparison] = []
    for key, cur_groups in cur_idx.items():
        base_groups = base_idx.get(key)
        if not base_groups:
            continue
        for cur_sub, cur_rows in cur_groups.items():
            if cur_sub in base_groups:
                base_rows = base_groups[cur_sub]
            else:
                base_rows = [r for sub, rows in base_groups.items() if _matches(cur_sub, sub) for r in rows]
            if not base_rows:
                continue
            base_t = _median(r.get("time_us") for r in base_rows)
            cur_t = _median(r.get("time_us") for r in cur_rows)
            if base_t is None or cur_t is None:
                continue
            base_bw = _median(r.get("busbw_GBps") for r in base_rows)
            cur_bw = _median(r.get("busbw_GBps") for r in cur_rows)
            collective, pattern, nbytes, dtype, in_place = key
            curve = (collective, pattern, dtype, in_place, cur_sub[0])
            base_curve = next(
                (k for k in ((*curve[:4], cur_sub[0]), (*curve[:4], None)) if k in base_noise), None
            )
            n_cur = _point_noise(cur_rows, cur_noise.get(curve))
            n_base = _point_noise(base_rows, base_noise.get(base_curve) if base_curve else None)
            noise = None if n_cur is None or n_base is None else math.hypot(n_cur, n_base)
            out.append(SizeComparison(
                collective=collective, pattern=pattern, bytes=nbytes, dtype=dtype, in_place=in_place,
                group=cur_sub[0], base_time_us=base_t, cur_time_us=cur_t,
                base_busbw_GBps=base_bw, cur_busbw_GBps=cur_bw,
                time_ratio=cur_t / base_t if base_t > 0 else None,
                busbw_ratio=cur_bw / base_bw if base_bw and cur_bw else None,
                noise_log=noise,
            ))
    out.sort(key=lambda c: (c.collective, c.pattern, c.group or "", c.dtype, c.in_place, c.bytes))
    return out


# -- environment --------------------------------------------------------------------------------

def _scalar(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _flatten(data: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(data, dict):
        for k, v in data.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    else:
        out[prefix] = _scalar(data)


def _summarise(values: dict[str, str]) -> str:
    """One value when every host agrees, else each distinct value with its host count."""
    distinct = sorted(set(values.values()))
    if len(distinct) == 1:
        return distinct[0]
    counts = {v: sum(1 for x in values.values() if x == v) for v in distinct}
    return ", ".join(f"{v} ({n} host{'s' if n > 1 else ''})" for v, n in counts.items())


def flatten_env(env: dict[str, Any]) -> dict[str, str]:
    """env.json as ``{"dotted.path": "value"}``, per-host entries collapsed to ``hosts.*.<key>``.

    Host names are folded into ``*`` because a baseline is often taken on other nodes: what matters
    is whether the software differs, not that the host names do. When hosts disagree the value
    lists each distinct value with its host count. The ``schema`` tag is dropped.
    """
    out: dict[str, str] = {}
    for k, v in env.items():
        if k in ("schema", "hosts"):
            continue
        _flatten(v, str(k), out)
    hosts = env.get("hosts") or {}
    per_key: dict[str, dict[str, str]] = defaultdict(dict)
    if isinstance(hosts, dict):
        for host, data in hosts.items():
            flat: dict[str, str] = {}
            _flatten(data, "", flat)
            for path, value in flat.items():
                per_key[path][str(host)] = value
        for path, values in per_key.items():
            missing = len(hosts) - len(values)
            summary = _summarise(values)
            if missing:
                summary += f" (missing on {missing} host{'s' if missing > 1 else ''})"
            out[f"hosts.*.{path}"] = summary
    return out


def env_diff(
    current_env: dict[str, Any], baseline_env: dict[str, Any]
) -> list[tuple[str, str | None, str | None]]:
    """Keys of env.json whose values differ, as ``(path, baseline_value, current_value)``.

    The tuple reads left to right as "was -> now" (the same order as the comparison table's base
    and current columns). A key present on one side only has ``None`` on the other.
    """
    cur, base = flatten_env(current_env), flatten_env(baseline_env)
    keys = sorted(cur.keys() | base.keys())
    return [(k, base.get(k), cur.get(k)) for k in keys if cur.get(k) != base.get(k)]


# -- fingerprint ----------------------------------------------------------------------------------

_ENV_ALIASES: dict[str, tuple[str, ...]] = {
    "torch": ("torch", "torch_version"),
    "nccl": ("nccl", "nccl_version", "nccl_version_torch"),
    "cuda": ("cuda", "cuda_version", "torch_cuda"),
    "driver": ("driver", "driver_version"),
    "python": ("python", "python_version"),
    "mpi": ("mpi", "mpi_version"),
    "nccl_tests": ("nccl_tests_version",),
}
_INV_FIELDS: dict[str, str] = {
    "torch": "torch_version", "nccl": "nccl_version_torch", "cuda": "cuda_version",
    "driver": "driver_version", "python": "python_version", "ofed": "ofed_version",
}


def _distinct(values: Iterable[Any]) -> str | None:
    """``"v"`` when all agree, ``"v1 | v2"`` (sorted) when not, None when nothing is known."""
    seen = sorted({str(v) for v in values if v not in (None, "")})
    return " | ".join(seen) if seen else None


def _nccl_vars(data: Any, out: dict[str, set[str]]) -> None:
    """Collect NCCL_* variables wherever a host's env entry keeps them (flat or in a sub-dict)."""
    if not isinstance(data, dict):
        return
    for k, v in data.items():
        if isinstance(v, dict):
            _nccl_vars(v, out)
        elif str(k).startswith("NCCL_"):
            out.setdefault(str(k), set()).add(str(v))


def fingerprint(env: dict[str, Any], inventory: list[dict[str, Any]]) -> dict[str, Any]:
    """What a run was measured with: software/firmware versions, NCCL_* settings, host count.

    Shown beside each side of a comparison so a reader sees at once whether a "regression" is a
    software change. Each version is one string when every host agrees, ``"a | b"`` when hosts
    differ, None when unknown. ``firmware`` covers NIC firmware and GPU VBIOS from the inventory.
    """
    hosts = env.get("hosts") if isinstance(env.get("hosts"), dict) else {}
    host_names = set(hosts) | {str(n.get("host")) for n in inventory if n.get("host")}
    fp: dict[str, Any] = {"hosts": len(host_names)}
    for name, aliases in _ENV_ALIASES.items():
        values = [h.get(a) for h in hosts.values() if isinstance(h, dict) for a in aliases]
        if name in _INV_FIELDS:
            values += [n.get(_INV_FIELDS[name]) for n in inventory]
        fp[name] = _distinct(values)
    fp["ofed"] = _distinct(n.get("ofed_version") for n in inventory)
    fp["nic_firmware"] = _distinct(nic.get("firmware") for n in inventory for nic in n.get("nics") or [])
    fp["gpu_vbios"] = _distinct(g.get("vbios") for n in inventory for g in n.get("gpus") or [])
    fp["gpu"] = _distinct(g.get("name") for n in inventory for g in n.get("gpus") or [])
    nccl_env: dict[str, set[str]] = {}
    for h in hosts.values():
        _nccl_vars(h, nccl_env)
    fp["nccl_env"] = {k: " | ".join(sorted(v)) for k, v in sorted(nccl_env.items())}
    return fp


# -- rendering (netbench compare) -----------------------------------------------------------------------

NOISE_Z = 3.0  # how many standard deviations of the runs' own noise a regression must exceed


def worse(ratio: float | None, limit: float, noise_log: float | None, z: float = NOISE_Z) -> bool:
    """Whether ``ratio`` (current / baseline) is past ``limit`` in the slower direction (time: a
    limit above 1, ratio above it; busbw: a limit below 1, ratio below it) AND more than ``z`` times
    the runs' noise away from 1. Without a noise estimate (a curve of a few sizes, one rank, no
    repeats) nothing says how large a chance difference is, so the limit's excess counts double."""
    if ratio is None or ratio <= 0:
        return False
    if noise_log is None:
        limit = 1 + 2 * (limit - 1)
    past = ratio > limit if limit > 1 else ratio < limit
    return past and (noise_log is None or abs(math.log(ratio)) > z * noise_log)


def is_regression(c: SizeComparison, threshold: float, z: float = NOISE_Z) -> bool:
    """Slower by more than ``threshold`` (0.1 = 10 %) in time, or lower by as much in busbw, and by
    more than the two runs' noise (``worse``)."""
    return worse(c.time_ratio, 1 + threshold, c.noise_log, z) or worse(
        c.busbw_ratio, 1 - threshold, c.noise_log, z
    )


def _size(n: int) -> str:
    from netbench.collectives.sizes import format_size

    return format_size(n)


def _f(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _table_rows(comparisons: list[SizeComparison], threshold: float) -> list[list[str]]:
    rows = []
    for c in comparisons:
        what = f"{c.collective} {c.pattern}{' ' + c.group if c.group else ''} {c.dtype} " \
               f"{'in-place' if c.in_place else 'out-of-place'}"
        noise = "?" if c.noise_log is None else f"{100 * (math.exp(c.noise_log) - 1):.0f}%"
        rows.append([what, _size(c.bytes), _f(c.base_time_us), _f(c.cur_time_us), _f(c.time_ratio, 3),
                     _f(c.base_busbw_GBps), _f(c.cur_busbw_GBps), noise,
                     "REGRESSED" if is_regression(c, threshold) else ""])
    return rows


_HEAD = ["what", "size", "base time (us)", "cur time (us)", "ratio", "base busbw", "cur busbw", "noise", ""]


def render(
    comparisons: list[SizeComparison],
    fingerprints: tuple[dict[str, Any], dict[str, Any]],
    diffs: list[tuple[str, str | None, str | None]],
    threshold: float,
    fmt: str = "text",
) -> str:
    """The comparison as ``text`` (aligned columns), ``markdown`` or ``json``."""
    base_fp, cur_fp = fingerprints
    regressed = [c for c in comparisons if is_regression(c, threshold)]
    if fmt == "json":
        return dumps({
            "schema": "netbench.compare/1", "threshold": threshold, "regressed": len(regressed),
            "fingerprint": {"baseline": base_fp, "current": cur_fp},
            "env_diff": [{"key": k, "baseline": b, "current": c} for k, b, c in diffs],
            "sizes": [dict(c.to_dict(), regressed=is_regression(c, threshold)) for c in comparisons],
        }, indent=2, default=str) + "\n"
    rows = _table_rows(comparisons, threshold)
    keys = sorted(set(base_fp) | set(cur_fp))
    def show(v: Any) -> str:
        return "-" if v is None or v == {} else _scalar(v)
    fp_rows = [[k, show(base_fp.get(k)), show(cur_fp.get(k))] for k in keys]
    diff_rows = [[k, "-" if b is None else b, "-" if c is None else c] for k, b, c in diffs]
    summary = (f"{len(regressed)} of {len(comparisons)} sizes regressed by more than "
               f"{threshold:.0%} and by more than {NOISE_Z:g} standard deviations of the two runs' noise "
               "(noise: one standard deviation, from each run's own scatter)"
               if comparisons else "no sizes in common")
    if fmt == "markdown":
        def md(head: list[str], body: list[list[str]]) -> str:
            esc = [[cell.replace("|", "\\|").replace("\n", " ") for cell in r] for r in [head, *body]]
            lines = ["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(head)]
            return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in esc[1:]])
        parts = [f"**{summary}**", "", md(_HEAD, rows), "", "### Environment fingerprint", "",
                 md(["", "baseline", "current"], fp_rows)]
        if diff_rows:
            parts += ["", "### Environment differences", "", md(["key", "baseline", "current"], diff_rows)]
        return "\n".join(parts) + "\n"

    def text_table(head: list[str], body: list[list[str]]) -> str:
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
        return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
                         for r in [head, *body])
    parts = [summary, "", text_table(_HEAD, rows), "", "environment fingerprint:",
             text_table(["", "baseline", "current"], fp_rows)]
    parts += ["", "environment differences:", text_table(["key", "baseline", "current"], diff_rows)] \
        if diff_rows else ["", "environment differences: none"]
    return "\n".join(parts) + "\n"
