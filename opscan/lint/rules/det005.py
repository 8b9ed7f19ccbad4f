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

from opscan.codes import parse_doc
from opscan.findings import Fix
from opscan.lint.context import Context
from opscan.lint.model import Cudnn

RULE = parse_doc(__doc__)


def check(ctx: Context) -> None:
    if not ctx.seeds_or_enables:
        return
    applicability = "safe" if ctx.enables else "unsafe"
    for event in ctx.of(Cudnn):
        if event.what.flag != "benchmark" or event.what.value is not True:
            continue
        if event.api is None:  # an assignment
            what, fix = "`cudnn.benchmark = True`", Fix("Set benchmark to False", applicability, {"action": "benchmark_false", "keyword": False})
        elif event.api.endswith(".Trainer"):  # Lightning's Trainer(benchmark=True)
            what, fix = f"`{event.api}(benchmark=True)`", Fix("Pass benchmark=False", applicability, {"action": "benchmark_false", "keyword": True})
        else:  # a helper that turns it on by itself
            what, fix = f"`{event.api}` sets `cudnn.benchmark = True`, which", None
        ctx.report(
            RULE,
            event.path,
            event.loc,
            f"{what} picks convolution algorithms by timing, which varies between runs; set benchmark to False",
            fix,
        )
