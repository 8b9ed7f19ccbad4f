"""GPU checks of the rules' [[silent]] entries (DET103): each is nondeterministic in strict mode and raises no alert.

For every entry: its reproducer runs in strict deterministic mode without any alert, and its
gradients differ between reruns from identical inputs (within a few tries); with shapes for which
the entry's condition is false, reruns match bit for bit. Then `opscan.trace.check` reports the
bundled entry as DET103 at the forward line, and nothing on such shapes.
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from opscan.rules import load  # noqa: E402
from tests.gpu.test_rule_reproducers import strict_determinism  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = os.environ.get("OPSCAN_GPU_TEST_DEVICE", "cuda")
SILENT = [e for e in load().silent if "cuda" in e.devices]
TRIES = 10


@pytest.fixture(autouse=True)
def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")


def _grads(reproducer: str) -> list[torch.Tensor]:
    """The gradients of the reproducer's leaf tensors, after one run in strict mode (an alert would raise)."""
    import torch.nn.functional as F
    from torch import nn

    namespace = {"torch": torch, "nn": nn, "F": F, "device": DEV}
    torch.manual_seed(0)
    with strict_determinism():
        exec(compile(reproducer, "<reproducer>", "exec"), namespace)  # noqa: S102 - our own rules data
    torch.cuda.synchronize()
    return [v.grad.clone() for v in namespace.values() if isinstance(v, torch.Tensor) and v.is_leaf and v.grad is not None]


def _parts(reproducer: str) -> int:
    """How many of TRIES reruns gave other bits than the first run."""
    first = _grads(reproducer)
    assert first, "the reproducer leaves no gradient to compare"
    return sum(any(not torch.equal(a, b) for a, b in zip(first, _grads(reproducer))) for _ in range(TRIES))


@pytest.mark.parametrize("entry", SILENT, ids=[e.id for e in SILENT])
def test_reproducer_is_nondeterministic_in_strict_mode_without_an_alert(entry):
    differed = _parts(entry.reproducer)
    print(f"\n{entry.id}: {differed} of {TRIES} strict-mode reruns differed (torch {torch.__version__}, {torch.cuda.get_device_name()})")
    assert differed > 0


def test_adaptive_max_pool3d_on_a_multiple_is_deterministic():
    reproducer = next(e for e in SILENT if e.id == "adaptive_max_pool3d_backward_atomic").reproducer
    assert "17, 17, 17" in reproducer
    assert _parts(reproducer.replace("17, 17, 17", "16, 16, 16")) == 0


def test_scan_reports_it_on_cuda_and_not_on_a_multiple():
    from opscan.trace import check

    class Pooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = torch.nn.AdaptiveMaxPool3d(8)

        def forward(self, x):
            return self.pool(x)  # POOL_LINE

    found = check(Pooled(), torch.randn(2, 4, 17, 17, 17, device=DEV, requires_grad=True))
    assert [(f.to_finding().code, f.rule, f.phase, f.line_text) for f in found] == [
        ("DET103", "adaptive_max_pool3d_backward_atomic", "backward", "return self.pool(x)  # POOL_LINE")
    ]
    assert check(Pooled(), torch.randn(2, 4, 16, 16, 16, device=DEV, requires_grad=True)) == []
