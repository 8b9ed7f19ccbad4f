"""DET001 seed-without-determinism: Code seeds its RNGs but never enables `torch.use_deterministic_algorithms(True)`.

## What it does
Flags a script that seeds (`torch.manual_seed`, `torch.cuda.manual_seed[_all]`,
`random.seed`, `np.random.seed`, `torch.Generator().manual_seed`,
`np.random.default_rng(seed)`, or a framework helper such as Lightning's
`seed_everything` or transformers' `set_seed`) while nothing that runs from it
turns on deterministic algorithms, directly or through a helper
(`Trainer(deterministic=True)`, `enable_full_determinism`, ...).

It points at the first seeding call that executes; when seeding happens inside
a project helper, at the script's call of that helper. An explicit
`torch.use_deterministic_algorithms(False)` is a deliberate choice and is not flagged.

## Why is this bad?
A seed fixes initialisation and data order, but GPU kernels that accumulate
with atomics, and cuDNN's algorithm choice, still differ between runs: two
"seeded" runs diverge from the first step. `torch.backends.cudnn.deterministic = True`
alone covers convolutions only.

## Example
```python
import torch

torch.manual_seed(0)
model = build_model().cuda()
```

## Use instead
```python
import os
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
model = build_model().cuda()
```

## Fix
Inserts `torch.use_deterministic_algorithms(True)` after the last seeding
statement of the block (after the helper call when a project helper seeds). Safe.
"""

from opscan.codes import parse_doc
from opscan.findings import Fix
from opscan.lint.context import Context, how
from opscan.lint.model import Cudnn

RULE = parse_doc(__doc__)


def check(ctx: Context) -> None:
    if not ctx.seeds or ctx.enables or ctx.disables:
        return
    first = ctx.seeds[0]
    path, loc = first.anchor
    note = ""
    if any(e.what.flag == "deterministic" and e.what.value is True for e in ctx.of(Cudnn)):
        note = " (`cudnn.deterministic = True` covers convolutions only)"
    seed_lines = sorted({e.anchor[1].line for e in ctx.seeds if e.anchor[0] == path})
    ctx.report(
        RULE,
        path,
        loc,
        f"Seeds {how(first)} but never enables determinism{note}; "
        "call `torch.use_deterministic_algorithms(True)` after seeding",
        Fix("Insert `torch.use_deterministic_algorithms(True)` after seeding", "safe", {"action": "enable_determinism", "seed_lines": seed_lines}),
    )
