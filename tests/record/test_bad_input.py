"""Bad input to `opscan record`: a clear message, exit 2, no traceback, and no file left behind."""

from __future__ import annotations

import pytest

from tests.record.helpers import CPU, FIXTURES, opscan

pytest.importorskip("torch")


def _no_files(folder, name="out.jsonl"):
    return not (folder / name).exists() and not (folder / (name + ".partial")).exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give a TARGET or --run SCRIPT"),
        (("models.py:build_clean", "models.py:build_conv"), "takes one target, got 2"),
        (("nowhere.py:build",), "nowhere.py: no such file"),
        (("models.py:no_such_function",), "has no attribute 'no_such_function'"),
        (("models.py:build_clean", "--input-shape", "2,3"), "--input-shape applies to torchvision:"),
        (("models.py:build_clean", "--steps", "0"), "is not a positive integer"),
        # torch.manual_seed's range, -2**63 to 2**64-1: past it torch raised, blamed on the builder.
        (("models.py:build_clean", "--seed", "99999999999999999999999"), "--seed: 99999999999999999999999 is out of range"),
        (("models.py:build_clean", "--seed", str(2**64)), f"--seed: {2**64} is out of range"),
        (("models.py:build_clean", "--seed", str(-(2**63) - 1)), f"--seed: {-(2**63) - 1} is out of range"),
        (("models.py:build_clean", "--seed", "1.5"), "--seed: '1.5' is not an integer"),
        (("models.py:build_clean", "--device", "tpu9"), "is not a device"),
        (("--run", "missing_script.py"), "missing_script.py: no such file"),
        (("not a target",), "is not a target"),
    ],
)
def test_bad_input_is_a_clear_error(tmp_path, args, message):
    proc = opscan("record", "-o", str(tmp_path / "out.jsonl"), *args)  # -o first: --run takes the rest of the line
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _no_files(tmp_path)


@pytest.mark.parametrize("seed", [-1, -(2**63), 2**64 - 1])
def test_every_seed_torch_takes_is_taken(capsys, tmp_path, seed):
    from tests.record.helpers import read, record

    rc, _, err = record(capsys, "models.py:build_clean", "--seed", str(seed), *CPU, "-o", str(tmp_path / "r.jsonl"))
    assert rc == 0, err
    assert read(tmp_path / "r.jsonl")["header"]["seed"] == seed


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (("models.py:build_clean",), False),
        (("--run", "train.py"), False),
        (("--run", "train.py", "-o", "out.jsonl"), True),  # the script's -o, not opscan's
        (("--run", "train.py", "--epochs", "2", "--output=out.jsonl"), True),
        (("--run", "train.py", "-oout.jsonl"), True),
    ],
)
def test_a_record_without_output_says_where_an_o_after_run_went(tmp_path, args, hint):
    proc = opscan("record", *args, cwd=FIXTURES)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "opscan: error: record needs -o FILE, the record to write" in proc.stderr
    assert ("the -o after --run SCRIPT went to the script" in proc.stderr) == hint, proc.stderr
    assert "SCRIPT" not in proc.stdout + proc.stderr.replace("--run SCRIPT", "")  # the script never ran
    assert _no_files(FIXTURES)


def test_output_must_be_a_writable_file(tmp_path):
    proc = opscan("record", "models.py:build_clean", *CPU, "-o", str(tmp_path))
    assert proc.returncode == 2 and "is a directory" in proc.stderr and "Traceback" not in proc.stderr
    proc = opscan("record", "models.py:build_clean", *CPU, "-o", str(tmp_path / "no" / "such" / "out.jsonl"))
    assert proc.returncode == 2 and "no folder" in proc.stderr and "Traceback" not in proc.stderr
    proc = opscan("record", "models.py:build_clean", *CPU)
    assert proc.returncode == 2 and "record needs -o FILE" in proc.stderr


