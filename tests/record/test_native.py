"""The native record engine (opscan/trace/native.py) on the CPU: its fingerprints, its records, and its choice.

The engine is built on first use with the C++ compiler torch.utils.cpp_extension finds (the CPU-only
build here; tests/gpu/test_record_native_gpu.py covers the CUDA kernel). Where it cannot be built,
the tests that need it skip and say why; those of the choice itself always run.
"""

from __future__ import annotations

import json
import re
import struct
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from opscan.trace.fingerprint import reference  # noqa: E402
from opscan.trace.recordwriter import PHASES, PackedOps, Resolver  # noqa: E402
from tests.record.helpers import CPU, FIXTURES, line_of, opscan, read, record  # noqa: E402

NATIVE = ("--engine", "native")


@pytest.fixture(scope="module")
def ext():
    from opscan.trace import native

    module = native.load(cuda=False)
    if module is None:
        pytest.skip(f"the native engine could not be built here: {native.why_not(False)}")
    return module


# ---------------------------------------------------------------- fingerprints

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    dtype=st.sampled_from(DTYPES),
    shape=st.lists(st.integers(0, 9), min_size=0, max_size=3),
    layout=st.sampled_from(["contiguous", "transposed", "sliced", "expanded"]),
    seed=st.integers(0, 2**16),
)
def test_fingerprints_equal_the_host_reference(ext, dtype, shape, layout, seed):
    from opscan.trace.native import fingerprint_now

    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g, dtype=torch.float64) * 100
    t = torch.complex(t, -t).to(dtype) if dtype.is_complex else (t > 0 if dtype == torch.bool else t.to(dtype))
    if layout == "transposed" and t.dim() >= 2:
        t = t.transpose(0, -1)
    elif layout == "sliced" and t.dim() >= 1:
        t = t[::2]
    elif layout == "expanded" and t.dim() >= 1:
        t = t.unsqueeze(0).expand(3, *t.shape)
    ((fp, norm),) = fingerprint_now(ext, [t])
    assert fp == reference(t)
    if dtype.is_floating_point:
        assert norm == pytest.approx(t.double().norm().item(), rel=1e-9, abs=1e-9)
    else:
        assert norm is None or dtype.is_complex


def test_the_xor_scheme_is_the_reference_one(ext):
    from opscan.trace.native import fingerprint_now

    t = torch.arange(1000, dtype=torch.int32)
    assert fingerprint_now(ext, [t], scheme="xor64")[0][0] == reference(t, "xor64")


class _Wrapped(torch.Tensor):
    """A wrapper subclass: its values are read through Python (__torch_dispatch__)."""

    @staticmethod
    def __new__(cls, elem):
        return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype)

    def __init__(self, elem):
        self.elem = elem

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda v: v.elem if isinstance(v, _Wrapped) else v  # noqa: E731
        return func(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in (kwargs or {}).items()})


def test_a_tensor_subclass_is_left_unfingerprinted(ext):
    from opscan.trace.native import fingerprint_now

    plain = torch.arange(4.0)
    assert fingerprint_now(ext, [_Wrapped(plain), plain]) == [(None, None), (reference(plain), pytest.approx(plain.norm().item()))]


# ---------------------------------------------------------------- records


