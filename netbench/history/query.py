"""What ``netbench history`` asks the store: an entity's series, and the changes of every entity with
the environment changes between its last good and first bad run, tested across the fleet.

Attribution: an entity that lost at run ``b`` (``g`` its last good run) is looked up in the env table
of both runs, on its hosts: a node's own, a link's two ends, a switch's hosts (those behind it in
``b``); every field whose value differs on one of them is a candidate, for a switch only a change
that hit most of its hosts (one host's change says nothing of a switch). For a candidate ``field:
old -> new`` the fleet splits into the hosts that made the same change between ``g`` and ``b`` and
those that did not, and each side counts its hosts that lost within a run of ``b`` as the entity
did: a node that lost, an end of a link that lost, a host behind a switch that lost. The change is
named the likely cause only when the contrast is strong: at least ``MIN_CHANGED`` hosts changed,
most of them lost, few that stayed did, and the one-sided Fisher exact test of the 2 x 2 table is
below ``P_CAUSE``. One host that changed and lost is said, not blamed: a part going bad looks the
same.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from netbench.common.errors import NetbenchError
from netbench.history.changes import WINDOW, Change, EnvChange, Shift, find_shifts
from netbench.history.store import HistoryStore

MIN_CHANGED = 3
P_CAUSE = 1e-4
_LOST_SHARE = 0.5  # of the hosts that changed, at least this share lost
_STAYED_SHARE = 0.1  # of those that did not, at most this share lost

#: per kind: the table, its entity's columns, the figure searched
SERIES = {
    "node": ("nodes", ("host",), "level"),  # with "effect" (_node_figure); a store made before: "effect"
    "link": ("links", ("a", "b"), "resid"),
    "switch": ("switches", ("switch",), "effect"),
    "fleet": ("fleet", ("collective", "pattern", "bytes"), "busbw_GBps"),
}


@dataclass(frozen=True)
class Series:
    kind: str
    entities: list[str]
    runs: list[str]
    started: list[str]
    values: np.ndarray  # (entities, runs) log figure, NaN: not measured


def series(store: HistoryStore, kind: str, where: ds.Expression | None = None) -> Series:
    """Every entity of ``kind`` (``where``: those its rows pass) over the catalog's runs."""
    runs = store.runs()
    ids = runs.column("run_id").to_pylist() if runs.num_rows else []
    started = runs.column("started").to_pylist() if runs.num_rows else []
    name, keys, value = SERIES[kind]
    extra = {"link": ["bytes"], "node": ["effect"]}.get(kind, [])
    try:
        table = store.table(name, columns=["run_id", *keys, value, *extra], where=where)
    except NetbenchError:
        if kind != "node":
            raise
        value = "effect"  # a store made before the partner levels (history.ingest.partner_level)
        table = store.table(name, columns=["run_id", *keys, value], where=where)
    if not table.num_rows:
        return Series(kind, [], ids, started, np.zeros((0, len(ids))))
    # columns, never a Python object a row: a 90-night history of 256 nodes is 2.9 M link rows
    coded = pc.dictionary_encode(_entity_names(table, kind)).combine_chunks()
    names, inv = coded.dictionary.to_pylist(), coded.indices.to_numpy(zero_copy_only=False)
    col = pc.fill_null(pc.index_in(table.column("run_id"), value_set=pa.array(ids, pa.string())), -1)
    col = col.to_numpy(zero_copy_only=False)
    vals = table.column(value).to_numpy(zero_copy_only=False).astype(float)
    if kind == "fleet":
        vals = np.log(np.where(vals > 0, vals, np.nan))
    x = np.full((len(names), len(ids)), np.nan)
    keep = col >= 0
    if kind == "link":  # a pair's residual is one a run, on each size's row: the largest size's taken
        sizes = runs.column("sizes").to_pylist()
        largest = np.array([int(str(z).rsplit(",", 1)[-1]) if z else 0 for z in sizes] + [0], dtype=np.int64)
        keep &= table.column("bytes").to_numpy(zero_copy_only=False) == largest[col]
    x[inv[keep], col[keep]] = vals[keep]
    if kind == "node" and value == "level":
        x = _node_figure(x, table.column("effect").to_numpy(zero_copy_only=False).astype(float), inv, col)
    order = sorted(range(len(names)), key=names.__getitem__)
    return Series(kind, [str(names[i]) for i in order], ids, started, x[order])


