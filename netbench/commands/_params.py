"""click parameter types: sizes, comma lists, durations, bounded numbers. Bad values raise
BadParameter (exit 2: one line, never a traceback).

Every number an option takes goes through ``Number`` (a finite float in a range) or ``Count`` (an
integer in a range with an upper end): ``nan`` compares false with every bound, so click's own
``FloatRange`` lets it through, and a count without an upper end lets ``10**30`` rounds through to a
loop that never ends. ``tests/test_input_bounds.py`` walks every command's options for these types.
"""

from __future__ import annotations

import math
import re

import click

from netbench.collectives.sizes import parse_size


class SizeType(click.ParamType):
    name = "SIZE"

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201 - click's signature
        if isinstance(value, int):
            return value
        try:
            return parse_size(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class CsvList(click.ParamType):
    """``a,b,c`` -> ['a', 'b', 'c'], each checked by ``check`` (which raises ValueError and returns the
    item's canonical form). An item given twice (``all_reduce,allreduce``, ``1M,1024K``) is kept once,
    in its first place: a repeat would be measured again, for nothing."""

    name = "LIST"

    def __init__(self, check=None):  # noqa: ANN001
        self.check = check

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201
        if isinstance(value, list):
            return value
        items = [v.strip() for v in str(value).split(",") if v.strip()]
        if not items:
            self.fail("empty list", param, ctx)
        if not self.check:
            return list(dict.fromkeys(items))
        out = []
        for item in items:
            try:
                out.append(self.check(item))
            except ValueError as exc:
                self.fail(str(exc), param, ctx)
        return list(dict.fromkeys(out))


class Duration(click.ParamType):
    """``90``, ``90s``, ``2m``, ``1h`` -> seconds (float), at least ``MIN_S``: a duration netbench
    takes is a limit (a timeout, a budget), and a limit under a second (``-T 1ms``) is shorter than
    starting a rank or making a group, so it would fail everything at once and blame the hosts. ``off``:
    0 is also taken, for a budget whose 0 turns a step off (``--confirm-budget 0``); ``auto``: the
    word ``auto`` is None, a budget the run sizes itself (``defaults.confirm_budget``)."""

    name = "DURATION"
    _RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
    MAX_S = 7 * 24 * 3600.0  # a week: beyond it a typo, not a limit (and timedelta stays in range)
    MIN_S = 1.0

    def __init__(self, off: bool = False, auto: bool = False) -> None:
        self.off, self.auto = off, auto

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201
        if self.auto and (value is None or str(value).strip().lower() == "auto"):
            return None
        if isinstance(value, int | float) and not isinstance(value, bool):
            seconds = float(value)
        else:
            m = self._RE.match(str(value))
            if not m:
                auto = ", or auto" if self.auto else ""
                self.fail(f"bad duration {value!r}: use e.g. 30, 30s, 2m, 1h{auto}", param, ctx)
            mult = {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600}[m.group(2)]
            seconds = float(m.group(1)) * mult
        if self.off and seconds == 0:
            return 0.0
        if not self.MIN_S <= seconds <= self.MAX_S:
            least = "0 (off), or 1 s or more," if self.off else "1 s or more"
            self.fail(f"{value!r} is not a usable limit: give {least} and at most 7 days", param, ctx)
        return seconds


class InputFile(click.ParamType):
    """A file netbench reads (hosts file, policy, topology, ssh_config): refused while the command
    line is read when it is missing, a directory, a FIFO, a device or a socket
    (``files.open_regular``), never waited on; an anonymous pipe (``--hosts <(...)``) is taken.
    ``keep``: words that are not paths (``--ssh-config none``)."""

    name = "FILE"

    def __init__(self, what: str, keep: tuple[str, ...] = ()) -> None:
        self.what, self.keep = what, keep

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201 - click's signature
        from netbench.common.errors import UsageError
        from netbench.common.files import open_regular

        if str(value).lower() in self.keep:
            return str(value)
        try:
            open_regular(str(value), self.what, UsageError, pipes=True).close()
        except UsageError as exc:
            self.fail(str(exc), param, ctx)
        return str(value)


class Number(click.FloatRange):
    """A finite float in [min, max] (``min_open``/``max_open``: the end itself excluded). ``nan``,
    ``inf`` and ``-inf`` are refused by name: a bound alone does not catch ``nan``."""

    def __init__(self, min: float, max: float, min_open: bool = False, max_open: bool = False) -> None:  # noqa: A002
        super().__init__(min=min, max=max, min_open=min_open, max_open=max_open)

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201 - click's signature
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number: give one in {self._describe_range()}", param, ctx)
        return super().convert(number, param, ctx)


class Count(click.IntRange):
    """An integer in [min, max]; the upper end is required, so no option takes a count without one."""

    def __init__(self, min: int, max: int) -> None:  # noqa: A002
        super().__init__(min=min, max=max)


def _pair_size(text: str) -> int:
    size = parse_size(text)
    if size == 0:
        raise ValueError(
            f"{text!r}: a pair measured at 0 bytes moves nothing, so there is no bandwidth to judge; "
            "give sizes of 1 byte or more"
        )
    return size


HOSTS_FILE = InputFile("hosts file")
POLICY_FILE = InputFile("policy file")
TOPOLOGY_FILE = InputFile("topology file")
SSH_CONFIG = InputFile("ssh config", keep=("none",))
SIZE = SizeType()
PAIR_SIZE_LIST = CsvList(_pair_size)
"""``--pair-sizes``: sizes a pair is measured at, none of them 0 (a pair phase that measures nothing
must not pass)."""
DURATION = Duration()
BUDGET = Duration(off=True, auto=True)  # a budget whose 0 turns its step off, auto sized by the run
