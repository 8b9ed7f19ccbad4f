"""`opscan record`: the header, every op line, the step lines, backward lines, scripts, and the state left behind."""

from __future__ import annotations

import base64
import gc
import json
import math
import random
import re
import shutil
import struct
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from opscan._hash import digest  # noqa: E402
from opscan.trace.fingerprint import reference  # noqa: E402
from tests.record.helpers import CPU, FIXTURES, env, line_of, opscan, read, record  # noqa: E402

HEX = re.compile(r"^[0-9a-f]{16}$")
PARAM_REF = re.compile(r"^p:[\w.]+@[0-9a-f]{16}$")
ENV_KEYS = (
    "torch", "cuda", "cudnn", "nccl", "gpu", "driver", "python", "deterministic", "warn_only", "cudnn_enabled",
    "cudnn_benchmark", "cudnn_deterministic", "allow_tf32_matmul", "allow_tf32_cudnn", "float32_matmul_precision",
    "cublas_workspace_config", "inductor_deterministic", "pythonhashseed",
)  # fmt: skip


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A 2-step record of models.py:build_clean, made once for the tests that only read it."""
    from opscan.cli import main  # capsys is function-scoped: run the command directly
    from tests.util import chdir

    path = tmp_path_factory.mktemp("rec") / "clean.jsonl"
    with chdir(FIXTURES):
        assert main(["record", "models.py:build_clean", "--steps", "2", *CPU, "-o", str(path)]) == 0
    return read(path)


def test_header_has_every_field(clean):
    h = clean["header"]
    assert clean["lines"][0] is h and h["type"] == "header"
    assert (h["format"], h["version"], h["target"], h["argv"], h["kind"]) == ("opscan-record", 1, "models.py:build_clean", [], "callable")
    assert (h["seed"], h["steps"], h["device"], h["fingerprint"]) == (0, 2, "cpu", "xor64+sum")
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", h["created"])
    env = h["env"]
    assert set(ENV_KEYS) <= set(env), set(ENV_KEYS) - set(env)
    assert all(not isinstance(v, (dict, list)) for v in env.values())
    assert env["torch"] == torch.__version__ and env["deterministic"] is False and env["gpu"] is None
    assert env["float32_matmul_precision"] == torch.get_float32_matmul_precision()
    assert h["sources"] == {"models.py": digest((FIXTURES / "models.py").read_bytes())}


def test_every_op_line_has_its_fields(clean):
    ops = clean["ops"]
    assert ops and [op["i"] for op in ops] == list(range(len(ops)))
    for op in ops:
        assert op["op"].startswith("aten.") and op["phase"] in ("forward", "backward", "optimizer")
        assert op["step"] in (0, 1)
        for key in ("module", "module_class", "file", "line", "norm"):
            assert key in op
        assert len(op["shapes"]) == len(op["dtypes"]) == len(op["in"])
        for fp in op["in"]:
            assert fp is None or HEX.match(fp) or PARAM_REF.match(fp), fp
        for fp in op["out"]:
            assert fp is None or HEX.match(fp), fp
        assert op["norm"] is None or isinstance(op["norm"], float)
    phases = {op["phase"] for op in ops}
    assert phases == {"forward", "backward", "optimizer"}
    relu = next(op for op in ops if op["op"] == "aten.relu.default")
    assert (relu["module"], relu["module_class"], relu["file"], relu["line"]) == ("", "Net", "models.py", line_of("NET_RELU_LINE"))
    addmm = next(op for op in ops if op["op"] == "aten.addmm.default")
    assert (addmm["module"], addmm["module_class"]) == ("fc1", "Linear")
    assert any(fp.startswith("p:fc1.bias@") for fp in addmm["in"] if fp)


def test_step_and_end_lines(clean):
    steps, ops, end = clean["steps"], clean["ops"], clean["end"]
    assert [s["step"] for s in steps] == [0, 1]
    for s in steps:
        assert s["ops"] == sum(1 for op in ops if op["step"] == s["step"])
        assert list(s["params"]) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
        assert isinstance(s["loss"], float)
    assert (end["steps"], end["ops"], end["stopped"]) == (2, len(ops), False)
    assert clean["lines"][-1] is end
    # every op line of a step comes before its step line
    kinds = [(d["type"], d.get("step")) for d in clean["lines"][1:-1]]
    assert kinds.index(("step", 0)) < kinds.index(("op", 1))


def _train_like_the_runner(build, steps):
    """The runner's training loop, outside opscan: seed 0, SGD(lr=0.01, momentum=0.9), loss = sum of the output."""
    torch.manual_seed(0)
    random.seed(0)
    try:
        import numpy

        numpy.random.seed(0)
    except ImportError:
        pass
    model, x = build()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    states, losses = [], []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = model(x).sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        states.append({n: p.detach().clone() for n, p in model.named_parameters()})
    return states, losses


