"""Planning one file's fixes: find each edit's target in the libcst tree and record the change.

The planner touches nothing itself; `opscan.lint.fix.rewriter` applies what it
recorded in one pass. Each rule's edit (`opscan.lint.model.Edit`) does its own
search through the planner's questions (where a finding's span is, the
innermost node of a kind, a node's ancestors) and records through its
shared edits: replacements, insertions, removals, and the group of
statements for the top of the module that DET002 and DET004 share.
"""

from __future__ import annotations

import ast
import bisect
import io
import re
import sys
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from opscan.lint.fix.nodes import (
    is_docstring,
    is_future_import,
    is_import_block,
    is_main_guard,
    module_name,
    statement,
    without_alias,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.findings import Finding

STDLIB = frozenset(sys.stdlib_module_names)
NEWLINE = re.compile(r"\r\n|\r|\n")

Position = tuple[int, int]  # (line, column in characters)


class CannotFix(Exception):
    """This file cannot be fixed safely; the message says why."""


class Conflict(Exception):
    """Another fix already edits this node; leave this one for the next round."""


@dataclass
class Moved:
    """A placeholder in the top-of-module group for a statement moved there, filled in as it is rewritten."""

    small: cst.BaseSmallStatement
    line: cst.SimpleStatementLine | None  # set when the whole line moves: its comments move with it


@dataclass
class Edits:
    """The planned edits of one file, keyed by the original nodes they apply to."""

    replace: dict[cst.CSTNode, Callable[[cst.CSTNode], cst.CSTNode]] = field(default_factory=dict)
    insert_after: dict[cst.CSTNode, list[cst.CSTNode]] = field(default_factory=dict)
    insert_before: dict[cst.CSTNode, list[cst.CSTNode]] = field(default_factory=dict)
    remove: set[cst.CSTNode] = field(default_factory=set)  # statement lines, or small statements in a line
    top: list = field(default_factory=list)  # statements (or Moved) for the top of the module
    top_imports: list = field(default_factory=list)  # `import torch`, after the leading imports
    captured: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)  # moved small statement -> rewritten


