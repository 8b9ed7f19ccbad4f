"""DET103: ops the rules know to be nondeterministic without an alert ([[silent]] in rules/*.toml).

On the CPU the bundled entry (the CUDA backward of 3-D adaptive max pooling) never applies, so the
scan's path is checked with a copy of the rules whose entry also lists the CPU; the real kernel on
CUDA is tests/gpu/test_scan_gpu.py's.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opscan import rules
from opscan.rules import RulesError, SILENT_WHEN, load
from tests.util import needs_torch

ENTRY_ID = "adaptive_max_pool3d_backward_atomic"
POOL_LINE = "y = self.pool(x)  # POOL_LINE"


def test_the_bundled_entry_loads():
    entry = next(e for e in load().silent if e.id == ENTRY_ID)
    assert entry.aten == ("aten.adaptive_max_pool3d_backward.default", "aten.adaptive_max_pool3d_backward.grad_input")
    assert (entry.phase, entry.devices, entry.when) == ("backward", ("cuda",), "input-3d-not-multiple-of-output")
    assert entry.reproducer and entry.remedy and "AdaptiveMaxPooling3d.cu" in entry.provenance
    assert load().silent_for("aten.adaptive_max_pool3d_backward.default") is entry
    assert load().silent_for("aten.adaptive_max_pool2d_backward.default") is None  # that one alerts: an [[op]]
    assert not any(e.id == ENTRY_ID for e in load().ops)  # lint's DET007 and the report read ops only


@given(
    batch=st.sampled_from([(), (2,)]),
    out=st.tuples(*[st.integers(1, 6)] * 3),
    inp=st.tuples(*[st.integers(1, 20)] * 3),
)
def test_the_atomic_condition_is_the_kernels(batch, out, inp):
    # AdaptiveMaxPooling3d.cu: atomic = isizeW % osizeW != 0 || isizeH % osizeH != 0 || isizeT % osizeT != 0
    grad_output, input_ = [*batch, 3, *out], [*batch, 3, *inp]
    atomic = inp[2] % out[2] != 0 or inp[1] % out[1] != 0 or inp[0] % out[0] != 0
    assert SILENT_WHEN["input-3d-not-multiple-of-output"]([grad_output, input_, grad_output]) is atomic


def test_the_atomic_condition_cannot_tell_without_two_volumes():
    when = SILENT_WHEN["input-3d-not-multiple-of-output"]
    assert when([]) is None and when([[3, 4, 4, 4]]) is None and when([[3, 4, 4], [3, 8, 8]]) is None
    assert when([[3, 0, 4, 4], [3, 8, 8, 8]]) is None


SILENT = """
[[silent]]
id = "s"
title = "t"
aten = ["aten.adaptive_max_pool3d_backward.default"]
phase = "backward"
torch = ">=2"
remedy = "r."
"""


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"when": '"sometimes"'}, "silent #1 (s): unknown when 'sometimes'; known: input-3d-not-multiple-of-output"),
        ({"when": '"input-3d-not-multiple-of-output"', "phase": '"sideways"'}, "phase must be 'forward' or 'backward', not 'sideways'"),
        ({"when": '"input-3d-not-multiple-of-output"', "aten": '["adaptive_max_pool3d_backward"]'}, "aten must list overloads"),
        ({"when": '"input-3d-not-multiple-of-output"', "torch": '"~=2.1"'}, "bad version clause"),
        ({}, "silent #1 (s): missing key 'when'"),
    ],
)
def test_the_loader_rejects_bad_silent_entries(tmp_path: Path, change, message):
    lines = []
    for line in SILENT.strip().splitlines():
        key = line.split(" = ")[0]
        lines.append(f"{key} = {change.pop(key)}" if key in change else line)
    lines += [f"{k} = {v}" for k, v in change.items()]
    shutil.copy(str(rules.rules_dir() / "torch.toml"), tmp_path / "torch.toml")
    (tmp_path / "bad.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RulesError, match=re.escape(message)):
        load(str(tmp_path))


def _rules_with_the_cpu(tmp_path: Path):
    for path in Path(str(rules.rules_dir())).glob("*.toml"):
        text = path.read_text(encoding="utf-8")
        if path.name == "pooling.toml":
            head, sep, tail = text.partition("[[silent]]")
            text = head + sep + tail.replace('devices = ["cuda"]', 'devices = ["cuda", "cpu"]', 1)
        (tmp_path / path.name).write_text(text, encoding="utf-8")
    return load(str(tmp_path))


def _pool_model(torch, size: int):
    class Pooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = torch.nn.AdaptiveMaxPool3d(4)

        def forward(self, x):
            y = self.pool(x)  # POOL_LINE
            return y * torch.linspace(0.5, 1.5, y.numel()).reshape(y.shape)

    return Pooled(), torch.randn(2, 3, size, size, size, requires_grad=True)  # no parameters: the input takes the gradient


@needs_torch
def test_scan_reports_the_op_at_its_forward_line_with_the_rules_remedy(tmp_path):
    import torch

    from opscan.trace import check

    db = _rules_with_the_cpu(tmp_path)
    model, x = _pool_model(torch, 9)  # 9 % 4 != 0: overlapping windows
    state = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    (found,) = check(model, x, rules=db)
    assert (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()) == state
    line = next(i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1) if text.strip() == POOL_LINE)
    finding = found.to_finding()
    assert finding.code == "DET103"
    assert finding.message == (
        "aten.adaptive_max_pool3d_backward.default is nondeterministic here and torch raises no alert for it, so strict "
        "mode does not catch it: the CUDA backward of 3-D adaptive max pooling where an input size is not a multiple of "
        f"the output size; it runs in backward of the forward op at tests/trace/test_unalerted.py:{line} in pool (AdaptiveMaxPool3d)"
    )
    assert (found.kind, found.rule, found.phase, found.line, found.line_text) == ("silent", ENTRY_ID, "backward", line, POOL_LINE)
    assert found.shapes[:2] == ((2, 3, 4, 4, 4), (2, 3, 9, 9, 9))
    assert finding.help.startswith("Make each pooled size of the input a multiple of the output size")
    assert finding.help_code.startswith("pool = nn.AdaptiveMaxPool3d(out)")


@needs_torch
def test_scan_is_silent_where_the_kernel_takes_no_atomics_or_the_rules_do_not_apply(tmp_path):
    import torch

    from opscan.trace import check

    model, x = _pool_model(torch, 8)  # 8 % 4 == 0: one window per input element
    assert check(model, x, rules=_rules_with_the_cpu(tmp_path)) == []
    model, x = _pool_model(torch, 9)
    assert check(model, x) == []  # the bundled entry is CUDA's: the CPU kernel is deterministic


@needs_torch
def test_assert_deterministic_ready_says_which_ops_no_alert_covers(tmp_path):
    import torch

    from opscan.pytest_plugin import _describe
    from opscan.trace import check

    model, x = _pool_model(torch, 9)
    text = _describe(check(model, x, rules=_rules_with_the_cpu(tmp_path)))
    assert text.splitlines()[0] == "1 op(s) are nondeterministic here with no alert (strict mode does not catch them):"
