"""A record is streamed: a run killed midway leaves PATH.partial, whose every whole line is readable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch")

from tests.record.helpers import CPU, FIXTURES, env  # noqa: E402


def test_a_killed_run_leaves_a_readable_prefix(tmp_path):
    path = tmp_path / "killed.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "opscan", "record", *CPU, "--steps", "1000", "-o", str(path), "--run", "train.py", "--epochs", "1000", "--sleep", "0.05"],
        cwd=FIXTURES, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        for line in proc.stderr:
            if line.startswith("SCRIPT step 3") or time.monotonic() > deadline:
                break
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert not path.exists()
    partial = tmp_path / "killed.jsonl.partial"
    lines = partial.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" or lines[-1]  # the last piece may be a line cut short
    whole = []
    for i, text in enumerate(lines):
        try:
            whole.append(json.loads(text))
        except ValueError:
            assert i == len(lines) - 1, f"line {i + 1} of {len(lines)} is not JSON"
    assert whole[0]["type"] == "header" and whole[0]["kind"] == "script"
    steps = [d for d in whole if d["type"] == "step"]
    assert len(steps) >= 3 and [s["step"] for s in steps] == list(range(len(steps)))
    assert not any(d["type"] == "end" for d in whole)


def test_compare_reads_the_prefix_and_says_it_was_cut_short(tmp_path):
    compare = pytest.importorskip("opscan.compare")
    path = tmp_path / "run.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "opscan", "record", *CPU, "--steps", "3", "-o", str(path), "--run", "train.py"],
        cwd=FIXTURES, env=env(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    step_lines = [i for i, line in enumerate(lines) if '"type":"step"' in line]
    cut.write_text("".join(lines[: step_lines[1] + 1]) + lines[step_lines[1] + 1][:40], encoding="utf-8")
    report = compare.compare_records(str(path), str(cut))
    assert any("cut short" in p.message for p in report.errors)
    assert report.table("first_divergence") is not None and not report.table("first_divergence").rows
    os.remove(cut)


def test_ctrl_c_keeps_the_prefix_without_a_traceback(tmp_path):
    # A terminal's Ctrl-C goes to the whole foreground process group: the record writer process too,
    # which printed a KeyboardInterrupt traceback. It must leave the ending to the training process.
    path = tmp_path / "interrupted.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "opscan", "record", *CPU, "--steps", "1000", "-o", str(path), "--run", "train.py", "--epochs", "1000", "--sleep", "0.05"],
        cwd=FIXTURES, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        for line in proc.stderr:
            if line.startswith("SCRIPT step 3") or time.monotonic() > deadline:
                break
        os.killpg(proc.pid, signal.SIGINT)
        rest = proc.stderr.read()
    finally:
        proc.wait(timeout=60)
        proc.stderr.close()
    assert proc.returncode == 130, rest
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest, rest
    assert "opscan: interrupted" in rest and f"{path}.partial holds the steps recorded so far" in rest
    lines = (tmp_path / "interrupted.jsonl.partial").read_text(encoding="utf-8").splitlines()
    whole = [json.loads(text) for text in lines]  # interrupted between steps: every line is whole
    assert whole[0]["type"] == "header"
    assert len([d for d in whole if d["type"] == "step"]) >= 3