def test_parameter_fingerprints_norms_and_samples_each_step(clean):
    import importlib.util

    spec = importlib.util.spec_from_file_location("record_models", FIXTURES / "models.py")
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)
    states, losses = _train_like_the_runner(models.build_clean, 2)
    assert clean["steps"][0]["params"]["fc1.weight"]["fp"] != clean["steps"][1]["params"]["fc1.weight"]["fp"]
    for step, state, loss in zip(clean["steps"], states, losses):
        assert step["loss"] == pytest.approx(loss, rel=1e-6)
        for name, p in state.items():
            entry = step["params"][name]
            assert entry["fp"] == reference(p), (step["step"], name)
            assert entry["norm"] == pytest.approx(p.double().norm().item(), rel=1e-5)
            raw = base64.b64decode(entry["sample"])
            flat = p.reshape(-1)
            stride = math.ceil(flat.numel() / 256)
            expected = flat[::stride].tolist()
            assert list(struct.unpack(f"<{len(raw) // 4}f", raw)) == expected


def test_output_fingerprints_are_those_of_the_values(clean):
    """The first addmm's output is fc1(x): its fingerprint is the reference one of that tensor, computed apart."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("record_models2", FIXTURES / "models.py")
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)
    torch.manual_seed(0)
    model, x = models.build_clean()
    addmm = next(op for op in clean["ops"] if op["op"] == "aten.addmm.default")
    assert addmm["out"] == [reference(model.fc1(x))]
    assert addmm["norm"] == pytest.approx(model.fc1(x).norm().item(), rel=1e-6)
    assert reference(x) in addmm["in"]  # the batch: fingerprinted where it is first read


def test_backward_ops_carry_the_forward_line(capsys, tmp_path):
    path = tmp_path / "conv.jsonl"
    rc, _, err = record(capsys, "models.py:build_conv", "--steps", "1", *CPU, "-o", str(path))
    assert rc == 0, err
    ops = read(path)["ops"]
    conv_bwd = [op for op in ops if op["op"].startswith("aten.convolution_backward")]
    assert conv_bwd and all(
        (op["phase"], op["module"], op["module_class"], op["file"], op["line"]) == ("backward", "conv", "Conv2d", "models.py", line_of("CONV_LINE"))
        for op in conv_bwd
    )
    head_bwd = [op for op in ops if op["phase"] == "backward" and op["module"] == "head" and op["op"] == "aten.mm.default"]
    assert head_bwd and all((op["file"], op["line"]) == ("models.py", line_of("HEAD_LINE")) for op in head_bwd)
    bn_bwd = [op for op in ops if op["phase"] == "backward" and "batch_norm_backward" in op["op"]]
    assert bn_bwd and bn_bwd[0]["module"] == "bn"


def test_a_target_above_the_working_directory_is_recorded_relative_to_it(capsys, tmp_path):
    """From a subfolder, each op's `file` was `/abs/sub/../models.py`; now `../models.py`, as lint and scan show it."""
    # Another name: the folder stays on sys.path, and a `models` there would shadow the fixture's for a module target.
    shutil.copy(FIXTURES / "models.py", tmp_path / "above.py")
    (tmp_path / "sub").mkdir()
    rc, _, err = record(capsys, "../above.py:build_conv", "--steps", "1", *CPU, "-o", "r.jsonl", cwd=tmp_path / "sub")
    assert rc == 0, err
    files = {op["file"] for op in read(tmp_path / "sub" / "r.jsonl")["ops"] if op["file"] and op["file"].endswith("above.py")}
    assert files == {"../above.py"}  # (the optimizer's ops are the test's: its frame calls main())


