"""DET004 late-cublas-workspace-config: `CUBLAS_WORKSPACE_CONFIG` is set after CUDA work has begun.

## What it does
Flags the first assignment of `CUBLAS_WORKSPACE_CONFIG` that executes after
CUDA work (`.cuda()`, `.to("cuda")`, a tensor created with `device="cuda"`,
`torch.cuda.init()`), in the script's execution order through project helpers,
when no assignment came before that work. A helper that sets the variable
itself counts at its call, e.g. Lightning's `Trainer(deterministic=True)`
constructed after `model.cuda()`.

## Why is this bad?
torch before 2.10 reads the variable once per process, at its first cuBLAS
call, and keeps the answer; CUDA work that has already run may have made
that call. Setting it later is ignored, and in deterministic mode the run
raises at a matmul as if it were unset.

## Torch versions
Only torch before 2.10 reads the variable (see DET002): the rule applies where
the targeted releases include one of those, names them when they are not all
("torch < 2.10 reads it when cuBLAS starts"), and is silent for 2.10 and later.

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

from __future__ import annotations

from opscan.codes import parse_doc
from opscan.findings import Finding, Fix
from opscan.lint.context import CUBLAS, Context, via_text
from opscan.lint.model import CudaWork, Edit, EnvWrite

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.lint.fix.planner import Planner

RULE = parse_doc(__doc__)


def check(ctx: Context) -> None:
    if not ctx.cublas_checked:
        return  # no targeted torch reads the variable
    first_cuda = None
    for event in ctx.trace.effects:  # the events that are not calls, in order
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
                and what.value.__class__ is str  # a computed value, or a constant, may need names defined later
            )
            ctx.report(
                RULE,
                path,
                loc,
                f"CUBLAS_WORKSPACE_CONFIG is set{via_text(event)} after CUDA work ({first_cuda.what.call} at {where}); "
                + (f"{ctx.cublas_releases} reads it when cuBLAS starts: " if ctx.cublas_releases else "")
                + "set it before any CUDA work, at the top of the script",
                Fix("Move the assignment to the top of the module", "unsafe", MoveCublasEnv()) if movable else None,
            )
            return


# -- the fix ------------------------------------------------------------------------
# libcst is imported inside the functions below: only the fixer runs them.


class MoveCublasEnv(Edit):
    """Move the statement that sets CUBLAS_WORKSPACE_CONFIG to the top of the module, where DET002's fix puts it."""

    _fields = ()
    __slots__ = ()
    order = 3  # into the top group, before DET002's insertion

    def plan(self, planner: Planner, finding: Finding) -> bool:
        import libcst as cst

        from opscan.lint.fix.nodes import is_main_guard
        from opscan.lint.fix.planner import Moved

        start, end = planner.span(finding)
        small = planner.innermost((cst.Assign, cst.Expr), start, end)
        if small is None or not isinstance(planner.parent.get(small), cst.SimpleStatementLine):
            return False
        line = planner.parent[small]
        if planner.parent.get(line) is planner.module and planner.body.index(line) <= planner.top_at:
            return False  # already at the top
        # Not out of a condition or loop: only from the module body, the `__main__`
        # block, and function bodies (the trace reached it, so the function runs).
        for anc in planner.ancestors(line):
            if anc is planner.module or isinstance(anc, (cst.IndentedBlock, cst.FunctionDef, cst.ClassDef)):
                continue
            if isinstance(anc, cst.If) and planner.parent.get(anc) is planner.module and is_main_guard(anc.test):
                continue
            return False
        # It may use nothing but os (defined at the top too) and literals.
        roots = _free_names(small)
        if len(roots) != 1:
            return False
        (root,) = roots
        whole_line = len(line.body) == 1
        planner.claim(*((line, small) if whole_line else (small,)))
        if planner.ensure_os(root) is None:
            return False
        planner.edits.remove.add(line if whole_line else small)
        planner.edits.top.append(Moved(small, line if whole_line else None))
        return True


def _free_names(small) -> set[str]:
    """Names a statement reads that are not attributes or keyword names."""
    import libcst as cst

    names: set[str] = set()

    class Collect(cst.CSTVisitor):
        def visit_Attribute(self, node):
            node.value.visit(self)
            return False

        def visit_Arg(self, node):
            node.value.visit(self)
            return False

        def visit_Name(self, node):
            names.add(node.value)

    small.visit(Collect())
    # Assignment targets like os.environ[...] are reads of `os`; plain-name targets would be writes.
    if isinstance(small, cst.Assign) and any(isinstance(t.target, cst.Name) for t in small.targets):
        names.add("<assigns a name>")
    return names
