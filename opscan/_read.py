"""Reading a file the user named: a regular file of bounded size, or one clear reason why not.

A device (/dev/zero, /dev/full) never ends and a named pipe blocks until
someone writes to it; a file far larger than anything opscan writes is not
one of its files. Each is refused before it is read, in words that say what
the path is (lint does the same for its sources: "not a regular file").
"""

from __future__ import annotations

import os
import stat

MB = 1024 * 1024


class NotReadable(ValueError):
    """The path is there but is not a regular file opscan will read; str() says what it is instead."""


def kind_of(mode: int) -> str:
    """What a path that is not a regular file is, in words: 'a directory', 'a device', ..."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _is(kind: str) -> str:
    return kind if kind.startswith("not ") else f"is {kind}"


def file_problem(path: str, what: str) -> str | None:
    """Why `path` cannot be read as `what` ('a Python script'), or None for a regular file.

    "PATH: no such file" for nothing there (a dangling link too), "PATH is a directory, not WHAT", ...
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"{path}: no such file"
    except (OSError, ValueError) as exc:  # a path too long, a folder without search permission, a NUL byte
        return f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}"
    if stat.S_ISREG(st.st_mode):
        return None
    return f"{path} {_is(kind_of(st.st_mode))}, not {what}"


def read_bytes(path: str, *, what: str, limit: int) -> bytes:
    """The bytes of the regular file at `path`; NotReadable where it is something else or over `limit` bytes.

    OSError as open() raises it (FileNotFoundError, PermissionError) for the caller to word.
    A named pipe is opened without waiting for a writer, then refused.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except IsADirectoryError:  # where a directory cannot be opened at all
        raise NotReadable(f"{path} is a directory, not {what}") from None
    try:
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):  # before fdopen, which refuses a directory with an OSError of its own
        os.close(fd)
        raise NotReadable(f"{path} {_is(kind_of(st.st_mode))}, not {what}")
    with os.fdopen(fd, "rb") as f:
        too_large = NotReadable(f"{path} is larger than {limit // MB} MB, too large for {what}")
        if st.st_size > limit:
            raise too_large
        data = f.read(limit + 1)  # it may have grown since
    if len(data) > limit:
        raise too_large
    return data
