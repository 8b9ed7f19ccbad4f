"""What the recorder does about collectives (opscan/trace/collectives.py): which ops they are, and waiting for their work."""

from __future__ import annotations

import pytest

from opscan.trace import collectives


@pytest.mark.parametrize(
    "name, want",
    [
        ("c10d.allreduce_.default", True),
        ("c10d.broadcast_.default", True),
        ("_c10d_functional.all_reduce.default", True),
        ("_c10d_functional.wait_tensor.default", False),
        ("_c10d_functional._wrap_tensor_autograd.default", False),
        ("aten.add_.Tensor", False),
    ],
)
def test_is_collective(name, want):
    assert collectives.is_collective(name) is want
    assert (collectives.settler(name) is not None) is want


def test_point_to_point_ops_are_not_waited_for():
    assert collectives.is_collective("c10d.recv_.default") and collectives.settler("c10d.recv_.default") is None
    assert collectives.settler("c10d.send.default") is None


class Work:
    waited = 0

    def wait(self):
        Work.waited += 1


def test_a_c10d_op_waits_for_its_work_alone_or_last_in_its_tuple():
    Work.waited = 0
    settle = collectives.settler("c10d.allreduce_.default")
    settle(([object()], Work()))
    settle(Work())
    settle(([], [Work()]))  # a list is no work
    assert Work.waited == 2


def test_what_a_c10d_op_writes():
    torch = pytest.importorskip("torch")
    import torch.distributed  # noqa: F401 - registers the c10d ops

    schema = torch.ops.c10d.allreduce_.default._schema
    assert collectives.written("c10d.allreduce_.default", schema) == [(0, "tensors", False)]
    assert collectives.written("c10d.send.default", torch.ops.c10d.send.default._schema) == []
    assert collectives.written("aten.add_.Tensor", torch.ops.aten.add_.Tensor._schema) == []
