"""The report policy: what "healthy" means for this fleet (TOML, ``--policy FILE``).

Every number a rule compares against that is not measured from the fleet itself lives here, so a
site can say "our HCAs must run firmware >= 28.39.1002, we expect 8 GPUs and 400 Gb/s links, and
outdated firmware is a failure" without touching code. Without a file the defaults apply: rules
then judge nodes and pairs against their peers (median/MAD), never against a fixed guess.

Loading is strict on purpose: an unknown key is an error that names it, because a misspelt
threshold silently falling back to its default is the worst kind of policy bug. So is a value
outside its vocabulary (a collective, pattern, hop class, rule id, severity, version component or
reference scope): a floor for ``all_redcue`` would match no row and never apply. Each is refused
with the nearest known word (``did you mean 'all_reduce'?``).
See ``docs/policy.example.toml`` for every key, documented.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import types
import typing
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from netbench.collectives.names import IMPORTED, MEASURED, ROW_PATTERNS, canonical
from netbench.collectives.sizes import parse_size
from netbench.inventory.topology import HOP_CLASSES, is_hop_class
from netbench.reports.rule_ids import ALL_IDS

from netbench.common.files import parse_toml, read_user_text
from netbench.common.findings import SEVERITIES
from netbench.common.text import did_you_mean

#: Components whose versions are compared (inventory field -> meaning), shared with the rules.
VERSION_COMPONENTS = ("driver", "vbios", "nic_firmware", "nic_driver", "ofed", "nccl", "cuda")


class PolicyError(ValueError):
    """A policy file that cannot be used; the message names the file and the key."""


Bytes = Annotated[int, "a size (a whole number of bytes, or a string such as \"64M\")"]
"""A field that takes a size: an integer or ``"64M"`` (``_size`` turns it into bytes)."""

COLLECTIVES = MEASURED + IMPORTED
"""What ``collective =`` may name: what netbench measures or imports (rows carry nothing else)."""


def _one_of(value: Any, known: Collection[str], where: str, what: str) -> str:
    """``value`` if it is one of ``known``; PolicyError naming ``where``, ``what`` it should be and
    the nearest word else."""
    if isinstance(value, str) and value in known:
        return value
    raise PolicyError(f"{where} = {value!r} is not a {what}{did_you_mean(value, known)}")


def _collective(value: Any, where: str) -> str:
    """A collective as rows spell it (``allreduce`` -> ``all_reduce``), else PolicyError."""
    key = canonical(value) if isinstance(value, str) else value
    if key in COLLECTIVES:
        return key
    raise PolicyError(f"{where} = {value!r} is not a collective{did_you_mean(key, COLLECTIVES)}")


@dataclass
class Thresholds:
    """Statistical and practical limits used by the rules. Factors are ratios to the peers' level."""

    slow_pair_factor: float = 0.8
    """A pair is slow when its busbw is at most this fraction of what its hop class and its two
    nodes predict (0.8: 20% or more below); a node's rail (``--pattern rail``) when its best group
    is at most this fraction of the median of the same rail's groups without it."""
    slow_node_factor: float = 0.9
    """A node's pair slower than this fraction of its hop class counts as one of its slow pairs;
    a re-test confirms a node whose pairs with known-good partners run at most this fraction of the
    controls; the uplink verdicts read it as "fine below the switch". Whether a node is reported at
    all, and how severely, is ``warn_floor`` and ``fail_floor``."""
    warn_floor: float = 0.05
    """A node, link or switch certainly slower than its peers (past the family-wise bar) is a warning
    when the near end of its effect's 95% interval is at least this much slower (0.05: 5%)."""
    fail_floor: float = 0.10
    """... and a failure when, besides, its interval reaches this much slower (0.10: a node measured
    10% slow fails whichever side of 10% the noise put its estimate). Past the bar but nearer than
    ``warn_floor``: info, reported with its interval."""
    single_sample: str = "warn"
    """The most a finding resting on one sample per pair without a re-test may be (an imported or
    old run): ``info`` makes every such finding a suspect to re-test; the family-wise bar under
    the learned noise tail holds either way."""
    mad_k: float = 4.0
    """Robust z-score (in units of 1.4826*MAD) a deviation must at least reach. For many tests the
    rules raise it further (family-wise control, ``fwer``), so 500k pairs do not yield false
    alarms from noise."""
    fwer: float = 0.05
    """Family-wise error of warn/fail slow node and link findings (Holm over every pair, or every
    node and hop class, tested): the chance that a healthy fleet raises even one, at any size."""
    fdr: float = 0.05
    """False-discovery rate of the "suspect: re-test" band (Benjamini-Hochberg over the same tests):
    evidence short of the family-wise bar is listed as info, never as a warning."""
    large_min_bytes: Bytes = 64 << 20
    """Sizes at or above this are "large" (bandwidth-bound); if none were measured, the largest."""
    large_sizes_max: int = 3
    """At most this many of the largest sizes are used for per-pair busbw."""
    small_max_bytes: Bytes = 64 << 10
    """Sizes at or below this are latency-bound: regressions are judged on time, not busbw."""
    min_partners: int = 3
    """A node needs this many measured partners before it is judged (else its pairs are judged
    against their hop class only)."""
    regression_busbw_factor: float = 0.9
    """Large-message busbw below this fraction of the baseline is a regression."""
    regression_time_factor: float = 1.25
    """Small-message time above this multiple of the baseline is a regression."""
    straggler_fraction: float = 0.5
    """A host that is last in at least this fraction of world/ring collectives is a straggler."""
    straggler_min_rows: int = 5
    """... counted over at least this many rows."""
    straggler_min_excess: float = 0.02
    """... and on average at least this much slower (fraction) than the median rank."""
    cross_spine_warn_ratio: float = 0.5
    """The oversubscription the fabric may have, as the fraction of a NIC a host gets across an uplink
    tier when all of them cross it (0.5: 2:1). Cross-spine pairs more than ``slow_node_factor`` below
    this fraction of same-leaf pairs are a warning; two sibling switches whose pairs with each other
    carry, in a round, that far below this share of the smaller side's NICs (per tier) are a slow
    uplink of one of the two (``slow_switch``)."""
    max_findings_per_rule: int = 200
    """Keep the report readable at 1,000 nodes: beyond this, a rule's findings are summarised."""
    below_ceiling_factor: float = 0.5
    """A headline busbw (large sizes, at least ``large_min_bytes``) below this fraction of its
    physical ceiling (NIC or NVLink rate from the inventory) is ``below_ceiling``."""
    below_reference_factor: float = 0.8
    """A headline of nodes whose NICs are unknown (an import without ``--nics``) below this
    fraction of the low end of its platform's published figure is ``below_reference``: a
    measured figure, not a physical bound, so the bar is closer than the ceiling's."""

    def __post_init__(self) -> None:
        for name in (
            "slow_pair_factor",
            "slow_node_factor",
            "regression_busbw_factor",
            "straggler_fraction",
            "cross_spine_warn_ratio",
            "below_ceiling_factor",
            "below_reference_factor",
        ):
            v = getattr(self, name)
            if not 0 < v <= 1:
                raise PolicyError(f"thresholds.{name} must be in (0, 1], got {v}")
        if self.regression_time_factor < 1:
            raise PolicyError(
                f"thresholds.regression_time_factor must be >= 1, got {self.regression_time_factor}"
            )
        for name in ("fwer", "fdr"):
            if not 0 < getattr(self, name) < 1:
                raise PolicyError(f"thresholds.{name} must be in (0, 1), got {getattr(self, name)}")
        if self.mad_k <= 0:
            raise PolicyError(f"thresholds.mad_k must be > 0, got {self.mad_k}")
        for name in ("large_min_bytes", "small_max_bytes"):
            setattr(self, name, _size(getattr(self, name), f"thresholds.{name}"))
        for name in ("large_sizes_max", "min_partners", "straggler_min_rows", "max_findings_per_rule"):
            if int(getattr(self, name)) < 1:
                raise PolicyError(f"thresholds.{name} must be >= 1")
        if self.straggler_min_excess < 0:
            raise PolicyError("thresholds.straggler_min_excess must be >= 0")
        if not 0 <= self.warn_floor <= self.fail_floor < 1:
            raise PolicyError(
                f"thresholds: need 0 <= warn_floor <= fail_floor < 1, got {self.warn_floor} and "
                f"{self.fail_floor}"
            )
        self.single_sample = _one_of(self.single_sample, SEVERITIES, "thresholds.single_sample", "severity")


