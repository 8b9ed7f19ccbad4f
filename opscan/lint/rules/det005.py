"""DET005 cudnn-benchmark: cuDNN benchmarking is on in code that seeds or enables determinism.

## What it does
Flags `torch.backends.cudnn.benchmark = True` and Lightning's
`Trainer(benchmark=True)` in a script that seeds or enables deterministic algorithms,
when benchmarking is still on once work runs on the GPU. Last write wins: a
later `cudnn.benchmark = False`, or a helper that turns it off (MONAI's
`set_determinism`, `Trainer(deterministic=True)`, transformers'
`enable_full_determinism`, ...), clears it when it runs before the first CUDA
work after the `True` (`.cuda()`, `.to("cuda")`, a tensor created on the GPU), in
execution order through project helpers. A reset after that work comes too late:
the finding stays, and so does one in another branch of the `if` that holds the
`True` (`if args.fast: ... = True` / `else: ... = False`), which runs on another
path.

A `True` in one branch of an `if` whose other branch asks for determinism
(`use_deterministic_algorithms(True)`, `cudnn.deterministic = True`) is the
script's own fast path for runs that do not ask for it (torchvision's
references: `if args.use_deterministic_algorithms: ... else:
torch.backends.cudnn.benchmark = True`): it is not reported, unless determinism
is also turned on outside such a branch. Nor is the same choice written as
strict by default, then an opt-out: determinism asked for outside an `if`
(`cudnn.deterministic = True`, `use_deterministic_algorithms(True)`), and the
branch that turns benchmarking on turning each of them off again before it
(espnet's `if args.debugmode < 1: torch.backends.cudnn.deterministic = False;
torch.backends.cudnn.benchmark = True`): where the `True` runs, nothing asks
for determinism, as in the `else` above. A branch that leaves one of them on,
an opt-out that runs whether or not the `True` does, or an ask after it that
runs with it, is still reported.

## Why is this bad?
With benchmarking on, cuDNN times several convolution algorithms on the first
batch and keeps the fastest. Timing varies between runs, so the chosen
algorithm, and with it the numerics, varies too, even when every seed is fixed.

## Example
```python
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = True
```

## Use instead
```python
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = False
```

## Fix
Sets benchmark to False, and drops the comment at the end of that line, which
was about the `True` (a `# noqa`, `# type:` or other tool pragma stays). Safe
when the script enables determinism (that is its stated intent); unsafe
otherwise, because it can slow training.
"""

from __future__ import annotations

from opscan.codes import parse_doc
from opscan.findings import Finding, Fix
from opscan.lint.context import Context
from opscan.lint.model import Cudnn, Determinism, Edit
from opscan.lint.modelled import helper

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.lint.fix.planner import Planner
    from opscan.lint.project import TraceEvent

RULE = parse_doc(__doc__)


def check(ctx: Context) -> None:
    if not ctx.seeds_or_enables:
        return
    applicability = "safe" if ctx.enables else "unsafe"
    for event in ctx.of(Cudnn):
        if event.what.flag != "benchmark" or event.what.value is not True:
            continue
        if ctx.overridden(event, _turns_benchmark_off, branches=True) is not None:
            continue  # turned off again before any CUDA work ran with it
        if _chosen_instead_of_determinism(ctx, event) or _opted_out_with(ctx, event):
            continue
        entry = helper(event.api)
        if event.api is None:  # an assignment
            what, fix = "`cudnn.benchmark = True`", Fix("Set benchmark to False", applicability, BenchmarkFalse(keyword=None))
        elif entry is not None and entry.benchmark:  # Lightning's Trainer(benchmark=True)
            keyword = entry.benchmark
            what = f"`{event.api}({keyword}=True)`"
            fix = Fix(f"Pass {keyword}=False", applicability, BenchmarkFalse(keyword=keyword))
        else:  # a helper that turns it on by itself
            what, fix = f"`{event.api}` sets `cudnn.benchmark = True`, which", None
        ctx.report(
            RULE,
            event.path,
            event.loc,
            f"{what} picks convolution algorithms by timing, which varies between runs; set benchmark to False",
            fix,
        )


def _turns_benchmark_off(what) -> bool:
    return what.__class__ is Cudnn and what.flag == "benchmark" and what.value is False


def _determinism_set(what):
    """What an effect sets determinism to (use_deterministic_algorithms' mode, or cudnn.deterministic's value:
    True, False or UNKNOWN); None where it is neither."""
    cls = what.__class__
    if cls is Determinism:
        return what.mode
    return what.value if cls is Cudnn and what.flag == "deterministic" else None


def _asks_for_determinism(what) -> bool:
    return _determinism_set(what) is True


def _chosen_instead_of_determinism(ctx: Context, event: TraceEvent) -> bool:
    """Is this `True` in one branch of an `if` whose other branch asks for determinism, with nothing turning
    determinism on outside such a branch: the fast path the script chose for runs that do not ask for it?"""
    asks = [e for e in ctx.trace.effects if _asks_for_determinism(e.what)]
    if not any(ctx.apart(event, other) for other in asks):
        return False
    return all(ctx.apart(event, other) for other in asks if other.what.__class__ is Determinism)


