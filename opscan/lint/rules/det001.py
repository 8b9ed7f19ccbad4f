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

Functions and methods that the module defines but its own run never calls may
be entry points for other code (a `PtlTrainer.setup` that builds
`Trainer(deterministic=True)`, called by a launcher): when such code would turn
determinism on, the rule stays silent, as it does for code behind a condition.

A script that never runs torch is not flagged either: one whose code, and
the project modules it imports, import nothing but the standard library and
libraries that never run torch (numpy, pandas, scikit-learn, PIL, ...), such
as a data-splitting script that seeds `random`. An import of torch, or of any
other library (timm, Lightning, ...), anywhere in the script, in a function
it does not call too, counts as running torch.

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
In the framework's own idiom where the script calls a helper that has one:
passes `deterministic=True` to Lightning's `Trainer(...)` (which also sets
CUBLAS_WORKSPACE_CONFIG and turns cuDNN benchmarking off),
`full_determinism=True` to the `TrainingArguments(...)` a transformers
`Trainer` gets, or `deterministic=True` to accelerate's `set_seed(...)`.
Otherwise inserts `torch.use_deterministic_algorithms(True)` after the last
seeding statement of the block (after the helper call when a project helper
seeds). Safe.

The transformers and accelerate keywords exist from transformers 4.19.0 and
accelerate 0.29.0 on (older releases raise `TypeError`), so they are used only
where every release the project may use has them: its requirement or lock
file says so (found as the targeted torch is) or, where nothing declares the
package, the installed one does. Elsewhere the fix is the insertion, and the
message names the keyword with its condition: "(or, on accelerate >= 0.29.0,
pass `deterministic=True` to `accelerate.utils.set_seed` on line 7)".
"""

from __future__ import annotations

from opscan.codes import parse_doc
from opscan.findings import Finding, Fix
from opscan.lint.context import Context, how
from opscan.lint.idiom import route
from opscan.lint.model import Cudnn, Edit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.lint.fix.planner import Planner

RULE = parse_doc(__doc__)


def check(ctx: Context) -> None:
    if not ctx.seeds or ctx.enables or ctx.disables or not ctx.uses_torch:
        return
    if ctx.uncalled_enables:
        return  # a function or method the module defines, for other code to call, turns it on
    first = ctx.seeds[0]
    path, loc = first.anchor
    note = ""
    if any(e.what.flag == "deterministic" and e.what.value is True for e in ctx.of(Cudnn)):
        note = " (`cudnn.deterministic = True` covers convolutions only)"
    idiom = route(ctx, path, "determinism")
    if idiom is not None and idiom.since is None:  # the framework's own switch: Trainer(deterministic=True), ...
        advice, fix = idiom.advice, Fix(idiom.fix_description(), "safe", idiom.edit())
    else:
        seed_lines = tuple(sorted({e.anchor[1].line for e in ctx.seeds if e.anchor[0] == path}))
        advice = "call `torch.use_deterministic_algorithms(True)` after seeding"
        if idiom is not None:  # the project may be on a release without the switch
            advice += idiom.alternative()
        fix = Fix("Insert `torch.use_deterministic_algorithms(True)` after seeding", "safe", EnableDeterminism(seed_lines))
    ctx.report(RULE, path, loc, f"Seeds {how(first)} but never enables determinism{note}; {advice}", fix)


# -- the fix ------------------------------------------------------------------------
# libcst is imported inside the functions below: only the fixer runs them.


class EnableDeterminism(Edit):
    """Insert `torch.use_deterministic_algorithms(True)` after the last statement of the block that seeds."""

    _fields = ("seed_lines",)
    __slots__ = _fields
    order = 5  # last: it may add `import torch` below what the fixes put at the top

    def __init__(self, seed_lines: tuple[int, ...]):
        self.seed_lines = seed_lines  # the lines, in the file fixed, of its calls that seed (or reach a seeding helper)

    def plan(self, planner: Planner, finding: Finding) -> bool:
        import libcst as cst

        from opscan.lint.fix.nodes import EXITS, statement

        start, end = planner.span(finding)
        seed_lines = set(self.seed_lines)
        small = planner.innermost(cst.BaseSmallStatement, start, end)
        if small is not None and isinstance(planner.parent.get(small), cst.SimpleStatementSuite):
            return _enable_in_suite(planner, small, seed_lines)
        stmt = planner.parent.get(small) if small is not None else planner.innermost(cst.BaseCompoundStatement, start, end)
        block = planner.parent.get(stmt)
        if stmt is None or not isinstance(block, (cst.Module, cst.IndentedBlock)):
            return False
        siblings = list(block.body)
        last = stmt
        for sibling in siblings[siblings.index(stmt) + 1 :]:
            if _holds_seed(planner, sibling, seed_lines):
                last = sibling
        new = statement(f"{_determinism_callee(planner, last)}(True)")
        if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], EXITS):
            planner.edits.insert_before.setdefault(last, []).append(new)  # `return seed_everything(0)`
        else:
            planner.edits.insert_after.setdefault(last, []).append(new)
        return True


def _enable_in_suite(planner: Planner, small, seed_lines: set[int]) -> bool:
    """`if args.seed: torch.manual_seed(s)`: add to the same one-line suite."""
    import libcst as cst

    from opscan.lint.fix.nodes import EXITS

    suite = planner.parent[small]
    last = small
    for other in suite.body[list(suite.body).index(small) + 1 :]:
        if planner.range(other)[0][0] in seed_lines:
            last = other
    new = cst.Expr(cst.parse_expression(f"{_determinism_callee(planner, suite)}(True)"))
    if isinstance(last, EXITS):
        planner.edits.insert_before.setdefault(last, []).append(new)
    else:
        planner.edits.insert_after.setdefault(last, []).append(new)
    return True


def _holds_seed(planner: Planner, stmt, seed_lines: set[int]) -> bool:
    """Does this statement run a seeding call itself (not in a def or class it defines)?"""
    import libcst as cst

    from opscan.lint.fix.nodes import SCOPES

    if isinstance(stmt, SCOPES):
        return False
    (first, _), (last, _) = planner.range(stmt)
    for line in seed_lines:
        if not first <= line <= last:
            continue
        text = planner.lines[line - 1]
        point = (line, len(text) - len(text.lstrip()))
        node = planner.innermost((cst.BaseSmallStatement, cst.BaseCompoundStatement), point)
        for anc in [node, *planner.ancestors(node)] if node is not None else ():
            if anc is stmt:
                return True
            if isinstance(anc, SCOPES):
                break
    return False


def _determinism_callee(planner: Planner, at) -> str:
    """How to name `torch.use_deterministic_algorithms` where `at` runs; adds `import torch` if needed.

    An import in an enclosing function, or at module level, that binds torch
    (`import torch`, `import torch as T`, `import torch.nn`,
    `from torch import use_deterministic_algorithms`) is reused. At module
    level it must come before the insertion, unless that is inside a function.
    """
    import libcst as cst

    insert_line = planner.range(at)[1][0]
    functions = [a for a in planner.ancestors(at) if isinstance(a, cst.FunctionDef)]
    for scope in [*functions, planner.module]:
        body = scope.body.body if isinstance(scope, cst.FunctionDef) else scope.body
        must_precede = scope is not planner.module or not functions
        found = None
        for holder, imp in _imports_in(body):
            if must_precede and _import_line(planner, holder, imp) >= insert_line:
                continue
            name = _torch_binding(imp)
            if name and (found is None or "." in name):  # prefer torch.<...> over a bare imported name
                found = name
        if found:
            return found
    planner.ensure_torch_import(at)
    return "torch.use_deterministic_algorithms"


def _import_line(planner: Planner, holder, imp) -> int:
    """The line of an import; `holder` is the statement of the scanned body that contains it."""
    import libcst as cst

    if isinstance(holder, cst.SimpleStatementLine):
        return planner.range(holder)[0][0]
    planner.ensure(planner.top_of.get(holder, holder))
    return planner.range(imp)[0][0]


def _imports_in(body) -> list:
    """(statement of `body`, import) for the imports in a body, in if/try/with blocks too, not in nested defs."""
    import libcst as cst

    from opscan.lint.fix.nodes import collect_statements

    found = []
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            found.extend((stmt, s) for s in stmt.body if isinstance(s, (cst.Import, cst.ImportFrom)))
        elif isinstance(stmt, cst.BaseCompoundStatement) and not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            inner: list = []
            collect_statements(stmt, inner)
            found.extend((stmt, imp) for _, imp in _imports_in(inner))
    return found


def _torch_binding(imp) -> str | None:
    """What to call for `torch.use_deterministic_algorithms` given this import, if it helps."""
    import libcst as cst

    from opscan.lint.fix.nodes import module_name

    if isinstance(imp, cst.Import):
        for alias in imp.names:
            name = module_name(alias.name)
            if alias.asname is not None:
                if name == "torch":
                    return f"{module_name(alias.asname.name)}.use_deterministic_algorithms"
            elif name == "torch" or name.startswith("torch."):
                return "torch.use_deterministic_algorithms"
    elif (
        isinstance(imp, cst.ImportFrom)
        and not imp.relative
        and module_name(imp.module) == "torch"
        and not isinstance(imp.names, cst.ImportStar)
    ):
        for alias in imp.names:
            if module_name(alias.name) == "use_deterministic_algorithms":
                return module_name(alias.asname.name) if alias.asname else "use_deterministic_algorithms"
    return None
