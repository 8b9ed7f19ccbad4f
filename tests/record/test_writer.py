"""The record's host side (opscan/trace/recordwriter.py): the writer process and the inline writer write the same lines."""

from __future__ import annotations

import base64
import io
import json
import os
import pickle
import stat
import struct
import sys

import pytest

from opscan.trace.recordwriter import (
    InlineWriter,
    ProcessWriter,
    Step,
    WriterError,
    combine,
    fmix64,
    geometry_salt,
    serve,
)


def _slots(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}Q", *values)


def _float_slot(x: float) -> int:
    """A slot whose low 4 bytes hold x as float32 (the norm slots' layout)."""
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _step(n: int) -> Step:
    # Slots: 0 xor, 1 sum (int32 in the low half), 2 norm (f32); 3-4 a loss (f64); 5.. a block of floats.
    loss = struct.unpack("<Q", struct.pack("<d", 0.25))[0]
    block = struct.unpack("<Q", struct.pack("<ff", 3.0, 1.5))[0]
    host = _slots(0x1234, 7, _float_slot(2.0), loss, block)
    entries = [
        ("d", 0, 0, 1, "i32", (1 << 32) - 1, False),  # handle 2n+0: direct, with a norm
        ("x", 2 * n, (2, 2), (2, 1), 0, "torch.float32"),  # handle 2n+1: a view of it
    ]
    entries.append(("v", 0, 3))  # the loss
    return Step(
        step=n, hosts=[host], entries=entries, blocks=[(0, 4, 2)],
        ops=[(0, "forward", 0, 0, (None,), (3 * n,), 3 * n, None), (1, "backward", 0, 0, (3 * n,), (3 * n + 1,), None, {"device": "cpu"})],
        params=[('"w"', 3 * n, 0, 0, 1, 1)], loss=3 * n + 2, keep=[3 * n],
        new_ops={0: '"aten.mm.default"', 1: '"aten.t.default"'} if n == 0 else {},
        new_sites={0: '"module":null,"module_class":null,"file":"t.py","line":3'} if n == 0 else {},
        new_metas={0: '"shapes":[[2,2]],"dtypes":["float32"]'} if n == 0 else {},
        new_param_handles={3 * n: "w"},
    )  # fmt: skip


def _write(writer) -> tuple[str, int]:
    writer.line('{"type":"header"}')
    for n in range(2):
        writer.step(_step(n))
    return writer.finish('{"type":"end"}', commit=True, remove=False)


def test_the_writer_process_writes_what_the_inline_writer_writes(tmp_path):
    a, b = tmp_path / "inline.jsonl", tmp_path / "process.jsonl"
    path_a, bytes_a = _write(InlineWriter(str(a), "xor64+sum"))
    path_b, bytes_b = _write(ProcessWriter(str(b), "xor64+sum"))
    assert (path_a, path_b) == (str(a), str(b))
    assert a.read_bytes() == b.read_bytes() and bytes_a == bytes_b == len(a.read_bytes())
    assert not (tmp_path / "process.jsonl.partial").exists()
    lines = [json.loads(text) for text in a.read_text(encoding="utf-8").splitlines()]
    fp = combine("xor64+sum", 0x1234, 7)
    first = lines[1]
    assert first == {
        "type": "op", "step": 0, "i": 0, "op": "aten.mm.default", "phase": "forward", "module": None, "module_class": None,
        "file": "t.py", "line": 3, "shapes": [[2, 2]], "dtypes": ["float32"], "in": [None], "out": [fp], "norm": 2.0,
    }  # fmt: skip
    view = f"{fmix64(int(fp, 16) ^ geometry_salt((2, 2), (2, 1), 0, 'torch.float32')):016x}"
    assert lines[2]["in"] == [f"p:w@{fp}"] and lines[2]["out"] == [view] and lines[2]["rng"] == {"device": "cpu"}
    assert lines[3] == {"type": "step", "step": 0, "ops": 2, "params": {"w": {"fp": fp, "norm": 3.0, "sample": lines[3]["params"]["w"]["sample"]}}, "loss": 0.25}
    assert struct.unpack("<f", base64.b64decode(lines[3]["params"]["w"]["sample"])) == (1.5,)
    assert [d["i"] for d in lines if d["type"] == "op"] == [0, 1, 2, 3]  # numbered across steps
    assert lines[-1] == {"type": "end"}


