"""Apply one file's planned edits to its libcst tree in a single pass."""

from __future__ import annotations

import libcst as cst

from opscan.lint.fix.nodes import attached_comments, is_import_block
from opscan.lint.fix.planner import Moved, Planner


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
        body, footer = self._rebuild(original_node.body, updated_node.body, top, imports)
        return updated_node.with_changes(body=_blank_after_imports(body, top), footer=[*footer, *updated_node.footer])

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
        leading = list(u.leading_lines)
        blank = []
        for line in leading:
            if line.comment is not None:
                break
            blank.append(line)
        if not blank:
            return u, group
        group = [group[0].with_changes(leading_lines=[*blank, *group[0].leading_lines]), *group[1:]]
        if is_import_block(original[i]):
            u = u.with_changes(leading_lines=leading[len(blank) :])
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
