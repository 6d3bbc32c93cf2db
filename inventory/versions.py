"""Parse and compare the version strings that GPU-cluster tools print.

The firmware/driver rules compare versions across a fleet, and the strings come in many shapes:
``580.159.04`` (driver), ``28.39.1002`` (NIC firmware), ``96.00.A5.00.1A`` (VBIOS, hex fields),
``MLNX_OFED_LINUX-23.10-1.1.9.0`` (OFED), ``NCCL version 2.28.9+cuda13.0``, ``V13.0.88`` (nvcc),
``28.39.3560 (MT_0000000838)`` (ethtool). A strict parser would refuse half of them, so this one is
tolerant: it finds the first version-like token in the string and turns it into a sortable key.

Rules (why they are what they are):
- Noise before the first digit is dropped (``MLNX_OFED_LINUX-``, ``NCCL version``, ``V``), as is text
  after the token (``(MT_...)``, ``(OFED-...)``).
- A ``+local`` suffix (``+cuda13.0``, ``+cpu``) is build metadata, not a newer release: it is kept in
  ``Version.local`` but ignored by comparisons.
- Fields are split on ``.``, ``-``, ``_`` and letter/digit boundaries; numbers compare as numbers
  (``04`` == ``4``, ``1002`` > ``999``).
- VBIOS strings (four or more fields of exactly two hex digits) compare field by field as hex, so
  ``96.00.A5.00.1A`` > ``96.00.99.00.01``. For two-digit decimal fields hex and decimal order agree.
- Pre-release words (``rc``, ``a``, ``alpha``, ``b``, ``beta``, ``dev``, ``pre``) sort before the
  release, other words too (``1.0.x`` < ``1.0`` < ``1.0.1``); only numbers make a version newer.
- Trailing zero fields do not matter: ``13.0`` == ``13.0.0`` == ``13``.
- A string with no digits gives an *unknown* version that sorts below every known one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Version", "parse_version", "compare_versions", "max_version"]

_TOKEN = re.compile(r"\d[0-9A-Za-z]*(?:[._\-~][0-9A-Za-z]+)*(?:\+[0-9A-Za-z._\-]+)?")
_VBIOS = re.compile(r"^[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f]{2}){3,}$")
_PRE_RELEASE = {"a", "alpha", "b", "beta", "c", "rc", "pre", "preview", "dev"}

# Each field is (rank, number, word): pre-release words rank 0, other words rank 1, numbers rank 2.
# The shorter key is padded with numeric zeros, so 13 == 13.0.0 and 2.0rc1 < 2.0.
_Field = tuple[int, int, str]
_PAD: _Field = (2, 0, "")


@dataclass(frozen=True, eq=False)
class Version:
    """A comparable version. ``raw`` is the input, ``key`` the sortable fields, ``local`` the +suffix."""

    raw: str
    key: tuple[_Field, ...] = field(default=())
    local: str | None = None
    known: bool = False  # False when the string had no version in it (sorts below every known one)

    @property
    def core(self) -> str:
        """The version token without prefix noise or local suffix, e.g. ``23.10-1.1.9.0``."""
        m = _TOKEN.search(self.raw or "")
        return m.group(0).split("+", 1)[0] if m else ""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return _compare(self, other) == 0

    def __hash__(self) -> int:
        return hash((self.known, self.key))

    def __lt__(self, other: Version) -> bool:
        return _compare(self, other) < 0

    def __le__(self, other: Version) -> bool:
        return _compare(self, other) <= 0

    def __gt__(self, other: Version) -> bool:
        return _compare(self, other) > 0

    def __ge__(self, other: Version) -> bool:
        return _compare(self, other) >= 0

    def __str__(self) -> str:
        return self.raw


def _fields(core: str) -> tuple[_Field, ...]:
    if _VBIOS.match(core):
        out = [(2, int(p, 16), "") for p in core.split(".")]
    else:
        out = []
        for tok in re.findall(r"\d+|[A-Za-z]+", core):
            if tok.isdigit():
                out.append((2, int(tok), ""))
            else:
                word = tok.lower()
                out.append((0, 0, word) if word in _PRE_RELEASE else (1, 0, word))
    while out and out[-1] == (2, 0, ""):
        out.pop()  # 13.0 == 13.0.0 == 13
    return tuple(out)


def parse_version(s: str | None) -> Version:
    """Parse any version-bearing string; never raises (no digits → an unknown version)."""
    raw = "" if s is None else str(s)
    m = _TOKEN.search(raw)
    if not m:
        return Version(raw=raw)
    token = m.group(0)
    core, _, local = token.partition("+")
    return Version(raw=raw.strip(), key=_fields(core), local=local or None, known=True)


def _compare(a: Version, b: Version) -> int:
    if a.known != b.known:
        return 1 if a.known else -1
    n = max(len(a.key), len(b.key))
    ka = a.key + (_PAD,) * (n - len(a.key))
    kb = b.key + (_PAD,) * (n - len(b.key))
    return (ka > kb) - (ka < kb)


def compare_versions(a: str | Version | None, b: str | Version | None) -> int:
    """-1, 0 or 1 as ``a`` is older than, the same as, or newer than ``b`` (strings or Versions)."""
    va = a if isinstance(a, Version) else parse_version(a)
    vb = b if isinstance(b, Version) else parse_version(b)
    return _compare(va, vb)


def max_version(values: list[str]) -> str | None:
    """The newest of several version strings (the first one among equals), None for an empty list."""
    best: str | None = None
    for v in values:
        if best is None or compare_versions(v, best) > 0:
            best = v
    return best