def test_a_folder_that_does_not_exist_is_an_oserror_and_leaves_nothing(tmp_path):
    for make in (InlineWriter, ProcessWriter):
        with pytest.raises(OSError, match="nope"):
            make(str(tmp_path / "nope" / "r.jsonl"), "xor64")
    assert not (tmp_path / "nope").exists()


def test_a_cut_short_record_keeps_its_partial_file_or_removes_an_empty_one(tmp_path):
    path = tmp_path / "r.jsonl"
    writer = ProcessWriter(str(path), "xor64")
    writer.line('{"type":"header"}')
    writer.step(_step(0))
    kept, _ = writer.finish(None, commit=False, remove=False)
    assert kept == str(path) + ".partial" and not path.exists()
    assert len(open(kept, encoding="utf-8").read().splitlines()) == 4
    writer = ProcessWriter(str(tmp_path / "empty.jsonl"), "xor64")
    assert writer.finish(None, commit=False, remove=True) == (None, 0)
    assert not list(tmp_path.glob("empty*"))


def test_end_of_input_closes_the_partial_file_with_every_step_handed_over(tmp_path):
    """The training process died: the writer keeps what it was sent."""
    path = tmp_path / "r.jsonl"
    stream = io.BytesIO()
    for message in (("open", str(path), "xor64+sum"), ("line", '{"type":"header"}'), ("step", _step(0))):
        pickle.dump(message, stream)
    stream.seek(0)
    replies = io.BytesIO()
    serve(stream, replies)
    replies.seek(0)
    assert pickle.load(replies) == ("opened", None)
    assert not path.exists()
    assert [json.loads(t)["type"] for t in (tmp_path / "r.jsonl.partial").read_text(encoding="utf-8").splitlines()] == ["header", "op", "op", "step"]


def test_a_writer_process_that_is_gone_is_a_writer_error(tmp_path):
    writer = ProcessWriter(str(tmp_path / "r.jsonl"), "xor64")
    writer._proc.kill()
    writer._proc.wait()
    with pytest.raises(WriterError, match="record writer process stopped"):
        for _ in range(64):  # the pipe may take a write or two before it breaks
            writer.step(_step(0))
        writer.finish(None, commit=True, remove=False)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_is_reported_at_the_end_and_leaves_no_partial_file(tmp_path):
    path = tmp_path / "r.jsonl"
    os.symlink("/dev/full", str(path) + ".partial")
    writer = ProcessWriter(str(path), "xor64")
    writer.line('{"type":"header"}')
    with pytest.raises(WriterError, match="No space left"):
        writer.finish(None, commit=True, remove=False)
    assert not path.exists()


def test_the_writer_process_imports_no_torch(tmp_path):
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = f"import sys; sys.path.insert(0, {root!r}); import opscan.trace.recordwriter; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
@pytest.mark.parametrize("commit", [True, False])
def test_a_named_pipe_is_streamed_into_and_stays_a_pipe(tmp_path, commit):
    """`record -o /dev/null` or a FIFO: no PATH.partial beside it renamed onto the device, none removed either."""
    import stat
    import threading

    fifo = tmp_path / "r.pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    writer = InlineWriter(str(fifo), "xor64")
    writer.line('{"type":"header"}')
    writer.step(_step(0))
    kept, _ = writer.finish('{"type":"end"}' if commit else None, commit=commit, remove=not commit)
    reader.join(timeout=10)
    assert stat.S_ISFIFO(fifo.stat().st_mode) and [p.name for p in tmp_path.iterdir()] == ["r.pipe"]
    assert kept == (str(fifo) if commit else None)
    assert got and got[0].startswith(b'{"type":"header"}\n')


