"""Collectives in a record: `torch.distributed`'s ops as a dispatch mode sees them, and what the recorder must do about them.

What a TorchDispatchMode sees of DDP's all-reduce (tried with gloo on torch
2.14.1, 2 ranks under torchrun, and read in the source):

- `ProcessGroup::allreduce` and its kin call their ops through the
  dispatcher (`c10::Dispatcher::singleton().findSchemaOrThrow("c10d::allreduce_", "")`,
  torch/csrc/distributed/c10d/ProcessGroup.hpp), and DDP's reducer
  (torch/csrc/distributed/c10d/reducer.cpp) runs its default hook through
  `ProcessGroup::allreduce`; so every bucket's all-reduce reaches the mode
  as `c10d.allreduce_.default`, on the thread that runs the backward, between
  the `aten.mul.out` ops that copy the gradients into the bucket (divided by
  the world size) and the `aten.copy_` ops of `finalize_backward` that copy
  the reduced bucket back into each `param.grad`. DDP's construction
  broadcasts the parameters (`c10d.broadcast_`) and checks their shapes
  (`c10d.allgather_`) the same way.
- The c10d ops (TORCH_LIBRARY(c10d) in torch/csrc/distributed/c10d/Ops.cpp)
  are asynchronous: they return a `Work` (a `torch.ScriptObject` whose class
  registers `wait`) before the backend has written the result. Their schemas
  do not mark what they write (`allreduce_(Tensor[] tensors, ...) ->
  (Tensor[], Work)`: no `(a!)`), so nothing bumps the tensors' version.
  Fingerprinted as the op returns, a bucket shows its pre-reduction values
  on one run and a half-reduced mix on another: with gloo, the two ranks'
  `allreduce_` outputs had different fingerprints where the reduced values
  are bitwise equal. So the recorder waits for the work before it
  fingerprints the outputs (`settler`). That serialises communication and
  computation for the record; the values are the same. Point-to-point ops
  (`send`, `recv_`) are not waited for (it could deadlock two ranks that
  exchange), so a `recv_`'s recorded output may be taken before its data came.
- Functional collectives (`torch.distributed._functional_collectives`,
  used by DTensor) are `_c10d_functional.all_reduce` and friends
  (torch/csrc/distributed/c10d/Functional.cpp): they return the output
  tensor at once and `_c10d_functional.wait_tensor` completes it; waiting
  twice is harmless (the second finds no work registered for the tensor).

What this relies on, in torch 2.11 and 2.14: the c10d ops and the `Work`
class with `wait` (the same `TORCH_LIBRARY(c10d)` block in every stored
version of pytorch/pytorch's torch/csrc/distributed/c10d/Ops.cpp read, and
`torch.ops.c10d.allreduce_` on the installed 2.14.1), and
`_c10d_functional::wait_tensor(Tensor tensor) -> Tensor` (the same
definition in every stored version of Functional.cpp read). Not run on
2.11 here (no multi-GPU machine; the CPU machine has 2.14.1).
"""

from __future__ import annotations

from typing import Callable

# The ops that reach the backend without writing a tensor argument (arguments read only).
_READ_ONLY = frozenset({"c10d.send", "c10d.barrier", "c10d.monitored_barrier_"})
# Point-to-point ops are not waited for: a rank that posts isend then irecv while its peer does the same
# (batch_isend_irecv, pipeline schedules) would wait on its send before posting the receive that completes it.
_NOT_WAITED = frozenset({"c10d.send", "c10d.recv_", "c10d.recv_any_source_"})
# Functional ops that are no collective of their own.
_FUNCTIONAL_HELPERS = frozenset({"wait_tensor"})


def is_collective(name: str) -> bool:
    """Is `aten.add.Tensor`-style `name` a collective (of c10d or of the functional collectives)?"""
    namespace, _, rest = name.partition(".")
    if namespace == "c10d":
        return True
    if namespace == "_c10d_functional":
        packet = rest.partition(".")[0]
        return packet not in _FUNCTIONAL_HELPERS and not packet.startswith("_")
    return False


def settler(name: str) -> Callable[[object], None] | None:
    """What to call on a collective's return value before its outputs are fingerprinted; None for any other op."""
    namespace = name.partition(".")[0]
    if namespace == "c10d":
        return None if ".".join(name.split(".")[:2]) in _NOT_WAITED else _wait_work
    if namespace == "_c10d_functional" and is_collective(name):
        return _wait_tensors
    return None


def written(name: str, schema) -> list[tuple[int, str, bool]]:
    """The arguments a c10d op writes, as OpInfo's `mutable` (position, name, keyword-only).

    The c10d schemas mark none; each writes its first argument (the tensors
    reduced or broadcast in place, the output lists of a gather), except the
    ops in `_READ_ONLY`. `_c10d_functional`'s in-place ops are marked (`Tensor(a!)`).
    """
    packet = ".".join(name.split(".")[:2])
    if not packet.startswith("c10d.") or packet in _READ_ONLY or not schema.arguments:
        return []
    first = schema.arguments[0]
    if "Tensor" not in str(first.type):
        return []
    return [(0, first.name, first.kwarg_only)]


def _wait_work(out) -> None:
    """Wait for the Work a c10d op returned (alone, or last in its tuple)."""
    work = out[-1] if isinstance(out, tuple) and out else out
    wait = getattr(work, "wait", None)
    if wait is None or isinstance(work, (list, tuple)):
        return
    try:
        wait()
    except Exception:  # noqa: BLE001 - a failed collective raises again where the program waits for it itself
        pass


def _wait_tensors(out) -> None:
    import torch

    wait = torch.ops._c10d_functional.wait_tensor.default
    for t in out if isinstance(out, (list, tuple)) else (out,):
        if isinstance(t, torch.Tensor):
            try:
                wait(t)
            except Exception:  # noqa: BLE001 - as above
                pass
