"""DET003 invalid-cublas-workspace-config: `CUBLAS_WORKSPACE_CONFIG` is set to a value torch does not accept.

## What it does
Flags a literal value for `CUBLAS_WORKSPACE_CONFIG` other than `:4096:8` or
`:16:8`, however it is set.

## Why is this bad?
torch compares the variable with exactly these two strings. Any other value,
including `:4096:2`, which PyTorch's own RNN/LSTM documentation quotes, leaves
cuBLAS nondeterministic, and stacks that enforce the check raise at the first
matmul under `use_deterministic_algorithms(True)`.

## Example
```python
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:2"
```

## Use instead
```python
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
```

## Fix
Replaces the value with `:4096:8`. Safe.
"""

from opscan.codes import parse_doc
from opscan.findings import Fix
from opscan.lint.context import VALID_CUBLAS, Context

RULE = parse_doc(__doc__)


def check(ctx: Context) -> None:
    for event in ctx.cublas_sets:
        value = event.what.value
        if isinstance(value, str) and value not in VALID_CUBLAS:
            ctx.report(
                RULE,
                event.path,
                event.loc,
                f'CUBLAS_WORKSPACE_CONFIG={value!r} is not accepted by torch; use ":4096:8" or ":16:8"',
                Fix('Replace the value with ":4096:8"', "safe", {"action": "replace_cublas_value", "old": value}),
            )