def test_both_engines_see_the_same_parameters_and_loss(ext, tmp_path):
    from opscan.trace.native import recorder_for
    from opscan.trace.record import record as record_run
    from opscan.trace.runner import parse_target
    from tests.util import chdir

    from tests.record.helpers import FIXTURES

    records = {}
    with chdir(FIXTURES):
        for engine in ("python", "native"):
            path = tmp_path / f"{engine}.jsonl"
            make, _ = recorder_for(engine, "cpu")
            result = record_run(parse_target("models.py:build_conv"), str(path), device="cpu", steps=3, seed=0, make_recorder=make)
            assert result.complete, result.problem
            records[engine] = read(path)
    py, nat = records["python"], records["native"]
    assert [s["params"] for s in py["steps"]] == [s["params"] for s in nat["steps"]]  # fingerprints, norms and samples
    assert [s["loss"] for s in py["steps"]] == pytest.approx([s["loss"] for s in nat["steps"]], rel=1e-12)
    assert (py["header"]["env"]["record_engine"], nat["header"]["env"]["record_engine"]) == ("python", "native")
    # The engines' ops differ in granularity (the native engine records outermost calls) but not in what they compute.
    ops = {op["op"] for op in nat["ops"]}
    assert "aten.conv2d.default" in ops and "aten.convolution.default" not in ops
    both = lambda rec, name: [op["out"] for op in rec["ops"] if op["op"] == name]  # noqa: E731
    assert both(py, "aten.convolution_backward.default") == both(nat, "aten.convolution_backward.default")
    from opscan.compare import compare_records

    # Aligned op by op, the same run's two records differ in hundreds of places: no DET203 (it would
    # say the runs ran different ops), but an error that says what to do.
    report = compare_records(str(tmp_path / "python.jsonl"), str(tmp_path / "native.jsonl"))
    assert not report.findings and not report.tables
    assert [e.message for e in report.errors] == [
        f"the records were made by different engines ({tmp_path / 'python.jsonl'}: python, {tmp_path / 'native.jsonl'}: native), "
        "which record ops at different granularity, so they cannot be compared op by op; "
        "record both with the same --engine (python works on every device)"
    ]
    same = compare_records(str(tmp_path / "native.jsonl"), str(tmp_path / "native.jsonl"))
    assert not same.errors and not any("different engines" in n for n in same.notices)


def test_backward_ops_carry_the_forward_line(ext, capsys, tmp_path):
    path = tmp_path / "conv.jsonl"
    rc, _, err = record(capsys, "models.py:build_conv", "--steps", "1", *CPU, *NATIVE, "-o", str(path))
    assert rc == 0, err
    ops = read(path)["ops"]
    conv_bwd = [op for op in ops if op["op"].startswith("aten.convolution_backward")]
    assert conv_bwd and all(
        (op["phase"], op["module"], op["module_class"], op["file"], op["line"]) == ("backward", "conv", "Conv2d", "models.py", line_of("CONV_LINE"))
        for op in conv_bwd
    )
    forward = [op for op in ops if op["op"] == "aten.conv2d.default"]
    assert forward and (forward[0]["module"], forward[0]["line"]) == ("conv", line_of("CONV_LINE"))
    assert {op["phase"] for op in ops} == {"forward", "backward", "optimizer"}


def test_random_ops_carry_the_generator_state(ext, capsys, tmp_path, monkeypatch):
    path = tmp_path / "drop.jsonl"
    monkeypatch.setenv("OPSCAN_TEST_EXTRA_DRAW", "1")
    rc, _, err = record(capsys, "models.py:build_dropper", "--steps", "2", *CPU, *NATIVE, "-o", str(path))
    assert rc == 0, err
    draws = [op for op in read(path)["ops"] if "rng" in op]
    rand = [op for op in draws if op["op"] == "aten.rand.default"]
    drop = [op for op in draws if op["op"] == "aten.dropout.default"]
    assert len(rand) == 2 and len(drop) == 2 and len(draws) == 4
    assert rand[0]["line"] == line_of("EXTRA_DRAW_LINE") and drop[0]["line"] == line_of("DROPOUT_LINE")
    states = [op["rng"]["state"] for op in draws]
    assert all(op["rng"]["device"] == "cpu" and op["rng"]["seed"] == 0 for op in draws)
    assert len(set(states)) == len(states)


def test_a_script_is_recorded_with_its_parameters_named(ext, capsys, tmp_path):
    path = tmp_path / "script.jsonl"
    rc, _, err = record(capsys, "--steps", "3", *CPU, *NATIVE, "-o", str(path), "--run", "train.py", "--epochs", "10")
    assert rc == 0, err
    rec = read(path)
    assert [s["step"] for s in rec["steps"]] == [0, 1, 2]
    assert list(rec["steps"][0]["params"]) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert all(isinstance(s["loss"], float) for s in rec["steps"])
    init = [op for op in rec["ops"] if op["op"] == "aten.uniform_.default"]
    assert init and all(op["in"] == [None] for op in init)  # nn.Linear's torch.empty weight: garbage, not fingerprinted
    later = [op for op in rec["ops"] if op["step"] == 2 and op["phase"] == "forward" and op["op"] == "aten.linear.default"]
    assert later and any(fp and fp.startswith("p:0.weight@") for op in later for fp in op["in"])


