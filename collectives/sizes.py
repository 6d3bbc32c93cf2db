"""Message sizes: parsing ``8``, ``64K``, ``1M``, ``8G`` and building nccl-tests' size sweep.

Suffixes are binary (K = 2^10 ...), exactly as nccl-tests' ``-b/-e`` parse them; bandwidths are
decimal GB/s (1e9), also as nccl-tests prints them. Mixing the two is intentional and documented.
"""

from __future__ import annotations

import re

_SUFFIX = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE | re.ASCII)
#: the largest size accepted (1 PiB: far above any GPU's memory, far below a float's precision limit)
MAX_SIZE = 1 << 50


def parse_size(text: str | int) -> int:
    """Parse a byte count with an optional binary suffix: ``"64K" -> 65536``.

    Raises ValueError with a message fit for the user on anything else.
    """
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"size must not be negative: {text}")
        return text
    m = _SIZE_RE.match(str(text))
    if not m:
        raise ValueError(f"bad size {text!r}: use a number with an optional K, M, G or T suffix (e.g. 64K)")
    too_large = f"bad size {_shown(str(text))}: larger than {format_size(MAX_SIZE)}"
    if len(m.group(1)) > 20:  # a float of 400 digits is inf (and int() of 5000 raises)
        raise ValueError(too_large)
    value = float(m.group(1)) * _SUFFIX[m.group(2).upper()]
    if value > MAX_SIZE:
        raise ValueError(too_large)
    if value != int(value):
        raise ValueError(f"bad size {text!r}: not a whole number of bytes")
    return int(value)


def _shown(text: str) -> str:
    """The value for an error line: quoted, and cut when a paste made it hundreds of characters long."""
    return repr(text) if len(text) <= 32 else f"{text[:24]!r}... ({len(text)} characters)"


def format_size(nbytes: int) -> str:
    """The shortest exact binary form: 65536 -> '64K', 1000 -> '1000'."""
    for suffix in ("T", "G", "M", "K"):
        unit = _SUFFIX[suffix]
        if nbytes >= unit and nbytes % unit == 0:
            return f"{nbytes // unit}{suffix}"
    return str(nbytes)


def size_sweep(min_bytes: int, max_bytes: int, factor: int = 2, step_bytes: int = 0) -> list[int]:
    """Sizes from min to max: multiplied by ``factor`` (nccl-tests -f) or stepped by ``step_bytes`` (-i).

    ``max_bytes`` is included when the progression lands on it, as in nccl-tests.
    """
    if min_bytes > max_bytes:
        raise ValueError(f"min size {min_bytes} is larger than max size {max_bytes}")
    if step_bytes:
        return list(range(min_bytes, max_bytes + 1, step_bytes))
    if factor < 2:
        raise ValueError(f"factor must be >= 2, got {factor}")
    sizes: list[int] = []
    size = max(min_bytes, 1)
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    if min_bytes == 0:
        sizes.insert(0, 0)
    return sizes
