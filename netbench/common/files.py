"""Reading a file the user named on the command line (hosts file, policy, topology).

One place for every way such a file can be unusable, each one line (and exit 2 at the CLI): missing,
a directory, unreadable, larger than any real one of its kind, not UTF-8. The read is bounded and
does not assume a regular file: ``--hosts <(scontrol show hostnames)`` is a pipe.
"""

from __future__ import annotations

from pathlib import Path

from netbench.common.errors import UsageError

MAX_USER_FILE_BYTES = 64 << 20  # far above any real hosts file, policy or topology


def read_user_text(
    path: str | Path, what: str, error: type[Exception] = UsageError, max_bytes: int = MAX_USER_FILE_BYTES
) -> str:
    """The UTF-8 text of ``path``, or ``error`` with one line naming the file and ``what`` it is."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise error(f"{p}: {what} not found") from None
    except IsADirectoryError:
        raise error(f"{p}: is a directory, not a {what}") from None
    except OSError as exc:
        raise error(f"{p}: cannot read the {what}: {exc.strerror}") from None
    if len(raw) > max_bytes:
        raise error(f"{p}: larger than {max_bytes >> 20} MiB; not a {what}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{p}: not UTF-8 text (byte {exc.start})") from None