AFTER_THE_LAST_STEP = """
import torch
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.ones(2, 3)).sum().backward()
opt.step()
print(float((torch.ones(3) * 2).sum()))  # after the last step: ops in no step
"""


@pytest.mark.parametrize("engine", ["python", "native"])
def test_ops_after_the_last_step_are_counted_and_said(request, capsys, tmp_path, engine):
    if engine == "native":
        request.getfixturevalue("ext")
    (tmp_path / "after.py").write_text(AFTER_THE_LAST_STEP)
    path = tmp_path / "after.jsonl"
    rc, _, err = record(capsys, "--steps", "5", *CPU, "--engine", engine, "-o", str(path), "--run", "after.py", cwd=tmp_path)
    assert rc == 0, err
    counted = re.search(r"opscan: (\d+) op\(s\) after the last optimizer step are in no step and were not written", err)
    assert counted and int(counted[1]) >= 3, err  # ones, mul, sum (and the read of the value)
    assert len(read(path)["steps"]) == 1


@pytest.mark.parametrize("engine", ["python", "native"])
def test_batch_norm_running_stats_are_fingerprinted_where_written(request, capsys, tmp_path, engine):
    # native_batch_norm updates running_mean/var in place with no `(a!)` in its schema and no version
    # bump: without record.STATS_WRITERS each step read the statistics' step-0 fingerprint again.
    if engine == "native":
        request.getfixturevalue("ext")
    path = tmp_path / "bn.jsonl"
    rc, _, err = record(capsys, "models.py:build_conv", "--steps", "3", *CPU, "--engine", engine, "-o", str(path))
    assert rc == 0, err
    bn = [op for op in read(path)["ops"] if "batch_norm" in op["op"] and op["phase"] == "forward"]
    assert [op["step"] for op in bn] == [0, 1, 2]
    stats_in = [op["in"][3:5] for op in bn]
    stats_out = [op["out"][-2:] for op in bn]
    assert stats_in[1] == stats_out[0] and stats_in[2] == stats_out[1]  # what a step reads is what the last one wrote
    assert len({tuple(s) for s in stats_in}) == 3 and stats_in[0][0] == "0" * 16  # running_mean starts at zeros


def test_batch_norm_in_eval_mode_writes_no_statistics():
    from opscan.trace.record import OpInfo, _written_tensors

    info = OpInfo(torch.ops.aten.native_batch_norm.default)
    x, mean, var = torch.randn(2, 3), torch.zeros(3), torch.ones(3)
    assert [t is mean or t is var for t in _written_tensors(info, (x, None, None, mean, var, True, 0.1, 1e-5), {})] == [True, True]
    assert list(_written_tensors(info, (x, None, None, mean, var, False, 0.1, 1e-5), {})) == []
    assert OpInfo(torch.ops.aten._native_batch_norm_legit.default).stats_flag is None  # its schema marks them (a!)


def test_torch_state_is_as_before(ext, capsys, tmp_path):
    from torch.nn.modules import module as module_module
    from torch.optim import optimizer as optim_module

    hooks = (
        len(optim_module._global_optimizer_pre_hooks), len(optim_module._global_optimizer_post_hooks),
        len(module_module._global_forward_pre_hooks), len(module_module._global_forward_hooks),
    )  # fmt: skip
    flags = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark, torch.is_grad_enabled())
    rc, _, err = record(capsys, "models.py:build_conv", "--deterministic", *CPU, *NATIVE, "-o", str(tmp_path / "r.jsonl"))
    assert rc == 0, err
    assert (
        len(optim_module._global_optimizer_pre_hooks), len(optim_module._global_optimizer_post_hooks),
        len(module_module._global_forward_pre_hooks), len(module_module._global_forward_hooks),
    ) == hooks  # fmt: skip
    assert (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark, torch.is_grad_enabled()) == flags
    # RecordFunction is on again for nested calls (the engine turns it off inside each op it records).
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.nn.functional.linear(torch.randn(2, 3), torch.randn(4, 3))
    assert {"aten::linear", "aten::t"} <= {e.key for e in prof.key_averages()}


