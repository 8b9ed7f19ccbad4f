"""DET006 deterministic-warn-only: Determinism is enabled with `warn_only=True`, so nothing is enforced.

## What it does
Flags `torch.use_deterministic_algorithms(True, warn_only=True)`,
`torch.set_deterministic_debug_mode("warn")`, Lightning's
`Trainer(deterministic="warn")`, and helpers called with the equivalent
(`enable_full_determinism(seed, warn_only=True)`, torchtune's `set_seed(debug_mode="warn")`).

## Why is this bad?
With `warn_only`, an op that has no deterministic implementation only warns
and runs its nondeterministic kernel, and the warning does not say where it came
from. SDPA's memory-efficient and cuDNN attention also keep their
nondeterministic backward paths; in strict mode they switch to deterministic ones.

## Example
```python
torch.use_deterministic_algorithms(True, warn_only=True)
```

## Use instead
```python
torch.use_deterministic_algorithms(True)
```
Run `opscan scan` first to list every op that would then raise.

## Fix
Drops `warn_only=True` (or turns `"warn"` into strict). Unsafe: ops without a
deterministic implementation will then raise.
"""

from opscan.codes import parse_doc
from opscan.findings import Fix
from opscan.lint.context import Context, api_name
from opscan.lint.model import Determinism

RULE = parse_doc(__doc__)


def check(ctx: Context) -> None:
    for event in ctx.of(Determinism):
        if event.what.mode is False or event.what.warn_only is not True:
            continue
        ctx.report(
            RULE,
            event.path,
            event.loc,
            f"{api_name(event)} enables determinism in warn-only mode, so nondeterministic ops only warn; enable it strictly",
            Fix("Enable determinism strictly (drop warn_only)", "unsafe", {"action": "drop_warn_only", "api": event.api}),
        )
