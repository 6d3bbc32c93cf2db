"""Small helpers shared by the parsers: N/A handling, numbers with units, ANSI codes, safe XML."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from netbench.inventory.model import GPU

_NA = {"", "n/a", "[n/a]", "na", "none", "unknown", "[unknown error]", "not supported",
       "[not supported]", "redacted", "[redacted]", "<not displayed>", "not available"}
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_DOCTYPE = re.compile(r"<!DOCTYPE[^>\[]*(\[.*?\])?\s*>", re.S | re.I)


@dataclass
class GpuReport:
    """What the nvidia-smi parser (``nvidia-smi -q -x``) returns."""

    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: list[GPU] = field(default_factory=list)


def clean(value: str | None) -> str | None:
    """Strip a value; ``N/A``, ``[Not Supported]``, ``REDACTED`` and friends become None."""
    if value is None:
        return None
    v = value.strip()
    return None if v.lower() in _NA else v


def clean_serial(value: str | None) -> str | None:
    """A serial number, or None when it is N/A, REDACTED or all zeros (cloud GPUs report 0000...)."""
    v = clean(value)
    if v is None or set(v) <= {"0"}:
        return None
    return v


def first_int(value: str | None) -> int | None:
    """The first integer in ``value`` ('16x' -> 16, '143771 MiB' -> 143771, 'N/A' -> None)."""
    v = clean(value)
    if v is None:
        return None
    m = re.search(r"-?\d+", v)
    return int(m.group(0)) if m else None


def first_float(value: str | None) -> float | None:
    """The first number in ``value`` as float ('400 Gb/sec (4X NDR)' -> 400.0)."""
    v = clean(value)
    if v is None:
        return None
    m = re.search(r"-?\d+(?:\.\d+)?", v)
    return float(m.group(0)) if m else None


def strip_ansi(text: str) -> str:
    """Remove terminal escape codes (nvidia-smi topo -m underlines its header row)."""
    return _ANSI.sub("", text)


def norm_bus_id(value: str | None) -> str | None:
    """PCI bus ids in lower case ('00000000:0C:00.0' -> '00000000:0c:00.0')."""
    v = clean(value)
    return v.lower() if v else None


def safe_xml(text: str) -> ET.Element:
    """Parse XML without fetching or expanding anything: the DOCTYPE (nvsmi_device_v13.dtd) is
    stripped and any entity declaration is refused, so no DTD is loaded and no entity bomb expands."""
    if "<!ENTITY" in text.upper():
        raise ValueError("XML with entity declarations is refused")
    body = _DOCTYPE.sub("", text, count=1)
    if "<!DOCTYPE" in body.upper():
        raise ValueError("XML with more than one DOCTYPE is refused")
    start = body.find("<")
    if start < 0:
        raise ValueError("no XML element found")
    try:
        return ET.fromstring(body[start:].strip())
    except ET.ParseError as e:
        raise ValueError(f"malformed XML: {e}") from e


def key_values(text: str, sep: str = ":") -> dict[str, str]:
    """``key<sep> value`` lines into a dict (first occurrence wins, keys stripped)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if sep in line:
            k, v = line.split(sep, 1)
            out.setdefault(k.strip(), v.strip())
    return out


def norm_guid(value: str | None) -> str | None:
    """GUIDs in one form, ``0x`` + 16 lower-case hex digits, whatever the tool printed:
    ``0xa088c20300e3142a`` (ibstat), ``b859:9f03:0022:626e`` (ibv_devinfo, sysfs), ``(100007)``."""
    v = clean(value)
    if v is None:
        return None
    h = v.lower().strip("()")
    h = h[2:] if h.startswith("0x") else h
    h = h.replace(":", "")
    if not h or not re.fullmatch(r"[0-9a-f]{1,16}", h):
        return None
    return "0x" + h.rjust(16, "0")


def port_state(value: str | None) -> str | None:
    """One word for a port state: ``4: ACTIVE`` / ``PORT_ACTIVE (4)`` / ``Active`` -> ``Active``;
    ``5: LinkUp`` -> ``LinkUp``."""
    v = clean(value)
    if v is None:
        return None
    v = re.sub(r"^\d+\s*:\s*", "", v)
    v = re.sub(r"\s*\(\d+\)\s*$", "", v)
    v = re.sub(r"^PORT_", "", v)
    return v.capitalize() if v.isupper() else v