def _node_figure(level: np.ndarray, effect: np.ndarray, inv: np.ndarray, col: np.ndarray) -> np.ndarray:
    """A node's figure a run: the lower of its partner level, against the run's middle node, and
    the pair model's node effect (its worst hop class). The level alone misses a node slow only
    where it bounds its pairs (inside its leaf, where the uplinks bound the others); the effect
    alone jumps up where half a leaf slowed at once (the model's sum of two ends fits no such leaf:
    healthy leaf-mates +4-7%, slowed ones read healthy, 2 of 20 simulated t3 histories). Both err
    upwards there, so the lower is the one that holds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a run without nodes: NaN stays
        # a class median moves where many of its pairs slowed (half of one of two leaves: 3 points
        # of an 8% loss), the run's middle node only where half the nodes did
        level = level - np.nan_to_num(np.nanmedian(level, axis=0))
    eff = np.full(level.shape, np.nan)
    keep = col >= 0
    eff[inv[keep], col[keep]] = effect[keep]
    return np.fmin(level, eff)


def _entity_names(table: pa.Table, kind: str) -> pa.ChunkedArray:
    if kind == "node":
        return table.column("host")
    if kind == "switch":
        return table.column("switch")
    if kind == "link":
        return pc.binary_join_element_wise(table.column("a"), table.column("b"), ",")
    from netbench.collectives.sizes import format_size

    return pa.chunked_array([pa.array([f"{c} {p} {format_size(int(b))}" for c, p, b in zip(
        table.column("collective").to_pylist(), table.column("pattern").to_pylist(),
        table.column("bytes").to_pylist(), strict=True)], pa.string())])


def changes(store: HistoryStore, kinds: tuple[str, ...] = ("node", "link", "switch", "fleet"),
            since: timedelta | None = None, now: datetime | None = None) -> list[Change]:
    """Every persistent shift of ``kinds``, oldest first; the losses of nodes, links and switches
    attributed; ``since``: only those whose first bad run started within that long before ``now``."""
    found: list[Change] = []
    for kind in kinds:
        s = series(store, kind)
        shifts = find_shifts(s.values, kind)
        dated = [_dated(s, sh) for sh in shifts]
        if kind == "link":
            dated = [c for c in dated if not _moved_with_an_end(c, found)]
        if kind != "fleet" and dated:
            dated = attribute(store, s, dated)
        found += dated
    if since is not None:
        cut = (now or datetime.now(UTC)) - since
        found = [c for c in found if _when(c.first_bad_at) >= cut]
    return sorted(found, key=lambda c: (c.first_bad_at, c.kind, c.entity))


def _moved_with_an_end(link: Change, found: list[Change]) -> bool:
    """Whether a link's shift is its ends': an end that changed near it (a drift: since it began), or,
    for a link faster than before, an end that lost before it. The slower end bounds a pair, which
    the model's sum of two node effects does not: a pair of two slow ends looks fast for them."""
    ends = set(link.entity.split(","))
    # a link's drift is dated from the window it was first seen in: its runs up to a window later
    seen = range(link.split, link.split + (WINDOW if link.shape == "drift" else 0) + 1)
    for c in found:
        if c.kind != "node" or c.entity not in ends:
            continue
        near = any(c.split - 3 <= k <= c.split + 3 for k in seen)
        if near or (c.shape == "drift" and seen[-1] >= c.split - 3):
            return True
        if link.shift_pct > 0 and c.shift_pct < 0 and c.split <= seen[-1]:
            return True
    return False


