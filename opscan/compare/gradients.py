"""After the all-reduce: the first op whose gradients differ between two data-parallel ranks.

Before the all-reduce each rank computes on its own batch, and its ops
differ from the other ranks' as its data does. The all-reduce makes the
gradients equal; from there to the optimizer step, whatever the ranks
compute from the gradients and the replicated state must be bitwise equal.
So, for one step of two ranks' records:

1. The step's *post-all-reduce region* is every op after its last
   collective (`c10d.allreduce_` for DDP's buckets; see
   opscan/trace/collectives.py for what a record holds of them). DDP
   copies each reduced bucket back into `param.grad` there
   (`aten.copy_`), then come the user's code between `backward()` and
   `step()`, and the optimizer.
2. A value is *replicated* when both ranks hold it: a parameter, an
   output of a collective that is the same on both, any value both ranks'
   regions read or write (DDP's `copy_` of the reduced bucket into
   `param.grad`; the gradient a `gradient_as_bucket_view` optimizer reads).
   An op carries gradients when it reads a replicated value and what it
   writes reaches the optimizer's ops. A
   rank's own noise (`torch.randn` on its generator) is not replicated; the
   `add_` that puts it into a gradient reads one (the gradient). Values are
   judged by fingerprint, not by which op made them: a fingerprint is of the
   values alone, so the bucket read afresh by `copy_` is the same value as
   the gradient it becomes.
3. The two regions are aligned as two runs' steps are (`align`): the first
   op that carries gradients and that one rank runs alone, or whose
   outputs differ from its counterpart's, is the answer.

Before all this, the collectives themselves are compared in order: an
all-reduce, broadcast or all-gather gives every rank the same values, and
one that did not is the answer itself. Reads JSON only; no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from opscan.compare.align import align
from opscan.compare.reader import Op, Step
from opscan.trace.collectives import is_collective

# Collectives after which every rank holds the same values (a reduce-scatter or an all-to-all gives each its own).
_SAME_ON_EVERY_RANK = ("allreduce", "all_reduce", "broadcast", "allgather", "all_gather")

ONLY_ON = "only on"  # the op runs on one rank alone
OUTPUTS_DIFFER = "outputs differ"
COLLECTIVE_DIFFERS = "collective differs"


@dataclass(frozen=True, slots=True)
class GradientDrift:
    """Where the gradients first differ after the all-reduce: `op` of `rank`, against `reference`'s `counterpart`."""

    step: int
    rank: int  # the rank whose op this is
    other: int  # the rank it is compared with
    op: Op
    counterpart: Op | None  # None when only `rank` runs the op
    change: str  # ONLY_ON, OUTPUTS_DIFFER or COLLECTIVE_DIFFERS
    inputs_equal: bool  # for OUTPUTS_DIFFER and COLLECTIVE_DIFFERS: did it read equal inputs?

    @property
    def change_text(self) -> str:
        """The `change` column: "only on rank 1", "outputs differ", "collective differs"."""
        return f"{ONLY_ON} rank {self.rank}" if self.change == ONLY_ON else self.change

    def describe(self) -> str:
        """What happened, in a clause: "rank 1 alone runs `aten.add_.Tensor` (train.py:45, outside any module)"."""
        op = self.op
        where = ", ".join(filter(None, [op.where, op.module_label]))
        name = f"`{op.op}` ({where})"
        if self.change == ONLY_ON:
            return f"rank {self.rank} alone runs {name} after the all-reduce, and it writes what the optimizer reads"
        inputs = (
            "from equal inputs (so an argument that is no tensor, such as a learning rate, or the kernel differs)"
            if self.inputs_equal else "and its inputs differ"
        )  # fmt: skip
        if self.change == COLLECTIVE_DIFFERS:
            return f"the collective {name} gives rank {self.rank} other values than rank {self.other}, {inputs}"
        return f"after the all-reduce, {name} writes other values on rank {self.rank} than on rank {self.other}, {inputs}"


def _same_everywhere(op: Op) -> bool:
    name = op.op.split(".")[1] if "." in op.op else op.op
    return any(word in name for word in _SAME_ON_EVERY_RANK) and "scatter" not in name


def _fp(value: str | None) -> str | None:
    """A fingerprint as an input holds it: `p:NAME@FP` is FP."""
    if value is not None and value.startswith("p:"):
        return value.rpartition("@")[2] or None
    return value


def _outs_differ(a: Op, b: Op) -> bool:
    if len(a.outs) != len(b.outs):
        return True
    return any(x is not None and y is not None and x != y for x, y in zip(a.outs, b.outs))


