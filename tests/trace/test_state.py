"""Every global the scan touches is put back: flags, warn_only, cudnn flags, dispatch modes, hooks, patched functions.

Also when the traced code raises, and whatever the flags were before.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")  # lint-only installs (no torch) skip this file

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack  # noqa: E402

import opscan  # noqa: E402
from opscan.trace.state import StrictMode, TorchFlags  # noqa: E402


def globals_snapshot():
    from torch.nn.modules import module as module_mod
    from torch.optim import optimizer as optimizer_mod

    return {
        "flags": TorchFlags.capture(),
        "dispatch_modes": len(_get_current_dispatch_mode_stack()),
        "use_deterministic_algorithms": torch.use_deterministic_algorithms,
        "set_deterministic_debug_mode": torch.set_deterministic_debug_mode,
        "optimizer_pre_hooks": len(optimizer_mod._global_optimizer_pre_hooks),
        "optimizer_post_hooks": len(optimizer_mod._global_optimizer_post_hooks),
        "module_pre_hooks": len(module_mod._global_forward_pre_hooks),
        "module_hooks": len(module_mod._global_forward_hooks),
        "grad_enabled": torch.is_grad_enabled(),
    }


class Boom(Exception):
    pass


class Raises(nn.Module):
    def __init__(self):
        super().__init__()
        self.unpool = nn.MaxUnpool1d(2)

    def forward(self, x):
        y = self.unpool(x, torch.arange(0, 8, 2).expand_as(x))  # alerts, is caught, goes on
        torch.use_deterministic_algorithms(False)  # ignored while scanning
        torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark  # the code changes a flag
        raise Boom(y.shape)


flag_sets = st.builds(
    TorchFlags,
    deterministic=st.booleans(),
    warn_only=st.booleans(),
    fill_uninitialized_memory=st.booleans(),
    cudnn_enabled=st.booleans(),
    cudnn_benchmark=st.booleans(),
    cudnn_deterministic=st.booleans(),
)


@pytest.fixture(autouse=True)
def _put_flags_back():
    before = TorchFlags.capture()
    yield
    before.restore()


@settings(max_examples=30, deadline=None)
@given(flags=flag_sets)
def test_state_is_restored_after_the_model_raises(flags):
    if not flags.deterministic:
        flags = TorchFlags(**{**flags.as_dict(), "warn_only": False})  # warn_only means nothing when off
    flags.restore()
    before = globals_snapshot()
    assert before["flags"] == flags
    with pytest.raises(Boom), opscan.trace() as t:
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.is_deterministic_algorithms_warn_only_enabled()
        Raises()(torch.randn(1, 1, 4))
    assert globals_snapshot() == before
    assert [f.op for f in t.findings] == ["aten.max_unpool2d.default"]
    assert any("use_deterministic_algorithms(False" in n for n in t.notices)


def test_state_is_restored_after_a_clean_run():
    before = globals_snapshot()
    with opscan.trace():
        nn.Linear(2, 2)(torch.randn(3, 2)).sum().backward()
    assert globals_snapshot() == before


def test_state_is_restored_after_a_scan_command(capsys):
    from tests.trace.helpers import scan

    before = globals_snapshot()
    scan(capsys, "targets_misc.py:forward_raises", "--device", "cpu")
    scan(capsys, "--device", "cpu", "--run", "train_loop.py")
    assert globals_snapshot() == before


def test_strict_mode_stays_strict_against_user_calls():
    notes = []
    with StrictMode(on_override=notes.append):
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.set_deterministic_debug_mode("warn")
        torch.use_deterministic_algorithms(True)  # what the scan wants anyway: no note
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.is_deterministic_algorithms_warn_only_enabled()
    assert len(notes) == 2
    assert "warn_only=True" in notes[0] and "set_deterministic_debug_mode('warn')" in notes[1]
    assert "test_state.py:" in notes[0]


def test_unpinned_trace_lets_code_change_the_mode():
    with opscan.trace(pin=False):
        torch.use_deterministic_algorithms(False)
        assert not torch.are_deterministic_algorithms_enabled()
    assert torch.use_deterministic_algorithms.__module__ == "torch"


def test_rerun_puts_strict_mode_back_after_each_caught_op():
    seen = []

    class Probe(nn.Module):
        def forward(self, x):
            y = x.flatten().put(torch.tensor([0]), torch.ones(1))
            seen.append((torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()))
            return y

    with opscan.trace() as t:
        Probe()(torch.randn(2, 2))
    assert seen == [(True, False)]
    assert len(t.findings) == 1


# A target that changes what the process holds beyond torch's flags: the default dtype, the
# environment (a variable added, one changed, one removed) and the working directory.
MEDDLING = """
import os

import torch
from torch import nn


def meddle():
    torch.set_default_dtype(torch.float64)
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:2"
    os.environ["OPSCAN_TEST_CHANGED"] = "by the target"
    os.environ.pop("OPSCAN_TEST_REMOVED", None)
    os.makedirs("elsewhere", exist_ok=True)
    os.chdir("elsewhere")


def build():
    meddle()
    return nn.Linear(4, 2), torch.randn(3, 4)


if __name__ == "__main__":
    meddle()
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(3, 4)).sum().backward()
        opt.step()