def _dated(s: Series, sh: Shift) -> Change:
    first = sh.start if sh.shape == "drift" else sh.split
    good = max(first - 1, 0)
    pct = lambda v: 100 * (math.exp(v) - 1)  # noqa: E731 - three uses below
    return Change(
        s.kind, s.entities[sh.row], sh.shape, first, s.runs[good], s.runs[first], s.started[good],
        s.started[first], pct(sh.shift), pct(sh.shift - 1.96 * sh.se), pct(sh.shift + 1.96 * sh.se), sh.z,
    )


def attribute(store: HistoryStore, s: Series, found: list[Change]) -> list[Change]:
    """``found`` (the changes of ``s``'s kind: nodes, links or switches) with the environment changes
    of each loss on its hosts, tested across the fleet (module docstring)."""
    env = store.table("env", columns=["run_id", "host", "field", "value"])
    if not env.num_rows:
        return found
    per_run = _env_by_run(env)
    behind = _behind(store, {s.runs[c.split] for c in found if c.shift_pct < 0}) if s.kind == "switch" else {}

    def hosts(c: Change) -> list[str]:
        if s.kind == "switch":
            return behind.get((s.runs[c.split], c.entity), [])
        return c.entity.split(",") if s.kind == "link" else [c.entity]

    losses: dict[int, dict[str, float]] = {}  # first bad run -> host -> its entity's shift (%)
    for c in found:
        if c.shift_pct < 0:
            at = losses.setdefault(c.split, {})
            for h in hosts(c):
                at[h] = min(at.get(h, 0.0), c.shift_pct)
    out = []
    for c in found:
        if c.shift_pct >= 0 or c.split == 0:
            out.append(c)
            continue
        good, bad = per_run.get(s.runs[c.split - 1], {}), per_run.get(s.runs[c.split], {})
        lost = {h: v for k in (c.split - 1, c.split, c.split + 1) for h, v in losses.get(k, {}).items()}
        mine = hosts(c)
        out.append(replace(c, env=[
            replace(_tested(fld, old, new, good, bad, lost), at=_where(s.kind, made, len(mine)))
            for (fld, old, new), made in _candidates(mine, good, bad, s.kind)]))
    return out


def _candidates(mine: list[str], good: dict[str, dict[str, str]], bad: dict[str, dict[str, str]], kind: str
                ) -> list[tuple[tuple[str, str | None, str | None], list[str]]]:
    """Each ``(field, old, new)`` that changed on the entity's hosts ``mine`` between ``good`` and
    ``bad``, with the hosts that made it; for a switch only those most of its hosts made."""
    made: dict[tuple[str, str | None, str | None], list[str]] = {}
    for h in mine:
        g, b = good.get(h, {}), bad.get(h, {})
        for fld in set(g) | set(b):
            if g.get(fld) != b.get(fld):
                made.setdefault((fld, g.get(fld), b.get(fld)), []).append(h)
    if kind == "switch":
        made = {k: v for k, v in made.items() if len(v) > len(mine) / 2}
    return sorted(made.items(), key=lambda kv: (kv[0][0], kv[0][1] or "", kv[0][2] or ""))


def _where(kind: str, made: list[str], hosts: int) -> str:
    """Where on the entity a change was made: a link's end (or both), a switch's share of its hosts."""
    if kind == "link":
        return f"at {made[0]}" if len(made) == 1 else "at both ends"
    return f"{len(made)} of {hosts} hosts behind it" if kind == "switch" else ""


def _behind(store: HistoryStore, runs: set[str]) -> dict[tuple[str, str], list[str]]:
    """(run, switch) -> the hosts behind it in that run (the nodes table's ``switch``)."""
    nodes = store.table("nodes", columns=["run_id", "host", "switch"],
                        where=pc.field("run_id").isin(sorted(runs)))
    out: dict[tuple[str, str], list[str]] = {}
    cols = [nodes.column(k).to_pylist() for k in ("run_id", "host", "switch")] if nodes.num_rows else [[]] * 3
    for run, host, switch in zip(*cols, strict=True):
        if switch:
            out.setdefault((run, switch), []).append(host)
    return out


