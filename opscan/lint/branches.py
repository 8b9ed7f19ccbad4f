"""Which branches of a module's compound statements hold which lines, read on `ast`.

Asked only of a finding a rule is about to report, which is rare: the file is
parsed again then, never in the per-file pass every file goes through.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ast

    from opscan.lint.facts import ModuleFacts


def lines_of(facts: ModuleFacts) -> list[str] | None:
    """The module's lines: the facts' own where the run has them (the text linted from stdin is not
    the file on disk), else the file's; None where it cannot be read."""
    return facts.lines if facts.lines is not None else file_lines(facts.path)


def file_lines(path: str) -> list[str] | None:
    """The lines of the module at `path` on disk, as Python numbers them, or None where it cannot be read."""
    from opscan.lint.facts import decode_source, source_lines

    try:
        with open(path, "rb") as fh:
            return source_lines(decode_source(fh.read()))
    except (OSError, UnicodeDecodeError, LookupError, SyntaxError, ValueError):
        return None


def parse_lines(lines: list[str]) -> ast.Module | None:
    """The tree of a module's lines, numbered as in the file; None where they do not parse."""
    import ast  # here, not above: ast.py brings enum and contextlib, ~2 ms of a one-file run

    try:
        return ast.parse("\n".join(lines) + "\n")
    except (SyntaxError, ValueError):
        return None


def parted(lines: list[str], a: int, b: int) -> bool:
    """Is there an `else` or `elif` line between lines `a` and `b`? Two branches of one `if` always have
    one between them: without it, they are not `apart` and no parse is needed."""
    return any(line.lstrip().startswith(("else", "elif")) for line in lines[min(a, b) : max(a, b)])


def is_elif(parent, stmt) -> bool:
    """Is `stmt` the `elif` of `parent` (an `if` alone in its `orelse`, at the same column)?"""
    import ast

    return isinstance(parent, ast.If) and parent.orelse == [stmt] and stmt.col_offset == parent.col_offset


def suites(stmt) -> list:
    """The statement lists a compound statement holds (an `elif` is the `if` in its `orelse`)."""
    import ast

    if isinstance(stmt, ast.Match):
        return [case.body for case in stmt.cases]
    found = [getattr(stmt, name) for name in ("body", "orelse", "finalbody") if isinstance(getattr(stmt, name, None), list)]
    return found + [h.body for h in getattr(stmt, "handlers", ())]


def branches(stmt) -> list:
    """The branches of a statement: an `if`'s bodies (of its `elif`s and `else` too), a `match`'s cases, a `try`'s parts."""
    import ast

    if isinstance(stmt, ast.If):
        found = [stmt.body]
        while len(stmt.orelse) == 1 and is_elif(stmt, stmt.orelse[0]):
            stmt = stmt.orelse[0]
            found.append(stmt.body)
        return [*found, stmt.orelse] if stmt.orelse else found
    if isinstance(stmt, ast.Match):
        return [case.body for case in stmt.cases]
    return [stmt.body, *(h.body for h in stmt.handlers), *(part for part in (stmt.orelse, stmt.finalbody) if part)]


def statement_at(body: list, line: int):
    """The statement of `body` whose lines hold `line`, or None."""
    return next((s for s in body if s.lineno <= line <= (s.end_lineno or s.lineno)), None)


def apart(tree: ast.Module, a: int, b: int) -> bool:
    """Are lines `a` and `b` in two branches of one `if` (its body, an `elif`'s, its `else`), so that a pass
    through that `if` runs one or the other, never both?"""
    import ast

    body = tree.body
    while True:
        stmt = statement_at(body, a)
        if stmt is None or stmt is not statement_at(body, b):
            return False
        if isinstance(stmt, ast.If):
            where = [next((i for i, suite in enumerate(branches(stmt)) if statement_at(suite, line) is not None), None) for line in (a, b)]
            if None not in where and where[0] != where[1]:
                return True
        body = [s for suite in suites(stmt) for s in suite]


def shared_branch(tree: ast.Module, a: int, b: int) -> tuple[int, int] | None:
    """The first and last lines of the innermost branch of an `if` (its body, an `elif`'s, its `else`) that
    holds both lines `a` and `b`, so that a pass through that `if` runs both or neither; None where none does
    (or they are `apart`)."""
    import ast

    body, found = tree.body, None
    while True:
        stmt = statement_at(body, a)
        if stmt is None or stmt is not statement_at(body, b):
            return found
        if isinstance(stmt, ast.If):
            held = branches(stmt)
            where = [next((i for i, suite in enumerate(held) if statement_at(suite, line) is not None), None) for line in (a, b)]
            if where[0] is None or where[1] is None:  # on the test's line: it runs whenever the `if` does
                return found
            if where[0] != where[1]:  # apart
                return None
            body = held[where[0]]
            found = (body[0].lineno, body[-1].end_lineno or body[-1].lineno)
        else:
            body = [s for suite in suites(stmt) for s in suite]
