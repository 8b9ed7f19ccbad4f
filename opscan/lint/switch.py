"""The project's own determinism switch, for DET001's fix and the framework idioms (opscan.lint.idiom).

cleanrl sets `torch.backends.cudnn.deterministic = args.torch_deterministic` after seeding, from its
`--torch-deterministic` flag; a fix that adds `torch.use_deterministic_algorithms(True)` (or
`Trainer(deterministic=True)`) would make that flag meaningless, since turning it off would no longer
turn determinism off. Where the flag's expression can be evaluated again to the same value, the fixes
pass it instead of True. Asked only of a finding a rule is about to report: the file is parsed again then.
"""

from __future__ import annotations

from opscan._plain import Plain
from opscan.lint.branches import lines_of, parse_lines, statement_at, suites
from opscan.lint.model import UNKNOWN, Cudnn, Loc
from opscan.lint.modelled import helper

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.lint.context import Context


class Switch(Plain):
    """The project's own determinism switch: `cudnn.deterministic = <text>` on `line`, a name or attribute
    chain the fix passes to `use_deterministic_algorithms` too. `after`: the assignment follows the
    seeding in its block, and the call goes right after it; else the call goes where it would go anyway."""

    _fields = ("line", "text", "after")
    __slots__ = _fields

    def __init__(self, line: int, text: str, after: bool):
        self.line = line
        self.text = text
        self.after = after


def find_switch(ctx: Context, path: str, loc, seed_lines, helper_lines, before: bool, hoist: int | None) -> Switch | None:
    """Where the run sets `cudnn.deterministic` from the project's own switch (cleanrl's
    `torch.backends.cudnn.deterministic = args.torch_deterministic`), the switch for the fix to pass,
    so that turning the switch off still turns determinism off; None where the fix passes True.

    A catalogued helper that sets `cudnn.deterministic` (and does not turn determinism on) from the
    truth of an argument is such an assignment, its argument the value: mmdet's
    `set_random_seed(seed, deterministic=args.deterministic)`, fastai's `set_seed(s, reproducible=...)`.
    Only where that assignment is the run's one write of `cudnn.deterministic`, is a statement of its
    own in the entry file, in the scope of the seeding, and its value is a name or an attribute chain
    (evaluating it again has no side effect) that is bound to the same thing where the call goes:
    either the assignment is the last of the seeding statements of the block (no project helper that
    seeds between: it may do the work), and the call goes right after it; or it runs before the
    seeding, on every path to it, and nothing between them rebinds the name, stores to the chain or
    hands a part of it to a call (`vars(args)`, `args.update(...)`). Read on `ast`, for one finding.
    """
    events = [e for e in ctx.of(Cudnn) if e.what.flag == "deterministic"]
    if len({(e.path, e.loc, e.api) for e in events}) != 1 or events[0].what.value is not UNKNOWN:
        return None  # none, or written in more than one place (or by a helper as well)
    event = events[0]
    if event.path != path or event.anchor != (path, event.loc):
        return None
    entry = helper(event.api) if event.api is not None else None
    param = _cudnn_switch_param(entry) if entry is not None else None
    if event.api is not None and param is None:
        return None
    facts = ctx.trace.entry.facts
    if scope_of(facts, event.loc) != scope_of(facts, loc):
        return None
    text = lines_of(facts)
    tree = parse_lines(text) if text is not None else None
    if tree is None:
        return None
    import ast  # loaded by parse_lines

    at = _suites_to(tree.body, event.loc.line)
    if not at:
        return None
    suite, i = at[-1]
    assign = suite[i]
    if param is not None:  # `set_random_seed(seed, deterministic=args.deterministic)` (mmdet, fastai's reproducible)
        call = next((n for n in ast.walk(assign) if isinstance(n, ast.Call) and (n.lineno, n.col_offset + 1) == (event.loc.line, event.loc.col)), None)
        value = _argument(call, param, entry.position(param)) if call is not None else None
        chain = _chain(value) if value is not None else None
    elif event.loc.line == loc.line:
        return None  # `torch.manual_seed(0); cudnn.deterministic = x` on one line
    else:
        chain = _chain(assign.value) if isinstance(assign, ast.Assign) and len(assign.targets) == 1 else None
    if chain is None or assign.lineno != event.loc.line:
        return None
    goes = _suites_to(tree.body, hoist if hoist is not None else loc.line)  # the statement the call goes by
    depth = len(at) - 1
    if len(goes) <= depth or any(a[0] is not b[0] or a[1] != b[1] for a, b in zip(at[:depth], goes[:depth])):
        return None  # in another branch, or deeper than the seeding: not on every path to it
    if goes[depth][0] is not suite:
        return None
    j = goes[depth][1]
    if i > j:  # after the seeding: beside the assignment, in the seeding statement's own block
        if hoist is not None or before or depth != len(goes) - 1:
            return None
        seeds, helpers = set(seed_lines), set(helper_lines)
        for stmt in suite[j + 1 : i]:
            if isinstance(stmt, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
                return None  # the assignment is not reached after the seeding
            lines = range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1)
            if any(line in helpers for line in lines):
                return None  # a project helper that seeds may do the work: the call goes before it
            if not isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign)) and any(line in seeds for line in lines):
                return None  # a branch or loop that seeds
        return Switch(assign.lineno, ".".join(chain), True)
    if i == j and (param is None or depth != len(goes) - 1):
        return None
    # Before the seeding, or the seeding helper's own argument: the call goes where it would anyway,
    # and the chain must hold up to there.
    scope = scope_of(facts, loc)
    last = max(line for line in (*seed_lines, *helper_lines, loc.line) if scope_of(facts, Loc(line, 1, line, 1)) == scope)
    end_at = _suites_to(tree.body, last)
    end = max(end_at[-1][0][end_at[-1][1]].end_lineno or last, last) if end_at else last
    if _touched(tree, chain, assign.end_lineno or assign.lineno, end):
        return None
    return Switch(assign.lineno, ".".join(chain), False)