def _env_by_run(env: pa.Table) -> dict[str, dict[str, dict[str, str]]]:
    out: dict[str, dict[str, dict[str, str]]] = {}
    cols = [env.column(k).to_pylist() for k in ("run_id", "host", "field", "value")]
    for run, host, fld, value in zip(*cols, strict=True):
        out.setdefault(run, {}).setdefault(host, {})[fld] = value
    return out


def _tested(fld: str, old: str | None, new: str | None, good: dict[str, dict[str, str]],
            bad: dict[str, dict[str, str]], lost: dict[str, float]) -> EnvChange:
    both = set(good) & set(bad)
    changed = {h for h in both if good[h].get(fld) == old and bad[h].get(fld) == new}
    stayed = both - changed
    lost_c = sorted(lost[h] for h in changed if h in lost)
    lost_u = sum(1 for h in stayed if h in lost)
    p = fisher_greater(len(lost_c), len(changed), lost_u, len(stayed))
    likely = (len(changed) >= MIN_CHANGED and len(lost_c) >= _LOST_SHARE * len(changed)
              and lost_u <= _STAYED_SHARE * max(len(stayed), 1) and p <= P_CAUSE)
    span = (-lost_c[-1], -lost_c[0]) if lost_c else None
    return EnvChange(fld, old, new, len(changed), len(lost_c), len(stayed), lost_u, p, likely, span)


def fisher_greater(a: int, n1: int, b: int, n2: int) -> float:
    """One-sided Fisher exact p: the chance that ``a`` or more of the ``n1`` changed hosts are among
    the ``a + b`` that lost, were losing unrelated to the change (hypergeometric upper tail)."""
    total, lost = n1 + n2, a + b

    def log_comb(n: int, k: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)

    base = log_comb(total, lost)
    terms = [log_comb(n1, k) + log_comb(n2, lost - k) - base for k in range(a, min(n1, lost) + 1)
             if lost - k <= n2]
    return min(1.0, sum(math.exp(t) for t in terms)) if terms else 1.0


def timeline(store: HistoryStore, kind: str, entity: str) -> tuple[list[dict[str, object]], list[Change]]:
    """One entity's runs (date, run, figure, and for a node its environment's changes) and its changes."""
    name, keys, _ = SERIES[kind]
    where = None
    if kind == "node":
        where = pc.field("host") == entity
    elif kind == "switch":
        where = pc.field("switch") == entity
    elif kind == "link":  # either order: the store keeps the analysis's (node2 before node10)
        a, _, b = entity.partition(",")
        where = ((pc.field("a") == a) & (pc.field("b") == b)) | ((pc.field("a") == b) & (pc.field("b") == a))
    rows = store.table(name, where=where).to_pylist()
    if kind == "link" and rows:
        entity = f"{rows[0]['a']},{rows[0]['b']}"
    if kind == "node" and rows:
        # the figure the changes are found on (``_node_figure``: it needs every node of a run, for the
        # run's middle node), so a shown level and a found change never disagree
        s = series(store, "node")
        if entity in s.entities:
            by_run = dict(zip(s.runs, s.values[s.entities.index(entity)].tolist(), strict=True))
            for r in rows:
                r["figure"] = by_run.get(str(r["run_id"]))
    return rows, [c for c in changes(store, (kind,)) if c.entity == entity]


def _when(text: str) -> datetime:
    t = datetime.fromisoformat(text)
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def env_by_run(store: HistoryStore, host: str) -> dict[str, dict[str, str]]:
    """One host's environment per run: ``run_id -> field -> value``."""
    env = store.table("env", columns=["run_id", "host", "field", "value"], where=pc.field("host") == host)
    return {run: fields.get(host, {}) for run, fields in _env_by_run(env).items()} if env.num_rows else {}
