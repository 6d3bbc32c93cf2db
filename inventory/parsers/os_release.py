"""``/etc/os-release``: ``KEY=value`` lines with optional shell-style quotes (never shell-evaluated)."""

from __future__ import annotations

import re


def parse_os_release(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([A-Z0-9_]+)=(.*)$", line)
        if not m:
            continue
        value = m.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
            if m.group(2).strip()[0] == '"':
                value = re.sub(r'\\([\\$"`])', r"\1", value)
        out[m.group(1)] = value
    return out


def pretty_name(text: str) -> str | None:
    """``PRETTY_NAME`` or ``NAME VERSION_ID``: what a report shows as the OS."""
    kv = parse_os_release(text)
    if kv.get("PRETTY_NAME"):
        return kv["PRETTY_NAME"]
    name = " ".join(v for v in (kv.get("NAME"), kv.get("VERSION_ID")) if v)
    return name or None
