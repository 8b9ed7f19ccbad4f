"""`opscan scan --run SCRIPT ARGS`: an unmodified script under the tracer, stopped after --max-steps."""

from __future__ import annotations

import json

import pytest

from tests.trace.helpers import opscan, scan
from tests.util import needs_torch

CPU = ("--device", "cpu")


@needs_torch
@pytest.mark.parametrize("steps", [1, 3])
def test_stops_after_max_steps(capsys, steps):
    rc, out, err = scan(capsys, *CPU, "--output-format", "json", "--max-steps", str(steps), "--run", "train_loop.py", "--epochs", "10")
    assert rc == 1
    doc = json.loads(out)  # stdout holds the report alone
    ran = [line for line in err.splitlines() if line.startswith("SCRIPT step")]
    assert ran == [f"SCRIPT step {i}" for i in range(steps)]
    assert "SCRIPT finished" not in err
    (finding,) = doc["findings"]
    assert finding["count"] == steps
    assert (finding["op"], finding["phase"], finding["module"], finding["file"], finding["line"]) == (
        "aten.max_unpool2d.default",
        "forward",
        "unpool",
        "train_loop.py",
        18,
    )
    assert f"stopped after {steps} optimizer step(s)" in err
    assert "calls torch.use_deterministic_algorithms(False" in err


@needs_torch
def test_script_arguments_reach_the_script(capsys):
    rc, out, err = scan(capsys, *CPU, "--max-steps", "5", "--run", "train_loop.py", "--epochs", "2")
    assert rc == 1
    assert "SCRIPT finished" in err
    assert "the script ended after 2 optimizer step(s)" in out


@needs_torch
def test_script_stdout_goes_to_stderr_in_a_real_process():
    proc = opscan("scan", *CPU, "--output-format", "json", "--run", "train_loop.py")
    assert proc.returncode == 1, proc.stderr
    json.loads(proc.stdout)
    assert "SCRIPT step 0" in proc.stderr and "SCRIPT" not in proc.stdout


@needs_torch
def test_output_file_with_run(capsys, tmp_path):
    report = tmp_path / "scan.md"
    rc, out, _err = scan(capsys, *CPU, "--output-format", "markdown", "-o", str(report), "--run", "train_loop.py")
    assert rc == 1 and out == ""
    text = report.read_text()
    assert "| DET100 | train_loop.py:18 | aten.max_unpool2d.default (max_unpooling2d_forward_out) has no deterministic implementation (forward) in unpool" in text


@needs_torch
def test_optimizer_and_closure_phases(capsys):
    rc, out, _err = scan(capsys, *CPU, "--output-format", "json", "--max-steps", "2", "--run", "train_phases.py")
    assert rc == 1
    found = sorted((f["op"], f["phase"], f["line"]) for f in json.loads(out)["findings"])
    assert found == [
        ("aten.max_unpool2d.default", "forward", 26),  # inside the closure that sgd.step() ran
        ("aten.put_.default", "optimizer", 16),
    ]


@needs_torch
def test_script_ending_without_optimizer(capsys):
    rc, out, _err = scan(capsys, *CPU, "--run", "train_clean_exit.py")
    assert rc == 0  # its forward and backward ran under the tracer: a scan, though no optimizer step was taken
    assert "the script ended after 0 optimizer step(s)" in out and "All checks passed!" in out


@needs_torch
@pytest.mark.parametrize("probe", [(), ("--probe",)])
def test_script_that_runs_no_torch_op_is_an_error_not_a_clean_scan(capsys, probe):
    """It said "All checks passed!" and exited 0 where nothing was scanned; record and diff refuse such a script too."""
    rc, out, err = scan(capsys, *CPU, *probe, "--run", "train_no_torch.py")
    assert rc == 2, out + err
    assert "error: train_no_torch.py: the script ran no torch op, so there was nothing to scan" in out
    assert "All checks passed!" not in out and "partial scan" not in out, "no notice about a scan that did not happen"


@needs_torch
def test_script_exiting_nonzero_is_an_error(capsys):
    rc, out, err = scan(capsys, *CPU, "--run", "train_exits.py")
    assert rc == 2
    assert "train_exits.py exited with status 3" in out and "Traceback" not in out + err


@needs_torch
@pytest.mark.parametrize(
    ("code", "said"),
    [('"bye"', "exited with status 1 after 0 optimizer step(s): bye"), ("True", "exited with status 1 after 0 optimizer step(s)\n"),
     ('""', "exited with status 1 after 0 optimizer step(s)\n")],
    ids=["a message", "True", "an empty message"],
)  # fmt: skip
def test_script_exiting_with_a_message_is_status_1_and_says_it(capsys, tmp_path, code, said):
    """sys.exit("bye") prints bye and exits 1, as Python does; it was reported as "exited with status bye"."""
    (tmp_path / "t.py").write_text(f"import sys\nimport torch\n\nsys.exit({code})\n")
    rc, out, err = scan(capsys, *CPU, "--run", "t.py", cwd=tmp_path)
    assert rc == 2
    assert f"error: t.py {said}" in out and "Traceback" not in out + err


@needs_torch
def test_a_model_target_exiting_with_a_message_says_status_1_and_the_message(capsys, tmp_path):
    (tmp_path / "m.py").write_text("import sys\n\n\ndef build():\n    sys.exit('no data')\n")
    rc, out, _err = scan(capsys, *CPU, "m.py:build", cwd=tmp_path)
    assert rc == 2
    assert "error: m.py:build exited with status 1 (sys.exit) instead of returning: no data" in out


@needs_torch
def test_script_raising_shows_its_own_traceback(capsys):
    rc, out, err = scan(capsys, *CPU, "--run", "train_raises.py")
    assert rc == 2
    assert "FileNotFoundError: data/train.csv" in out
    assert 'train_raises.py", line 9, in <module>' in out
    assert 'train_raises.py", line 5, in load_data' in out
    assert "runpy" not in out and "opscan/trace" not in out.replace("\\", "/")
    assert "FileNotFoundError" not in err  # said once, in the report


@needs_torch
def test_missing_script(capsys):
    rc, out, err = scan(capsys, *CPU, "--run", "nope.py")
    assert rc == 2 and "nope.py: no such file" in out


def test_run_restores_argv_and_path(capsys):
    import sys

    argv, path = list(sys.argv), list(sys.path)
    scan(capsys, *CPU, "--run", "train_loop.py", "--epochs", "1")
    assert sys.argv == argv and sys.path == path


@needs_torch
def test_output_file_stays_where_it_was_named_when_the_script_changes_folder(tmp_path):
    """-o is relative to where opscan was started, whatever folder the --run script moves to."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "train.py").write_text(
        "import os\nimport torch\n\nos.chdir('elsewhere')\n"
        "model = torch.nn.Linear(3, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model(torch.randn(2, 3)).sum().backward()\nopt.step()\n"
    )
    proc = opscan("scan", *CPU, "--output-format", "json", "-o", "scan.json", "--run", "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "scan.json").read_text())["findings"] == []
    assert not (tmp_path / "elsewhere" / "scan.json").exists()
