"""The golden cases: each a pair of synthetic records and what `opscan compare` must say about them.

`tests/fixtures/compare/<case>/` holds `a.jsonl`, `b.jsonl` and `expected.txt`
(the whole text output of `opscan compare a.jsonl b.jsonl`, run in that
folder). `python scripts/gen_golden_compare.py` writes them from CASES;
tests/compare/test_golden.py fails when either the records or the output
change without their fixture.
"""

from __future__ import annotations

from pathlib import Path

from tests.compare.records import FILE, TRAIN, RecordWriter, mm, run, tensor, transpose, variant

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "compare"

# How a record is written: the run, and the cut (see RecordWriter.write).
Case = tuple[RecordWriter, dict]


def _pair(a: RecordWriter, b: RecordWriter, b_cut: dict | None = None) -> tuple[Case, Case]:
    return (a, {}), (b, b_cut or {})


def identical():
    return _pair(run(steps=2), run(steps=2))


def kernel_nondeterminism():
    # gW1's matmul in fc1's backward rounds differently in b; everything after it reads that.
    return _pair(run(steps=3), run(variant(nudge=(0, "backward", "aten.mm.default", "fc1")), steps=3))


def reordered_on_cpu():
    # As kernel_nondeterminism, but both runs are on the CPU, whose kernels are deterministic: equal fingerprints
    # with other outputs are the same values in another order (a batch shuffled apart), which fingerprints miss.
    cpu = {"device": "cpu"}
    return _pair(run(variant(header=cpu), steps=3), run(variant(header=cpu, nudge=(0, "backward", "aten.mm.default", "fc1")), steps=3))


def random_stream():
    # b draws torch.rand(4) before the dropout: the dropout's Philox offset is 4 ahead.
    return _pair(run(variant(dropout=True), steps=2), run(variant(dropout=True, extra_draw=0), steps=2))


def unseeded():
    # A script recorded without --seed that never seeds: torch seeds the generator anew in each process.
    script = {"seed": None, "kind": "script", "target": "train.py"}
    return _pair(
        run(variant(dropout=True, gen_seed=1088, header=script), steps=2),
        run(variant(dropout=True, gen_seed=5023, header=script), steps=2),
    )


def data_differs():
    # b's first batch comes in the other order.
    return _pair(run(steps=2), run(variant(swap_batch=0), steps=2))


def initialisation_differs():
    return _pair(run(steps=2), run(variant(init_shift=True), steps=2))


def structure_same_numbers():
    # b clones the activation and computes fc2's transpose first: two structural differences, the same maths.
    return _pair(run(steps=2), run(variant(clone_after_relu=True, w2t_first=True), steps=2))


def structure_changes_numbers():
    # b doubles the activation: an inserted op whose output changes everything after it.
    return _pair(run(steps=2), run(variant(scale_after_relu=True), steps=2))


# The project files a record's header lists (opscan/trace/sources.py): the script, and the model it imports.
SOURCES = {"models/tiny.py": "6c0f2b7e41d9a3c58e1f0b2d4a6c8e90", "train.py": "0f1e2d3c4b5a69788796a5b4c3d2e1f0"}


def structure_same_sources():
    # As structure_changes_numbers, but both headers list the same project files alike: the same code took
    # another path (an unseeded branch), which is what compare must say, not "the code changed".
    same = {"sources": SOURCES}
    return _pair(run(variant(header=same), steps=2), run(variant(scale_after_relu=True, header=same), steps=2))


def structure_changed_sources():
    # As structure_changes_numbers, and the headers say models/tiny.py changed between the runs.
    changed = {"sources": {**SOURCES, "models/tiny.py": "a7b6c5d4e3f201928374655647382910"}}
    return _pair(run(variant(header={"sources": SOURCES}), steps=2), run(variant(scale_after_relu=True, header=changed), steps=2))


def structure_after_kernel():
    # b clones the activation, and fc1's forward matmul rounds differently before that clone runs.
    return _pair(run(steps=2), run(variant(clone_after_relu=True, nudge=(0, "forward", "aten.mm.default", "fc1")), steps=2))


def environment():
    # b allows TF32: fc1's forward matmul rounds differently from the first op on.
    return _pair(
        run(steps=2),
        run(variant(env={"allow_tf32_matmul": True, "torch": "2.14.1+cu128"}, nudge=(0, "forward", "aten.mm.default", "fc1")), steps=2),
    )


def seeds_differ():
    # b was recorded with --seed 1: the batch drawn from the generator differs from the first op on.
    return _pair(run(steps=2), run(variant(swap_batch=0, header={"seed": 1}), steps=2))


