"""Atomic writes: a new report file gets the user's usual permission bits, an existing file keeps its own."""

from __future__ import annotations

import os
import stat

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
