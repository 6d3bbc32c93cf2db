"""Which host a failed row blames, from the coordinator's words (``netbench.coordinator``'s
``_failed_group`` texts): a failed pair is evidence against the host its error names (dead, hung,
cut off), never against its partner, and a pair that never ran measured nothing. Read by the
errors rule, the pair model (rounds a loss disturbed) and the re-test judge."""

from __future__ import annotations

import re
from typing import Any

_BLAME = re.compile(r"^(?:not run: host |(?:hung|lost): rank\(s\) \[[^\]]*\] on )(.+?)(?: is down\b| \(|$)")
"""The coordinator's words for a group that failed because of some of its hosts
(``netbench.coordinator``: "not run: host X is down (...)", "hung: rank(s) [3] on X", "lost: rank(s)
[1] on X, Y (...)"): the hosts it names."""


def blamed_hosts(error: Any, hosts: list[str]) -> set[str]:
    """The hosts of a failed row that its error names as the cause (a dead, hung or unreachable
    host), of ``hosts`` only: a host's text is untrusted and names nothing else. Empty when the
    error blames no host (a timeout with every rank alive, a collective's own error)."""
    m = _BLAME.match(error) if isinstance(error, str) else None
    return set(m.group(1).split(", ")) & set(hosts) if m else set()


def never_ran(error: Any) -> bool:
    """A failed row of a group that never ran ("not run: host X is down"): no measurement."""
    return isinstance(error, str) and error.startswith("not run:")
