"""`opscan bench` argument handling: every bad input is a clear message and exit 2, with no output file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from opscan.cli import main
from tests.bench.helpers import FIXTURES, ROOT
from tests.util import chdir, needs_torch


def bench(capsys, *args, cwd=FIXTURES):
    capsys.readouterr()
    with chdir(cwd):
        try:
            rc = main(["bench", *args])
        except SystemExit as exc:  # argparse
            rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give a TARGET or --run SCRIPT"),
        (("models.py:build", "models.py:build_put"), "one target at a time"),
        (("nocolon",), "is not a target"),
        (("--rounds", "19", "models.py:build"), "19 rounds: a median of fewer than 20 timed steps"),
        (("--rounds", "0", "models.py:build"), "'0' is not a positive integer"),
        (("--precision", "fp16", "models.py:build"), "'fp16' is not a list of precisions"),
        (("--profile-steps", "-1", "models.py:build"), "'-1' is not an integer >= 0"),
        (("--output-format", "sarif", "models.py:build"), "invalid choice: 'sarif'"),
        (("--input-shape", "2,3,8,8", "models.py:build"), "--input-shape applies to torchvision:, timm: and hf: targets only"),
        (("--input-shape", "2,3,8,8", "--run", "train_bench.py"), "--input-shape applies to"),
        pytest.param(("--device", "cpu", "models.py:build"), "opscan bench needs a CUDA GPU", marks=needs_torch),
    ],
)
def test_bad_input_is_a_clear_error(capsys, tmp_path, args, message):
    out_file = tmp_path / "report.json"
    rc, out, err = bench(capsys, *args, "-o", str(out_file)) if "--run" not in args else bench(capsys, "-o", str(out_file), *args)
    assert rc == 2
    assert message in err
    assert "Traceback" not in err
    assert out == "" and not out_file.exists()


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "html"])
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nothere.py:build",), "nothere.py: no such file"),  # said before it needs a GPU (or torch)
        (("--run", "nothere.py"), "nothere.py: no such file"),
        (("--run", "/"), "/ is a directory, not a Python script"),
    ],
)
def test_a_target_file_that_cannot_be_run_is_an_error_in_the_report(capsys, tmp_path, fmt, args, message):
    """As scan's: json is still json (it printed nothing, the error was on stderr only), and -o's file is left as it was."""
    rc, out, err = bench(capsys, "--output-format", fmt, *args)
    assert rc == 2 and "Traceback" not in err
    if fmt == "json":
        doc = json.loads(out)
        assert (doc["command"], doc["errors"]) == ("bench", [{"message": message, "target": args[-1]}])
    else:
        assert message in out
    assert err == ("" if fmt == "text" else f"opscan: error: {message}\n")  # text on stdout says it once
    out_file = tmp_path / "report.json"
    out_file.write_text("last good report\n")
    rc, out, err = bench(capsys, "--output-format", fmt, "-o", str(out_file), *args)
    assert (rc, out, out_file.read_text()) == (2, "", "last good report\n")
    assert err == f"opscan: error: {message}\nopscan: {out_file} not written: the run stopped before any result\n"


def test_without_a_gpu_bench_says_it_needs_one(capsys, monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out_file = tmp_path / "report.html"
    rc, out, err = bench(capsys, "--output-format", "html", "-o", str(out_file), "models.py:build")
    assert rc == 2
    assert err.strip() == (
        "opscan: error: opscan bench needs a CUDA GPU: it times steps with CUDA events and compares GPU kernels, "
        "and none is available here"
    )
    assert not out_file.exists()
    rc, _, err = bench(capsys, "--device", "cuda", "models.py:build")
    assert rc == 2 and "no CUDA GPU is available; opscan bench needs a CUDA GPU" in err


def test_an_output_that_is_a_module_the_script_imported_is_not_written(capsys, monkeypatch, tmp_path):
    """-o naming a module the script imports (not on the command line) was replaced by the report, as in scan; the
    report is kept in helper.py.partial, as scan keeps it.

    The timing itself needs a GPU: here the script runs once on the CPU in its place (the loading is what counts).
    """
    pytest.importorskip("torch")
    from opscan.bench import measure
    from opscan.findings import Report
    from opscan.trace import runner

    helper = "from torch import nn\n\n\ndef make():\n    return nn.Linear(4, 2)\n"
    (tmp_path / "helper.py").write_text(helper)
    (tmp_path / "t.py").write_text(
        "import torch\nfrom helper import make\n\nmodel = make()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model(torch.ones(2, 4)).sum().backward()\nopt.step()\n"
    )

    def timed_on_the_cpu(target, **_options):
        assert runner.run(target, device="cpu", steps=1).problem is None
        return Report("bench", summary="verdict: timed")

    monkeypatch.setattr(runner, "resolve_device", lambda requested, also="": "cuda")
    monkeypatch.setattr(measure, "bench", timed_on_the_cpu)
    monkeypatch.delitem(sys.modules, "helper", raising=False)
    rc, out, err = bench(capsys, "-o", "helper.py", "--run", "t.py", cwd=tmp_path)
    sys.modules.pop("helper", None)
    assert (rc, out) == (2, ""), err
    assert err == (
        "opscan: error: -o helper.py is a project module the run loaded: the report would overwrite it, so it was not written; "
        "the whole report is in helper.py.partial: move it where you want it\n"
    )
    assert (tmp_path / "helper.py").read_text() == helper
    assert "verdict: timed" in (tmp_path / "helper.py.partial").read_text()  # the minutes of timing are not lost


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[tool.opscan.bench]\nrounds = 5\n", "5 rounds: a median of fewer than 20"),
        ("[tool.opscan.bench]\nrounds = 'many'\n", "[tool.opscan.bench] rounds must be a positive integer"),
        ("[tool.opscan.bench]\nwarmup = 0\n", "[tool.opscan.bench] warmup must be a positive integer"),
        ("[tool.opscan.bench]\ninput-shape = [2, 0]\n", "[tool.opscan.bench] input-shape must be a list of positive integers"),
        ("[tool.opscan.bench]\nseed = 1\n", "unknown key(s) in [tool.opscan.bench]: seed"),
        pytest.param("[tool.opscan.bench]\ndevice = 'cpu'\n", "opscan bench needs a CUDA GPU", marks=needs_torch),
        pytest.param("[tool.opscan.bench]\ndevice = 'tpu9'\n", "pyproject.toml: [tool.opscan.bench] device: 'tpu9' is not a device", marks=needs_torch),
    ],
)
def test_config_section(capsys, tmp_path, toml, message):
    (tmp_path / "pyproject.toml").write_text(toml)
    (tmp_path / "m.py").write_text((FIXTURES / "models.py").read_text())
    rc, _, err = bench(capsys, "m.py:build", cwd=tmp_path)
    assert rc == 2 and message in err


def test_config_values_reach_the_settings(tmp_path):
    from opscan import config

    (tmp_path / "pyproject.toml").write_text("[tool.opscan.bench]\ndevice = 'cuda:1'\ninput-shape = [8, 3, 64, 64]\nrounds = 40\nwarmup = 2\n")
    settings = config.load([str(tmp_path)]).bench
    assert (settings.device, settings.input_shape, settings.rounds, settings.warmup) == ("cuda:1", (8, 3, 64, 64), 40, 2)
    assert config.load([str(tmp_path / "elsewhere")], str(tmp_path / "pyproject.toml")).scan.device is None


def test_the_command_is_registered_and_imports_no_torch():
    code = (
        "import sys; from opscan.cli import build_parser; "
        "p = build_parser('bench'); p.parse_args(['bench', '--rounds', '25', 'torchvision:resnet18']); "
        "print('torch' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert done.stdout.strip() == "False"
    help_text = subprocess.run([sys.executable, "-m", "opscan", "--help"], capture_output=True, text=True, env=env).stdout
    assert "bench" in help_text
