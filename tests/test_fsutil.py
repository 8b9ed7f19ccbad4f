"""Atomic writes: a new report file gets the user's usual permission bits, an existing file keeps its own."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from opscan.fsutil import atomic_write_bytes

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
