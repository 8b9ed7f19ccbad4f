"""pytest plugin: assert in a test that a model is ready for deterministic training.

    def test_model_is_deterministic_ready(assert_deterministic_ready):
        model, inputs = build()
        assert_deterministic_ready(model, inputs, device="cuda")

The fixture runs one forward and backward under `opscan.trace()` and fails the
test with a list of every op that has no deterministic implementation. Where
torch is missing, or `device="cuda"` is asked for on a machine without CUDA,
it skips the test with the reason, as `pytest.importorskip` does. Loading the
plugin imports no torch (lint-only installs load pytest plugins too); the
fixture imports it when called.
"""

from __future__ import annotations

import pytest


def _describe(findings) -> str:
    lines = [f"{len(findings)} op(s) have no deterministic implementation:"]
    for f in findings:
        lines.append(f"  {f.op} ({f.caller}), {f.phase}, module {f.module or '-'}, at {f.where}")
        if f.remedy.text:
            lines.append(f"    remedy: {f.remedy.text}")
    return "\n".join(lines)


def _skip_unless_available(device) -> None:
    try:
        import torch
    except ImportError:
        pytest.skip("assert_deterministic_ready needs torch; install opscan[trace]")
    if device is None:
        return
    try:
        wanted = torch.device(device)
    except (RuntimeError, TypeError):
        return  # let the move to the device say what is wrong with it
    if wanted.type == "cuda" and not torch.cuda.is_available():
        pytest.skip(f"assert_deterministic_ready(device={str(device)!r}): no CUDA device here")


def assert_deterministic_ready(model, inputs, loss_fn=None, *, device=None, rules=None):
    """Fail the current test if one forward and backward of `model` hits an op without a deterministic kernel.

    On the CPU only put_ and max_unpool raise, so pass device="cuda" for a full check.
    Returns the (empty) list of OpFindings.
    """
    _skip_unless_available(device)
    from opscan.trace import check

    findings = check(model, inputs, loss_fn, device=device, rules=rules)
    if findings:
        pytest.fail(_describe(findings), pytrace=False)
    return findings


@pytest.fixture(name="assert_deterministic_ready")
def _assert_deterministic_ready_fixture():
    """The `assert_deterministic_ready(model, inputs, loss_fn=None, *, device=None)` helper."""
    return assert_deterministic_ready
