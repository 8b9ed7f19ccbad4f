"""DET002 missing-cublas-workspace-config: Code seeds or enables determinism but never sets `CUBLAS_WORKSPACE_CONFIG`.

## What it does
Flags a script that enables deterministic algorithms (or seeds without
explicitly turning them off) while nothing that runs from it sets the
`CUBLAS_WORKSPACE_CONFIG` environment variable, through `os.environ[...] =`,
`os.environ.setdefault`, `os.environ.update`, `os.putenv`, or a helper that
sets it (`enable_full_determinism`, Lightning's `Trainer(deterministic=True)`).
A script that reads the variable is taken to handle it itself.

It points at the `use_deterministic_algorithms` call (or the helper call that
enables it); otherwise at the first seeding call. Code behind a condition
(`if args.deterministic: ...`) counts as enabling, so it still needs the variable,
unless a literal argument or default decides it (`set_seed(0, deterministic=False)`, see DET001).
Functions and methods the module defines but never calls itself may be entry
points for other code: when such code would enable determinism (or set the
variable), the rule stays silent here; the script that calls it is checked.

A script that never runs torch (see DET001) is not flagged.

## Torch versions
Torch checks the variable from 1.7 to 2.9: in deterministic mode the first
cuBLAS call raises (warns under `warn_only`) unless it is `:4096:8` or
`:16:8`. Torch 2.10 removed the check (PR #161749): it allocates a cuBLAS
workspace per handle and stream, which is enough for determinism. So the
rule applies only where the targeted torch releases include one before
2.10 (rules/torch.toml records the boundary and how it was established),
and when they include later ones too, the message says which need it:
"torch < 2.10 raises without it". It is silent for a project that targets
2.10 or later only, and so its fix is not offered there, although setting
the variable is harmless on every release.

## Why is this bad?
On torch before 2.10, `torch.use_deterministic_algorithms(True)` makes the
first matrix product raise `RuntimeError: Deterministic behavior was enabled
... but this operation is not deterministic because it uses CuBLAS` unless the
variable is `:4096:8` or `:16:8`, usually after the model and data are built.

## Example
```python
import torch

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
```

## Use instead
```python
import os
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
```

## Fix
Where the script builds Lightning's `Trainer(...)` (or the `TrainingArguments`
of a transformers `Trainer`) before any CUDA work, passes it
`deterministic=True` (`full_determinism=True`), which sets the variable, as
DET001's fix does; `full_determinism` only where the project cannot be on a
transformers release before 4.19.0, which lacks it (see DET001). So does
composer's `Trainer(deterministic_mode=True)` where the project cannot be on
mosaicml before 0.4.0, whose `deterministic_mode` did not set it. Otherwise inserts
`os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")` near the
top of the module, after the docstring and `from __future__` imports and before
the first torch import, adding `import os` if needed (in sorted place among the
standard-library imports above it, with a blank line after the imports, so
ruff's E402 and isort rules stay satisfied). Safe on every torch release;
offered with the finding, so not where the rule is silent. Where DET001's
fix follows the project's own switch (`use_deterministic_algorithms(args.x)`),
this one is still unconditional: the switch is not known at the top of the
module, and the variable does nothing with determinism off.
"""

from __future__ import annotations

from opscan.codes import parse_doc
from opscan.findings import Finding, Fix
from opscan.lint.context import CUBLAS, Context, how, script_text
from opscan.lint.idiom import route
from opscan.lint.model import CUBLAS_VALUE, Edit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.lint.fix.planner import Planner

RULE = parse_doc(__doc__)


def check(ctx: Context) -> None:
    if ctx.cublas_handled or not ctx.cublas_checked:
        return
    if ctx.enables:
        cause = ctx.enables[0]
        what = f"Enables determinism {how(cause)}"
    elif ctx.seeds and not ctx.disables:
        cause = ctx.seeds[0]
        what = f"Seeds {how(cause)}"
    else:
        return
    if not ctx.uses_torch:  # asked only here: it reads every import the run reached
        return
    if ctx.uncalled_enables or ctx.uncalled_handles_cublas:
        return  # code the module defines for other code to call turns determinism on: the caller's to set up
    path, loc = cause.anchor
    idiom = route(ctx, path, "cublas")
    if idiom is not None and idiom.since is None:  # the framework's own switch sets it: Trainer(deterministic=True), ...
        advice, fix = f"{idiom.advice}, which sets it", Fix(idiom.fix_description(), "safe", idiom.edit())
    else:
        advice = 'set it to ":4096:8" before torch starts cuBLAS'
        if idiom is not None:  # the project may be on a release without the switch
            advice += idiom.alternative(", which sets it")
        fix = Fix('Set CUBLAS_WORKSPACE_CONFIG=":4096:8" at the top of the module', "safe", InsertCublasEnv())
    if ctx.cublas_releases:  # only some targeted releases check it: say which
        needs = "raises without it" if ctx.strictly_enabled else "requires it in deterministic mode"
        advice = f"{ctx.cublas_releases} {needs}: {advice}"
    ctx.report(RULE, path, loc, f"{what} but never sets CUBLAS_WORKSPACE_CONFIG{script_text(ctx)}; {advice}", fix)


# -- the fix ------------------------------------------------------------------------


class InsertCublasEnv(Edit):
    """Insert `os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")` at the top of the module."""

    _fields = ()
    __slots__ = ()
    order = 4  # into the top group, after any statement DET004 moves there

    def plan(self, planner: Planner, finding: Finding) -> bool:
        from opscan.lint.fix.nodes import statement

        if planner.environ is not None:
            return True  # a second finding for the same file: one statement does for both
        environ = planner.ensure_os(None)
        if environ is None:
            return False
        q = planner.quote
        planner.edits.top.append(statement(f"{environ}.setdefault({q}{CUBLAS}{q}, {q}{CUBLAS_VALUE}{q})"))
        return True
