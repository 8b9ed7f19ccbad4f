"""GPU tests for `opscan record` and `opscan diff`: fingerprints on CUDA, the Philox state of random ops, and ResNet-18.

Run on the GPU machine: `python3 -m pytest tests/gpu/test_record_gpu.py -m gpu -s`. Each diff test
prints one `ROOT CAUSE` line (or `NO DIVERGENCE`) to quote; with OPSCAN_GPU_RESULTS=FILE set, the same
facts are appended to FILE as JSON lines. The diff tests need opscan.compare.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")  # lint-only installs (no torch) skip this file

from opscan.trace.fingerprint import ROW, SCHEMES, Fingerprinter, reference  # noqa: E402
from tests.record.helpers import FIXTURES, line_of, read  # noqa: E402

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# OPSCAN_GPU_TEST_DEVICE=cpu dry-runs this file's code on the CPU (with --noconftest); its verdicts count only on CUDA.
DEV = os.environ.get("OPSCAN_GPU_TEST_DEVICE", "cuda")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSCAN_TEST_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _opscan(*args: str, timeout: int, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "opscan", *args], cwd=FIXTURES, env=_env(**extra), capture_output=True, text=True, timeout=timeout, check=False
    )


def _note(test: str, **facts) -> None:
    path = os.environ.get("OPSCAN_GPU_RESULTS")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"test": test, **facts}) + "\n")


def _first(doc: dict) -> dict | None:
    for table in doc.get("tables", []):
        if table["name"] == "first_divergence":
            return table["rows"][0] if table["rows"] else None
    return None


def _diff(test: str, *args: str, timeout: int):
    proc = _opscan("diff", *args, "--output-format", "json", timeout=timeout)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    first = _first(doc)
    if first is None:
        print(f"\nNO DIVERGENCE ({test}): {' '.join(args)}; {'; '.join(doc.get('notices', []))}")
    else:
        print(
            f"\nROOT CAUSE ({test}): {first['op']} at step {first['step']} ({first['phase']}), module {first['module']!r}, "
            f"{first['file']}:{first['line']}, cause: {first['cause']}"
        )
    _note(test, args=list(args), returncode=proc.returncode, first_divergence=first, errors=[e["message"] for e in doc["errors"]])
    return proc, doc, first


# ---------------------------------------------------------------- fingerprints on the device


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.uint8, torch.bool])
def test_cuda_fingerprints_equal_the_host_reference(dtype):
    g = torch.Generator().manual_seed(0)
    shapes = [(), (0,), (3, 5), (7, 3, 2), (ROW + 11,), (2, ROW * 3 + 5)]
    tensors = []
    for shape in shapes:
        t = torch.randn(shape, generator=g, dtype=torch.float64) * 50
        tensors.append(t.to(dtype) if dtype.is_floating_point else (t > 0 if dtype == torch.bool else t.to(dtype)))
    tensors.append(tensors[3].transpose(0, 2))  # not contiguous
    for scheme in SCHEMES:
        want = [reference(t, scheme) for t in tensors]
        for staged in (False, True):
            fpr = Fingerprinter(scheme, staged=staged)
            handles = [fpr.add(t.to(DEV), True) for t in tensors]
            fpr.end_step()
            assert [fpr.hex(h) for h in handles] == want, (scheme, staged)
            for t, h in zip(tensors, handles):
                if dtype.is_floating_point and t.numel():
                    assert fpr.norm(h) == pytest.approx(t.double().norm().item(), rel=2e-3, abs=1e-3)


def test_cuda_random_ops_carry_the_philox_seed_and_offset(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path, extra in ((a, {}), (b, {"OPSCAN_TEST_EXTRA_DRAW": "1"})):
        proc = _opscan("record", "models.py:build_dropper", "--steps", "2", "--device", DEV, "-o", str(path), timeout=300, **extra)
        assert proc.returncode == 0, proc.stderr
    draws_a = [op for op in read(a)["ops"] if "rng" in op]
    draws_b = [op for op in read(b)["ops"] if "rng" in op]
    assert draws_a and all(op["rng"]["device"].startswith(DEV) and op["rng"]["seed"] == 0 for op in draws_a)
    position = "offset" if DEV == "cuda" else "state"
    assert all(position in op["rng"] for op in draws_a + draws_b)
    assert len({op["rng"][position] for op in draws_a}) == len(draws_a)  # the stream moves on
    dropout_a = [op["rng"] for op in draws_a if op["line"] == line_of("DROPOUT_LINE")]
    dropout_b = [op["rng"] for op in draws_b if op["line"] == line_of("DROPOUT_LINE")]
    extra_b = [op["rng"] for op in draws_b if op["line"] == line_of("EXTRA_DRAW_LINE")]
    assert len(dropout_a) == len(dropout_b) == len(extra_b) == 2
    assert extra_b[0] == dropout_a[0]  # the extra draw takes the state a's dropout drew from
    assert dropout_b[0] != dropout_a[0]  # so b's dropout draws from a shifted stream
    print(f"\nrandom draws (a): {[(op['op'], op['rng']) for op in draws_a]}")
    print(f"random draws (b): {[(op['op'], op['rng']) for op in draws_b]}")


def test_resnet18_cuda_record_staged_equals_direct(tmp_path):
    """Deterministic mode, in this process: the staged (default on CUDA) and direct paths give the same record."""
    from opscan.trace.record import record
    from opscan.trace.runner import parse_target

    records = []
    for staged in (True, False):
        path = tmp_path / f"r18-{staged}.jsonl"
        result = record(
            parse_target("torchvision:resnet18"), str(path), device=DEV, steps=2, seed=0, deterministic=True,
            input_shape=(8, 3, 64, 64), staged=staged,
        )  # fmt: skip
        assert result.complete, result.problem
        assert not any("could not be fingerprinted" in n for n in result.notices), result.notices
        records.append(read(path))
    staged_rec, direct_rec = records
    ops = staged_rec["ops"]
    nulls = {op["op"] for op in ops for fp in op["out"] if fp is None}
    assert nulls <= {"aten.empty.memory_format", "aten.empty_like.default", "aten.empty_strided.default", "aten.new_empty.default"}, nulls
    assert [(op["op"], op["in"], op["out"]) for op in ops] == [(op["op"], op["in"], op["out"]) for op in direct_rec["ops"]]
    assert [s["params"]["fc.weight"]["fp"] for s in staged_rec["steps"]] == [s["params"]["fc.weight"]["fp"] for s in direct_rec["steps"]]
    print(f"\nresnet18 on {DEV}: {len(ops) // 2} ops per step, {path.stat().st_size // 2 // 1000} kB per step")


# ---------------------------------------------------------------- ResNet-18, issue 10's acceptance


def test_resnet18_benchmark_mode_diverges_with_a_root_cause():
    """fp32, default (nondeterministic) mode, cudnn.benchmark=True, two fresh processes: a root cause at step 0 or 1."""
    proc, doc, first = _diff(
        "resnet18 benchmark=True", "torchvision:resnet18", "--steps", "2", "--benchmark", "--device", DEV,
        "--input-shape", os.environ.get("OPSCAN_GPU_TEST_SHAPE", "32,3,224,224"), timeout=420,
    )  # fmt: skip
    assert doc["errors"] == [], doc["errors"]
    assert proc.returncode == 1 and first is not None, "the two runs matched bit for bit"
    assert first["step"] in (0, 1)
    assert first["module"] is not None and first["file"] and first["line"], first
    assert first["cause"] in ("kernel nondeterminism", "random stream"), first


def test_resnet18_deterministic_matches_for_200_steps():
    """--deterministic (use_deterministic_algorithms(True), cudnn.benchmark off): no divergence over 200 steps."""
    proc, doc, first = _diff(
        "resnet18 --deterministic x200", "torchvision:resnet18", "--steps", os.environ.get("OPSCAN_GPU_TEST_STEPS", "200"), "--deterministic", "--device", DEV,
        "--input-shape", "8,3,64,64", timeout=560,
    )  # fmt: skip
    assert doc["errors"] == [], doc["errors"]
    assert first is None and proc.returncode == 0, first
    assert any("match bit for bit" in n for n in doc["notices"]), doc["notices"]
