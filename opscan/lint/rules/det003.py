"""DET003 invalid-cublas-workspace-config: `CUBLAS_WORKSPACE_CONFIG` is set to a value torch does not accept.

## What it does
Flags a literal value for `CUBLAS_WORKSPACE_CONFIG` other than `:4096:8` or
`:16:8`, however it is set. A name bound once to a string in the same scope,
or a module-level constant, counts as that string:
`WS = ":4096:2"` then `os.environ["CUBLAS_WORKSPACE_CONFIG"] = WS`. A name
bound more than once, a parameter or a computed value is not known, and is
not flagged.

## Torch versions
Only torch before 2.10 checks the value (see DET002): the rule applies where
the targeted releases include one of those, names them when they are not
all ("is not accepted by torch < 2.10"), and is silent for 2.10 and later.

## Why is this bad?
torch before 2.10 compares the variable with exactly these two strings. Any
other value, including `:4096:2`, which PyTorch's own RNN/LSTM documentation
quotes, fails the check: the first matmul under
`use_deterministic_algorithms(True)` raises.

## Example
```python
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:2"
```

## Use instead
```python
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
```

## Fix
Replaces the value with `:4096:8`, in the constant's own assignment when the
value came through a name. Safe.
"""

from __future__ import annotations

from opscan.codes import parse_doc
from opscan.findings import Finding, Fix
from opscan.lint.context import CUBLAS, VALID_CUBLAS, Context
from opscan.lint.model import CUBLAS_VALUE, Edit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.lint.fix.planner import Planner

RULE = parse_doc(__doc__)


def check(ctx: Context) -> None:
    if not ctx.cublas_checked:
        return  # no targeted torch checks the value
    by = ctx.cublas_releases or "torch"
    for event in ctx.cublas_sets:
        value = event.what.value
        if isinstance(value, str) and value not in VALID_CUBLAS:
            ctx.report(
                RULE,
                event.path,
                event.loc,
                f'CUBLAS_WORKSPACE_CONFIG={value!r} is not accepted by {by}; use ":4096:8" or ":16:8"',
                Fix('Replace the value with ":4096:8"', "safe", ReplaceCublasValue(value)),
            )


# -- the fix ------------------------------------------------------------------------
# libcst is imported inside the functions below: only the fixer runs them.


class ReplaceCublasValue(Edit):
    """Replace the string `old` that CUBLAS_WORKSPACE_CONFIG is set to with ":4096:8", in the same quotes."""

    _fields = ("old",)
    __slots__ = _fields
    order = 0  # in place

    def __init__(self, old: str):
        self.old = old

    def plan(self, planner: Planner, finding: Finding) -> bool:
        import libcst as cst

        from opscan.lint.fix.nodes import same_quotes

        start, end = planner.span(finding)
        node = planner.innermost((cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Call), start, end)
        if node is None:
            return False
        for key, value in _env_pairs(node):
            if _string(planner, node, key)[0] != CUBLAS:
                continue
            text, string = _string(planner, node, value)  # the literal, or the one a constant is bound to
            if text == self.old and string is not None:
                if string in planner.edits.replace:
                    return True  # a constant several findings read: one replacement fixes them all
                planner.claim(string)
                planner.edits.replace[string] = lambda updated, v=string: same_quotes(v, CUBLAS_VALUE)
                return True
        return False


def _string(planner: Planner, at, expr):
    """(value, node) of the string `expr` is, or names: a literal, or a name bound once to one
    (`WS = ":4096:2"` in the enclosing function, else at module level); (None, None) otherwise."""
    import libcst as cst

    from opscan.lint.fix.nodes import string_value

    if isinstance(expr, cst.SimpleString):
        return string_value(expr), expr
    if not isinstance(expr, cst.Name):
        return None, None
    scopes = [a for a in planner.ancestors(at) if isinstance(a, cst.FunctionDef)][:1] + [planner.module]
    for scope in scopes:
        found = []

        class Definitions(cst.CSTVisitor):
            def visit_FunctionDef(self, node):
                return node is scope

            def visit_ClassDef(self, node):
                return False

            def visit_Lambda(self, node):
                return False

            def visit_Assign(self, node):
                if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and node.targets[0].target.value == expr.value:
                    found.append(node.value)

            def visit_AnnAssign(self, node):
                if isinstance(node.target, cst.Name) and node.target.value == expr.value and node.value is not None:
                    found.append(node.value)

        scope.visit(Definitions())
        if found:  # lint read the name as a constant: bound once in this scope
            value = found[0]
            return (string_value(value), value) if len(found) == 1 and isinstance(value, cst.SimpleString) else (None, None)
    return None, None


def _env_pairs(node):
    """(key, value) expression pairs that set environment variables in this statement or call."""
    import libcst as cst

    if isinstance(node, cst.AugAssign):  # os.environ |= {...}
        if isinstance(node.operator, cst.BitOrAssign) and isinstance(node.value, cst.Dict):
            for element in node.value.elements:
                if isinstance(element, cst.DictElement):
                    yield element.key, element.value
        return
    if isinstance(node, (cst.Assign, cst.AnnAssign)):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            if isinstance(target, cst.Subscript) and len(target.slice) == 1:
                index = target.slice[0].slice
                if isinstance(index, cst.Index):
                    yield index.value, node.value
        return
    positional = [a.value for a in node.args if a.keyword is None and not a.star]
    keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
    key = positional[0] if positional else keywords.get("key", keywords.get("name"))
    value = positional[1] if len(positional) > 1 else keywords.get("default", keywords.get("value"))
    if key is not None and value is not None:
        yield key, value  # setdefault(key, value), putenv(name, value)
    for name, value in keywords.items():  # update(CUBLAS_WORKSPACE_CONFIG=...)
        yield cst.SimpleString(repr(name)), value
    for arg in positional[:1]:  # update({...})
        if isinstance(arg, cst.Dict):
            for element in arg.elements:
                if isinstance(element, cst.DictElement):
                    yield element.key, element.value
