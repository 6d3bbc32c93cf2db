"""Hosts files: one host (or Slurm hostlist) per line, the formats clusters already have.

Accepted, freely mixed::

    node01                          # bare name
    node02 slots=8                  # Open MPI / DeepSpeed
    node03:8                        # MPICH / Intel MPI
    gpu[01-16,20] slots=8 switch=leaf3 rack=r12
    big1 gpus=0-3  user=ops port=2222 python=/opt/conda/bin/python

Labels are ``key=value`` (``switch rack user port python gpus`` are understood, others are kept for
reports). Everything here ends up in SSH commands and HTML, so names and values are validated: no
shell metacharacters, no spaces, sane lengths. A bad line raises UsageError("FILE:LINE: why").
A host may appear twice only when the lines differ by ``gpus=`` (one node split in several ranks sets).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path

from netbench.inventory.hostlist import MAX_HOSTS, expand_hostlist

from netbench.common.errors import UsageError
from netbench.common.files import read_user_text

MAX_NAME = 253
MAX_VALUE = 256
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
_VALUE_RE = re.compile(r"^[A-Za-z0-9._:/@+,%=-]+$")
_USER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$")
_GPUS_RE = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$", re.ASCII)
_ZONE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # an IPv6 zone: an interface name or index
#: characters str.splitlines() ends a line at besides \n and \r: an editor shows one line, so a
#: hosts file line containing one is refused instead of silently becoming two hosts
_LINE_BREAKS = {"\x0b": "VT", "\x0c": "FF", "\x1c": "FS", "\x1d": "GS", "\x1e": "RS", "\x85": "NEL",
                "\u2028": "U+2028 LINE SEPARATOR", "\u2029": "U+2029 PARAGRAPH SEPARATOR"}
#: the largest hosts file read (100,000 hosts with labels are a few MB)


@dataclass
class HostEntry:
    """One host of a hosts file, with where it came from so errors and reports can point at it."""

    name: str
    slots: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    source: str = ""  # "FILE:LINE"
    line: str = ""  # the line as written (comment stripped)

    @property
    def gpus(self) -> str | None:
        return self.labels.get("gpus")

    @property
    def key(self) -> tuple[str, str | None]:
        """Identity in a hosts file: the name, plus ``gpus=`` for a node split into several entries."""
        return (self.name, self.gpus)


def validate_hostname(name: str) -> str | None:
    """Why ``name`` is not acceptable as a host name or address (None when it is)."""
    if not name:
        return "empty host name"
    if len(name) > MAX_NAME:
        return f"host name longer than {MAX_NAME} characters"
    if ":" in name:  # only an IPv6 literal may contain colons
        address, pct, zone = name.partition("%")
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            return "not a host name or IPv6 address"
        if pct and not _ZONE_RE.match(zone):  # the zone reaches SSH commands too: same rules as a name
            return f"bad IPv6 zone {zone!r} (want an interface name like eth0)"
        return None
    if not _NAME_RE.match(name):
        bad = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c in "_.-"))})
        if bad:
            return f"character(s) {''.join(bad)!r} not allowed in a host name"
        return "a host name must start with a letter, digit or '_'"
    if ".." in name:
        return "empty label ('..') in host name"
    return None


def expand_hostnames(expr: str, where: str, error: type[Exception] = UsageError) -> list[str]:
    """A host name or hostlist expression (``gpu[01-04]``) expanded, every name checked by
    ``validate_hostname``; ``error`` naming ``where`` otherwise (hosts files, Slurm's node lists)."""
    try:
        names = expand_hostlist(expr) if any(c in expr for c in "[],") else [expr]
    except ValueError as exc:
        raise error(f"{where}: {exc}") from None
    for name in names:
        why = validate_hostname(name)
        if why:
            raise error(f"{where}: {why}: {name[:60]!r}")
    return names


def _validate_label(key: str, value: str) -> str | None:
    if not _KEY_RE.match(key):
        return f"bad label name {key!r}"
    if not value:
        return f"label {key}= has no value"
    if len(value) > MAX_VALUE:
        return f"label {key}= longer than {MAX_VALUE} characters"
    if not _VALUE_RE.match(value):
        bad = sorted({c for c in value if not (c.isascii() and (c.isalnum() or c in "._:/@+,%=-"))})
        return f"character(s) {''.join(bad)!r} not allowed in label {key}="
    if key == "port" and not (value.isdigit() and 0 < int(value) < 65536):
        return f"port={value} is not a TCP port"
    if key == "user" and not _USER_RE.match(value):
        return f"user={value} is not a valid user name"
    if key == "gpus" and not _GPUS_RE.match(value):
        return f"gpus={value}: want GPU indices like 0,1 or 0-3"
    if key == "python" and (value.startswith("-") or value.endswith("/")):
        return f"python={value} is not a program path"
    return None


def _strip_comment(raw: str) -> str:
    """Drop ``# ...`` (at line start or after whitespace); '#' inside a token is an error later."""
    m = re.search(r"(^|\s)#", raw)
    return raw[: m.start()] if m else raw


def _parse_line(text: str, where: str) -> list[HostEntry]:
    tokens = text.split()
    spec, rest = tokens[0], tokens[1:]
    slots: int | None = None
    if ":" in spec and spec.count(":") == 1 and "[" not in spec.split(":")[1]:
        spec, _, n = spec.partition(":")
        if not (n.isascii() and n.isdigit()) or len(n) > 9 or int(n) < 1:
            raise UsageError(f"{where}: bad slot count {n!r} in {tokens[0]!r} (want host:N, N >= 1)")
        slots = int(n)
    names = expand_hostnames(spec, where)
    labels: dict[str, str] = {}
    for tok in rest:
        key, eq, value = tok.partition("=")
        if not eq:
            raise UsageError(f"{where}: expected key=value after the host name, got {tok!r}")
        key = key.replace("-", "_") if key in ("max-slots",) else key
        why = _validate_label(key, value)
        if why:
            raise UsageError(f"{where}: {why}")
        if key in labels or (key == "slots" and slots is not None):
            raise UsageError(f"{where}: {key}= given twice")
        if key == "slots":
            if not value.isdigit() or len(value) > 9 or int(value) < 1:
                raise UsageError(f"{where}: slots={value} is not a positive number")
            slots = int(value)
            continue
        labels[key] = value
    line = text.strip()
    return [HostEntry(name=n, slots=slots, labels=dict(labels), source=where, line=line) for n in names]


def parse_hosts_text(text: str, source: str = "<hosts>") -> list[HostEntry]:
    """Parse hosts-file text; ``source`` names the file in error messages (``source:LINE: why``)."""
    entries: list[HostEntry] = []
    seen: dict[tuple[str, str | None], HostEntry] = {}
    first_of: dict[str, HostEntry] = {}  # a name's first entry, whatever its gpus=
    whole: dict[str, HostEntry] = {}  # a name's entry without gpus= (the whole node), if any
    for lineno, raw in enumerate(text.split("\n"), 1):
        where = f"{source}:{lineno}"
        if "\x00" in raw:
            raise UsageError(f"{where}: NUL byte (is this a binary file?)")
        if breaks := sorted({_LINE_BREAKS[c] for c in raw if c in _LINE_BREAKS}):
            raise UsageError(f"{where}: {', '.join(breaks)} inside the line; use one host per line")
        body = _strip_comment(raw).strip()
        if not body:
            continue
        for e in _parse_line(body, where):
            # the same name twice: only as parts of one node, each with its own gpus= (a dict look-up
            # each, so 100,000 parts of one name stay linear)
            first = seen.get(e.key) or (first_of.get(e.name) if e.gpus is None else whole.get(e.name))
            if first is not None:
                raise UsageError(
                    f"{where}: duplicate host {e.name} (first at {first.source}); list a node twice only "
                    "with different gpus= labels")
            seen[e.key] = e
            first_of.setdefault(e.name, e)
            if e.gpus is None:
                whole[e.name] = e
            entries.append(e)
        if len(entries) > MAX_HOSTS:  # per file, not per expression: 1,000 lines of node[1-99999] too
            raise UsageError(f"{where}: {source} lists more than {MAX_HOSTS} hosts")
    return entries


def parse_hosts_file(path: str | Path) -> list[HostEntry]:
    """Read and parse a hosts file. Missing/unreadable/empty files raise UsageError (exit 2)."""
    p = Path(path)
    text = read_user_text(p, "hosts file")
    entries = parse_hosts_text(text, str(p))
    if not entries:
        raise UsageError(f"{p}: no hosts in file")
    return entries