@dataclass
class ExpectedBusbw:
    """A floor for busbw: rows matching collective/pattern/hop class at sizes >= min_bytes."""

    collective: str
    busbw_GBps: float
    min_bytes: Bytes = 0
    pattern: str | None = None  # None: any pattern
    hop_class: str = "any"  # a hop class (netbench.inventory.topology) or any; pairs only

    def __post_init__(self) -> None:
        self.collective = _collective(self.collective, "expect.busbw.collective")
        if self.pattern is not None:
            self.pattern = _one_of(self.pattern, ROW_PATTERNS, "expect.busbw.pattern", "pattern")
        self.min_bytes = _size(self.min_bytes, "expect.busbw.min_bytes")
        if not 0 < self.busbw_GBps:
            raise PolicyError(f"expect.busbw.busbw_GBps must be > 0, got {self.busbw_GBps}")
        hop = self.hop_class
        if not (isinstance(hop, str) and (hop == "any" or is_hop_class(hop))):
            raise PolicyError(
                f"expect.busbw.hop_class = {self.hop_class!r} is not a hop class (intra, leaf, spine, core, "
                f"tier-N for N >= 4, unknown or any){did_you_mean(self.hop_class, (*HOP_CLASSES, 'any'))}"
            )


@dataclass
class Expectations:
    """What every node should have. None: judge against the fleet's majority only."""

    gpus_per_node: int | None = None
    link_rate_gbps: float | None = None
    nvlinks_up: bool = True
    """Every NVLink a GPU reports should be up."""
    busbw: list[ExpectedBusbw] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.gpus_per_node is not None and self.gpus_per_node < 0:
            raise PolicyError("expect.gpus_per_node must be >= 0")
        if self.link_rate_gbps is not None and self.link_rate_gbps <= 0:
            raise PolicyError("expect.link_rate_gbps must be > 0")
        self.busbw = [
            b if isinstance(b, ExpectedBusbw) else _build(ExpectedBusbw, b, f"expect.busbw[{i}]")
            for i, b in enumerate(self.busbw)
        ]


