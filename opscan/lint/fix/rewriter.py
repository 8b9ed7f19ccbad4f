"""Apply one file's planned edits to its libcst tree in a single pass."""

from __future__ import annotations

import libcst as cst

from opscan.lint.fix.nodes import attached_comments, is_future_import, is_import_block, module_name
from opscan.lint.fix.planner import STDLIB, Moved, Planner


class Rewriter(cst.CSTTransformer):
    """Applies the planned edits in one pass. Children are never removed by their own
    leave methods, so a block's original and rewritten bodies stay aligned."""

    def __init__(self, planner: Planner):
        super().__init__()
        self.edits = edits = planner.edits
        self.top_at, self.imports_at, self.header_end = planner.top_at, planner.imports_end, planner.header_end
        moved = [m for m in [*edits.top, *edits.top_imports] if isinstance(m, Moved)]
        self.moved = {m.small for m in moved}
        # How many leading lines of each moved line go with it (the rest stay behind).
        self.moved_lines = {m.line: len(attached_comments(m.line)) for m in moved if m.line is not None}
        # Only the top-level statements that hold an edit are visited; the rest stay as they are.
        targets = [*edits.replace, *edits.insert_after, *edits.insert_before, *edits.remove, *self.moved]
        self.top_level = set(planner.body)
        self.added_imports: set[int] = set()
        tops = {planner.top_of.get(t) for t in targets}
        self.touched = None if None in tops else tops  # None: visit everything

    def on_visit(self, node) -> bool:
        return self.touched is None or node not in self.top_level or node in self.touched

    def on_leave(self, original_node, updated_node):
        updated = super().on_leave(original_node, updated_node)
        replace = self.edits.replace.get(original_node)
        if replace is not None:
            updated = replace(updated)
        if original_node in self.moved:
            self.edits.captured[original_node] = updated
        return updated

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if not any(s in self.edits.remove for s in original_node.body):
            return updated_node
        kept = [u for o, u in zip(original_node.body, updated_node.body, strict=True) if o not in self.edits.remove]
        if not kept:
            return updated_node  # the whole line goes; the block drops it
        kept[-1] = kept[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(body=kept)

    def leave_SimpleStatementSuite(self, original_node, updated_node):
        body = []
        for o, u in zip(original_node.body, updated_node.body, strict=True):
            body.extend(self.edits.insert_before.get(o, []))
            body.append(u)
            body.extend(self.edits.insert_after.get(o, []))
        if len(body) == len(updated_node.body):
            return updated_node
        old_last = updated_node.body[-1]
        if body[-1] is not old_last:  # an inserted statement ends the suite: it takes over the ending
            body[body.index(old_last)] = old_last.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            body[-1] = body[-1].with_changes(semicolon=old_last.semicolon)
        return updated_node.with_changes(body=body)

    def leave_IndentedBlock(self, original_node, updated_node):
        body, footer = self._rebuild(original_node.body, updated_node.body)
        if not body:
            body = [cst.SimpleStatementLine([cst.Pass()])]
        return updated_node.with_changes(body=body, footer=[*footer, *updated_node.footer])

    def leave_Module(self, original_node, updated_node):
        edits = self.edits
        top = [self._materialise(item) for item in edits.top]
        imports = [self._materialise(item) for item in edits.top_imports]
        self.added_imports = {id(stmt) for stmt in imports}  # and their copies with other blank lines
        body, footer = self._rebuild(original_node.body, updated_node.body, top, imports)
        body = _space_torch_import(_blank_after_imports(body, top), self.added_imports)
        return updated_node.with_changes(body=body, footer=[*footer, *updated_node.footer])

    def _materialise(self, item):
        if not isinstance(item, Moved):
            return item
        small = self.edits.captured[item.small].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        if item.line is not None:
            return cst.SimpleStatementLine(
                [small], leading_lines=attached_comments(item.line), trailing_whitespace=item.line.trailing_whitespace
            )
        return cst.SimpleStatementLine([small])

    def _rebuild(self, original, updated, top=(), imports=()):
        """The new statement list: removals, insertions, and (for the module) the top groups."""
        top_at, imports_at = self.top_at, self.imports_at
        out: list[cst.CSTNode] = []
        pending: list[cst.EmptyLine] = []  # leading lines of removed statements, for the next one
        groups: dict[int, list] = {}
        if top or imports:
            groups.setdefault(top_at, []).extend(top)
            groups.setdefault(imports_at, []).extend(imports)
        is_module = bool(top or imports)
        for i, (o, u) in enumerate(zip(original, updated, strict=True)):
            emitted = []
            group = groups.get(i, []) if is_module else []
            if group:
                u, group = self._place_group(i, original, u, group)
                emitted.extend(group)
            if self._removed(o):
                keep = len(u.leading_lines) - self.moved_lines.get(o, 0)
                pending.extend(u.leading_lines[:keep])
                out.extend(emitted)
                continue
            emitted.extend(self.edits.insert_before.get(o, []))
            emitted.append(u)
            emitted.extend(self.edits.insert_after.get(o, []))
            if pending:
                first = emitted[0]
                if any(line.comment is not None for line in pending) or not first.leading_lines:
                    emitted[0] = first.with_changes(leading_lines=[*pending, *first.leading_lines])
                pending = []
            out.extend(emitted)
        if is_module and len(original) in groups:
            out.extend(groups[len(original)])
        footer = [line for line in pending if line.comment is not None]
        return out, footer

    def _removed(self, stmt) -> bool:
        if stmt in self.edits.remove:
            return True
        return isinstance(stmt, cst.SimpleStatementLine) and all(s in self.edits.remove for s in stmt.body)

    def _place_group(self, i, original, u, group):
        """Blank lines around statements inserted at the top: after a docstring or
        `from __future__` import, the inserted group takes the blank lines that
        separated them from the next statement; after an import, it joins that import block."""
        if not (0 < i <= self.header_end):
            return u, group
        # The original's blank lines: another edit may have replaced u's (an `import torch` put before it).
        blank = _leading_blank(original[i].leading_lines)
        if not blank:
            return u, group
        if is_future_import(original[i - 1]) and is_import_block(group[0]):
            blank = blank[:1]  # the `from __future__` section and the next: one blank line, as isort wants
        first = group[0].with_changes(leading_lines=[*blank, *group[0].leading_lines])
        if id(group[0]) in self.added_imports:
            self.added_imports.add(id(first))
        group = [first, *group[1:]]
        if is_import_block(original[i]) and not self.edits.insert_before.get(original[i]):
            u = u.with_changes(leading_lines=u.leading_lines[len(_leading_blank(u.leading_lines)) :])
        return u, group


def _blank_after_imports(body: list, group: list) -> list:
    """A statement of the top group that follows an import line gets a blank line before it, as
    isort (ruff's I001) wants after an import block: `import os`, blank, `os.environ...`."""
    ids = {id(stmt) for stmt in group}
    out = list(body)
    for i in range(1, len(out)):
        stmt = out[i]
        if id(stmt) not in ids or is_import_block(stmt) or not is_import_block(out[i - 1]):
            continue
        if not stmt.leading_lines or stmt.leading_lines[0].comment is not None:
            out[i] = stmt.with_changes(leading_lines=[cst.EmptyLine(), *stmt.leading_lines])
    return out


def _leading_blank(lines) -> list:
    """The blank lines before the first comment line."""
    blank = []
    for line in lines:
        if line.comment is not None:
            break
        blank.append(line)
    return blank


def _space_torch_import(body: list, ids: set[int]) -> list:
    """Blank lines around an `import torch` put after the leading imports, as isort (ruff's I001)
    wants them: one before it where it starts the third-party section after an import line of
    another section (the standard library, `from __future__`), and after it, where the code
    follows, one blank line, or two before a def or class (with the comments that belong to it)."""
    out = list(body)
    for i, stmt in enumerate(out):
        if id(stmt) not in ids:
            continue
        if i > 0 and _is_stdlib_import_line(out[i - 1]) and not _leading_blank(stmt.leading_lines):
            out[i] = stmt.with_changes(leading_lines=[cst.EmptyLine(), *stmt.leading_lines])
        if i + 1 < len(out) and not is_import_block(out[i + 1]) and id(out[i + 1]) not in ids:
            after = out[i + 1]
            blank = _leading_blank(after.leading_lines)
            rest = after.leading_lines[len(blank) :]
            # A comment with a blank line below it stands alone: the code after the imports is the comment.
            alone = any(line.comment is None for line in rest)
            defines = isinstance(after, (cst.FunctionDef, cst.ClassDef)) and not alone
            want = 2 if defines else 1
            if len(blank) != want:
                out[i + 1] = after.with_changes(leading_lines=[*[cst.EmptyLine()] * want, *rest])
    return out


def _is_stdlib_import_line(stmt) -> bool:
    """An import line of the standard library or `from __future__`: a section before torch's."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    roots = []
    for small in stmt.body:
        if isinstance(small, cst.Import):
            roots += [module_name(a.name).split(".")[0] for a in small.names]
        elif isinstance(small, cst.ImportFrom) and not small.relative:
            roots.append(module_name(small.module).split(".")[0])
        else:
            return False
    return all(root in STDLIB or root == "__future__" for root in roots)