def test_random_ops_carry_the_generator_state(capsys, tmp_path, monkeypatch):
    path = tmp_path / "drop.jsonl"
    monkeypatch.setenv("OPSCAN_TEST_EXTRA_DRAW", "1")
    rc, _, err = record(capsys, "models.py:build_dropper", "--steps", "2", *CPU, "-o", str(path))
    assert rc == 0, err
    ops = read(path)["ops"]
    draws = [op for op in ops if "rng" in op]
    rand = [op for op in draws if op["op"] == "aten.rand.default"]
    drop = [op for op in draws if op["op"].startswith("aten.bernoulli")]
    assert len(rand) == 2 and len(drop) == 2  # one of each per step
    assert rand[0]["line"] == line_of("EXTRA_DRAW_LINE") and drop[0]["line"] == line_of("DROPOUT_LINE")
    states = [op["rng"]["state"] for op in draws]
    assert all(op["rng"]["device"] == "cpu" and op["rng"]["seed"] == 0 for op in draws)
    assert len(set(states)) == len(states)  # every draw moves the generator on
    assert not any("rng" in op for op in ops if op not in draws)


def test_seed_deterministic_and_benchmark_flags_reach_the_header(capsys, tmp_path):
    path = tmp_path / "flags.jsonl"
    rc, _, err = record(capsys, "models.py:build_clean", "--seed", "7", "--deterministic", *CPU, "-o", str(path))
    assert rc == 0, err
    h = read(path)["header"]
    assert h["seed"] == 7 and h["env"]["deterministic"] is True and h["env"]["cudnn_benchmark"] is False
    rc, _, err = record(capsys, "models.py:build_clean", "--benchmark", *CPU, "-o", str(path))
    assert rc == 0, err
    assert read(path)["header"]["env"]["cudnn_benchmark"] is True
    assert not torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.benchmark


def test_the_step_count_comes_from_the_scan_section_as_scan_takes_it(capsys, tmp_path):
    """[tool.opscan.scan] max-steps, as device and input-shape already were; record took 1 step whatever it said."""
    shutil.copy(FIXTURES / "models.py", tmp_path / "models.py")
    (tmp_path / "pyproject.toml").write_text("[tool.opscan.scan]\nmax-steps = 2\n")
    rc, _, err = record(capsys, "models.py:build_clean", *CPU, "-o", "r.jsonl", cwd=tmp_path)
    assert rc == 0, err
    assert [s["step"] for s in read(tmp_path / "r.jsonl")["steps"]] == [0, 1]
    rc, _, err = record(capsys, "models.py:build_clean", "--steps", "1", *CPU, "-o", "r.jsonl", cwd=tmp_path)  # the flag wins
    assert rc == 0, err
    assert [s["step"] for s in read(tmp_path / "r.jsonl")["steps"]] == [0]


