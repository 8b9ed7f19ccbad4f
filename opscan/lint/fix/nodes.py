"""Small questions and builders on libcst nodes, shared by the planner, the rewriter and the rules' edits."""

from __future__ import annotations

import libcst as cst


def statement(code: str) -> cst.SimpleStatementLine:
    """One line of code as a statement to insert."""
    stmt = cst.parse_statement(code + "\n")
    assert isinstance(stmt, cst.SimpleStatementLine)
    return stmt


def module_name(node) -> str:
    """The source text of a (dotted) name node."""
    return cst.Module([]).code_for_node(node) if node is not None else ""


def is_name(node, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name and not node.lpar


def string_value(node):
    """The str a string literal holds, else None."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 - an odd literal is simply not a match
            return None
        return value if isinstance(value, str) else None
    return None


def same_quotes(node, value: str) -> cst.SimpleString:
    """A string literal holding `value`, written with the prefix and quotes of `node`."""
    first = node.left if isinstance(node, cst.ConcatenatedString) else node
    while isinstance(first, cst.ConcatenatedString):
        first = first.left
    prefix = "".join(c for c in first.prefix if c in "rRuU")
    return cst.SimpleString(f"{prefix}{first.quote}{value}{first.quote}", lpar=node.lpar, rpar=node.rpar)


def is_main_guard(test) -> bool:
    """`__name__ == "__main__"` in either order."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    if not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = [test.left, test.comparisons[0].comparator]
    return any(is_name(s, "__name__") for s in sides) and any(string_value(s) == "__main__" for s in sides)


def is_docstring(stmt) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def is_future_import(stmt) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, cst.ImportFrom) and module_name(s.module) == "__future__" and not s.relative for s in stmt.body
    )


def is_import_block(stmt) -> bool:
    """Imports only: an import line, or a try/if whose statements are all imports (or pass)."""
    if isinstance(stmt, cst.SimpleStatementLine):
        return all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)
    if isinstance(stmt, (cst.Try, cst.If)):
        inner: list = []
        collect_statements(stmt, inner)
        return bool(inner) and all(
            isinstance(s, cst.SimpleStatementLine)
            and all(isinstance(x, (cst.Import, cst.ImportFrom, cst.Pass)) or _is_none_assign(x) for x in s.body)
            for s in inner
        )
    return False


def _is_none_assign(small) -> bool:
    """`torch = None` in an `except ImportError:` branch."""
    return isinstance(small, cst.Assign) and is_name(small.value, "None")


def collect_statements(node, out: list) -> None:
    """The statements in a compound statement's blocks, opening nested if/try blocks too."""
    for child in node.children:
        if isinstance(child, cst.SimpleStatementLine) or (
            isinstance(child, cst.BaseCompoundStatement) and not isinstance(child, (cst.If, cst.Try))
        ):
            out.append(child)
        else:
            collect_statements(child, out)


def attached_comments(line: cst.SimpleStatementLine) -> list[cst.EmptyLine]:
    """The comment lines right above a statement, with no blank line between: they describe it."""
    attached: list[cst.EmptyLine] = []
    for empty in reversed(line.leading_lines):
        if empty.comment is None:
            break
        attached.insert(0, empty)
    return attached


def without_alias(imp, alias):
    """`import sys, os` without `os` (found by its original node's code)."""
    code = cst.Module([]).code_for_node
    target = code(alias.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip()
    names = [a for a in imp.names if code(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip() != target]
    if len(names) == len(imp.names) or not names:  # pragma: no cover - planned from the same node
        return imp
    last = imp.names[-1]
    names[-1] = names[-1].with_changes(comma=last.comma)
    return imp.with_changes(names=names)


def attr_name(node) -> str | None:
    """The attribute an `a.b` expression names, else None."""
    return node.attr.value if isinstance(node, cst.Attribute) else None


EXITS = (cst.Return, cst.Raise, cst.Break, cst.Continue)  # nothing after them in a block runs
SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)  # their bodies do not run where they stand
