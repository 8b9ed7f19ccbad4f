"""`ast.iter_child_nodes` and `ast.walk` on the C module `_ast`: lint's start-up does not import the
pure-Python `ast` module (see opscan.lint.facts). Shared by the facts pass and its star-import reader."""

from __future__ import annotations

import _ast as ast


def iter_child_nodes(node: ast.AST):
    """`ast.iter_child_nodes`: the direct child nodes, in field order."""
    AST = ast.AST
    for name in node._fields:
        field = getattr(node, name, None)
        if isinstance(field, AST):
            yield field
        elif isinstance(field, list):
            for item in field:
                if isinstance(item, AST):
                    yield item


def walk(node: ast.AST):
    """`ast.walk`: the node and every node below it, breadth first, as ast's own order."""
    todo = [node]
    i = 0
    while i < len(todo):
        node = todo[i]
        i += 1
        todo.extend(iter_child_nodes(node))
        yield node
