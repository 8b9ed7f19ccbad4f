"""DET005 cudnn-benchmark: cuDNN benchmarking is on in code that seeds or enables determinism.

## What it does
Flags `torch.backends.cudnn.benchmark = True` and Lightning's
`Trainer(benchmark=True)` in a script that seeds or enables deterministic algorithms.

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
Sets benchmark to False. Safe when the script enables determinism (that is its
stated intent); unsafe otherwise, because it can slow training.
"""

from __future__ import annotations

from opscan.codes import parse_doc
from opscan.findings import Finding, Fix
from opscan.lint.context import Context
from opscan.lint.edit import Edit
from opscan.lint.model import Cudnn

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.lint.fix.planner import Planner

RULE = parse_doc(__doc__)


def check(ctx: Context) -> None:
    if not ctx.seeds_or_enables:
        return
    applicability = "safe" if ctx.enables else "unsafe"
    for event in ctx.of(Cudnn):
        if event.what.flag != "benchmark" or event.what.value is not True:
            continue
        if event.api is None:  # an assignment
            what, fix = "`cudnn.benchmark = True`", Fix("Set benchmark to False", applicability, BenchmarkFalse(keyword=False))
        elif event.api.endswith(".Trainer"):  # Lightning's Trainer(benchmark=True)
            what, fix = f"`{event.api}(benchmark=True)`", Fix("Pass benchmark=False", applicability, BenchmarkFalse(keyword=True))
        else:  # a helper that turns it on by itself
            what, fix = f"`{event.api}` sets `cudnn.benchmark = True`, which", None
        ctx.report(
            RULE,
            event.path,
            event.loc,
            f"{what} picks convolution algorithms by timing, which varies between runs; set benchmark to False",
            fix,
        )


# -- the fix ------------------------------------------------------------------------


class BenchmarkFalse(Edit):
    """Turn `cudnn.benchmark = True` (or, with `keyword`, a call's `benchmark=True`) into False."""

    _fields = ("keyword",)
    __slots__ = _fields
    order = 1  # in place

    def __init__(self, keyword: bool):
        self.keyword = keyword

    def plan(self, planner: Planner, finding: Finding) -> bool:
        import libcst as cst

        from opscan.lint.fix.nodes import attr_name, is_name

        start, end = planner.span(finding)
        if self.keyword:
            call = planner.innermost(cst.Call, start, end)
            value = None
            for arg in call.args if call is not None else ():
                if arg.keyword is not None and arg.keyword.value == "benchmark" and is_name(arg.value, "True"):
                    value = arg.value
        else:
            stmt = planner.innermost((cst.Assign, cst.AnnAssign), start, end)
            value = stmt.value if stmt is not None and is_name(stmt.value, "True") else None
            if isinstance(stmt, cst.Assign) and not any(attr_name(t.target) == "benchmark" for t in stmt.targets):
                value = None
            if isinstance(stmt, cst.AnnAssign) and attr_name(stmt.target) != "benchmark":
                value = None
        if value is None:
            return False
        planner.claim(value)
        planner.edits.replace[value] = lambda updated: updated.with_changes(value="False")
        return True
