"""Star imports, as the facts pass reads them: what a module's own `__all__` says, and the order of its
bindings against its `from m import *` statements. The linker does the rest (`Project._through_stars`).

`from m import *` binds `m.__all__` where m defines one, else every module-level name of m not
starting with `_`. Lint reads an `__all__` only in these shapes, at the top level of the module:
`__all__ = [...]` or `(...)` (annotated or not), `__all__ += [...]`, `__all__.extend([...])` and
`__all__.append("name")`, each of string literals. Any other binding or use of it (a comprehension,
`other.__all__ + [...]`, `__all__.remove(...)`, one inside an `if` or `try`) makes it unreadable
(`UNREADABLE`): the linker then follows no name through that module's `*`.
"""

from __future__ import annotations

import _ast as ast
import builtins

from opscan.lint.nodes import iter_child_nodes, walk

# Names a function finds in builtins when no module binds them: not looked up in star imports
# (a star-imported module that rebinds `print` is not modelled).
BUILTIN_NAMES = frozenset(dir(builtins))

UNREADABLE = False  # ModuleFacts.exports of a module whose `__all__` lint does not read

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_OWN_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _strings(node: ast.AST) -> tuple[str, ...] | None:
    """The strings of a list or tuple display of string literals; None for anything else."""
    if node.__class__ not in (ast.List, ast.Tuple):
        return None
    out = []
    for elt in node.elts:
        if elt.__class__ is not ast.Constant or elt.value.__class__ is not str:
            return None
        out.append(elt.value)
    return tuple(out)


def _mentions_all(node: ast.AST) -> bool:
    return any(sub.__class__ is ast.Name and sub.id == "__all__" for sub in walk(node))


def read_all(tree: ast.Module, lines: list[str]) -> tuple[str, ...] | bool:
    """A module's `__all__` as the shapes above build it, in order; UNREADABLE for any other shape.

    Asked only of a module that binds `__all__` (the facts pass knows that already). Where its text
    names `__all__` only in the statements read, no other statement is searched for it: walking
    them all was most of this function's time on torch's tree (794 modules)."""
    names: list[str] | None = None
    read = 0  # the statements read: each names `__all__` once
    others = []
    for stmt in tree.body:
        cls = stmt.__class__
        if cls in _SCOPES:
            continue  # what a function does with it when called is not read
        value = None
        if cls is ast.Assign and len(stmt.targets) == 1 and stmt.targets[0].__class__ is ast.Name and stmt.targets[0].id == "__all__":
            value = _strings(stmt.value)
            if value is None:
                return UNREADABLE
            names = list(value)
            read += 1
            continue
        if cls is ast.AnnAssign and stmt.target.__class__ is ast.Name and stmt.target.id == "__all__" and stmt.value is not None:
            value = _strings(stmt.value)
            if value is None:
                return UNREADABLE
            names = list(value)
            read += 1
            continue
        if cls is ast.AugAssign and stmt.target.__class__ is ast.Name and stmt.target.id == "__all__":
            value = _strings(stmt.value)
            if value is None or names is None or stmt.op.__class__ is not ast.Add:
                return UNREADABLE
            names += value
            read += 1
            continue
        if cls is ast.Expr and stmt.value.__class__ is ast.Call:
            call = stmt.value
            func = call.func
            if func.__class__ is ast.Attribute and func.value.__class__ is ast.Name and func.value.id == "__all__":
                if names is None or len(call.args) != 1 or call.keywords:
                    return UNREADABLE
                arg = call.args[0]
                if func.attr == "append" and arg.__class__ is ast.Constant and arg.value.__class__ is str:
                    names.append(arg.value)
                    read += 1
                    continue
                value = _strings(arg) if func.attr == "extend" else None
                if value is None:
                    return UNREADABLE
                names += value
                read += 1
                continue
        others.append(stmt)
    if names is None:
        return UNREADABLE
    if sum(line.count("__all__") for line in lines) != read and any(_mentions_all(stmt) for stmt in others):
        return UNREADABLE
    return tuple(names)


def star_order(tree: ast.Module, stars: set[int]) -> dict[str, int]:
    """For each name the module binds at its top level (imports, def, class, assignment, for, with,
    except, walrus, match): how many of its star imports (`stars`: their nodes' ids) come before its
    last binding, in source order. A star import after that binding may rebind the name; one before it may not.

    Bindings inside functions (`global`) are not counted. Asked only of a module with star imports."""
    order: dict[str, int] = {}
    seen = 0
    todo: list[ast.AST] = list(reversed(tree.body))
    while todo:
        node = todo.pop()
        cls = node.__class__
        if cls in _SCOPES:
            order[node.name] = seen
            continue
        if cls in _OWN_SCOPES:
            continue
        if cls is ast.Name:
            if node.ctx.__class__ is not ast.Load:
                order[node.id] = seen
            continue
        if cls is ast.ImportFrom or cls is ast.Import:
            for alias in node.names:
                if alias.name == "*":
                    seen += id(node) in stars
                else:
                    order[alias.asname or alias.name.partition(".")[0]] = seen
            continue
        if cls is ast.ExceptHandler or cls.__name__ in ("MatchAs", "MatchStar"):
            if getattr(node, "name", None):
                order[node.name] = seen
        elif cls.__name__ == "MatchMapping" and node.rest:
            order[node.rest] = seen
        todo += reversed(list(iter_child_nodes(node)))
    return order