def _summed(module: str, width: int, steps: int = 2) -> RecordWriter:
    """A one-layer model `module` of `width` outputs, trained on the sum of its outputs: a record of models/tiny.py:build_<module>."""
    rec = RecordWriter(target=f"models/tiny.py:build_{module}", steps=steps)
    w = tensor((width, 3), [0.1 * (k + 1) for k in range(width * 3)])
    fwd = {"phase": "forward", "module_class": None}
    bwd = {"phase": "backward", "module_class": None}
    for step in range(steps):
        ops = rec.i
        x = tensor((2, 3), [0.5, -1.0, 2.0, 1.5, 0.25 * step, -0.5])
        rec.op(step, "aten._to_copy.default", module=None, file=TRAIN, line=30, ins=[x], outs=[x], **fwd)
        wt = transpose(w)
        rec.op(step, "aten.t.default", module=module, file=FILE, line=11, ins=[("p", f"{module}.weight", w)], outs=[wt], **fwd)
        y = mm(x, wt)
        rec.op(step, "aten.mm.default", module=module, file=FILE, line=11, ins=[x, wt], outs=[y], **fwd)
        loss = tensor((), [sum(y.v)])
        rec.op(step, "aten.sum.default", module=None, file=TRAIN, line=32, ins=[y], outs=[loss], **fwd)
        one = tensor((), [1.0])
        rec.op(step, "aten.ones_like.default", module=None, file=TRAIN, line=33, ins=[loss], outs=[one], **bwd)
        grad = tensor(y.shape, [1.0] * len(y.v))  # a view of the 1.0 in y's shape: another shape in each model
        rec.op(step, "aten.expand.default", module=None, file=TRAIN, line=32, ins=[one], outs=[grad], **bwd)
        gt = transpose(grad)
        rec.op(step, "aten.t.default", module=module, file=FILE, line=11, ins=[grad], outs=[gt], **bwd)
        gw = mm(gt, x)
        rec.op(step, "aten.mm.default", module=module, file=FILE, line=11, ins=[gt, x], outs=[gw], **bwd)
        new = tensor(w.shape, [a - 0.05 * d for a, d in zip(w.v, gw.v)])
        rec.op(step, "aten.add_.Tensor", phase="optimizer", module=None, module_class=None, file=TRAIN, line=35,
               ins=[("p", f"{module}.weight", w), gw], outs=[new])  # fmt: skip
        w = new
        rec.step(step, rec.i - ops, {f"{module}.weight": w}, loss.v[0])
    rec.end(steps)
    return rec


def different_models():
    # Two models with nothing in common but the loss: their only aligned op that differs is the expand of
    # the loss's gradient, equal inputs into outputs of another shape; no parameter has a name in both.
    return _pair(_summed("fc", 4), _summed("head", 2))


def truncated():
    # b was killed in step 2: no end line, and its last line is half written.
    return _pair(run(steps=3), run(steps=3), {"cut_last": 1 + 18 + 18 + 5})


def different_targets():
    return _pair(run(steps=2), run(variant(header={"target": "models/tiny_v2.py:build"}), steps=2))


def spread():
    # A kernel difference in step 1's backward, then eight steps at a learning rate that lets it grow.
    return _pair(run(variant(lr=1.0), steps=8), run(variant(lr=1.0, nudge=(1, "backward", "aten.mm.default", "fc1")), steps=8))


CASES = {
    f.__name__: f
    for f in (
        identical,
        kernel_nondeterminism,
        reordered_on_cpu,
        random_stream,
        unseeded,
        data_differs,
        initialisation_differs,
        structure_same_numbers,
        structure_changes_numbers,
        structure_same_sources,
        structure_changed_sources,
        structure_after_kernel,
        environment,
        seeds_differ,
        truncated,
        different_targets,
        different_models,
        spread,
    )
}


def write_records(name: str, folder: Path) -> None:
    """Write the case's a.jsonl and b.jsonl into folder."""
    (a, a_cut), (b, b_cut) = CASES[name]()
    folder.mkdir(parents=True, exist_ok=True)
    a.write(folder / "a.jsonl", **a_cut)
    b.write(folder / "b.jsonl", **b_cut)


def compare_text(folder: Path) -> tuple[int, str]:
    """The exit code and the text output of `opscan compare a.jsonl b.jsonl`, run in folder."""
    from opscan.compare import compare_records
    from opscan.output import render
    from tests.util import chdir

    with chdir(folder):
        report = compare_records("a.jsonl", "b.jsonl")
    return report.exit_code(), render(report, "text")