_FD_LINKS = os.path.isdir("/proc/self/fd")


@pytest.mark.skipif(not _FD_LINKS, reason="needs /proc/self/fd")
def test_a_descriptor_link_to_a_file_is_appended_to_and_stays_a_link(tmp_path):
    """`record -o /dev/stdout > run.jsonl`: PATH.partial beside the link was renamed onto it, and as root
    that replaced the machine's /dev/stdout with the record. A test-local link stands in for /dev/stdout."""
    log = tmp_path / "run.jsonl"
    log.write_bytes(b"")
    link = tmp_path / "stdout"
    with open(log, "ab") as out:
        link.symlink_to(f"/proc/self/fd/{out.fileno()}")
        writer = InlineWriter(str(link), "xor64")
        writer.line('{"type":"header"}')
        writer.step(_step(0))
        kept, _ = writer.finish('{"type":"end"}', commit=True, remove=False)
    assert kept == str(link)
    assert link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl", "stdout"]
    lines = log.read_text().splitlines()
    assert lines[0] == '{"type":"header"}' and lines[-1] == '{"type":"end"}'


@pytest.mark.skipif(not _FD_LINKS, reason="needs /proc/self/fd")
def test_record_to_a_link_to_its_own_stdout_reaches_the_pipe(tmp_path):
    """`record -o /dev/stdout | ...`: the writer process opened /dev/stdout as its own stdout, the pipe it
    answers on, and the record garbled the replies. Such a path is written by the training process."""
    pytest.importorskip("torch")
    from tests.record.helpers import CPU, opscan

    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    proc = opscan("record", "models.py:build_clean", *CPU, "-o", str(link))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines[0]["type"] == "header" and lines[-1]["type"] == "end"
    assert link.is_symlink()


@pytest.mark.skipif(not _FD_LINKS, reason="needs /proc/self/fd")
def test_record_to_stdout_whose_reader_has_gone_says_so_without_a_traceback(tmp_path):
    """`record -o /dev/stdout | head -1`: the broken pipe was reported as a bug in opscan, with its traceback."""
    pytest.importorskip("torch")
    import subprocess

    from tests.record.helpers import CPU, FIXTURES, env

    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "opscan", "record", "models.py:build_clean", *CPU, "--steps", "40", "-o", str(link)],
        cwd=FIXTURES, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert json.loads(proc.stdout.readline())["type"] == "header"
    # As `head -1` does. 40 steps are several times what a pipe holds: the run cannot have ended before this.
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 2
    assert "Traceback" not in err and "bug in opscan" not in err, err
    assert f"opscan: error: cannot write {link}: Broken pipe at the end of step" in err, err


def test_a_record_through_a_symlink_replaces_the_file_and_keeps_the_link(tmp_path):
    real = tmp_path / "records" / "run.jsonl"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "run.jsonl"
    link.symlink_to(real)
    path, _ = _write(InlineWriter(str(link), "xor64"))
    assert path == str(link) and link.is_symlink()
    assert real.read_text(encoding="utf-8").startswith('{"type":"header"}\n')
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["records", "run.jsonl", "run.jsonl"]


@pytest.mark.parametrize("make", [InlineWriter, ProcessWriter], ids=["inline", "process"])
def test_an_existing_record_keeps_its_permission_bits_and_a_new_one_follows_the_umask(tmp_path, make):
    """A 0600 record rewritten became 0644 (its partial file too, for the whole run): fsutil's rule, which -o follows everywhere."""
    kept = tmp_path / "private.jsonl"
    kept.write_text("old\n")
    kept.chmod(0o600)
    writer = make(str(kept), "xor64")
    assert stat.S_IMODE(os.stat(str(kept) + ".partial").st_mode) == 0o600  # never readable by others meanwhile
    assert _write(writer)[0] == str(kept)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and kept.read_text().startswith('{"type":"header"}')
    old = os.umask(0o027)
    try:
        _write(make(str(tmp_path / "new.jsonl"), "xor64"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.jsonl").stat().st_mode) == 0o640
