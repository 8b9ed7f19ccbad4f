"""GPU tests of `opscan report`: a fresh report on this GPU agrees, rule by rule, with what
tests/gpu/test_rule_reproducers.py expects of each reproducer, and each remedy the rules can run does run.

Run on the GPU machine: `python3 -m pytest tests/gpu -m gpu`. The report is built once for the module.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from opscan.report import matrix  # noqa: E402
from tests.gpu.test_rule_reproducers import CUDA_OPS  # noqa: E402 - the same expectation, the same ops

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def report():
    from opscan.report.build import rules_report
    from opscan.trace.state import TorchFlags

    before = TorchFlags.capture()
    built = rules_report(torch_version=None, device="cuda", runs=5)
    assert TorchFlags.capture() == before
    rows = {(r["rule"], r["device"], r["dtype"]): r for r in matrix.rows_of(built)}
    return built, rows


def _row(report, op):
    return report[1][(op.id, "cuda", op.dtypes[0])]


@pytest.mark.parametrize("op", CUDA_OPS, ids=[op.id for op in CUDA_OPS])
def test_report_agrees_with_the_reproducer_test(report, op):
    row = _row(report, op)
    assert row["measured"] is True and row["verdict"] != matrix.V_ERROR, row["note"]
    if op.raises_on(torch.__version__, "cuda"):
        assert row["strict"] == "raises" and row["caller"] in op.callers, row
    else:
        assert row["strict"] == "no alert" and row["caller"] == "", row


RAISING_WITH_REMEDY = [op for op in CUDA_OPS if op.raises_on(torch.__version__, "cuda") and op.remedy_reproducer.strip()]


@pytest.mark.parametrize("op", RAISING_WITH_REMEDY, ids=[op.id for op in RAISING_WITH_REMEDY])
def test_the_remedy_runs_in_strict_mode(report, op):
    assert _row(report, op)["remedy"].startswith("runs; "), _row(report, op)["remedy"]


@pytest.mark.parametrize("op", RAISING_WITH_REMEDY, ids=[op.id for op in RAISING_WITH_REMEDY])
def test_the_remedy_is_bitwise_reproducible(report, op):
    assert _row(report, op)["remedy"] == "runs; identical in 5 runs", _row(report, op)["remedy"]


def test_every_rule_device_and_dtype_has_a_measured_row(report):
    built, rows = report
    want = {(op.id, device, dtype) for op in CUDA_OPS for device in op.devices for dtype in op.dtypes}
    assert want <= set(rows)
    assert all(rows[key]["measured"] is True for key in want)
    env = built.env
    assert env["device"].startswith("cuda") and env["gpu"] and env["cuda"] and env["date"]
    assert env["torchvision"], "the torchvision rules need torchvision"
