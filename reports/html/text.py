"""Escaping and JSON for the page: what a host reported is untrusted (the package docstring says how it is
kept inert)."""

from __future__ import annotations

import html
import json
from typing import Any

import numpy as np


def e(value: Any) -> str:
    """Escape anything for HTML text or attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def safe_json(data: Any) -> str:
    """JSON safe inside <script>: no '<', '>', '&' (so no '</script>'), no U+2028/9 line breaks."""
    text = json.dumps(data, separators=(",", ":"), default=_json_default, allow_nan=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return None if not np.isfinite(o) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
