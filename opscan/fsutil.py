"""Atomic file writes: a temporary file in the same folder, fsync, then rename."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class ChangedOnDiskError(RuntimeError):
    """The file changed between our read and our write; it was left alone."""


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, expect: bytes | None = None) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file.

    An existing file's permission bits are kept; a new file gets the bits any
    file the user creates gets (0666 less the umask), not mkstemp's 0600. If
    `expect` is given and the file no longer holds exactly those bytes,
    nothing is written and ChangedOnDiskError is raised. An existing file
    this process may not write is refused (PermissionError), as the shell's
    `>` refuses it: the rename alone would replace it, since only the folder's
    mode counts for that.
    """
    if is_descriptor_link(path):
        # /dev/stdout, /dev/fd/N: a stream of this process, whatever it is now. Resolving it names a
        # pipe ("pipe:[N]", no path: the write failed) or a file the shell opened (renaming onto it
        # lost what `>>` had kept there). Append through it: the shell's `>` has emptied it already.
        with open(path, "ab") as fh:
            fh.write(data)
        return
    # Through a symlink to the file it names: replacing the link itself would cut it.
    target = Path(os.path.realpath(path))
    mode = None
    try:
        st = target.stat()
        mode = stat.S_IMODE(st.st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    else:
        if is_special_file(st):
            # /dev/null, /dev/stdout, a named pipe: renaming onto it would swap the device
            # for a plain file (as root, for every process on the machine). Write through it.
            with open(target, "wb") as fh:
                fh.write(data)
            return
        if not os.access(target, os.W_OK):  # checked, then renamed over: root passes, as it does the shell's check
            import errno

            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".opscan-tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        if expect is not None and target.read_bytes() != expect:
            raise ChangedOnDiskError(f"{path} changed on disk since it was read; not overwritten")
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _sync_folder(target.parent or ".")  # make the rename itself durable


def _sync_folder(folder: str | os.PathLike) -> None:
    """fsync a folder, so that a rename or link in it survives a crash; where that cannot be done, nothing."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def atomic_create_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Create `path` holding `data`, whole or not at all, and never over a file there: FileExistsError.

    Written to a temporary file in the same folder and fsync'ed, then hard-linked to `path`,
    which fails where anything is there already (a rename would replace it). A file system
    without hard links gets a check and a rename instead, which a file made in between could lose.
    """
    import errno

    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".opscan-tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # a new file's bits, not mkstemp's 0600
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV):
                raise
            if os.path.lexists(path):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path) from None
            os.rename(tmp, path)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    _sync_folder(folder)


def is_descriptor_link(path: str | os.PathLike) -> bool:
    """Whether `path` is, or links through, one of this process's descriptors: /dev/stdout, /dev/fd/N, /proc/self/fd/N.

    Such a path stands for an open stream, not a file: it is written into,
    never replaced by a rename, and means something else in another process.
    (Linux; elsewhere /dev/fd/N are devices, which is_special_file sees.)
    """
    p = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on a chain of links
        parts = os.path.realpath(os.path.dirname(p)).split(os.sep)
        if len(parts) in (4, 6) and parts[1] == "proc" and parts[-1] == "fd":  # /proc/PID/fd, /proc/PID/task/TID/fd
            return True
        try:
            target = os.readlink(p)
        except OSError:  # not a link (or nothing there): a plain path
            return False
        p = os.path.abspath(os.path.join(os.path.dirname(p), target))
    return False


def is_special_file(st: os.stat_result) -> bool:
    """A device, FIFO or socket: something written into, never replaced by a rename."""
    return not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode))


def same_file(path: str | os.PathLike, others) -> str | None:
    """The first of `others` that is the regular file `path` names (the same device and inode: a link, another
    spelling), or None. A `path` that is not there, or is no regular file (/dev/null), is no other file."""
    try:
        out = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(out.st_mode):
        return None
    for other in others:
        if not other or other == "-":
            continue
        try:
            st = os.stat(other)
        except (OSError, ValueError):
            continue
        if (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino):
            return str(other)
    return None


def _umask() -> int:
    # The only portable way to read the umask is to set it; put it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