class Planner:
    """One file's tree, the questions edits ask of it, and the edits planned so far."""

    def __init__(self, module: cst.Module, text: str, tree: ast.Module, first_party: Callable[[str], bool] | None = None):
        self.module = module
        # Whether a top-level module name is the project's own (a file or package beside the one
        # fixed), as ruff's isort decides it: an added `import torch` goes before those imports.
        self.first_party = first_party or (lambda name: False)
        self.lines = NEWLINE.split(text)  # as Python numbers lines
        self.quote = _first_quote(text)
        self.body = list(module.body)
        # Positions and parents are computed per top-level statement, and only for
        # those a fix looks into: libcst's position pass costs as much as parsing.
        self.pos: dict[cst.CSTNode, tuple[Position, Position]] = {}
        self.parent: dict[cst.CSTNode, cst.CSTNode] = {}
        self.top_of: dict[cst.CSTNode, cst.CSTNode] = {}
        self._nodes: dict[cst.CSTNode, list] = {}  # top-level statement -> [(node, start, end)]
        self._starts = _top_level_lines(self.body, tree)
        for stmt, (first, last) in zip(self.body, self._starts, strict=True):
            self.parent[stmt] = module
            self.top_of[stmt] = stmt
            self.pos[stmt] = ((first, 0), (last, len(self.lines[last - 1]) if last <= len(self.lines) else 0))
        self.edits = Edits()
        self.claimed: set[cst.CSTNode] = set()
        self.header_end = self._header_end()
        self.top_at = self._top_index()  # where DET002's statement goes (P)
        self.imports_end = self.top_at  # where an added `import torch` goes (Q); set when one is needed
        self.environ: str | None = None  # the expression for os.environ at the top, once ensured
        self.shared: dict = {}  # edits several findings share, by a key of the edit's choosing: planned once
        self._torch_import_added = False
        self._os_added = False

    def plan(self, f: Finding) -> bool:
        """Plan `f`'s fix; False where its target is not found or another fix already edits it."""
        try:
            return bool(f.fix.edit.plan(self, f))
        except Conflict:
            return False

    def claim(self, *nodes) -> None:
        """Mark nodes as edited by the fix being planned; raises Conflict if another fix edits one."""
        if any(n in self.claimed for n in nodes):
            raise Conflict
        self.claimed.update(nodes)

    # -- positions ------------------------------------------------------------

    def ensure(self, top) -> list:
        """Positions and parents of every node in one top-level statement."""
        nodes = self._nodes.get(top)
        if nodes is not None:
            return nodes
        mini = self.module.with_changes(body=[top], header=[], footer=[])
        positions = MetadataWrapper(mini, unsafe_skip_copy=True).resolve(PositionProvider)
        decorators = getattr(top, "decorators", ())
        first = positions[decorators[0] if decorators else top].start.line
        offset = self.pos[top][0][0] - first
        nodes = []
        for node, r in positions.items():
            if node is mini or node is top:
                continue
            span = ((r.start.line + offset, r.start.column), (r.end.line + offset, r.end.column))
            self.pos[node] = span
            self.top_of[node] = top
            nodes.append((node, *span))
        top.visit(_Parents(self.parent))
        self._nodes[top] = nodes
        return nodes

    def _top_at_line(self, line: int):
        """The top-level statement whose lines hold `line`, if any."""
        i = bisect.bisect_right([first for first, _ in self._starts], line) - 1
        if i >= 0 and line <= self._starts[i][1]:
            return self.body[i]
        return None

    def _char_col(self, line: int, byte_col: int) -> int:
        """ast columns count UTF-8 bytes; libcst's count characters."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", "ignore"))

    def at(self, line: int, col: int) -> Position:
        """A 1-based line and column as lint reports them (UTF-8 bytes), in libcst positions."""
        return (line, self._char_col(line, col - 1))

    def span(self, f: Finding) -> tuple[Position, Position]:
        """Where a finding points, in libcst positions."""
        start = (f.line, self._char_col(f.line, f.col - 1))
        end_line = f.end_line or f.line
        end = (end_line, self._char_col(end_line, (f.end_col or f.col) - 1))
        return start, end

    def range(self, node) -> tuple[Position, Position]:
        """A node's start and end; its top-level statement must have been `ensure`d."""
        return self.pos[node]

    def innermost(self, types, start: Position, end: Position | None = None):
        """The smallest node of `types` whose range holds start..end (ranges in a tree nest)."""
        end = end or start
        top = self._top_at_line(start[0])
        if top is None:
            return None
        best = (top, *self.pos[top]) if isinstance(top, types) else None
        for node, s, e in self.ensure(top):
            inside_best = best is None or (best[1] <= s and e <= best[2])
            if isinstance(node, types) and s <= start and end <= e and inside_best:
                best = (node, s, e)
        return best[0] if best else None

    def ancestors(self, node):
        """The nodes that hold `node`, innermost first, up to the module."""
        while node in self.parent:
            node = self.parent[node]
            yield node

    def _top_level(self, node):
        """The module-level statement that holds `node` (or is it)."""
        if self.parent.get(node) is self.module:
            return node
        return next(a for a in self.ancestors(node) if self.parent.get(a) is self.module)

    # -- module layout ----------------------------------------------------------

    def _header_end(self) -> int:
        """Index of the first statement after the docstring and `from __future__` imports."""
        i = 0
        if self.body and is_docstring(self.body[0]):
            i = 1
        while i < len(self.body) and is_future_import(self.body[i]):
            i += 1
        return i

    def _top_index(self) -> int:
        """Where the environment variable is set: before the first statement, after the
        header, that is not an import of standard-library modules. Any other import
        (torch, torchvision, lightning, a project module) may start torch."""
        for i in range(self.header_end, len(self.body)):
            if not _is_stdlib_import(self.body[i]):
                return i
        return len(self.body)

    def _imports_end(self, before: int) -> int:
        """Just after the last module-level import above statement `before`, and not above the top group."""
        end = self.header_end
        for i in range(self.header_end, before):
            if is_import_block(self.body[i]):
                end = i + 1
        return max(end, self.top_at)

    # -- the top of the module: os and torch ---------------------------------------

    def ensure_os(self, name: str | None) -> str | None:
        """Make `os` (or the os-bound `name`) available at the top insertion point.

        Returns the expression for os.environ to use. A binding before the point
        is reused; one after it (at module level or in the `__main__` block) is
        moved up rather than duplicated; otherwise `import os` is added.
        """
        if self.environ is not None and name is None:
            return self.environ
        bindings = [b for b in _os_bindings(self.body) if (b.what in ("os", "environ") if name is None else b.name == name)]
        before = [b for b in bindings if b.index < self.top_at]
        after = [b for b in bindings if b.index >= self.top_at]
        chosen = None
        if before:
            chosen = min(before, key=lambda b: (b.what != "os", b.index))
        elif after:
            chosen = min(after, key=lambda b: (b.what != "os", b.index))
            self._move_import(chosen)
        elif name in (None, "os"):
            if not self._os_added:
                self._add_import("import os", "os", self.header_end, self.top_at, top=True)
                self._os_added = True
            chosen = Binding(-1, "os", "os", None, None, None)
        if chosen is None:
            return None
        environ = chosen.name if chosen.what == "environ" else f"{chosen.name}.environ"
        if name is None:
            self.environ = environ
        return environ

    def _move_import(self, b: Binding) -> None:
        """Take one import binding out of its statement and put it in the top group."""
        self.ensure(self.body[b.index])
        line, small, alias = b.line, b.small, b.alias
        self.claim(alias)
        names = list(small.names)
        if len(names) == 1:
            if len(line.body) == 1:
                self.claim(line)
                self.edits.remove.add(line)
                self.edits.top.append(Moved(small, line))
            else:
                self.claim(small)
                self.edits.remove.add(small)
                self.edits.top.append(Moved(small, None))
            return
        # `import sys, os`: keep the others where they are.
        self.claim(small)
        self.edits.replace[small] = lambda updated, a=alias: without_alias(updated, a)
        name = module_name(alias.with_changes(comma=cst.MaybeSentinel.DEFAULT))
        if isinstance(small, cst.ImportFrom):
            self.edits.top.append(statement(f"from {module_name(small.module)} import {name}"))
        else:
            self.edits.top.append(statement(f"import {name}"))

    def ensure_torch_import(self, at) -> None:
        """Make a module-level `import torch` run before the top-level statement that holds `at`.

        It goes after the leading imports (and after the top group); a plain
        `import torch` further down, or in the `__main__` block, is moved up instead.
        """
        if self._torch_import_added:
            return
        self._torch_import_added = True
        self.imports_end = self._imports_end(self.body.index(self._top_level(at)))
        later = [b for b in _module_imports(self.body) if isinstance(b.small, cst.Import) and _is_plain_torch(b.alias)]
        if later:
            self._move_torch_import(later[0])
        else:
            self._add_import("import torch", "torch", self.top_at, self.imports_end, top=False)

    def _add_import(self, code: str, module: str, first: int, end: int, top: bool) -> None:
        """Add `import <module>` where isort would put it among the module-level import lines in
        body[first:end]: in its section (standard library; third party; the project's own), after
        the plain `import x` lines that sort before it. Without such lines, into the top group
        (`top`) or after the leading imports, as before."""
        new = statement(code)
        lines = [i for i in range(first, end) if _is_import_line(self.body[i])]
        stdlib = module in STDLIB

        def section(i: int) -> int:
            root = _imported_modules(self.body[i].body[0])[0].split(".")[0]
            return 0 if root in STDLIB else 2 if root == "." or self.first_party(root) else 1

        mine = 0 if stdlib else 1
        same = [i for i in lines if section(i) == mine]
        plain_before = [i for i in same if _plain_import_key(self.body[i]) is not None and _plain_import_key(self.body[i]) < module]
        if plain_before:
            self.edits.insert_after.setdefault(self.body[plain_before[-1]], []).append(new)
            return
        after = [i for i in lines if section(i) >= mine]
        if after and self._take_leading_lines(self.body[after[0]], new, blank_after=section(after[0]) != mine):
            return
        if lines and not top:
            last = self.body[lines[-1]]
            blank = section(lines[-1]) != mine  # a new section after the last import
            self.edits.insert_after.setdefault(last, []).append(new.with_changes(leading_lines=[cst.EmptyLine()] if blank else []))
            return
        (self.edits.top if top else self.edits.top_imports).append(new)

    def _take_leading_lines(self, line, new, blank_after: bool) -> bool:
        """Insert `new` before `line`, giving it `line`'s leading blank lines and comments; `line` then
        starts a new section (one blank line) where `blank_after`. False where another fix edits `line`."""
        if line in self.edits.replace or line in self.claimed:
            return False
        self.claim(line)
        self.edits.insert_before.setdefault(line, []).append(new.with_changes(leading_lines=line.leading_lines))
        self.edits.replace[line] = lambda updated: updated.with_changes(leading_lines=[cst.EmptyLine()] if blank_after else [])
        return True

    def _move_torch_import(self, b: Binding) -> None:
        self.ensure(self.body[b.index])
        line, small = b.line, b.small
        if len(small.names) == 1 and len(line.body) == 1:
            self.claim(line)
            self.edits.remove.add(line)
            self.edits.top_imports.append(Moved(small, line))
        else:
            self.claim(small)
            if len(small.names) == 1:
                self.edits.remove.add(small)
            else:
                self.edits.replace[small] = lambda updated, a=b.alias: without_alias(updated, a)
            self.edits.top_imports.append(statement("import torch"))


