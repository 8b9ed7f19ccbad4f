"""The parse floor plus a visit of every node: what a linter that looks at the whole tree pays.

    python benchmarks/walk_floor.py PATH

As benchmarks/parse_floor.py (the interpreter, `import ast`, an `ast.parse` of
every .py file under PATH, a folder shared among forked processes), and then
each tree is walked once, node by node, doing nothing at each. It is the
tightest generic walk we found in CPython (of four tried): an explicit stack,
`_fields` read per node, lists pushed whole and filtered when popped. A linter
whose rules are Python code and that inspects every node pays this visit on
top of the parse; opscan's facts pass skips nothing either (every function of
a training script names torch, a helper or `self`; BENCHMARKS.md, issue 9).
Like the parse floor, it runs with the cycle collector on, as a plain script
does; a process that turns it off (lint does) parses ~13% faster.
bench_lint_ab.py times it beside the parse floor.
"""

import ast
import sys


def visit_all(tree) -> int:
    """Visit every node of the tree once and do nothing; the number of nodes."""
    AST = ast.AST
    n = 0
    stack = [tree]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        node = pop()
        if not isinstance(node, AST):  # a field's plain value (a name, a constant): filtered here, once
            continue
        n += 1
        for name in node._fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                extend(value)
            elif value is not None:
                push(value)
    return n


if __name__ == "__main__":
    import parse_floor  # beside this file: the same reading, parsing and sharing among processes

    parse_floor.main(sys.argv[1], lambda paths: parse_floor.parse_all(paths, then=visit_all))
