"""pytest plugin: assert in a test that a model is ready for deterministic training, and that it trains reproducibly.

    def test_model_is_deterministic_ready(assert_deterministic_ready):
        model, inputs = build()
        assert_deterministic_ready(model, inputs, device="cuda")

    def test_training_is_reproducible(assert_reproducible):
        model, inputs = build()
        assert_reproducible(model, inputs, steps=2, device="cuda")

`assert_deterministic_ready` runs one forward and backward under
`opscan.trace()` and fails the test with a list of every op that has no
deterministic implementation. `assert_reproducible` trains two copies of the
model from the same state and seed, records both (`opscan record`) and fails
the test with the first op where they part, its line and the cause. Where
torch is missing, or `device="cuda"` is asked for on a machine without CUDA,
both skip the test with the reason, as `pytest.importorskip` does. Loading the
plugin imports no torch (lint-only installs load pytest plugins too); the
fixtures import it when called.
"""

from __future__ import annotations

import pytest


def _describe(findings) -> str:
    silent = sum(1 for f in findings if f.kind == "silent")
    head = f"{len(findings) - silent} op(s) have no deterministic implementation" if silent < len(findings) else ""
    if silent:
        unalerted = f"{silent} op(s) are nondeterministic here with no alert (strict mode does not catch them)"
        head = f"{head}; {unalerted}" if head else unalerted
    lines = [f"{head}:"]
    for f in findings:
        lines.append(f"  {f.op} ({f.caller}), {f.phase}, module {f.module or '-'}, at {f.where}")
        if f.remedy.text:
            lines.append(f"    remedy: {f.remedy.text}")
    return "\n".join(lines)


def _skip_unless_available(device, fixture: str = "assert_deterministic_ready") -> None:
    try:
        import torch
    except ImportError:
        pytest.skip(f"{fixture} needs torch; install opscan[trace]")
    if device is None:
        return
    try:
        wanted = torch.device(device)
    except (RuntimeError, TypeError):
        return  # let the move to the device say what is wrong with it
    if wanted.type == "cuda" and not torch.cuda.is_available():
        pytest.skip(f"{fixture}(device={str(device)!r}): no CUDA device here")


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


def assert_reproducible(model, inputs, steps=2, loss_fn=None, device=None, *, seed=0, engine="auto"):
    """Fail the current test if two seeded training runs of `model` on `inputs` part.

    Each run trains a deep copy of `model` (so `model` itself is left as it
    is) for `steps` SGD steps from the same seed, recorded op by op; the
    test fails with the first op whose output differs, its module, line, step
    and cause. `device` moves the copies and inputs there (default: where the
    model's parameters are). `engine` is `opscan record --engine`'s: "auto"
    records with the native engine on CUDA, built on first use. Returns the
    comparison (an opscan Report).
    """
    _skip_unless_available(device, "assert_reproducible")
    from opscan.diff import check_workload, describe, first_divergence

    report = check_workload(model, inputs, loss_fn, steps=steps, device=None if device is None else str(device), seed=seed, engine=engine)
    if report.errors:
        pytest.fail("assert_reproducible could not compare the runs: " + "; ".join(p.message for p in report.errors), pytrace=False)
    divergence = first_divergence(report)
    if divergence is not None:
        lines = [f"the two runs are not reproducible: they first part at {describe(divergence)}"]
        lines += [f"  {f.message}" for f in report.sorted_findings()[:5]]
        pytest.fail("\n".join(lines), pytrace=False)
    return report


@pytest.fixture(name="assert_reproducible")
def _assert_reproducible_fixture():
    """The `assert_reproducible(model, inputs, steps=2, loss_fn=None, device=None)` helper."""
    return assert_reproducible
