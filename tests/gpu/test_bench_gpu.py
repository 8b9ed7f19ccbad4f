"""GPU tests of `opscan bench`'s timing path: CUDA events, peak memory, the profiler's kernels, the env it reports.

Run on the GPU machine: `python3 -m pytest tests/gpu/test_bench_gpu.py -m gpu`.
No assertion is about speed (that is benchmarks/bench_determinism.py's job):
they check that every variant was timed and profiled, that the kernels and
lines land where they belong, that a deterministic fallback shows as other
kernels, that an op that raises becomes a finding, and that no flag is left
changed. OPSCAN_GPU_TEST_DEVICE=cpu dry-runs the engine parts on the CPU
(with --noconftest); the CUDA-only checks then skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime

import pytest

torch = pytest.importorskip("torch")  # lint-only installs (no torch) skip this file

from opscan.bench.measure import bench  # noqa: E402
from opscan.trace.runner import parse_target  # noqa: E402
from opscan.trace.state import TorchFlags  # noqa: E402
from opscan.versions import parse_version  # noqa: E402
from tests.bench.helpers import FIXTURES, ROOT, line_of  # noqa: E402
from tests.util import chdir  # noqa: E402

pytestmark = pytest.mark.gpu

DEV = os.environ.get("OPSCAN_GPU_TEST_DEVICE", "cuda")
ON_GPU = DEV.startswith("cuda")
needs_cuda = pytest.mark.skipif(not ON_GPU, reason="checks CUDA-only output")
ROUNDS = 20


def run_bench(spec, **kwargs):
    kwargs = {"device": DEV, "rounds": ROUNDS, "warmup": 2, "profile_steps": 2, "top": 200, **kwargs}
    with chdir(FIXTURES):
        return bench(parse_target(spec), **kwargs)


def rows(report, name):
    table = report.table(name)
    keys = [c.key for c in table.columns]
    return [dict(zip(keys, row)) for row in table.rows]


@pytest.fixture(scope="module")
def resnet():
    before = TorchFlags.capture()
    report = run_bench("torchvision:resnet18", input_shape=(8, 3, 64, 64))
    return report, before, TorchFlags.capture()


def test_every_variant_is_timed(resnet):
    report, _, _ = resnet
    assert report.exit_code() == 0, (report.errors, report.findings)
    got = {r["variant"]: r for r in rows(report, "variants")}
    assert list(got) == ["fp32/bench", "fp32/default", "fp32/det", "bf16/bench", "bf16/default", "bf16/det"]
    for row in got.values():
        assert row["status"] == "ok" and row["steps"] == ROUNDS
        assert row["median_ms"] > 0 and row["spread_pct"] >= 0
        if ON_GPU:
            assert row["peak_mib"] > 0
    assert report.summary.startswith("verdict: determinism costs ")


def test_the_cost_table_adds_up(resnet):
    report, _, _ = resnet
    for row in rows(report, "cost"):
        assert row["cost_pct"] == pytest.approx(row["autotuner_pp"] + row["determinism_pp"], abs=0.02)


def test_the_ops_have_their_lines_forward_and_backward(resnet):
    report, _, _ = resnet
    ops = rows(report, "ops")
    assert {r["precision"] for r in ops} == {"fp32", "bf16"}
    forward_convs = {r["where"] for r in ops if (r["phase"], r["op"]) == ("forward", "aten::conv2d")}
    backward_convs = {r["where"] for r in ops if (r["phase"], r["op"]) == ("backward", "aten::convolution_backward")}
    assert forward_convs and all(w.startswith("torchvision/models/resnet.py:") for w in forward_convs)
    assert backward_convs and backward_convs <= forward_convs  # backward ops sit at the forward line
    if ON_GPU:
        conv = next(r for r in ops if r["op"] == "aten::convolution_backward")
        assert conv["bench_ms"] > 0 and conv["det_ms"] > 0 and conv["kernels"]
        assert "GPU kernel time" in report.table("ops").note


@needs_cuda
def test_the_env_says_where_it_ran(resnet):
    report, _, _ = resnet
    env = report.env
    assert env["timer"] == "cuda events" and env["gpu"] == torch.cuda.get_device_name()
    assert env["torch"] == torch.__version__ and env["cuda"] == torch.version.cuda
    assert env["cudnn"] == torch.backends.cudnn.version()
    datetime.fromisoformat(env["date"])
    assert env["clocks_from"] in ("pynvml", "nvidia-smi", None)
    if env["clocks_from"]:
        assert env["sm_clock_mhz"] > 0 and env["max_sm_clock_mhz"] >= env["sm_clock_mhz"] > 0
    if parse_version(torch.__version__) < (2, 10, 0):
        assert env["cublas_workspace_config"] in (":4096:8", ":16:8")
    elif env["cublas_workspace_config_set_by"] != "environment":
        assert env["cublas_workspace_config"] is None  # torch 2.10+ does not need it: left alone


def test_no_flag_is_left_changed(resnet):
    _, before, after = resnet
    assert after == before
    assert not torch.is_autocast_enabled(torch.device(DEV).type)


def test_a_deterministic_fallback_shows_as_other_kernels():
    report = run_bench("models.py:build_index_add", precisions=("fp32",))
    assert report.exit_code() == 0, (report.errors, report.findings)
    where = f"models.py:{line_of('index_add')}"
    (row,) = [r for r in rows(report, "ops") if (r["phase"], r["op"], r["where"]) == ("forward", "aten::index_add_", where)]
    if ON_GPU:  # atomics when free, a sort-based path in deterministic mode
        assert "(same kernels)" not in row["kernels"] and " → " in row["kernels"]
        assert row["det_ms"] > 0 and row["bench_ms"] > 0


def test_an_op_that_raises_is_the_scans_finding_and_the_rest_is_timed():
    report = run_bench("models.py:build_put", profile_steps=0)
    assert report.exit_code() == 1 and not report.errors
    forward = [f for f in report.findings if f.properties["op"] == "aten.put_.default"]
    assert [(f.code, f.path, f.line) for f in forward] == [("DET100", "models.py", line_of("put"))]
    got = {r["variant"]: r for r in rows(report, "variants")}
    assert got["fp32/det"]["status"].startswith("blocked: ") and got["bf16/det"]["status"].startswith("blocked: ")
    assert {got[v]["steps"] for v in ("fp32/bench", "fp32/default", "bf16/bench", "bf16/default")} == {ROUNDS}


@needs_cuda
def test_the_command_times_a_script(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    base = [sys.executable, "-m", "opscan", "bench", "--rounds", "20", "--warmup", "2", "--profile-steps", "1"]
    outputs = {}
    for fmt in ("json", "html"):  # the other formats render the same Report (tests/bench/test_report.py)
        out = tmp_path / f"report.{fmt}"
        done = subprocess.run(
            [*base, "--output-format", fmt, "-o", str(out), "--run", "train_bench.py", "100000"],
            cwd=FIXTURES, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        outputs[fmt] = out.read_text()
    doc = json.loads(outputs["json"])
    variants = doc["tables"][0]["rows"]
    assert [r["status"] for r in variants] == ["ok"] * 6 and {r["steps"] for r in variants} == {20}
    assert not any("did not run as labelled" in n for n in doc["notices"])  # it sets benchmark=True at its top only
    assert doc["summary"].startswith("verdict: ") and doc["env"]["timer"] == "cuda events"
    assert "<svg" in outputs["html"]