class _Parents(cst.CSTVisitor):
    """Records each node's parent."""

    def __init__(self, parent: dict):
        super().__init__()
        self.parent = parent
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node) -> bool:
        if self.stack:
            self.parent[node] = self.stack[-1]
        self.stack.append(node)
        return True

    def on_leave(self, original_node) -> None:
        self.stack.pop()


def _top_level_lines(body, tree: ast.Module) -> list[tuple[int, int]]:
    """(first line, last line) of each top-level libcst statement, from the ast.

    A libcst line of `a; b` is two ast statements; a compound statement is one,
    starting at its first decorator.
    """
    spans, i = [], 0
    for stmt in body:
        count = len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
        group = tree.body[i : i + count]
        i += count
        if len(group) != count:
            raise CannotFix("libcst and ast disagree about its statements; please report this")
        first = min([group[0].lineno, *(d.lineno for d in getattr(group[0], "decorator_list", ()))])
        spans.append((first, group[-1].end_lineno))
    if i != len(tree.body):
        raise CannotFix("libcst and ast disagree about its statements; please report this")
    return spans


def _first_quote(text: str) -> str:
    """The quote character of the file's first ordinary string literal, as ruff's Stylist picks it."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.STRING:
                literal = token.string.lstrip("rRbBuUfF")
                if not literal.startswith(('"""', "'''")):
                    return literal[0]
    except (tokenize.TokenError, SyntaxError):
        pass
    return '"'


