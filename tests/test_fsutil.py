"""Atomic writes: a new report file gets the user's usual permission bits, an existing file keeps its own."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading

import pytest

from opscan.fsutil import atomic_create_bytes, atomic_write_bytes

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_new_file_follows_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        atomic_write_bytes(tmp_path / "report.txt", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "report.txt").stat().st_mode) == 0o666 & ~umask
    assert os.umask(old) == old  # and the umask is as it was
    os.umask(old)


def test_existing_file_keeps_its_mode(tmp_path):
    path = tmp_path / "report.txt"
    path.write_bytes(b"old")
    path.chmod(0o640)
    atomic_write_bytes(path, b"new")
    assert path.read_bytes() == b"new" and stat.S_IMODE(path.stat().st_mode) == 0o640


def _read_fifo_in_background(path):
    got: list[bytes] = []

    def read() -> None:
        with open(path, "rb") as fh:  # blocks until the writer opens the pipe
            got.append(fh.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, got


def test_a_named_pipe_is_written_through_not_replaced(tmp_path):
    # `-o /dev/null` or a FIFO: a rename onto it would swap the device for a plain file
    # (CI once lost its /dev/null that way, as root, and git then read garbage config).
    fifo = tmp_path / "out.pipe"
    os.mkfifo(fifo)
    thread, got = _read_fifo_in_background(fifo)
    atomic_write_bytes(fifo, b"report\n")
    thread.join(timeout=10)
    assert got == [b"report\n"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["out.pipe"]  # no temporary left beside it


def test_a_symlink_keeps_pointing_at_its_file(tmp_path):
    real = tmp_path / "real.txt"
    real.write_bytes(b"old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    atomic_write_bytes(link, b"new")
    assert link.is_symlink() and real.read_bytes() == b"new"


def test_dev_null_stays_a_device(tmp_path):
    if not os.path.exists(os.devnull) or not stat.S_ISCHR(os.stat(os.devnull).st_mode):
        pytest.skip("this machine's /dev/null is not a character device")
    atomic_write_bytes(os.devnull, b"gone\n")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


_FD_LINKS = os.path.isdir("/proc/self/fd")


def _write_to_own_stdout(path: str, stdout) -> subprocess.CompletedProcess:
    """atomic_write_bytes(path) in a fresh process whose stdout is `stdout`."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = f"import sys; sys.path.insert(0, {root!r}); from opscan.fsutil import atomic_write_bytes; atomic_write_bytes({path!r}, b'report\\n')"
    return subprocess.run([sys.executable, "-c", code], stdout=stdout, stderr=subprocess.PIPE, check=False, timeout=60)


@pytest.mark.skipif(not _FD_LINKS, reason="needs /proc/self/fd")
def test_a_descriptor_link_to_a_pipe_is_written_through(tmp_path):
    # `-o /dev/stdout | less`: /dev/stdout is a link to /proc/self/fd/1, whose target is
    # "pipe:[N]", no path at all; resolving it gave "cannot write: No such file or directory".
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")  # what /dev/stdout is (a test must not risk the real one)
    proc = _write_to_own_stdout(str(link), subprocess.PIPE)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"report\n"
    assert link.is_symlink()


@pytest.mark.skipif(not _FD_LINKS, reason="needs /proc/self/fd")
def test_a_descriptor_link_to_a_file_appends_and_replaces_nothing(tmp_path):
    # `-o /dev/stdout >> log`: renaming onto the link replaced it (as root, /dev/stdout itself)
    # and writing the file it resolves to by a rename lost what the log held.
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    log = tmp_path / "log.txt"
    log.write_bytes(b"earlier\n")
    with open(log, "ab") as out:
        proc = _write_to_own_stdout(str(link), out)
    assert proc.returncode == 0, proc.stderr
    assert log.read_bytes() == b"earlier\nreport\n"
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.txt", "stdout"]


def test_a_file_this_process_may_not_write_is_refused(tmp_path, monkeypatch):
    """The rename would replace it whatever its own mode: refused as the shell's `>` refuses it (root passes that check)."""
    path = tmp_path / "report.txt"
    path.write_bytes(b"keep")
    path.chmod(0o444)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if os.fspath(p) == str(path) and mode == os.W_OK else real_access(p, mode, **kw))
    with pytest.raises(PermissionError) as refused:
        atomic_write_bytes(path, b"new")
    assert refused.value.strerror == "Permission denied" and refused.value.filename == str(path)
    assert path.read_bytes() == b"keep" and sorted(p.name for p in tmp_path.iterdir()) == ["report.txt"]


def test_create_makes_a_whole_new_file_with_the_usual_bits(tmp_path):
    old = os.umask(0o027)
    try:
        atomic_create_bytes(tmp_path / "report.txt.partial", b"report\n")
    finally:
        os.umask(old)
    path = tmp_path / "report.txt.partial"
    assert path.read_bytes() == b"report\n" and stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.txt.partial"]  # no temporary file left


@pytest.mark.parametrize("there", ["file", "dangling link"])
def test_create_never_replaces_what_is_there(tmp_path, there):
    path = tmp_path / "report.txt.partial"
    if there == "file":
        path.write_bytes(b"the user's")
    else:
        path.symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileExistsError):
        atomic_create_bytes(path, b"report\n")
    assert os.path.lexists(path) and not (tmp_path / "nowhere").exists()
    assert there != "file" or path.read_bytes() == b"the user's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.txt.partial"]


def test_create_without_hard_links_still_refuses_a_file_there(tmp_path, monkeypatch):
    """A file system without hard links (EPERM from link): a check, then a rename."""
    import errno

    def no_links(*_args, **_kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    atomic_create_bytes(tmp_path / "a", b"new")
    assert (tmp_path / "a").read_bytes() == b"new"
    with pytest.raises(FileExistsError):
        atomic_create_bytes(tmp_path / "a", b"newer")
    assert (tmp_path / "a").read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == ["a"]
