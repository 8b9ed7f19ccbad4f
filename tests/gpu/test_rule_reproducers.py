"""Each rule's reproducer raises its own alert exactly where the rules data says it does.

For every op in `rules/*.toml` the reproducer runs forward and backward in
strict deterministic mode (`use_deterministic_algorithms(True)`, not
`warn_only`). It must raise a RuntimeError that starts with one of the op's
caller strings + " does not have a deterministic implementation" if and only
if `op.raises_on(torch.__version__, device)`.

* `test_cuda_alert_matches_rules` (marker `gpu`): ops whose devices include cuda.
* `test_cpu_alert_matches_rules`: ops whose devices include cpu (put_, max_unpool);
  runs in CI.
* `test_cuda_only_reproducer_is_quiet_on_cpu`: the other reproducers run on the
  CPU without any alert, which keeps them runnable and honest before a GPU run.

Global state (the deterministic flags) is restored after each run.
"""

from __future__ import annotations

import contextlib
import os
import re

import pytest

torch = pytest.importorskip("torch")

from opscan.rules import load

# The cuBLAS workspace is read once per process; set it before any CUDA work so
# a reproducer that happens to use cuBLAS cannot fail on the workspace check.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

ALERT = re.compile(r"^(.+?) does not have a deterministic implementation")
DB = load()


@contextlib.contextmanager
def strict_determinism():
    """use_deterministic_algorithms(True) for the block, then the caller's setting back."""
    mode = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)


def run_reproducer(op, device: str) -> None:
    import torch.nn.functional as F
    from torch import nn

    namespace = {"torch": torch, "nn": nn, "F": F, "device": device}
    exec(compile(op.reproducer, f"<reproducer {op.id}>", "exec"), namespace)  # noqa: S102 - our own rules data


def alert_raised(op, device: str) -> str | None:
    """Run the reproducer in strict mode; the alert's caller, or None. Other errors propagate."""
    try:
        with strict_determinism():
            run_reproducer(op, device)
    except ModuleNotFoundError as exc:  # torchvision reproducers
        pytest.skip(f"{op.id}: {exc}")
    except RuntimeError as exc:
        match = ALERT.match(str(exc))
        if match is None:
            raise
        return match.group(1)
    finally:
        if device == "cuda":
            torch.cuda.synchronize()
    return None


def _ids(ops):
    return [op.id for op in ops]


CUDA_OPS = [op for op in DB.ops if "cuda" in op.devices]
CPU_OPS = [op for op in DB.ops if "cpu" in op.devices]
CUDA_ONLY_OPS = [op for op in DB.ops if "cpu" not in op.devices]


def _check(op, device):
    caller = alert_raised(op, device)
    expected = op.raises_on(torch.__version__, device)
    if expected:
        assert caller is not None, f"{op.id}: expected an alert on torch {torch.__version__} {device}, none raised"
        assert caller in op.callers, f"{op.id}: raised {caller!r}, rules list {op.callers}"
    else:
        assert caller is None, f"{op.id}: rules say no alert on torch {torch.__version__} {device}, got {caller!r}"


@pytest.mark.gpu
@pytest.mark.parametrize("op", CUDA_OPS, ids=_ids(CUDA_OPS))
def test_cuda_alert_matches_rules(op):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    _check(op, "cuda")
    assert not torch.are_deterministic_algorithms_enabled()


@pytest.mark.parametrize("op", CPU_OPS, ids=_ids(CPU_OPS))
def test_cpu_alert_matches_rules(op):
    _check(op, "cpu")
    assert not torch.are_deterministic_algorithms_enabled()


@pytest.mark.parametrize("op", CUDA_ONLY_OPS, ids=_ids(CUDA_ONLY_OPS))
def test_cuda_only_reproducer_is_quiet_on_cpu(op):
    assert alert_raised(op, "cpu") is None


def test_state_is_restored_after_an_alert():
    put = next(op for op in CPU_OPS if op.id == "put")
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        assert alert_raised(put, "cpu") in put.callers
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("op", DB.ops, ids=_ids(DB.ops))
def test_aten_overloads_exist(op):
    """The overload names are the ones a TorchDispatchMode sees in this torch (and torchvision)."""
    for name in op.aten:
        namespace, packet, overload = name.split(".")
        if namespace == "torchvision":
            pytest.importorskip("torchvision")
        assert overload in getattr(getattr(torch.ops, namespace), packet).overloads(), name
