"""The scan defects a new user found, one test each: each fails on the old behaviour."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.trace.helpers import FIXTURES, ROOT, opscan, scan
from tests.util import needs_torch

# Some tests here check what happens without torch (a refused target, `opscan.trace`'s install hint), so they
# must run on a lint-only install; only the ones that build or run a model skip there.
try:
    import torch
    from torch import nn
except ImportError:
    torch = nn = None

CPU = ("--device", "cpu")


def _env_with_poisoned_torch(tmp_path):
    """PYTHONPATH where `import torch` raises: proof that a command never imported it."""
    fake = tmp_path / "poison" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise RuntimeError('TORCH WAS IMPORTED')\n")
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSCAN_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "poison"), str(ROOT)])
    return env


def test_a_malformed_target_is_refused_before_torch_is_imported(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "opscan", "scan", "my_models.py"],
        cwd=tmp_path, env=_env_with_poisoned_torch(tmp_path), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stdout == ""  # no environment line, no report
    assert "'my_models.py' is not a target" in proc.stderr
    assert "TORCH WAS IMPORTED" not in proc.stderr and "Traceback" not in proc.stderr


@needs_torch
def test_a_failing_target_is_said_once_and_the_summary_does_not_pass(capsys):
    rc, out, err = scan(capsys, "targets_misc.py:raises", *CPU)
    assert rc == 2
    assert err.count("cannot build this model") == 0
    assert out.count("error: targets_misc.py:build") == 0 and "error: targets_misc.py:raises raised" in out
    assert out.splitlines()[-1] == "1 problem stopped part of the run; nothing found in the rest."


@needs_torch
def test_input_shape_with_a_file_target_is_an_error_not_ignored(capsys):
    rc, out, err = scan(capsys, "put_model.py:build", "--input-shape", "2,3,8,8", *CPU)
    assert (rc, out) == (2, "")  # refused up front, as record, diff and bench refuse it
    assert err == "opscan: error: --input-shape applies to torchvision:, timm: and hf: targets only; put_model.py:build builds its own inputs\n"


@needs_torch
def test_cudnn_benchmark_left_on_by_a_script_is_a_finding_at_its_line(capsys):
    rc, out, _err = scan(capsys, *CPU, "--output-format", "json", "--max-steps", "2", "--run", "train_benchmark.py")
    assert rc == 1
    (finding,) = [f for f in json.loads(out)["findings"] if f["code"] == "DET105"]
    assert (finding["path"], finding["line"]) == ("train_benchmark.py", 7)
    assert "cudnn.benchmark was True while train_benchmark.py trained" in finding["message"]
    assert not torch.backends.cudnn.benchmark  # and the scan put the flag back


@needs_torch
def test_cudnn_benchmark_reset_before_training_is_not_a_finding(capsys):
    rc, out, _err = scan(capsys, *CPU, "--output-format", "json", "--run", "train_benchmark_reset.py")
    assert rc == 0, out
    assert json.loads(out)["findings"] == []


@needs_torch
def test_cublas_unset_on_a_torch_that_checks_it_is_a_finding(capsys, monkeypatch):
    # The check itself needs CUDA and a torch before 2.10; here the environment says it enforces.
    import opscan.trace.tracer as tracer

    real = tracer.collect_env
    monkeypatch.setattr(tracer, "collect_env", lambda *a, **k: {**real(*a, **k), "torch": "2.9.1", "cublas_enforced": True})
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    rc, out, _err = scan(capsys, "clean_model.py:build", *CPU, "--output-format", "json")
    assert rc == 1
    (finding,) = json.loads(out)["findings"]
    assert finding["code"] == "DET102" and "torch 2.9.1 refuses cuBLAS" in finding["message"] and "it is unset" in finding["message"]


@needs_torch
def test_no_cublas_finding_where_torch_does_not_check(capsys):
    rc, out, _err = scan(capsys, "clean_model.py:build", *CPU, "--output-format", "json")
    assert rc == 0 and json.loads(out)["findings"] == []


@needs_torch
def test_a_compiled_module_is_named_by_the_users_path():
    from opscan.trace.sourcemap import SourceMap

    inner = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    compiled = torch.compile(inner)  # wraps it as `_orig_mod`; nothing is compiled until it is called
    names = SourceMap(roots=(compiled,))
    assert names.name(inner[0]).label == "0"
    assert "_orig_mod" not in names.name(inner[1]).label


def test_trace_without_torch_says_what_to_install():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["torch"] = None  # import torch now raises ModuleNotFoundError
        import opscan
        try:
            opscan.trace()
        except ModuleNotFoundError as exc:
            print(exc)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "opscan.trace needs torch; install opscan[trace]", proc.stdout + proc.stderr


PLUGIN_TEST = '''
import torch
from torch import nn


def test_needs_cuda(assert_deterministic_ready):
    assert_deterministic_ready(nn.Linear(3, 2), torch.randn(4, 3), device="cuda")
'''


@needs_torch
def test_plugin_skips_with_a_reason_when_cuda_is_asked_for_and_absent(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    (tmp_path / "test_cuda.py").write_text(PLUGIN_TEST)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:opscan", "-p", "opscan.pytest_plugin", "-p", "no:cacheprovider", "test_cuda.py"],
        cwd=tmp_path, env={**_plain_env(), "CUDA_VISIBLE_DEVICES": ""}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 skipped" in proc.stdout
    assert "no CUDA device here" in proc.stdout and "Traceback" not in proc.stdout


def _plain_env():
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSCAN_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def test_fixtures_folder_is_where_the_scripts_are():
    assert (FIXTURES / "train_benchmark.py").is_file() and opscan is not None