REFERENCE_SCOPES = ("intra", "per_nic", "platform")


@dataclass
class Reference:
    """A published busbw figure with its source (``reports/assets/references.toml`` bundles some; a
    policy's ``[[reference]]`` adds more, or replaces a bundled one of the same ``id``)."""

    id: str
    collective: str
    # intra: one node over NVLink; per_nic: across nodes, per NIC of the slowest node; platform:
    # across nodes of a named system (GPU model and count) whose NICs nobody told us (an import)
    scope: str
    low_GBps: float
    high_GBps: float
    source: str
    gpu: list[str] = field(default_factory=list)  # substrings of the GPU name; empty: any
    gpus: int = 0  # GPUs per node it was measured with; 0: any
    nic_gbps: float | None = None  # per_nic: the port rate it applies to
    platform: str = ""  # platform: the system it assumes ("DGX H100: 8 x 400 Gb/s ConnectX-7")
    algo: str = "default"
    note: str = ""

    def __post_init__(self) -> None:
        where = f"reference {self.id!r}"
        self.collective = _collective(self.collective, f"{where}: collective")
        _one_of(self.scope, REFERENCE_SCOPES, f"{where}: scope", "reference scope")
        if not 0 < self.low_GBps <= self.high_GBps:
            raise PolicyError(f"{where}: need 0 < low_GBps <= high_GBps")
        if self.scope == "per_nic" and not (self.nic_gbps and self.nic_gbps > 0):
            raise PolicyError(f"{where}: a per_nic reference needs nic_gbps > 0")
        if self.nic_gbps is not None and not self.nic_gbps > 0:
            raise PolicyError(f"{where}: nic_gbps must be > 0, got {self.nic_gbps}")
        if self.gpus < 0:
            raise PolicyError(f"{where}: gpus must be >= 0 (0: any), got {self.gpus}")
        if self.scope == "platform" and not (self.gpu and self.gpus and self.platform.strip()):
            raise PolicyError(f"{where}: a platform reference needs gpu, gpus and the platform it assumes")
        if not self.source.strip():
            raise PolicyError(f"{where}: a reference needs its source")
        if not isinstance(self.gpu, list) or not all(isinstance(g, str) and g for g in self.gpu):
            raise PolicyError(f"{where}: gpu must be a list of GPU name parts")


