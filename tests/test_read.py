"""Reading a file the user named (opscan._read): a device, a named pipe, a directory or a huge file is refused before it is read."""

from __future__ import annotations

import os

import pytest

from opscan._read import NotReadable, read_bytes

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX devices and named pipes")


@pytest.mark.parametrize(("path", "said"), [("/dev/zero", "/dev/zero is a device, not a saved report"), ("/dev/full", "/dev/full is a device, not a saved report")])
def test_a_device_is_refused_not_read_to_its_end(path, said):
    with pytest.raises(NotReadable) as caught:
        read_bytes(path, what="a saved report", limit=1 << 20)
    assert str(caught.value) == said


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NotReadable, match="pipe is a named pipe, not a saved report"):
        read_bytes(str(fifo), what="a saved report", limit=1 << 20)


def test_a_directory_and_a_file_over_the_limit(tmp_path):
    with pytest.raises(NotReadable, match="is a directory, not a saved report$"):
        read_bytes(str(tmp_path), what="a saved report", limit=1 << 20)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (3 << 20))
    with pytest.raises(NotReadable, match=r"big.json is larger than 2 MB, too large for a saved report$"):
        read_bytes(str(big), what="a saved report", limit=2 << 20)
    assert read_bytes(str(big), what="a saved report", limit=3 << 20) == b" " * (3 << 20)
    with pytest.raises(FileNotFoundError):  # worded by the caller
        read_bytes(str(tmp_path / "missing"), what="a saved report", limit=1)