def test_diff_finds_the_urandom_noise_line(ext):
    proc = opscan("diff", "models.py:build_noisy", "--steps", "2", *CPU, *NATIVE, "--output-format", "json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    (table,) = [t for t in doc["tables"] if t["name"] == "first_divergence"]
    first = table["rows"][0]
    assert (first["file"], first["line"], first["phase"]) == ("models.py", line_of("NOISE_LINE"), "forward")
    assert first["step"] in (0, 1) and first["cause"] in ("kernel nondeterminism", "data")
    proc = opscan("diff", "models.py:build_clean", "--steps", "2", *CPU, *NATIVE, "--output-format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_an_extra_draw_is_a_random_stream_shift(ext, tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path, extra in ((a, {}), (b, {"OPSCAN_TEST_EXTRA_DRAW": "1"})):
        proc = opscan("record", "models.py:build_dropper", "--steps", "2", *CPU, *NATIVE, "-o", str(path), **extra)
        assert proc.returncode == 0, proc.stderr
    proc = opscan("compare", str(a), str(b), "--output-format", "json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    (table,) = [t for t in doc["tables"] if t["name"] == "first_divergence"]
    assert table["rows"][0]["cause"] == "random stream" and table["rows"][0]["op"] == "aten.dropout.default"


# ---------------------------------------------------------------- which engine


def test_auto_on_the_cpu_is_the_python_engine(capsys, tmp_path):
    path = tmp_path / "auto.jsonl"
    rc, _, err = record(capsys, "models.py:build_clean", *CPU, "-o", str(path))
    assert rc == 0, err
    assert read(path)["header"]["env"]["record_engine"] == "python"


def test_native_that_cannot_be_built_is_an_error_and_auto_says_why(capsys, tmp_path, monkeypatch):
    from opscan.trace import native

    monkeypatch.setattr(native, "load", lambda cuda=None, announce=False: None)
    monkeypatch.setattr(native, "why_not", lambda cuda=None: "RuntimeError: no compiler")
    path = tmp_path / "n.jsonl"
    rc, _, err = record(capsys, "models.py:build_clean", *CPU, *NATIVE, "-o", str(path))
    assert rc == 2 and "the native record engine could not be built: RuntimeError: no compiler" in err
    assert not path.exists() and not (tmp_path / "n.jsonl.partial").exists()
    make, notice = native.recorder_for("auto", "cuda")
    assert make is None and notice == "recorded with the Python engine: the native engine could not be built (RuntimeError: no compiler)"
    with pytest.raises(ValueError, match="unknown record engine 'fast'"):
        native.recorder_for("fast", "cpu")


def test_a_failed_build_is_told_by_the_compilers_first_error():
    from opscan.trace.native import _reason

    output = (
        "Error building extension 'opscan_record_1': [1/2] c++ -c record_hook.cpp\n"
        "FAILED: record_hook.o\n"
        "record_hook.cpp:12:10: fatal error: torch/extension.h: No such file or directory\n"
        "compilation terminated.\n"
        "ninja: build stopped: subcommand failed."
    )
    assert _reason(RuntimeError(output)) == "RuntimeError: record_hook.cpp:12:10: fatal error: torch/extension.h: No such file or directory"
    assert _reason(RuntimeError("ninja: build stopped: subcommand failed.")) == "RuntimeError: ninja: build stopped: subcommand failed."
    assert _reason(OSError("")) == "OSError: "


def test_engine_flag_is_checked_before_anything_runs(capsys):
    from opscan.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["record", "models.py:build_clean", "--engine", "fast", "-o", "x.jsonl"])
    assert exc.value.code == 2
    assert "invalid choice: 'fast'" in capsys.readouterr().err


# ---------------------------------------------------------------- the packed step (no engine needed)


def _pack(ops):
    blob = b""
    for oid, phase, sid, mid, ins, outs, norm in ops:
        blob += struct.pack("<iiiBHHq", oid, sid, mid, phase, len(ins), len(outs), -1 if norm is None else norm)
        blob += struct.pack(f"<{len(ins) + len(outs)}q", *[-1 if h is None else h for h in ins + outs])
    return blob


handles = st.lists(st.one_of(st.none(), st.integers(0, 2**40)), max_size=5)


@given(
    st.lists(
        st.tuples(st.integers(0, 500), st.integers(0, 2), st.integers(0, 900), st.integers(0, 900), handles, handles, st.one_of(st.none(), st.integers(0, 2**40))),
        max_size=20,
    )
)
def test_packed_ops_read_back_as_the_python_engines_rows(ops):
    rngs = {i: {"device": "cpu", "seed": i} for i in range(0, len(ops), 3)}
    rows = list(PackedOps(_pack(ops), len(ops), rngs))
    assert rows == [(oid, PHASES[phase], sid, mid, ins, outs, norm, rngs.get(i)) for i, (oid, phase, sid, mid, ins, outs, norm) in enumerate(ops)]


def test_the_resolver_reads_native_entries_between_others():
    resolver = Resolver("xor64+sum")
    blob = struct.pack("<QdB", 0xABC, 2.5, 1) + struct.pack("<QdB", 0, float("nan"), 0) + struct.pack("<QdB", 7, float("nan"), 1)
    resolver.resolve([], [("c", "00000000000000ff", None), ("F", blob, 3), ("c", "0000000000000001", 1.0)])
    assert resolver.hex == {0: "00000000000000ff", 1: "0000000000000abc", 2: None, 3: "0000000000000007", 4: "0000000000000001"}
    assert resolver.norm == {1: 2.5, 4: 1.0}
    assert resolver.base == 5


def test_check_workload_takes_the_engine(ext, tmp_path):
    from opscan.diff import check_workload, first_divergence

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.BatchNorm1d(6), torch.nn.Linear(6, 2))
    for engine in ("auto", "native"):
        report = check_workload(model, torch.randn(5, 6), steps=2, engine=engine, keep=str(tmp_path / engine))
        assert not report.errors and first_divergence(report) is None
        expected = "native" if engine == "native" else "python"  # auto: the Python engine on the CPU
        assert read(tmp_path / engine / "a.jsonl")["header"]["env"]["record_engine"] == expected
    bad = check_workload(model, torch.randn(5, 6), engine="fast")
    assert [p.message for p in bad.errors] == ["unknown record engine 'fast'; choose from auto, native, python"]


DEFAULT_F64_SCRIPT = """
import torch
from torch import nn

torch.set_default_dtype(torch.float64)
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(3, 4)).pow(2).mean().backward()
    opt.step()
"""


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("target", ["models.py:build_f64", "models.py:build_complex64", "models.py:build_complex128", "--run f64.py"])
def test_every_parameter_dtype_is_recorded(request, capsys, tmp_path, engine, target):
    # The parameters' norms asked vector_norm for float32 of every tensor: a float64 model
    # (or a script under set_default_dtype(float64)) failed in opscan, blamed on the builder.
    if engine == "native":
        request.getfixturevalue("ext")
    (tmp_path / "f64.py").write_text(DEFAULT_F64_SCRIPT)
    path = tmp_path / "r.jsonl"
    args = ["--run", str(tmp_path / "f64.py")] if target == "--run f64.py" else [target]  # --run last: it takes the rest
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # nor a warning of opscan's own (a complex sample cast to real)
            rc, _, err = record(capsys, "--steps", "2", *CPU, "--engine", engine, "-o", str(path), *args, cwd=FIXTURES)
    finally:
        torch.set_default_dtype(torch.float32)  # the script's, were it left (the runner's to restore)
    assert rc == 0, err
    rec = read(path)
    assert len(rec["steps"]) == 2 and rec["end"] is not None
    for step in rec["steps"]:
        for name, p in step["params"].items():
            assert isinstance(p["norm"], float) and p["norm"] > 0, (name, p)
            assert re.fullmatch(r"[0-9a-f]{16}", p["fp"]), (name, p)