def _imported_modules(small) -> list[str]:
    if isinstance(small, cst.Import):
        return [module_name(a.name) for a in small.names]
    if isinstance(small, cst.ImportFrom):
        return ["." if small.relative else module_name(small.module)]
    return []


def _is_import_line(stmt) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)


def _plain_import_key(stmt) -> str | None:
    """The lower-cased module of a line `import x` (one name), as isort sorts them; None for other lines."""
    if len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Import) and len(stmt.body[0].names) == 1:
        return module_name(stmt.body[0].names[0].name).lower()
    return None


def _is_stdlib_import(stmt) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if not isinstance(small, (cst.Import, cst.ImportFrom)):
            return False
        if any(m.split(".")[0] not in STDLIB for m in _imported_modules(small)):
            return False
    return True


# -- module-level imports -------------------------------------------------------


@dataclass(frozen=True)
class Binding:
    """One module-level import that binds a name: where it is and what it binds."""

    index: int  # in the module body (the `__main__` block counts as its `if`)
    name: str  # the bound name
    what: str  # "os", "environ", "torch", ...
    line: cst.SimpleStatementLine | None
    small: cst.Import | cst.ImportFrom | None
    alias: cst.ImportAlias | None


def _module_imports(body) -> list[Binding]:
    """Import aliases in module-level import lines and in the `__main__` block."""
    out = []
    for index, stmt in enumerate(body):
        lines = []
        if isinstance(stmt, cst.SimpleStatementLine):
            lines = [stmt]
        elif isinstance(stmt, cst.If) and is_main_guard(stmt.test) and isinstance(stmt.body, cst.IndentedBlock):
            lines = [s for s in stmt.body.body if isinstance(s, cst.SimpleStatementLine)]
        for line in lines:
            for small in line.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                    for alias in small.names:
                        out.append(Binding(index, "", "", line, small, alias))
    return out


def _os_bindings(body) -> list[Binding]:
    out = []
    for b in _module_imports(body):
        small, alias = b.small, b.alias
        name = module_name(alias.name)
        bound = module_name(alias.asname.name) if alias.asname else None
        if isinstance(small, cst.Import):
            if name == "os" or (name.startswith("os.") and bound is None):
                out.append(Binding(b.index, bound or "os", "os", b.line, small, alias))
        elif not small.relative and module_name(small.module) == "os" and name == "environ":
            out.append(Binding(b.index, bound or "environ", "environ", b.line, small, alias))
        elif not small.relative and module_name(small.module) == "os" and name == "putenv":
            out.append(Binding(b.index, bound or "putenv", "putenv", b.line, small, alias))
    # The top group needs os.environ; a `from os import putenv` can only serve a moved putenv call.
    return out


def _is_plain_torch(alias) -> bool:
    return alias.asname is None and module_name(alias.name) == "torch"