"""


@pytest.fixture
def process_state(monkeypatch):
    """The environment and default dtype as a test leaves them, put back whatever the command did."""
    import os

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setenv("OPSCAN_TEST_CHANGED", "before")
    monkeypatch.setenv("OPSCAN_TEST_REMOVED", "before")
    saved = dict(os.environ)
    yield
    torch.set_default_dtype(torch.float32)
    for key in set(os.environ) - set(saved):
        del os.environ[key]
    os.environ.update({k: v for k, v in saved.items() if k != "PYTEST_CURRENT_TEST"})


@pytest.mark.parametrize("command", ["scan", "record"])
@pytest.mark.parametrize("target", ["meddling.py:build", "--run meddling.py"])
def test_a_command_puts_back_the_default_dtype_environment_and_folder(capsys, tmp_path, process_state, command, target):
    import os

    from opscan.cli import main
    from tests.util import chdir

    (tmp_path / "meddling.py").write_text(MEDDLING)
    out = ["-o", str(tmp_path / "r.jsonl")] if command == "record" else ["--output-format", "json"]
    environ = dict(os.environ)
    with chdir(tmp_path):
        rc = main([command, "--device", "cpu", *out, *target.split()])
        assert os.getcwd() == str(tmp_path)
    stdout, err = capsys.readouterr()
    assert rc in (0, 1), err
    assert torch.get_default_dtype() == torch.float32
    assert dict(os.environ) == environ
    if command == "scan":  # the report still says what the target trained with
        assert json.loads(stdout)["env"]["cublas_workspace_config"] == ":4096:2"


# ---------------------------------------------------------------- torch's modes (TorchModes)


def _modes() -> tuple:
    """torch's modes as a comparable tuple, read as TorchModes does (None where a legacy getter refuses)."""
    from opscan.trace.state import TorchModes

    m = TorchModes.capture()
    return (m.grad, m.anomaly, m.device_context, m.threads, m.matmul, m.cudnn_tf32, m.fp32, m.inductor_deterministic)


def _fp32(path: str, value: str):
    def set_it():
        owner = torch.backends
        for part in path.split(".") if path else ():
            owner = getattr(owner, part)
        owner.fp32_precision = value

    return set_it


# Each way a script sets float32 precision: the legacy API, and torch 2.9's per-backend one where present.
_PRECISION_SETTERS = [
    ("matmul high", lambda: torch.set_float32_matmul_precision("high")),
    ("matmul medium", lambda: torch.set_float32_matmul_precision("medium")),
    ("matmul allow_tf32", lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", True)),
    ("cudnn allow_tf32 off", lambda: setattr(torch.backends.cudnn, "allow_tf32", False)),
]
if hasattr(torch.backends, "fp32_precision"):
    _PRECISION_SETTERS += [
        ("all tf32", _fp32("", "tf32")),
        ("cuda.matmul tf32", _fp32("cuda.matmul", "tf32")),
        ("cudnn.conv ieee", _fp32("cudnn.conv", "ieee")),
        ("mkldnn bf16", _fp32("mkldnn", "bf16")),
    ]


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.sampled_from(_PRECISION_SETTERS), min_size=1, max_size=4))
def test_float32_precision_set_through_either_api_is_put_back(steps):
    """The legacy getters raise once the newer API was used: what was readable before reads the same after."""
    from opscan.trace.state import TorchModes

    before = _modes()
    saved = TorchModes.capture()
    try:
        for _, set_it in steps:
            set_it()
    finally:
        saved.restore()
    assert _modes() == before, [name for name, _ in steps]
    assert before[4] is not None and torch.get_float32_matmul_precision() == before[4]
    assert before[5] is not None and torch.backends.cudnn.allow_tf32 == before[5]


MODES_SCRIPT = """
import torch

torch.set_grad_enabled(False)
torch.set_default_device("cpu")
torch.set_num_threads(1)
torch.autograd.set_detect_anomaly(True, check_nan=False)
torch.set_float32_matmul_precision("medium")
torch.backends.cudnn.allow_tf32 = False
torch.use_deterministic_algorithms(True)  # sets inductor's `deterministic` too

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with torch.enable_grad():
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(3, 4)).sum().backward()
        opt.step()
"""


@pytest.mark.parametrize("command", ["scan", "scan --probe", "record", "diff --same-process --steps 1"])
def test_a_command_puts_back_the_modes_a_script_sets(capsys, tmp_path, command):
    """A script's top-level `set_grad_enabled(False)` or default device must not reach the caller (nor a next target)."""
    from opscan.cli import main
    from tests.util import chdir

    (tmp_path / "modes.py").write_text(MODES_SCRIPT)
    out = ["-o", str(tmp_path / "r.jsonl")] if command == "record" else ["--output-format", "json"]
    before = _modes()
    assert before[7] is False  # inductor's flag as a process starts: the script's call must not outlive the run
    assert before[2] is None  # no default device set: the script's cpu context must go, not stay
    with chdir(tmp_path):
        rc = main([*command.split(), "--device", "cpu", *out, "--run", "modes.py"])
    _, err = capsys.readouterr()
    assert rc in (0, 1), err
    assert _modes() == before
