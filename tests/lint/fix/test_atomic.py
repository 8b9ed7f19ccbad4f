"""Fault injection: kill the fixer while it writes, and check that no file is truncated or lost.

The fixer runs in a subprocess that SIGKILLs itself at a chosen point of the
write (mid-way through writing a temporary file, before or after a rename),
or is killed from outside at a moment spread across its run. Afterwards every
file holds exactly its old bytes or exactly its fixed bytes, no temporary file
looks like Python source, and running --fix again finishes the job.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.lint.fix.helpers import FIX_FIXTURES

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

# Runs `opscan lint --fix` in this process after arranging to be killed at one point.
DRIVER = r"""
import os, signal, sys
mode, when = sys.argv[1], int(sys.argv[2])
count = {"n": 0}
real_replace, real_fdopen = os.replace, os.fdopen

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def turn():
    hit = count["n"] == when
    count["n"] += 1
    return hit

if mode == "before-rename":
    def replace(src, dst):
        if turn():
            die()
        return real_replace(src, dst)
    os.replace = replace
elif mode == "after-rename":
    def replace(src, dst):
        real_replace(src, dst)
        if turn():
            die()
    os.replace = replace
elif mode == "mid-write":
    class HalfWriter:
        def __init__(self, fh):
            self.fh = fh
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            return self.fh.__exit__(*exc)
        def write(self, data):
            self.fh.write(data[: len(data) // 2])
            self.fh.flush()
            os.fsync(self.fh.fileno())
            die()
        def __getattr__(self, name):
            return getattr(self.fh, name)
    def fdopen(fd, *args, **kwargs):
        fh = real_fdopen(fd, *args, **kwargs)
        return HalfWriter(fh) if turn() else fh
    os.fdopen = fdopen

from opscan import cli
sys.exit(cli.main(["lint", "--fix", "--unsafe-fixes", "--no-cache", "."]))
"""

CASES = ["det001_module_level", "det001_det002_crlf", "det002_shebang_cookie", "det003_value", "det005_benchmark"]


def make_project(folder: Path, copies: int = 1) -> dict[str, bytes]:
    folder.mkdir()
    for i in range(copies):
        for name in CASES:
            shutil.copyfile(FIX_FIXTURES / "safe" / f"{name}.in.py", folder / f"{name}_{i}.py")
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def fixed_bytes(copies: int = 1) -> dict[str, bytes]:
    """What each file becomes: its golden output."""
    return {f"{name}_{i}.py": (FIX_FIXTURES / "safe" / f"{name}.out.py").read_bytes() for i in range(copies) for name in CASES}


def run(folder: Path, mode: str, when: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", DRIVER, mode, str(when)], cwd=folder, env=env, capture_output=True, text=True, check=False
    )


def check_every_file_old_or_new(folder: Path, old: dict[str, bytes], new: dict[str, bytes]) -> None:
    for name, before in old.items():
        data = (folder / name).read_bytes()
        assert data in (before, new[name]), f"{name} is neither its old nor its fixed self ({len(data)} bytes)"
    extra = sorted(p.name for p in folder.iterdir() if p.name not in old)
    for name in extra:  # a killed writer cannot clean up; its temporary files must be hidden and not *.py
        assert re.fullmatch(r"\..+\.opscan-tmp", name), f"unexpected file {name}"
    assert not [n for n in extra if n.endswith(".py")]


@pytest.mark.parametrize("mode", ["mid-write", "before-rename", "after-rename"])
@pytest.mark.parametrize("when", [0, 3])
def test_killed_writer_leaves_old_or_new_files(tmp_path, mode, when):
    new = fixed_bytes()
    folder = tmp_path / "project"
    old = make_project(folder)
    proc = run(folder, mode, when)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    check_every_file_old_or_new(folder, old, new)
    changed = [n for n in old if (folder / n).read_bytes() != old[n]]
    expected_changed = when + 1 if mode == "after-rename" else when
    assert len(changed) == expected_changed  # files are written one after another
    # Fixing again completes the job; the stray temporary files are not linted.
    again = run(folder, "none", 0)
    assert again.returncode == 0, again.stdout + again.stderr
    for name in old:
        assert (folder / name).read_bytes() == new[name]


def test_killed_from_outside_at_any_moment(tmp_path):
    """SIGKILL from another process at moments spread over a whole run of 30 files."""
    copies = 6
    new = fixed_bytes(copies)
    timing = tmp_path / "timing"
    make_project(timing, copies)
    started = time.monotonic()
    run(timing, "none", 0)
    duration = time.monotonic() - started
    assert {p.name: p.read_bytes() for p in timing.iterdir()} == new
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # The writes happen late in a run (after fixing, before the final lint): aim around there.
    for i, fraction in enumerate((0.6, 0.7, 0.75, 0.8, 0.85)):
        folder = tmp_path / f"project{i}"
        old = make_project(folder, copies)
        proc = subprocess.Popen([sys.executable, "-c", DRIVER, "none", "0"], cwd=folder, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(duration * fraction)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        check_every_file_old_or_new(folder, old, new)