def _ins_equal(a: Op, b: Op) -> bool:
    return len(a.ins) == len(b.ins) and all(_fp(x) == _fp(y) for x, y in zip(a.ins, b.ins))


def post_allreduce(ops: list[Op]) -> int | None:
    """The index of the first op after the step's last collective; None when the step has none."""
    for i in range(len(ops) - 1, -1, -1):
        if is_collective(ops[i].op):
            return i + 1
    return None


def _values(region: list[Op]) -> set[str]:
    """Every fingerprint the region's ops read or write."""
    return {v for op in region for v in (*map(_fp, op.ins), *op.outs) if v is not None}


def feeds_optimizer(region: list[Op]) -> list[bool]:
    """For each op of the region: is it an optimizer op, or does what it writes reach one (read back from the optimizer)?"""
    needed: set[str] = set()
    feeds = [False] * len(region)
    for k in range(len(region) - 1, -1, -1):
        op = region[k]
        if op.phase == "optimizer" or any(fp is not None and fp in needed for fp in op.outs):
            feeds[k] = True
            needed.update(v for v in map(_fp, op.ins) if v is not None)
    return feeds


def _merged(pairs: list[tuple[int, int]], only_a: list[int], only_b: list[int]):
    """Every op of both regions once, in program order: ("pair", x, y), ("a", x, None) or ("b", None, y)."""
    out = []
    left_a, left_b = sorted(only_a), sorted(only_b)
    ia = ib = 0
    for x, y in sorted(pairs):
        while ib < len(left_b) and left_b[ib] < y:
            out.append(("b", None, left_b[ib]))
            ib += 1
        while ia < len(left_a) and left_a[ia] < x:
            out.append(("a", left_a[ia], None))
            ia += 1
        out.append(("pair", x, y))
    out.extend(("b", None, y) for y in left_b[ib:])
    out.extend(("a", x, None) for x in left_a[ia:])
    return out


def first_drift(reference: Step, ref_rank: int, other: Step, other_rank: int) -> GradientDrift | None:
    """The first op of this step whose gradients differ between the two ranks after the all-reduce; None if none is seen.

    Raises LookupError when a rank's step has no collective (there is no all-reduce to look after).
    """
    step = other.step
    ref_ops, ops = reference.ops, other.ops
    ref_coll = [op for op in ref_ops if is_collective(op.op)]
    coll = [op for op in ops if is_collective(op.op)]
    if not ref_coll or not coll:
        missing = [r for r, c in ((ref_rank, ref_coll), (other_rank, coll)) if not c]
        raise LookupError(missing)
    for a, b in zip(ref_coll, coll):
        if a.op == b.op and _same_everywhere(b) and _outs_differ(a, b):
            return GradientDrift(step, other_rank, ref_rank, b, a, COLLECTIVE_DIFFERS, _ins_equal(a, b))
    # The parameters are replicated: they were equal after the last step (this is the first where they part).
    replicated = {_fp(v) for op in (*ref_ops, *ops) for v in op.ins if v is not None and v.startswith("p:")}
    for a, b in zip(ref_coll, coll):
        if not _outs_differ(a, b):
            replicated.update(fp for fp in b.outs if fp is not None)
    start_a, start_b = post_allreduce(ref_ops), post_allreduce(ops)
    region_a, region_b = ref_ops[start_a:], ops[start_b:]
    feeds_a, feeds_b = feeds_optimizer(region_a), feeds_optimizer(region_b)
    replicated |= _values(region_a) & _values(region_b)
    alignment = align([op.key for op in region_a], [op.key for op in region_b])

    def reads_replicated(op: Op) -> bool:
        return any(_fp(v) in replicated for v in op.ins)

    for kind, x, y in _merged(alignment.pairs, alignment.only_a, alignment.only_b):
        if kind == "pair":
            a, b = region_a[x], region_b[y]
            equal_ins = _ins_equal(a, b)
            if not _outs_differ(a, b):
                continue
            if (feeds_a[x] or feeds_b[y]) and (equal_ins or reads_replicated(a) or reads_replicated(b)):
                return GradientDrift(step, other_rank, ref_rank, b, a, OUTPUTS_DIFFER, equal_ins)
        elif kind == "b" and feeds_b[y] and reads_replicated(region_b[y]):
            return GradientDrift(step, other_rank, ref_rank, region_b[y], None, ONLY_ON, False)
        elif kind == "a" and feeds_a[x] and reads_replicated(region_a[x]):
            return GradientDrift(step, ref_rank, other_rank, region_a[x], None, ONLY_ON, False)
    return None