def _opted_out_with(ctx: Context, event: TraceEvent) -> bool:
    """Is this `True` the fast path of a script strict by default: asked for outside an `if`, determinism is
    turned off again, before it, in the branch of that `if` that holds it (espnet's
    `if args.debugmode < 1: cudnn.deterministic = False; cudnn.benchmark = True`)? The same choice as
    `if ...: (strict) else: (fast)`: where the `True` runs, nothing asks for determinism."""
    effects = ctx.trace.effects
    index = ctx._positions.get(id(event))
    if index is None:
        return False
    last: dict[type, TraceEvent] = {}  # for each switch (Determinism, cudnn.deterministic), its last write before
    asked: list[TraceEvent] = []
    for earlier in effects[:index]:
        value = _determinism_set(earlier.what)
        if value is not None and not ctx.apart(event, earlier):
            last[earlier.what.__class__] = earlier
            if value is True:
                asked.append(earlier)
    if not asked or not all(_determinism_set(e.what) is False for e in last.values()):
        return False  # never asked for, or still asked for (or maybe: a computed mode) where the `True` runs
    for off in last.values():
        branch = ctx.shared_branch(event, off)
        if branch is None:
            return False  # turned off whether or not the `True` runs: not a choice between the two
        if all(ctx.runs_in(ask, branch) for ask in asked):
            return False  # asked for in that branch too: nothing outside it is strict
    # Asked for again after it, where the `True` runs: not a fast path.
    return not any(_asks_for_determinism(e.what) and not ctx.apart(event, e) for e in effects[index + 1 :])


# -- the fix ------------------------------------------------------------------------


class BenchmarkFalse(Edit):
    """Turn `cudnn.benchmark = True` (or a call's `keyword=True`) into False, and drop the
    comment that ends its line: it was about the `True`."""

    _fields = ("keyword",)
    __slots__ = _fields
    order = 1  # in place

    def __init__(self, keyword: str | None):
        self.keyword = keyword  # the call's keyword that sets benchmark; None for an assignment

    def plan(self, planner: Planner, finding: Finding) -> bool:
        import libcst as cst

        from opscan.lint.fix.nodes import attr_name, is_name

        start, end = planner.span(finding)
        if self.keyword:
            call = planner.innermost(cst.Call, start, end)
            value = holder = None
            for arg in call.args if call is not None else ():
                if arg.keyword is not None and arg.keyword.value == self.keyword and is_name(arg.value, "True"):
                    value, holder = arg.value, arg
        else:
            stmt = planner.innermost((cst.Assign, cst.AnnAssign), start, end)
            value = stmt.value if stmt is not None and is_name(stmt.value, "True") else None
            if isinstance(stmt, cst.Assign) and not any(attr_name(t.target) == "benchmark" for t in stmt.targets):
                value = None
            if isinstance(stmt, cst.AnnAssign) and attr_name(stmt.target) != "benchmark":
                value = None
            holder = planner.parent.get(stmt)
        if value is None:
            return False
        planner.claim(value)
        planner.edits.replace[value] = lambda updated: updated.with_changes(value="False")
        _drop_stale_comment(planner, holder)
        return True


# Comments that are instructions to a tool, not a reason for the `True`: they stay.
_PRAGMAS = ("noqa", "type:", "pragma", "pylint:", "fmt:", "opscan:", "isort:", "nosec", "ruff:")


def _drop_stale_comment(planner: Planner, node) -> None:
    """Drop the comment that ends the line of `node` (a statement line with one statement, or a
    keyword argument), unless it is a tool's pragma. `x = True  # speed!` justified the `True`."""
    import libcst as cst

    def without_comment(ws):
        if isinstance(ws, cst.TrailingWhitespace) and ws.comment is not None and not _is_pragma(ws.comment.value):
            return ws.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)
        return None

    if node is None or node in planner.edits.replace:
        return
    if isinstance(node, cst.SimpleStatementLine):
        if len(node.body) == 1 and without_comment(node.trailing_whitespace) is not None:
            planner.edits.replace[node] = lambda updated: updated.with_changes(
                trailing_whitespace=without_comment(updated.trailing_whitespace) or updated.trailing_whitespace
            )
    elif isinstance(node, cst.Arg):
        # `benchmark=True,  # faster` keeps its comment after the comma; a last argument, before `)`.
        comma = node.comma
        if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
            if without_comment(comma.whitespace_after.first_line) is not None:
                planner.edits.replace[node] = lambda updated: updated.with_changes(
                    comma=updated.comma.with_changes(
                        whitespace_after=updated.comma.whitespace_after.with_changes(
                            first_line=without_comment(updated.comma.whitespace_after.first_line)
                        )
                    )
                )
        elif isinstance(node.whitespace_after_arg, cst.ParenthesizedWhitespace):
            if without_comment(node.whitespace_after_arg.first_line) is not None:
                planner.edits.replace[node] = lambda updated: updated.with_changes(
                    whitespace_after_arg=updated.whitespace_after_arg.with_changes(
                        first_line=without_comment(updated.whitespace_after_arg.first_line)
                    )
                )


def _is_pragma(comment: str) -> bool:
    text = comment.lstrip("#").strip().lower()
    return text.startswith(_PRAGMAS)
