"""Errors that the CLI turns into one line and an exit code, never a traceback."""

from __future__ import annotations


class NetbenchError(Exception):
    """A failure the user can act on. ``exit_code`` follows the CLI's conventions (2: bad input)."""

    exit_code = 1

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(NetbenchError):
    """Bad input: a malformed hosts file, size spec, policy ... Exit code 2."""

    exit_code = 2
