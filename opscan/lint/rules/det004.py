"""DET004 late-cublas-workspace-config: `CUBLAS_WORKSPACE_CONFIG` is set after CUDA work has begun.

## What it does
Flags the first assignment of `CUBLAS_WORKSPACE_CONFIG` that executes after
CUDA work (`.cuda()`, `.to("cuda")`, a tensor created with `device="cuda"`,
`torch.cuda.init()`), in the script's execution order through project helpers,
when no assignment came before that work. A helper that sets the variable
itself counts at its call, e.g. Lightning's `Trainer(deterministic=True)`
constructed after `model.cuda()`.

## Why is this bad?
torch reads the variable once per process, when cuBLAS starts; CUDA work
that has already run may have started it. Setting it later is silently
ignored, and the run stays nondeterministic (or raises at the first matmul on
stacks that enforce the check).

## Example
```python
model = Net().cuda()
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
```

## Use instead
```python
import os
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
import torch

model = Net().cuda()
```

## Fix
Moves the assignment to the top of the module, where DET002's fix would put
it. Unsafe: code between the two places may depend on the old position.
"""

from opscan.codes import parse_doc
from opscan.findings import Fix
from opscan.lint.context import CUBLAS, Context, via_text
from opscan.lint.model import CudaWork, EnvWrite

RULE = parse_doc(__doc__)


def check(ctx: Context) -> None:
    first_cuda = None
    for event in ctx.trace.events:
        what = event.what
        if what.__class__ is CudaWork and first_cuda is None:
            first_cuda = event
        elif what.__class__ is EnvWrite and what.var == CUBLAS:
            if first_cuda is None:
                return  # set before any CUDA work: later re-sets do not matter
            path, loc = event.anchor
            cuda_path, cuda_loc = first_cuda.anchor
            where = f"line {cuda_loc.line}" if cuda_path == path else f"{cuda_path}:{cuda_loc.line}"
            movable = (
                (event.path, event.loc) == (path, loc)  # the statement itself is in this script
                and event.api in (None, "os.environ.setdefault", "os.putenv")  # None: `os.environ[...] =`
                and isinstance(what.value, str)  # a computed value may need names defined later
            )
            ctx.report(
                RULE,
                path,
                loc,
                f"CUBLAS_WORKSPACE_CONFIG is set{via_text(event)} after CUDA work ({first_cuda.what.call} at {where}); "
                "set it before any CUDA work, at the top of the script",
                Fix("Move the assignment to the top of the module", "unsafe", {"action": "move_cublas_env"}) if movable else None,
            )
            return