def test_a_script_is_recorded_until_steps(capsys, tmp_path):
    path = tmp_path / "script.jsonl"
    rc, out, err = record(capsys, "--steps", "3", *CPU, "-o", str(path), "--run", "train.py", "--epochs", "10")
    assert rc == 0, err
    # The script prints after opt.step(); the third step's is where opscan stops it.
    assert [line for line in err.splitlines() if line.startswith("SCRIPT")] == [f"SCRIPT step {i}" for i in range(2)]
    rec = read(path)
    h = rec["header"]
    assert (h["kind"], h["target"], h["argv"], h["seed"]) == ("script", "train.py", ["--epochs", "10"], None)
    # The script's digest, for compare to tell the same code from a changed one (opscan/trace/sources.py).
    # models.py too where an earlier test in this process imported it: what the process had loaded.
    assert h["sources"]["train.py"] == digest((FIXTURES / "train.py").read_bytes()) and set(h["sources"]) <= {"train.py", "models.py"}
    assert [s["step"] for s in rec["steps"]] == [0, 1, 2]
    assert rec["end"]["stopped"] is True and rec["end"]["steps"] == 3
    assert list(rec["steps"][0]["params"]) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert all(isinstance(s["loss"], float) for s in rec["steps"])
    assert "stopped after 3 optimizer step(s)" in err
    assert "SCRIPT finished" not in err
    init = [op for op in rec["ops"] if op["op"] == "aten.uniform_.default"]
    assert init and all(op["in"] == [None] for op in init)  # nn.Linear's torch.empty weight: garbage, not fingerprinted
    assert all(op["out"][0] for op in init)
    script_ops = [op for op in rec["ops"] if op["file"] == "train.py"]
    assert script_ops and {op["phase"] for op in rec["ops"]} >= {"forward", "backward", "optimizer"}


def test_a_script_that_ends_first_has_its_steps(capsys, tmp_path):
    path = tmp_path / "script.jsonl"
    rc, _, err = record(capsys, "--steps", "5", *CPU, "--seed", "3", "-o", str(path), "--run", "train.py", "--epochs", "2")
    assert rc == 0, err
    rec = read(path)
    assert rec["header"]["seed"] == 3 and len(rec["steps"]) == 2 and rec["end"]["stopped"] is False
    assert "the script ended after 2 optimizer step(s)" in err


def test_torch_state_is_as_before(capsys, tmp_path):
    from torch.optim import optimizer as optim_module

    rng = torch.get_rng_state()
    hooks = (len(optim_module._global_optimizer_pre_hooks), len(optim_module._global_optimizer_post_hooks))
    flags = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark, torch.is_grad_enabled())
    collector = (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count())
    rc, _, err = record(capsys, "models.py:build_conv", "--deterministic", "--benchmark", *CPU, "-o", str(tmp_path / "r.jsonl"))
    assert rc == 0, err
    assert (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()) == collector  # the recorder froze and put back
    assert torch.equal(torch.get_rng_state(), rng)
    assert (len(optim_module._global_optimizer_pre_hooks), len(optim_module._global_optimizer_post_hooks)) == hooks
    assert (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark, torch.is_grad_enabled()) == flags
    assert torch._C._len_torch_dispatch_stack() == 0


@pytest.mark.parametrize("target", ["models.py:build_conv", "--run train.py --foreach"])
def test_staged_fingerprints_equal_direct_ones(tmp_path, target):
    """The CUDA path (staging buffers, one multi-tensor copy for a foreach op) gives the same record as the direct one."""
    from opscan.trace.record import record as record_run
    from opscan.trace.runner import parse_target, script_target
    from tests.util import chdir

    if target.startswith("--run"):
        _, script, *argv = target.split()
        spec = script_target(script, argv)
    else:
        spec = parse_target(target)
    records = []
    with chdir(FIXTURES):
        for staged in (False, True):
            path = tmp_path / f"staged-{staged}.jsonl"
            result = record_run(spec, str(path), device="cpu", steps=2, seed=0, staged=staged)
            assert result.complete, result.problem
            records.append(read(path))
    if target.startswith("--run"):
        assert any(op["op"].startswith("aten._foreach_") for op in records[0]["ops"])
    direct, staged = records
    assert [(op["op"], op["in"], op["out"]) for op in direct["ops"]] == [(op["op"], op["in"], op["out"]) for op in staged["ops"]]
    assert [{n: p["fp"] for n, p in s["params"].items()} for s in direct["steps"]] == [
        {n: p["fp"] for n, p in s["params"].items()} for s in staged["steps"]
    ]
    for a, b in zip(direct["ops"], staged["ops"]):
        assert (a["norm"] is None) == (b["norm"] is None)
        if a["norm"] is not None:
            assert b["norm"] == pytest.approx(a["norm"], rel=1e-5, abs=1e-6)