def test_dash_is_not_a_record_file_name(tmp_path):
    proc = opscan("record", f"{FIXTURES / 'models.py'}:build_clean", *CPU, "-o", "-", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "record writes a file: give -o a file name (-o /dev/stdout streams it to standard output)" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_script_that_raises_keeps_the_finished_steps_as_partial(tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(
        "import torch\n"
        "m = torch.nn.Linear(2, 2)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for step in range(5):\n"
        "    m(torch.ones(1, 2)).sum().backward()\n"
        "    opt.step()\n"
        "    if step == 1:\n"
        "        raise ValueError('boom')\n"
    )
    proc = opscan("record", *CPU, "--steps", "5", "-o", str(tmp_path / "out.jsonl"), "--run", str(script), cwd=tmp_path)
    assert proc.returncode == 2
    assert "ValueError: boom" in proc.stderr
    assert "the record is incomplete" in proc.stderr and "holds the first 2 step(s)" in proc.stderr
    assert not (tmp_path / "out.jsonl").exists()
    partial = (tmp_path / "out.jsonl.partial").read_text()
    assert partial.count('"type":"step"') == 2 and '"type": "end"' not in partial


def test_an_earlier_runs_partial_file_is_not_emptied(tmp_path):
    """The prefix a killed run left (docs/record.md) was silently replaced by the next record's stream to FILE.partial."""
    (tmp_path / "out.jsonl.partial").write_text("the steps a killed run recorded\n")
    proc = opscan("record", f"{FIXTURES / 'models.py'}:build_clean", *CPU, "-o", "out.jsonl", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "opscan: error: out.jsonl.partial is there already, left by an earlier record of out.jsonl "
        "(a run cut short keeps its steps there): move or remove it, then record again\n"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl.partial"]
    assert (tmp_path / "out.jsonl.partial").read_text() == "the steps a killed run recorded\n"


def test_a_model_that_raises_in_its_first_step_leaves_nothing(tmp_path):
    target = tmp_path / "bad.py"
    target.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = torch.nn.Linear(1, 1)\n"
        "    def forward(self, x):\n"
        "        raise RuntimeError('no forward today')\n"
        "def build():\n"
        "    return M(), torch.ones(1)\n"
        "def build_empty():\n"
        "    return torch.nn.ReLU(), torch.ones(1)\n"
        "def build_exits():\n"
        "    raise SystemExit(3)\n"
    )
    proc = opscan("record", "bad.py:build", *CPU, "-o", str(tmp_path / "out.jsonl"), cwd=tmp_path)
    assert proc.returncode == 2 and "no forward today" in proc.stderr
    assert _no_files(tmp_path)
    proc = opscan("record", "bad.py:build_empty", *CPU, "-o", str(tmp_path / "out.jsonl"), cwd=tmp_path)
    assert proc.returncode == 2 and "has no parameters to train" in proc.stderr and "Traceback" not in proc.stderr
    assert _no_files(tmp_path)
    proc = opscan("record", "bad.py:build_exits", *CPU, "-o", str(tmp_path / "out.jsonl"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr  # was 3, opscan's own exit code taken over by the target's, and no word
    assert "bad.py:build_exits exited with status 3 (sys.exit) instead of returning" in proc.stderr
    assert _no_files(tmp_path)


def test_a_script_that_takes_no_optimizer_step_records_nothing(tmp_path):
    (tmp_path / "infer.py").write_text("import torch\n\nmodel = torch.nn.Linear(3, 1)\nmodel(torch.randn(2, 3)).sum().backward()\n")
    proc = opscan("record", *CPU, "-o", str(tmp_path / "out.jsonl"), "--run", "infer.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert "opscan: error: the target took no optimizer step, so there was nothing to record" in proc.stderr
    assert _no_files(tmp_path)


def test_commands_import_no_torch():
    import subprocess
    import sys

    from tests.record.helpers import env

    code = (
        "import sys, opscan.cli, opscan.commands.record, opscan.commands.diff, opscan.diff, opscan.pytest_plugin\n"
        "opscan.cli.build_parser()\n"
        "heavy = sorted(m for m in ('torch', 'torchvision') if m in sys.modules)\n"
        "assert heavy == [], heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env(), capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_help_lists_the_commands():
    proc = opscan("--help", cwd=FIXTURES)
    assert "record" in proc.stdout + proc.stderr and "diff" in proc.stdout + proc.stderr
