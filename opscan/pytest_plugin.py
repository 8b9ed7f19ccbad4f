"""pytest plugin: assert in a test that a model is ready for deterministic training.

    def test_model_is_deterministic_ready(assert_deterministic_ready):
        model, inputs = build()
        assert_deterministic_ready(model, inputs, device="cuda")

The fixture runs one forward and backward under `opscan.trace()` and fails the
test with a table of every op that has no deterministic implementation.
Loading the plugin imports no torch (lint-only installs load pytest plugins
too); the fixture imports it when called.
"""

from __future__ import annotations

import pytest


def _describe(findings) -> str:
    lines = [f"{len(findings)} op(s) have no deterministic implementation:"]
    for f in findings:
        x = f.extra
        where = f"{x.get('file')}:{x.get('line')}" if x.get("file") else "unknown line"
        lines.append(f"  {x.get('op')} ({x.get('caller')}), {x.get('phase')}, module {x.get('module') or '-'}, at {where}")
        if x.get("remedy"):
            lines.append(f"    remedy: {x['remedy']}")
    return "\n".join(lines)


def assert_deterministic_ready(model, inputs, loss_fn=None, *, device=None, rules=None):
    """Fail the current test if one forward and backward of `model` hits an op without a deterministic kernel.

    On the CPU only put_ and max_unpool raise, so pass device="cuda" for a full check.
    Returns the (empty) list of findings.
    """
    from opscan.trace import check

    findings = check(model, inputs, loss_fn, device=device, rules=rules)
    if findings:
        pytest.fail(_describe(findings), pytrace=False)
    return findings


@pytest.fixture(name="assert_deterministic_ready")
def _assert_deterministic_ready_fixture():
    """The `assert_deterministic_ready(model, inputs, loss_fn=None, *, device=None)` helper."""
    return assert_deterministic_ready