@dataclass
class Versions:
    """Minimum versions per component. A value is a version string, or for ``nic_firmware`` /
    ``nic_driver`` also a table keyed by HCA type (``{MT4129 = "28.39.1002"}``) since each NIC
    model has its own firmware line."""

    minimum: dict[str, str | dict[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, value in self.minimum.items():
            if key not in VERSION_COMPONENTS:
                known = did_you_mean(key, VERSION_COMPONENTS)
                raise PolicyError(f"unknown key versions.minimum.{key}{known}")
            if isinstance(value, dict):
                if key not in ("nic_firmware", "nic_driver"):
                    raise PolicyError(f"versions.minimum.{key} must be a version string")
                for k, v in value.items():
                    if not isinstance(v, str):
                        raise PolicyError(f"versions.minimum.{key}.{k} must be a string")
            elif not isinstance(value, str):
                raise PolicyError(f"versions.minimum.{key} must be a version string, got {value!r}")

    def minimum_for(self, component: str, hca_type: str | None = None) -> str | None:
        value = self.minimum.get(component)
        if isinstance(value, dict):
            return value.get(hca_type or "") or value.get("default")
        return value


@dataclass
class Policy:
    thresholds: Thresholds = field(default_factory=Thresholds)
    expect: Expectations = field(default_factory=Expectations)
    versions: Versions = field(default_factory=Versions)
    severity: dict[str, str] = field(default_factory=dict)
    """Per-rule severity overrides, e.g. ``outdated_firmware = "fail"``."""
    references: list[Reference] = field(default_factory=list)
    """Published figures to compare headlines with, besides (or replacing, by id) the bundled ones."""
    source: str | None = None  # the file it came from, for the report

    def __post_init__(self) -> None:
        for rule, sev in self.severity.items():
            if rule not in ALL_IDS:
                raise PolicyError(f"unknown rule severity.{rule}{did_you_mean(rule, ALL_IDS)}")
            _one_of(sev, SEVERITIES, f"severity.{rule}", "severity")


def _size(value: Any, where: str) -> int:
    try:
        return parse_size(value)
    except (ValueError, TypeError) as exc:
        raise PolicyError(f"{where}: {exc}") from None


def _fits(value: Any, hint: Any) -> bool:
    """Whether a TOML value has the type a field declares, before any comparison sees it: a bool is
    no number (``true < 1`` holds in Python, so ``slow_pair_factor = true`` would pass as 1.0), and a
    date or a list compared with a number is Python's ``'<' not supported``, naming no key. Tables
    and arrays are checked by their own record (``Versions``, ``ExpectedBusbw``) for what they hold."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:  # Bytes: an integer, or a size string for parse_size
        return isinstance(value, str) or _fits(value, args[0])
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args if a is not type(None))
    if origin is list:
        item = args[0] if args else Any
        plain = item in (str, int, float, bool)
        return isinstance(value, list) and (not plain or all(_fits(v, item) for v in value))
    if origin is dict:
        return isinstance(value, dict)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint in (bool, str):
        return isinstance(value, hint)
    return True  # Any


def _expected(hint: Any) -> str:
    """What a field takes, in words, for the error line."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return args[1]
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_expected(a) for a in args if a is not type(None))
    if origin is list:
        item = args[0] if args else Any
        return "a list of strings" if item is str else "an array of tables"
    if origin is dict:
        return "a table"
    words = {float: "a number", int: "a whole number", bool: "true or false", str: "a string"}
    return words.get(hint, "a value")


def _shown(value: Any) -> str:
    """A value as the TOML file wrote it (``true``, ``1979-05-27``, ``[1, 2]``), cut to a line."""
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, datetime.date | datetime.time):
        text = value.isoformat()
    else:
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _build(cls: type, data: Any, where: str) -> Any:
    """Build a dataclass from a TOML table, naming any unknown key."""
    if not isinstance(data, dict):
        raise PolicyError(f"{where} must be a table")
    names = {f.name for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls, include_extras=True)
    for key in data:
        if key not in names:
            raise PolicyError(f"unknown key {where}.{key}{did_you_mean(key, names)}")
        value = data[key]
        if isinstance(value, float) and not math.isfinite(value):  # TOML has nan and inf
            raise PolicyError(f"{where}.{key} = {value} is not a finite number")
        if not _fits(value, hints[key]):
            raise PolicyError(f"{where}.{key} = {_shown(value)} is not {_expected(hints[key])}")
    try:
        return cls(**data)
    except TypeError as exc:  # a required field missing
        raise PolicyError(f"{where}: {exc}") from None


def policy_from_dict(data: dict[str, Any], source: str | None = None) -> Policy:
    names = {"thresholds", "expect", "versions", "severity", "reference"}
    for key in data:
        if key not in names:
            raise PolicyError(f"unknown key {key}{did_you_mean(key, names)}")
    kw: dict[str, Any] = {}
    if "thresholds" in data:
        kw["thresholds"] = _build(Thresholds, data["thresholds"], "thresholds")
    if "expect" in data:
        kw["expect"] = _build(Expectations, data["expect"], "expect")
    if "versions" in data:
        kw["versions"] = _build(Versions, data["versions"], "versions")
    if "severity" in data:
        if not isinstance(data["severity"], dict):
            raise PolicyError("severity must be a table of rule = severity")
        kw["severity"] = dict(data["severity"])
    if "reference" in data:
        kw["references"] = build_references(data["reference"], "reference")
    return Policy(source=source, **kw)


def build_references(entries: Any, where: str) -> list[Reference]:
    """``[[reference]]`` tables -> References, strict like every policy key."""
    if not isinstance(entries, list):
        raise PolicyError(f"{where} must be an array of tables ([[reference]])")
    return [_build(Reference, e, f"{where}[{i}]") for i, e in enumerate(entries)]


def load_policy(path: str | Path | None = None) -> Policy:
    """Load a TOML policy, or the defaults when ``path`` is None. Raises PolicyError (a ValueError)
    with the file and the offending key in the message."""
    if path is None:
        return Policy()
    path = Path(path)
    data = parse_toml(read_user_text(path, "policy file", PolicyError), str(path), PolicyError)
    try:
        return policy_from_dict(data, source=str(path))
    except PolicyError as exc:
        raise PolicyError(f"{path}: {exc}") from None