def _cudnn_switch_param(entry) -> str | None:
    """The parameter of a catalogued helper whose truth sets `cudnn.deterministic` and nothing that
    turns determinism on (mmdet's `deterministic`, fastai's `reproducible`); None for any other helper."""
    from opscan.lint.frameworks import If
    from opscan.lint.model import Determinism

    if callable(entry.effects):
        return None
    for step in entry.effects:
        if step.__class__ is If and any(e.__class__ is Cudnn and e.flag == "deterministic" for e in step.then):
            if any(e.__class__ is Determinism for e in step.then):
                return None
            return step.param
    return None


def _argument(call, param: str, pos: int | None):
    """The expression `call` passes for `param`, by keyword or at `pos`; None where it passes none or `*args`."""
    import ast

    for keyword in call.keywords:
        if keyword.arg == param:
            return keyword.value
    if pos is None or any(isinstance(a, ast.Starred) for a in call.args[: pos + 1]) or pos >= len(call.args):
        return None
    return call.args[pos]


def _suites_to(body: list, line: int) -> list:
    """(statement list, index) from the module down to the innermost statement that holds `line`."""
    found = []
    while True:
        stmt = statement_at(body, line)
        if stmt is None:
            return found
        found.append((body, body.index(stmt)))
        inner = [suite for suite in suites(stmt) if statement_at(suite, line) is not None]
        if not inner:
            return found
        body = inner[0]


def _chain(node) -> list[str] | None:
    """`args.torch_deterministic` as ["args", "torch_deterministic"]; None for anything but a name or attribute chain."""
    import ast

    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(names)]


def _touched(tree, chain: list[str], after: int, end: int) -> bool:
    """Might a statement on lines after `after` up to `end` change what `chain` evaluates to?

    It rebinds or deletes the name (an assignment, `for`, `with ... as`, `import`, `def`, `except ... as`,
    `global`), stores to or deletes an attribute or item along the chain, or passes the object (or a
    part of the chain short of the value) to a call, or calls a method on it. What a def's or a
    class's body does runs elsewhere; a call of a function that rebinds a global is not followed.
    """
    import ast

    root = chain[0]
    prefixes = {tuple(chain[:k]) for k in range(1, len(chain))}
    stack = [n for n in tree.body if (n.end_lineno or n.lineno) > after and n.lineno <= end]
    while stack:
        node = stack.pop()
        line = getattr(node, "lineno", None)
        if line is not None and ((getattr(node, "end_lineno", None) or line) <= after or line > end):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == root:
                return True
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name) and node.id == root and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
            base = node.value
            while isinstance(base, (ast.Attribute, ast.Subscript, ast.Call)):
                base = base.func if isinstance(base, ast.Call) else base.value
            if isinstance(base, ast.Name) and base.id == root:
                return True
        if isinstance(node, (ast.Global, ast.Nonlocal)) and root in node.names:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name.partition(".")[0]) == root for a in node.names):
            return True
        if isinstance(node, ast.ExceptHandler) and node.name == root:
            return True
        if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name == root:
            return True
        if isinstance(node, ast.Call):
            func = _chain(node.func)
            if func is not None and len(func) > 1 and tuple(func[:-1]) in prefixes:
                return True  # args.update(...), args.sub.reset()
            parts = [*node.args, *(k.value for k in node.keywords)]
            for part in parts:
                inner = _chain(part.value if isinstance(part, ast.Starred) else part)
                if inner is not None and tuple(inner) in prefixes:
                    return True  # vars(args), reset(args.sub)
        stack.extend(ast.iter_child_nodes(node))
    return False


def scope_of(facts, loc) -> str | None:
    """The innermost function or method of the module that holds `loc`, by qualified name; None: the module."""
    best = None
    for fn in facts.functions.values():
        at = fn.loc
        if at.line <= loc.line <= at.end_line and (best is None or at.line >= best.loc.line):
            best = fn
    return best.qualname if best is not None else None
