"""The first op after the all-reduce whose gradients differ between two ranks (opscan/compare/gradients.py), on hand-made steps."""

from __future__ import annotations

import pytest

from opscan.compare.gradients import COLLECTIVE_DIFFERS, ONLY_ON, OUTPUTS_DIFFER, first_drift, post_allreduce
from opscan.compare.reader import Op, Step


def op(name: str, ins=(), outs=(), phase: str = "forward", line: int | None = 10, module: str | None = None) -> Op:
    shapes = tuple((4,) for _ in ins)
    return Op(0, name, phase, module, None, "train.py", line, shapes, tuple(ins), tuple(outs), None, None, None, 0, (name, module, shapes, None))


def ddp_step(rank_grad: str, *, after=(), reduced: str = "R", lr_out: str = "W1", local: str = "L0") -> Step:
    """Backward on the rank's data, the bucket all-reduce, DDP's copy into the grad, `after` (user code), SGD."""
    ops = [
        op("aten.mm.default", ["x", "W0"], [local], "backward"),  # rank-local
        op("aten.mul.out", [local], [rank_grad], "backward", line=None),
        op("c10d.allreduce_.default", [rank_grad], [reduced], "backward", line=None),
        op("aten.copy_.default", [local, reduced], [reduced], line=40),
        op("aten._local_scalar_dense.default", [local + "loss"], [], line=41),  # loss.item(): rank-local, not a gradient
        op("aten.detach.default", [local + "loss"], [local + "loss"], line=41),
        *after,
        op("aten.add_.Tensor", ["p:fc.weight@W0", after[-1].outs[0] if after else reduced], [lr_out], "optimizer", line=50),
    ]
    return Step(3, ops, {}, None, 0)


def test_equal_gradients_give_no_drift_though_the_local_ops_differ():
    assert first_drift(ddp_step("G0"), 0, ddp_step("G1", local="L1"), 1) is None


def test_an_op_one_rank_alone_runs_on_the_gradient():
    noisy = ddp_step("G1", local="L1", after=[op("aten.randn.generator", [], ["N"], line=44), op("aten.add_.Tensor", ["R", "N"], ["RN"], line=45)], lr_out="W2")
    drift = first_drift(ddp_step("G0"), 0, noisy, 1)
    assert (drift.change, drift.rank, drift.other, drift.op.op, drift.op.line, drift.step) == (ONLY_ON, 1, 0, "aten.add_.Tensor", 45, 3)
    assert drift.change_text == "only on rank 1"
    assert drift.describe() == "rank 1 alone runs `aten.add_.Tensor` (train.py:45, outside any module) after the all-reduce, and it writes what the optimizer reads"
    # The same on the reference's side: the op is the reference rank's.
    drift = first_drift(noisy, 0, ddp_step("G1"), 1)
    assert (drift.change, drift.rank, drift.other) == (ONLY_ON, 0, 1)


def test_the_optimizer_computing_otherwise_from_equal_inputs():
    drift = first_drift(ddp_step("G0"), 0, ddp_step("G1", lr_out="W9"), 1)
    assert (drift.change, drift.op.op, drift.op.phase, drift.inputs_equal) == (OUTPUTS_DIFFER, "aten.add_.Tensor", "optimizer", True)
    assert drift.describe().endswith(
        "writes other values on rank 1 than on rank 0, from equal inputs (so an argument that is no tensor, "
        "such as a learning rate, or the kernel differs)"
    )


def test_an_all_reduce_that_gives_the_ranks_other_values():
    drift = first_drift(ddp_step("G0"), 0, ddp_step("G1", reduced="R2"), 1)
    assert (drift.change, drift.op.op, drift.inputs_equal) == (COLLECTIVE_DIFFERS, "c10d.allreduce_.default", False)


def test_a_gradient_the_optimizer_reads_from_the_bucket_itself():
    # gradient_as_bucket_view=True: no copy_ after the all-reduce; both optimizers read the gradient "G" afresh.
    def step(after=()):
        ops = [
            op("c10d.allreduce_.default", ["B0"], ["B"], "backward", line=None),
            *after,
            op("aten.add_.Tensor", ["p:fc.weight@W0", after[-1].outs[0] if after else "G"], ["W1" if not after else "W2"], "optimizer"),
        ]
        return Step(1, ops, {}, None, 0)

    noisy = step([op("aten.randn.generator", [], ["N"], line=44), op("aten.add_.Tensor", ["G", "N"], ["GN"], line=45)])
    drift = first_drift(step(), 0, noisy, 1)
    assert (drift.change, drift.rank, drift.op.line) == (ONLY_ON, 1, 45)


def test_a_step_without_a_collective():
    plain = Step(0, [op("aten.add_.Tensor", ["p:w@1", "g"], ["2"], "optimizer")], {}, None, 0)
    assert post_allreduce(plain.ops) is None
    with pytest.raises(LookupError) as exc:
        first_drift(ddp_step("G0"), 0, plain, 1)
    assert exc.value.args == ([1],)