def test_views_share_or_derive_their_base_fingerprint(clean):
    ops = clean["ops"]
    detach = [op for op in ops if op["op"] == "aten.detach.default"]
    assert detach and all(op["out"] == [op["in"][0].rsplit("@", 1)[-1]] for op in detach if op["in"][0])
    t = next(op for op in ops if op["op"] == "aten.t.default")
    assert t["out"][0] and t["out"][0] != t["in"][0].rsplit("@", 1)[-1]


def test_the_inline_writer_writes_the_same_record(tmp_path, monkeypatch):
    """OPSCAN_RECORD_WRITER=inline (no writer process) gives the same lines, but for the time stamps."""
    from opscan.trace.record import record as record_run
    from opscan.trace.runner import parse_target
    from tests.util import chdir

    texts = []
    for writer in ("process", "inline"):
        monkeypatch.setenv("OPSCAN_RECORD_WRITER", writer)
        path = tmp_path / f"{writer}.jsonl"
        with chdir(FIXTURES):
            result = record_run(parse_target("models.py:build_conv"), str(path), device="cpu", steps=2, seed=0)
        assert result.complete and result.bytes == path.stat().st_size
        lines = [json.loads(t) for t in path.read_text(encoding="utf-8").splitlines()]
        lines[0].pop("created")
        lines[-1].pop("seconds")
        texts.append(lines)
    assert texts[0] == texts[1]


def test_the_forward_sites_of_old_steps_are_forgotten_and_the_last_step_keeps_its_own(tmp_path, monkeypatch):
    from opscan.trace.record import record as record_run
    from opscan.trace.runner import parse_target
    from opscan.trace.sourcemap import SourceMap
    from tests.util import chdir

    sizes = []
    forget = SourceMap.forget_before

    def counting(self, seq):
        forget(self, seq)
        sizes.append(len(self.node_sites))

    monkeypatch.setattr(SourceMap, "forget_before", counting)
    path = tmp_path / "r.jsonl"
    with chdir(FIXTURES):
        assert record_run(parse_target("models.py:build_conv"), str(path), device="cpu", steps=5, seed=0).complete
    assert len(sizes) == 5 and max(sizes[2:]) == sizes[1]  # two steps' nodes at most, not five
    last = [op for op in read(path)["ops"] if op["step"] == 4 and op["phase"] == "backward"]
    assert last and all(op["line"] is not None for op in last if op["op"].startswith("aten.convolution_backward"))


def test_an_op_called_with_no_python_frame_above_is_recorded_without_a_line(tmp_path, monkeypatch):
    """A collective's completion callback runs ops on a C++ thread: no caller frame, `sys._getframe(1)` raises."""
    import opscan.trace.record as record_module
    from tests.util import chdir

    def no_caller(depth=0):
        raise ValueError("call stack is not deep enough")

    monkeypatch.setattr(record_module, "_getframe", no_caller)
    path = tmp_path / "r.jsonl"
    with chdir(FIXTURES):
        result = record_module.record(record_module_target(), str(path), device="cpu", steps=1, seed=0)
    assert result.complete and not result.notices, result.notices
    forward = [op for op in read(path)["ops"] if op["phase"] == "forward"]
    assert forward and all(op["file"] is None and op["line"] is None for op in forward)


