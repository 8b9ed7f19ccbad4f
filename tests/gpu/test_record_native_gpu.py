"""GPU tests for the native record engine (opscan/trace/native.py): its kernel's fingerprints, and records on CUDA.

Run on the GPU machine: `python3 -m pytest tests/gpu/test_record_native_gpu.py -m gpu -s`. The engine
is built on first use (nvcc and a C++ compiler); where it cannot be, these tests skip and say why.
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")  # lint-only installs (no torch) skip this file

from opscan.trace.fingerprint import reference  # noqa: E402
from tests.gpu.test_record_gpu import DEV, _diff, _opscan  # noqa: E402
from tests.record.helpers import line_of, read  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def ext():
    from opscan.trace import native

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    module = native.load(cuda=True)
    if module is None:
        pytest.skip(f"the native engine could not be built: {native.why_not(True)}")
    return module


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.int16, torch.uint8, torch.bool, torch.complex64]
)
def test_kernel_fingerprints_equal_the_host_reference(ext, dtype):
    from opscan.trace.native import CHUNK_ELEMENTS, fingerprint_now

    g = torch.Generator().manual_seed(0)
    shapes = [(), (0,), (3, 5), (7, 3, 2), (CHUNK_ELEMENTS + 11,), (2, CHUNK_ELEMENTS * 3 + 5), (4, 3, 16, 16)]
    tensors = []
    for shape in shapes:
        t = torch.randn(shape, generator=g, dtype=torch.float64) * 50
        if dtype.is_complex:
            tensors.append(torch.complex(t, -t).to(dtype))
        elif dtype == torch.bool:
            tensors.append(t > 0)
        else:
            tensors.append(t.to(dtype))
    tensors.append(tensors[3].transpose(0, 2))  # not contiguous: hashed through a contiguous copy
    tensors.append(tensors[6].to(memory_format=torch.channels_last) if not dtype.is_complex else tensors[6])  # dense, another order
    tensors.append(tensors[2][:, ::2])  # a strided slice
    want = [reference(t) for t in tensors]
    got = fingerprint_now(ext, [t.to(DEV) for t in tensors])
    assert [fp for fp, _ in got] == want
    if dtype.is_floating_point:
        for t, (_, norm) in zip(tensors, got):
            assert norm == pytest.approx(t.double().norm().item(), rel=1e-6, abs=1e-6)


def test_native_and_python_engines_agree_on_resnet18(ext, tmp_path):
    """Deterministic mode, in this process: both engines see the same parameters and loss at every step."""
    from opscan.trace.native import recorder_for
    from opscan.trace.record import record
    from opscan.trace.runner import parse_target

    records = {}
    for engine in ("python", "native"):
        path = tmp_path / f"r18-{engine}.jsonl"
        result = record(
            parse_target("torchvision:resnet18"), str(path), device=DEV, steps=3, seed=0, deterministic=True,
            input_shape=(8, 3, 64, 64), make_recorder=recorder_for(engine, DEV)[0],
        )  # fmt: skip
        assert result.complete, result.problem
        assert not any("could not be" in n for n in result.notices), result.notices
        records[engine] = read(path)
    py, nat = records["python"], records["native"]
    assert nat["header"]["env"]["record_engine"] == "native" and py["header"]["env"]["record_engine"] == "python"
    for a, b in zip(py["steps"], nat["steps"]):
        assert {k: v["fp"] for k, v in a["params"].items()} == {k: v["fp"] for k, v in b["params"].items()}
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-6)
    ops = nat["ops"]
    nulls = {op["op"] for op in ops for fp in op["out"] if fp is None}
    assert nulls <= {"aten.empty.memory_format", "aten.empty_like.default", "aten.empty_strided.default", "aten.new_empty.default"}, nulls
    convs = [op for op in ops if op["op"] == "aten.conv2d.default" and op["step"] == 0]
    assert convs and all(op["module"] and op["file"] and op["line"] for op in convs)
    backward = [op for op in ops if op["phase"] == "backward" and op["step"] == 0]
    assert backward and sum(1 for op in backward if op["line"]) > len(backward) // 2  # forward lines for backward ops
    print(f"\nresnet18: python engine {len(py['ops']) // 3} ops per step, native {len(ops) // 3}")


def test_native_diff_of_resnet18_in_benchmark_mode_names_a_root_cause(ext):
    proc, doc, first = _diff(
        "resnet18 benchmark=True native", "torchvision:resnet18", "--steps", "2", "--benchmark", "--device", DEV, "--engine", "native",
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert first is not None and first["step"] in (0, 1)
    assert first["module"] is not None and first["file"] and first["line"]


def test_native_diff_of_resnet18_deterministic_matches(ext):
    steps = os.environ.get("OPSCAN_GPU_TEST_NATIVE_STEPS", "20")
    proc, doc, first = _diff(
        f"resnet18 --deterministic x{steps} native", "torchvision:resnet18", "--steps", steps, "--deterministic", "--device", DEV,
        "--engine", "native", timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert first is None


def test_native_random_stream_shift_is_classified(ext, tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path, extra in ((a, {}), (b, {"OPSCAN_TEST_EXTRA_DRAW": "1"})):
        proc = _opscan("record", "models.py:build_dropper", "--steps", "2", "--device", DEV, "--engine", "native", "-o", str(path), timeout=300, **extra)
        assert proc.returncode == 0, proc.stderr
    draws = [op for op in read(a)["ops"] if "rng" in op]
    assert draws and all(op["rng"]["device"].startswith("cuda") and "offset" in op["rng"] for op in draws)
    assert {op["line"] for op in draws} >= {line_of("DROPOUT_LINE")}
    proc = _opscan("compare", str(a), str(b), "--output-format", "json", timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert '"random stream"' in proc.stdout


def test_assert_reproducible_on_cuda_records_with_the_native_engine(ext, tmp_path):
    """check_workload (assert_reproducible's engine) picks the native engine on CUDA: it passes a deterministic
    model and fails one whose index_add_ sums duplicate indices with atomics, at that op."""
    from opscan.diff import check_workload, first_divergence

    class Scatter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(64, 64)

        def forward(self, x):
            h = self.fc(x)
            index = torch.zeros(h.shape[0], dtype=torch.long, device=h.device)  # every row into row 0: atomics
            return torch.zeros(4, 64, device=h.device).index_add_(0, index, h * 1e-3 + 1.0)  # INDEX_ADD_LINE

    torch.manual_seed(0)
    clean = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(DEV)
    report = check_workload(clean, torch.randn(16, 32, device=DEV), steps=3, keep=str(tmp_path / "clean"))
    assert not report.errors and first_divergence(report) is None, report.errors
    header = read(tmp_path / "clean" / "a.jsonl")["header"]
    assert header["env"]["record_engine"] == "native", header["env"]
    bn = [op for op in read(tmp_path / "clean" / "a.jsonl")["ops"] if op["op"] == "aten.batch_norm.default"]
    assert [op["step"] for op in bn] == [0, 1, 2] and bn[1]["in"][3:5] == bn[0]["out"][-2:]  # running stats, step to step

    parted = None
    for attempt in range(5):  # atomics order differs between runs nearly always; a few tries make it certain enough
        report = check_workload(Scatter().to(DEV), torch.randn(20000, 64, device=DEV), steps=1)
        parted = first_divergence(report)
        if parted is not None:
            break
    assert parted is not None and parted["op"].startswith("aten.index_add"), parted