def test_a_failure_inside_the_recorder_leaves_the_op_to_run_and_says_so(tmp_path, monkeypatch):
    import opscan.trace.record as record_module
    from tests.util import chdir

    calls = {"n": 0}
    locate = record_module.locate

    def failing(frame, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyError("planted")
        return locate(frame, **kw)

    monkeypatch.setattr(record_module, "locate", failing)
    path = tmp_path / "r.jsonl"
    with chdir(FIXTURES):
        result = record_module.record(record_module_target(), str(path), device="cpu", steps=2, seed=0)
    assert result.complete
    assert any("1 op(s) ran but could not be recorded in full" in n and "KeyError: 'planted'" in n for n in result.notices), result.notices
    clean = tmp_path / "clean.jsonl"
    monkeypatch.setattr(record_module, "locate", locate)
    with chdir(FIXTURES):
        record_module.record(record_module_target(), str(clean), device="cpu", steps=2, seed=0)
    a, b = read(path), read(clean)
    assert len(a["ops"]) == len(b["ops"]) - 1  # the one op missing; the run itself went on as before
    assert [s["params"] for s in a["steps"]] == [s["params"] for s in b["steps"]]


def record_module_target():
    from opscan.trace.runner import parse_target

    return parse_target("models.py:build_conv")


def test_an_op_in_an_end_of_backward_callback_is_a_backward_op(tmp_path):
    """DDP copies the reduced buckets into .grad in an engine callback: no autograd node, but inside backward."""
    from opscan.trace.record import Recorder
    from opscan.trace.recordwriter import InlineWriter

    model = torch.nn.Linear(3, 2)
    path = tmp_path / "r.jsonl"
    recorder = Recorder(InlineWriter(str(path), "xor64+sum"), target="t", kind="zoo", steps=1, device="cpu", seed=0)
    recorder.modes(model)
    marker = torch.full((2,), 7.0)

    def callback():
        marker.mul_(3)

    def hook(grad):
        torch.autograd.Variable._execution_engine.queue_callback(callback)
        return grad

    with recorder:
        out = model(torch.ones(1, 3))
        out.register_hook(hook)
        out.sum().backward()
        marker.mul_(2)  # after backward: forward again
    recorder.end_step(0)
    recorder.finish(complete=True)
    muls = [op for op in read(path)["ops"] if op["op"] == "aten.mul_.Tensor"]
    assert [op["phase"] for op in muls] == ["backward", "forward"]


SWALLOWING_SCRIPT = """
import torch
from torch import nn

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    try:
        opt.zero_grad()
        model(torch.randn(3, 4)).sum().backward()
        opt.step()
    except Exception:  # a script that carries on past any error
        pass
"""


@pytest.mark.parametrize("target", ["models.py:build_clean", "--run swallow.py"])
def test_a_failure_of_opscans_own_step_work_is_opscans_not_the_targets(capsys, tmp_path, monkeypatch, target):
    import opscan.trace.record as record_module

    def failing(self, params):
        raise RuntimeError("planted")

    monkeypatch.setattr(record_module.Recorder, "_param_blocks", failing)
    (tmp_path / "swallow.py").write_text(SWALLOWING_SCRIPT)
    args = ["--run", str(tmp_path / "swallow.py")] if target.startswith("--run") else [target]
    rc, _, err = record(capsys, *CPU, "-o", str(tmp_path / "r.jsonl"), *args)
    assert rc == 2
    name = args[-1]
    assert f"opscan: error: opscan failed at the end of step 0 while running {name} (a bug in opscan" in err, err
    assert "RuntimeError: planted" in err and f"{name} raised" not in err
    assert "in _end_step" in err  # the whole traceback: opscan's own frames are what a report needs


def test_opscans_own_step_work_running_out_of_memory_is_no_bug_report(capsys, tmp_path, monkeypatch):
    import opscan.trace.record as record_module

    def failing(self, params):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(record_module.Recorder, "_param_blocks", failing)
    rc, _, err = record(capsys, *CPU, "-o", str(tmp_path / "r.jsonl"), "models.py:build_clean")
    assert rc == 2
    assert (
        "opscan: error: opscan ran out of memory at the end of step 0 while running models.py:build_clean: its own work "
        "needs memory beside the target's; free some (a smaller batch, fewer other processes on the device) and run it "
        "again: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    ) in err, err
    assert "a bug in opscan" not in err and "models.py:build_clean raised" not in err


# What pip writes for `[project.scripts] opscan = "opscan.cli:entry"`: a file outside the package.
LAUNCHER = """# -*- coding: utf-8 -*-
import re
import sys
from opscan.cli import entry
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(entry())
"""


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("target", ["models.py:build_clean", "--run train.py"])
def test_the_console_script_is_never_the_users_line(tmp_path, target, engine):
    # The ops opscan runs itself (the runner's optimizer step) were credited to the launcher's `sys.exit(entry())`.
    import subprocess
    import sys

    from tests.record.helpers import env

    if engine == "native":
        from opscan.trace import native

        if native.load(cuda=False) is None:
            pytest.skip(f"the native engine could not be built here: {native.why_not(False)}")
    launcher = tmp_path / "bin" / "opscan"
    launcher.parent.mkdir()
    launcher.write_text(LAUNCHER)
    path = tmp_path / "r.jsonl"
    argv = [sys.executable, str(launcher), "record", "--steps", "2", *CPU, "--engine", engine, "-o", str(path), *target.split()]
    done = subprocess.run(argv, cwd=FIXTURES, env=env(), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    files = {op["file"] for op in read(path)["ops"]}
    assert not any(f and "bin" in f.split("/") for f in files), files
    assert files >= {"models.py" if target.startswith("models") else "train.py"}


def test_a_permutation_from_a_shifted_stream_is_blamed_on_the_draw(capsys, tmp_path, monkeypatch):
    """`randperm` from another generator state gives the same values in another order, which the fingerprints
    cannot see: compare names the draw (DET201), not the first op that reads it (which is no kernel's fault)."""
    from opscan.compare import compare_records

    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for path, extra in zip(paths, ("", "1")):
        monkeypatch.setenv("OPSCAN_TEST_EXTRA_DRAW", extra)
        rc, _, err = record(capsys, "models.py:build_shuffler", "--steps", "2", "--engine", "python", *CPU, "-o", str(path))
        assert rc == 0, err
    report = compare_records(*map(str, paths))
    assert [(f.code, f.line) for f in report.findings] == [("DET201", line_of("PERM_LINE"))], [f.message for f in report.findings]
    assert report.findings[0].message.startswith("`aten.randperm.default` drew from a different generator state")


COMPILED = """\
import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
run = torch.compile(model) if COMPILE else model
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(3):
    opt.zero_grad()
    run(torch.randn(3, 4)).sum().backward()
    opt.step()
"""


def _compile_runs_here() -> str:
    """Why torch.compile cannot run here (no C compiler for inductor, ...), or "": tried in a process of its own."""
    probe = subprocess.run(
        [sys.executable, "-c", "import torch\nprint(torch.compile(lambda x: x * 2 + 1)(torch.ones(3)).sum().item())"],
        env=env(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return "" if probe.returncode == 0 and probe.stdout.strip() == "9.0" else f"torch.compile does not run here: {probe.stderr[-300:]}"


def test_a_compiled_model_is_recorded_without_dynamo_tracing_opscan(tmp_path):
    """Inside a compiled call Dynamo took the dispatch mode's frames, and record_nodes', as code to compile:
    27 lines of warnings about opscan's own code, its recompile limit hit, and norms computed by compiled code."""
    reason = _compile_runs_here()
    if reason:
        pytest.skip(reason)
    (tmp_path / "compiled.py").write_text("COMPILE = True\n" + COMPILED)
    (tmp_path / "eager.py").write_text("COMPILE = False\n" + COMPILED)
    proc = opscan("record", "--steps", "2", "-o", "c.jsonl", "--run", "compiled.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    noise = [line for line in proc.stderr.splitlines() if "Warning" in line or "recompile" in line or "opscan/trace" in line]
    # torch's own word on one patch release of Python (torch 2.14.1 on 3.13.0), not about opscan's code
    noise = [line for line in noise if "Guards may run slower on Python 3.13.0" not in line]
    assert noise == [], proc.stderr
    assert opscan("record", "--steps", "2", "-o", "e.jsonl", "--run", "eager.py", cwd=tmp_path).returncode == 0
    compiled, eager = read(tmp_path / "c.jsonl")["ops"], read(tmp_path / "e.jsonl")["ops"]
    same = [(c, e) for c, e in zip(compiled, eager) if (c["op"], c["in"], c["out"]) == (e["op"], e["in"], e["out"])]
    assert len(same) >= len(eager) // 2  # the record is of the same run
    assert [c.get("norm") for c, _ in same] == [e.get("norm") for _, e in same]  # and its own code ran eagerly
