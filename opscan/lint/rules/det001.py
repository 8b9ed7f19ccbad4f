"""DET001 seed-without-determinism: Code seeds its RNGs but never enables `torch.use_deterministic_algorithms(True)`.

## What it does
Flags a script that seeds (`torch.manual_seed`, `torch.cuda.manual_seed[_all]`,
`random.seed`, `np.random.seed`, `torch.Generator().manual_seed`,
`np.random.default_rng(seed)`, or a framework helper such as Lightning's
`seed_everything` or transformers' `set_seed`) while nothing that runs from it
turns on deterministic algorithms, directly or through a helper
(`Trainer(deterministic=True)`, `enable_full_determinism`, ...).

It points at the first seeding call that executes; when seeding happens inside
a helper of another module, at the script's call of that helper (a helper the
script defines itself is pointed into, where its seeding is). An explicit
`torch.use_deterministic_algorithms(False)` is a deliberate choice and is not flagged.

A helper can also turn determinism off without being asked: Lightning 1.5 to
1.9 (`pytorch-lightning`, and the `lightning` distribution's 1.8 and 1.9) call
`torch.use_deterministic_algorithms(False)` when a `Trainer` is built without
`deterministic`, undoing a `use_deterministic_algorithms(True)` that ran before
it; 2.0 and later leave it as it is. So where the script turns determinism on
and then builds such a `Trainer` (with nothing turning it on again after it),
the rule fires, naming the releases ("on pytorch-lightning 1.5 to 1.9
`pytorch_lightning.Trainer` (line 11), built without `deterministic`, turns
determinism off again"), unless the project cannot be on one of them: its
requirement or lock file admits none (`lightning>=2.0`, `pytorch-lightning==1.4.9`,
a lock of 2.5.6; found as the targeted torch is) or, where nothing declares
the package, the installed one is not.

Functions and methods that the module defines but its own run never calls may
be entry points for other code (a `PtlTrainer.setup` that builds
`Trainer(deterministic=True)`, called by a launcher): when such code would turn
determinism on, the rule stays silent, as it does for code behind a condition.

A function the script hands to a fresh process is checked in that process's
own state: `torch.multiprocessing.spawn(worker)`, `start_processes(worker)`
(whose default method is spawn), and `Process(target=worker)` of a
`get_context("spawn")` or `get_context("forkserver")` context. Such a process
is a new interpreter: it inherits the environment variables set before it
starts (`CUBLAS_WORKSPACE_CONFIG`), and runs the script's top level again
(without its `__main__` block), then the worker's module and the worker; the
parent's `use_deterministic_algorithms`, cuDNN flags and seeds do not carry
over. So a worker that seeds where only the parent turns determinism on is
reported at the worker's seed (in its module, for a worker defined elsewhere),
and the fix goes there. A parent that seeds and leaves determinism to its
workers is not reported where they turn it on, as for code the script hands
to others to call. What the worker does is not the parent's, and the
other rules judge it there too (DET002 where the variable is set only after
the process starts, DET007 only where the worker itself turns determinism on).
A forked child (`get_context("fork")`, `start_method="fork"`) starts as a copy
of the parent, state and all, so its code runs as a call of the worker where
it is started. A bare `multiprocessing.Process` starts by the method that
`multiprocessing.set_start_method(...)` set before it, where the script sets
one; else by the platform's default, read as fork: Linux's default up to
Python 3.13, and CUDA training runs on Linux. (macOS and Windows default to
spawn, and Python 3.14 made Linux's forkserver; reading the default as spawn
would report workers whose determinism does hold on every Linux run before
3.14, so such a worker is checked fresh only where the script names spawn
itself.) `torchrun` and `torch.distributed.elastic` start separate scripts:
each is its own entry.

A script that never runs torch is not flagged either: one whose code, and
the project modules it imports, import nothing but the standard library and
libraries that never run torch (numpy, pandas, scikit-learn, PIL, OpenCV,
SimpleITK, nibabel, pydicom, h5py, ...), such as a data-splitting script that
seeds `random`. An import of torch, or of any other library (timm, Lightning,
batchgenerators, ...), anywhere in the script, in a function
it does not call too, counts as running torch. Keras 3 counts only where the
script sets `KERAS_BACKEND` to `"torch"` before it imports keras (keras reads
the variable then): on another backend, or one the script does not set (the
default is TensorFlow, else `keras.json` or the launcher decide), keras never
runs torch, and `keras.utils.set_random_seed` seeds `random` and numpy only.

## Why is this bad?
A seed fixes initialisation and data order, but GPU kernels that accumulate
with atomics, and cuDNN's algorithm choice, still differ between runs: two
"seeded" runs diverge from the first step. `torch.backends.cudnn.deterministic = True`
alone covers convolutions only.

## Example
```python
import torch

torch.manual_seed(0)
model = build_model().cuda()
```

## Use instead
```python
import os
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
model = build_model().cuda()
```

## Fix
Where a Lightning `Trainer` turns determinism off again (above), passes it
`deterministic=True`, which keeps it on in every release; where that `Trainer`
is built in another module, there is no fix: pass it there.
Otherwise, in the framework's own idiom where the script calls a helper that has one:
passes `deterministic=True` to Lightning's `Trainer(...)` (which also sets
CUBLAS_WORKSPACE_CONFIG and turns cuDNN benchmarking off),
`full_determinism=True` to the `TrainingArguments(...)` a transformers
`Trainer` gets, `deterministic=True` to accelerate's `set_seed(...)`, or
`deterministic_mode=True` to composer's `Trainer(...)` (which calls
`configure_deterministic_mode()` right after it seeds).
Otherwise inserts `torch.use_deterministic_algorithms(True)` after the
seeding statement (and the seeding statements that follow it in the block,
up to a call of a project helper that seeds, or a branch or loop that seeds
and does more); before it where it calls a project helper that seeds, since
the helper may go on to do the work. Seeding in one branch stays
conditional: after `if args.seed is not None: torch.manual_seed(args.seed)`
the call goes in that branch, so runs without a seed are left as they were.
Where other branches of the `if`, `try` or `match` around it seed too, the
call goes before that statement instead, so that every path that seeds gets
it (and before the next one out, where the same holds); a loop keeps it in
its body. The `__main__` block counts as a scope of its own (above it, the
call would run on import), and a `try` that imports torch is not left.
Where the module has no `import torch` to use, one is added where isort
(ruff's I rules) puts a third-party import: in sorted place in the
third-party section, or as a section of its own after the standard
library's, with the blank lines around it that isort wants. Safe.

Where the script sets `cudnn.deterministic` from its own switch (cleanrl's
`torch.backends.cudnn.deterministic = args.torch_deterministic`), the call
passes that switch, not `True`, so that turning it off still turns
determinism off: right after that assignment where it follows the seeding in
the block, else where the call goes anyway, where the assignment runs before
it on every path and nothing between rebinds the name, stores to the chain or
hands it to a call. Only for a name or attribute chain, the run's one write of
`cudnn.deterministic`, in the scope that seeds; a literal, a call or another
expression keeps `True`. The finding stands there: `cudnn.deterministic`
covers convolutions only. DET002's variable still goes at the top, whatever
the switch: it must be set before cuBLAS starts, and does nothing with
determinism off. A catalogued helper that sets only the cuDNN flags from its
argument is such a switch too: mmdet's and mmcv's
`set_random_seed(seed, deterministic=args.deterministic)`, fastai's
`set_seed(s, reproducible=args.reproducible)`.

The transformers and accelerate keywords exist from transformers 4.19.0 and
accelerate 0.29.0 on (older releases raise `TypeError`; composer's is in
every mosaicml release), so they are used only
where every release the project may use has them: its requirement or lock
file says so (found as the targeted torch is) or, where nothing declares the
package, the installed one does. Elsewhere the fix is the insertion, and the
message names the keyword with its condition: "(or, on accelerate >= 0.29.0,
pass `deterministic=True` to `accelerate.utils.set_seed` on line 7)".
"""

from __future__ import annotations

from opscan._plain import Plain
from opscan.codes import parse_doc
from opscan.findings import Finding, Fix
from opscan.lint.branches import branches, is_elif, lines_of, parse_lines, statement_at, suites
from opscan.lint.context import UNKNOWN, Context, api_name, how, process_text, via_text
from opscan.lint.idiom import Route, route
from opscan.lint.model import Cudnn, Edit, Import, Loc
from opscan.lint.modelled import helper

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.lint.context import TurnedOff
    from opscan.lint.fix.planner import Planner

RULE = parse_doc(__doc__)


def check(ctx: Context) -> None:
    if not ctx.seeds or ctx.disables:
        return
    if ctx.enables:
        if ctx.turned_off is not None:  # on, but a helper's older releases turn it off again
            _turned_off(ctx, ctx.turned_off)
        return
    if not ctx.uses_torch:
        return
    if ctx.uncalled_enables:
        return  # a function or method the module defines, for other code to call, turns it on
    first = ctx.seeds[0]
    path, loc = first.anchor
    note = ""
    flags = {e.what.value for e in ctx.of(Cudnn) if e.what.flag == "deterministic"}
    if True in flags:
        note = " (`cudnn.deterministic = True` covers convolutions only)"
    elif UNKNOWN in flags:  # `cudnn.deterministic = args.torch_deterministic`: the project's switch, for convolutions
        note = " (`cudnn.deterministic` covers convolutions only)"
    idiom = route(ctx, path, "determinism")
    if idiom is not None and idiom.since is None:  # the framework's own switch: Trainer(deterministic=True), ...
        advice, fix = idiom.advice, Fix(idiom.fix_description(), "safe", idiom.edit())
    else:
        imports = _import_locs(ctx)
        here = [(e.anchor[1], bool(e.helper) and e.anchor[1] not in imports) for e in ctx.seeds if e.anchor[0] == path]
        seed_lines = tuple(sorted({at.line for at, helper in here if not helper}))
        helper_lines = tuple(sorted({at.line for at, helper in here if helper}))
        before = bool(first.helper) and loc not in imports
        hoist = _branch_that_seeds(ctx, loc, {at.line for at, _ in here})
        switch = _switch(ctx, path, loc, seed_lines, helper_lines, before, hoist[1] if hoist else None)
        mode = switch.text if switch is not None else "True"
        call = f"torch.use_deterministic_algorithms({mode})"
        edit = EnableDeterminism(
            seed_lines, helper_lines, before=before, hoist_line=hoist[1] if hoist else None,
            mode=mode, after_line=switch.line if switch is not None and switch.after else None,
        )  # fmt: skip
        if switch is not None and switch.after:  # seeding, then `cudnn.deterministic = args.x`: beside it
            advice = f"call `{call}` right after the switch sets `cudnn.deterministic` (line {switch.line})"
            where = f"right after the `cudnn.deterministic` assignment (line {switch.line})"
        elif hoist:  # `if ...: seed(a)` `else: seed(b)`: before the `if`, for both paths
            advice = f"call `{call}` before the `{hoist[0]}` around it"
            where = f"before the `{hoist[0]}` around it, where another branch seeds too"
        elif before:
            advice, where = f"call `{call}` before calling it", f"before calling `{first.helper}`"
        else:
            advice, where = f"call `{call}` after seeding", "after seeding"
        if switch is not None and not switch.after:
            advice += f", with the switch that sets `cudnn.deterministic` (line {switch.line})"
        if idiom is not None:  # the project may be on a release without the switch
            advice += idiom.alternative()
        fix = Fix(f"Insert `{call}` {where}", "safe", edit)
    ctx.report(RULE, path, loc, f"Seeds {how(first)} but never enables determinism{process_text(ctx, path)}{note}; {advice}", fix)


def _turned_off(ctx: Context, off: TurnedOff) -> None:
    """Determinism is on, but a helper's call turns it off again on older releases the project may use
    (Lightning 1.5 to 1.9's `Trainer()`): its own keyword keeps it on, on every release."""
    first, call = ctx.seeds[0], off.call
    path, loc = first.anchor
    entry = helper(call.api)
    keyword, idiom = off.resets.keyword, entry.idiom if entry is not None else None
    fix = None
    if idiom is not None and idiom.keyword == keyword and call.anchor == (call.path, call.loc) and call.path == path:
        turn = Route(call.api, idiom.keyword, idiom.value, call.loc, idiom.covers)
        advice, fix = turn.advice, Fix(turn.fix_description(), "safe", turn.edit())
    else:  # in another module: the user's to edit there
        advice = f"pass `{keyword}=True` to it"
    at, on_at = call.anchor[1].line, off.on.anchor[1].line
    ctx.report(
        RULE, path, loc,
        f"Seeds {how(first)}, but on {off.package} {off.resets.shown} {api_name(call)}{via_text(call)} (line {at}), "
        f"built without `{keyword}`, turns determinism off again (`torch.use_deterministic_algorithms(False)`) "
        f"after {api_name(off.on)}{via_text(off.on)} turned it on (line {on_at}); {advice}",
        fix,
    )  # fmt: skip


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


def _switch(ctx: Context, path: str, loc, seed_lines, helper_lines, before: bool, hoist: int | None) -> Switch | None:
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
    if _scope_of(facts, event.loc) != _scope_of(facts, loc):
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
    scope = _scope_of(facts, loc)
    last = max(line for line in (*seed_lines, *helper_lines, loc.line) if _scope_of(facts, Loc(line, 1, line, 1)) == scope)
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


def _branch_that_seeds(ctx: Context, loc, lines: set[int]) -> tuple[str, int] | None:
    """The statement the fix goes before so that the other paths that seed get it too: ("if", its line), or None.

    Seeding in one branch only is conditional (`if args.seed is not None:
    torch.manual_seed(args.seed)`): the call stays with it, and a run that does
    not seed is left as it is. Where an `if`, `try` or `match` of the scope
    holds `loc` and seeds (a statement on one of `lines`) in another of its
    branches too (if, elif and else bodies; match cases; try body, handlers,
    else and finally), the call goes before it instead, and before the next one
    out that does the same. A loop or `with` is passed through, never chosen:
    the call in its body runs on every iteration that seeds. The scope is the
    function or class, else the module; the module's `__main__` block counts
    as one (above it, the call would run on import); a statement that imports
    torch is not left (above it, torch may not be bound).

    Decided here, once, on `ast`: the message says where the fix goes, and the
    fix (EnableDeterminism.hoist_line) puts it there.
    """
    facts = ctx.trace.entry.facts
    scope = _scope_of(facts, loc)
    others = [line for line in lines if line != loc.line and _scope_of(facts, Loc(line, 1, line, 1)) == scope]
    if not others:
        return None
    text = lines_of(facts)
    if text is None:
        return None
    # Two branches of one statement are parted by an `else`, `elif`, `except`, `finally` or `case` line:
    # without one between the seeds (random, numpy and torch seeded in a row), no parse is needed.
    first, last = min(loc.line, *others), max(loc.line, *others)
    if not any(line.lstrip().startswith(_BRANCH_WORDS) for line in text[first:last]):
        return None
    tree = parse_lines(text)
    if tree is None:
        return None
    import ast  # loaded by parse_lines

    chain: list = []  # the statements that hold `loc`, outermost first
    body = tree.body
    while True:
        stmt = statement_at(body, loc.line)
        if stmt is None:
            break
        chain.append(stmt)
        body = [s for suite in suites(stmt) for s in suite]
    tries = (ast.Try, getattr(ast, "TryStar", ast.Try))
    found = None
    for i in range(len(chain) - 2, -1, -1):  # innermost first; the last is the seeding statement itself
        stmt = chain[i]
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            break
        if isinstance(stmt, ast.If) and i == 0 and _main_guard(stmt.test):
            break
        if not isinstance(stmt, (ast.If, ast.Match, *tries)) or is_elif(chain[i - 1] if i else None, stmt):
            continue  # a loop, a `with`; an `elif`, a branch of the `if` that holds it
        if sum(any(_runs_line(s, lines) for s in suite) for suite in branches(stmt)) < 2:
            break  # the only branch that seeds: a run that takes another does not seed here
        if any(isinstance(n, ast.Import) and any(a.name.split(".")[0] == "torch" for a in n.names) for n in ast.walk(stmt)):
            break  # `try: import torch ...`: the call stays where torch is bound
        found = ("if" if isinstance(stmt, ast.If) else "match" if isinstance(stmt, ast.Match) else "try", stmt.lineno)
    return found


_BRANCH_WORDS = ("else", "elif", "except", "finally", "case")


def _runs_line(stmt, lines: set[int]) -> bool:
    """Does `stmt` hold a statement on one of `lines`, not in a def or class it defines?"""
    import ast

    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    if not any(stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno) for line in lines):
        return False
    inner = [s for suite in suites(stmt) for s in suite] if not isinstance(stmt, ast.Lambda) else []
    if not inner or any(line == stmt.lineno for line in lines):
        return True  # a simple statement, or a seed in a compound statement's header
    return any(_runs_line(s, lines) for s in inner)


def _main_guard(test) -> bool:
    """`__name__ == "__main__"` in either order."""
    import ast

    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = {ast.dump(test.left), ast.dump(test.comparators[0])}
    return sides == {ast.dump(ast.Name("__name__", ast.Load())), ast.dump(ast.Constant("__main__"))}


def _scope_of(facts, loc) -> str | None:
    """The innermost function or method of the module that holds `loc`, by qualified name; None: the module."""
    best = None
    for fn in facts.functions.values():
        at = fn.loc
        if at.line <= loc.line <= at.end_line and (best is None or at.line >= best.loc.line):
            best = fn
    return best.qualname if best is not None else None


def _import_locs(ctx: Context) -> set:
    """Where the entry file imports: a project module that seeds on import is no helper call to put the fix before."""
    facts = ctx.trace.entry.facts
    events = [*facts.body, *(e for f in facts.functions.values() for e in f.events)]
    return {e.loc for e in events if e.what.__class__ is Import}


# -- the fix ------------------------------------------------------------------------
# libcst is imported inside the functions below: only the fixer runs them.


class EnableDeterminism(Edit):
    """Insert `torch.use_deterministic_algorithms(True)` where every path that seeds runs it before the work.

    With the project's own switch (`mode`, see _switch), that instead of True; right after the
    `cudnn.deterministic = <switch>` that follows the seeding (`after_line`), where it does.

    After the statement that seeds (and the seeding statements that follow it
    in the block); before it where it calls a project helper, which may do the
    work too. Where other branches of an `if`, `try` or `match` around it seed
    too, before that statement (`hoist_line`, chosen by `_branch_that_seeds`).
    """

    _fields = ("seed_lines", "helper_lines", "before", "hoist_line", "mode", "after_line")
    __slots__ = _fields
    order = 5  # last: it may add `import torch` below what the fixes put at the top

    def __init__(
        self,
        seed_lines: tuple[int, ...],
        helper_lines: tuple[int, ...] = (),
        before: bool = False,
        hoist_line: int | None = None,
        mode: str = "True",
        after_line: int | None = None,
    ):
        self.seed_lines = seed_lines  # the lines, in the file fixed, of its calls that seed themselves
        self.helper_lines = helper_lines  # ... and of its calls of project helpers that seed (and may do the work)
        self.before = before  # the finding's own statement calls such a helper
        self.hoist_line = hoist_line  # the first line of the `if`, `try` or `match` to go before, if any
        self.mode = mode  # the argument, source text: "True", or the project's switch (`Switch.text`)
        self.after_line = after_line  # the line of the `cudnn.deterministic = <switch>` to go right after, if any

    def plan(self, planner: Planner, finding: Finding) -> bool:
        import libcst as cst

        from opscan.lint.fix.nodes import EXITS, is_import_block, statement

        start, end = planner.span(finding)
        small = planner.innermost(cst.BaseSmallStatement, start, end)
        stmt = planner.parent.get(small) if small is not None else planner.innermost(cst.BaseCompoundStatement, start, end)
        if stmt is None:
            return False
        if self.hoist_line is not None:  # the `if`, `try` or `match` the rule chose (_branch_that_seeds)
            branching = (cst.If, cst.Try, cst.TryStar, cst.Match)
            outer = next(
                (
                    anc for anc in planner.ancestors(stmt)
                    if isinstance(anc, branching) and planner.range(anc)[0][0] == self.hoist_line
                    and isinstance(planner.parent.get(anc), (cst.Module, cst.IndentedBlock))
                ),
                None,
            )  # fmt: skip
            if outer is None:
                return False  # not where the rule saw it: no fix rather than another one
            new = statement(f"{_determinism_callee(planner, outer, before=True)}({self.mode})")
            return _insert_before(planner, outer, new)
        if isinstance(stmt, cst.SimpleStatementSuite):
            return _enable_in_suite(planner, small, set(self.seed_lines), self.before, self.mode)
        block = planner.parent.get(stmt)
        if not isinstance(block, (cst.Module, cst.IndentedBlock)):
            return False
        if self.before:  # `evaluate(data)`, a helper that seeds and runs the evaluation
            new = statement(f"{_determinism_callee(planner, stmt, before=True)}({self.mode})")
            return _insert_before(planner, stmt, new)
        siblings = list(block.body)
        last = stmt
        for sibling in siblings[siblings.index(stmt) + 1 :]:
            if self.after_line is not None and planner.range(sibling)[0][0] == self.after_line:
                last = sibling  # `cudnn.deterministic = args.x`, the switch (_switch): right after it
                break
            step = _seeding(planner, sibling, set(self.seed_lines), set(self.helper_lines))
            if step == "work":
                break  # a helper that seeds, or a branch or loop that seeds and works: not after it
            if step == "seed":
                last = sibling
        if self.after_line is not None and planner.range(last)[0][0] != self.after_line:
            return False  # not where the rule saw it: no fix rather than another one
        new = statement(f"{_determinism_callee(planner, last)}({self.mode})")
        if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], EXITS):
            planner.edits.insert_before.setdefault(last, []).append(new)  # `return seed_everything(0)`
        else:
            if is_import_block(last):  # `import seeding` seeds on import: a blank line ends the imports, as isort wants
                new = new.with_changes(leading_lines=[cst.EmptyLine()])
            planner.edits.insert_after.setdefault(last, []).append(new)
        return True


def _insert_before(planner: Planner, stmt, new) -> bool:
    """Insert `new` before `stmt`, which keeps the comment lines right above it; `new` takes the blank lines.

    Where the statements other fixes put at the top of the module land before
    `stmt` too, they take its blank lines (after a docstring), and `new`
    follows them after a blank line of its own.
    """
    import libcst as cst

    from opscan.lint.fix.nodes import attached_comments

    if planner.parent.get(stmt) is planner.module:
        i = planner.body.index(stmt)
        edits = planner.edits
        if (edits.top and i == planner.top_at) or (edits.top_imports and i == planner.imports_end):
            planner.edits.insert_before.setdefault(stmt, []).append(new.with_changes(leading_lines=[cst.EmptyLine()]))
            return True
    leading = list(stmt.leading_lines)
    attached = attached_comments(stmt)
    blank = leading[: len(leading) - len(attached)]
    if blank and stmt not in planner.edits.replace and stmt not in planner.claimed:
        planner.claim(stmt)
        new = new.with_changes(leading_lines=blank)
        planner.edits.replace[stmt] = lambda updated: updated.with_changes(leading_lines=attached)
    planner.edits.insert_before.setdefault(stmt, []).append(new)
    return True


def _enable_in_suite(planner: Planner, small, seed_lines: set[int], before: bool, mode: str) -> bool:
    """`def seed(): torch.manual_seed(0)`: add to the same one-line suite."""
    import libcst as cst

    from opscan.lint.fix.nodes import EXITS

    suite = planner.parent[small]
    last = small
    if not before:
        for other in suite.body[list(suite.body).index(small) + 1 :]:
            if planner.range(other)[0][0] in seed_lines:
                last = other
    new = cst.Expr(cst.parse_expression(f"{_determinism_callee(planner, suite)}({mode})"))
    if before or isinstance(last, EXITS):
        planner.edits.insert_before.setdefault(last, []).append(new)
    else:
        planner.edits.insert_after.setdefault(last, []).append(new)
    return True


def _seeding(planner: Planner, stmt, seed_lines: set[int], helper_lines: set[int]) -> str | None:
    """Whether a statement after the seeding one seeds ("seed"), seeds and may work too ("work"), or neither.

    A call of a project helper that seeds may work; so may a branch or loop
    that seeds, unless all it holds seeds (`if torch.cuda.is_available():
    torch.cuda.manual_seed_all(0)`). The call goes before such a statement.
    """
    import libcst as cst

    from opscan.lint.fix.nodes import collect_statements

    if _holds_line(planner, stmt, helper_lines):
        return "work"
    if not _holds_line(planner, stmt, seed_lines):
        return None
    if isinstance(stmt, cst.SimpleStatementLine):
        return "seed"
    inner: list = []
    collect_statements(stmt, inner)
    for s in inner:
        if not isinstance(s, cst.SimpleStatementLine):
            return "work"
        if not _holds_line(planner, s, seed_lines) and not all(isinstance(x, cst.Pass) for x in s.body):
            return "work"
    return "seed"


def _holds_line(planner: Planner, stmt, lines: set[int]) -> bool:
    """Does this statement run a call on one of `lines` itself (not in a def or class it defines)?"""
    import libcst as cst

    from opscan.lint.fix.nodes import SCOPES

    if isinstance(stmt, SCOPES):
        return False
    (first, _), (last, _) = planner.range(stmt)
    for line in lines:
        if not first <= line <= last:
            continue
        text = planner.lines[line - 1]
        point = (line, len(text) - len(text.lstrip()))
        node = planner.innermost((cst.BaseSmallStatement, cst.BaseCompoundStatement), point)
        for anc in [node, *planner.ancestors(node)] if node is not None else ():
            if anc is stmt:
                return True
            if isinstance(anc, SCOPES):
                break
    return False


def _determinism_callee(planner: Planner, at, before: bool = False) -> str:
    """How to name `torch.use_deterministic_algorithms` after (`before`: before) `at`; adds `import torch` if needed."""
    line = planner.range(at)[0][0] if before else planner.range(at)[1][0]
    name = _torch_name(planner, at, line)
    if name:
        return name
    planner.ensure_torch_import(at)
    return "torch.use_deterministic_algorithms"


def _torch_name(planner: Planner, at, insert_line: int) -> str | None:
    """How an import already binds `torch.use_deterministic_algorithms` for a call inserted on `insert_line` near `at`.

    An import in an enclosing function, or at module level, that binds torch
    (`import torch`, `import torch as T`, `import torch.nn`,
    `from torch import use_deterministic_algorithms`) is reused. At module
    level it must come before the insertion, unless that is inside a function.
    """
    import libcst as cst

    functions = [a for a in planner.ancestors(at) if isinstance(a, cst.FunctionDef)]
    for scope in [*functions, planner.module]:
        body = scope.body.body if isinstance(scope, cst.FunctionDef) else scope.body
        must_precede = scope is not planner.module or not functions
        found = None
        for holder, imp in _imports_in(body):
            if must_precede and _import_line(planner, holder, imp) >= insert_line:
                continue
            name = _torch_binding(imp)
            if name and (found is None or "." in name):  # prefer torch.<...> over a bare imported name
                found = name
        if found:
            return found
    return None


def _import_line(planner: Planner, holder, imp) -> int:
    """The line of an import; `holder` is the statement of the scanned body that contains it."""
    import libcst as cst

    if isinstance(holder, cst.SimpleStatementLine):
        return planner.range(holder)[0][0]
    planner.ensure(planner.top_of.get(holder, holder))
    return planner.range(imp)[0][0]


def _imports_in(body) -> list:
    """(statement of `body`, import) for the imports in a body, in if/try/with blocks too, not in nested defs."""
    import libcst as cst

    from opscan.lint.fix.nodes import collect_statements

    found = []
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            found.extend((stmt, s) for s in stmt.body if isinstance(s, (cst.Import, cst.ImportFrom)))
        elif isinstance(stmt, cst.BaseCompoundStatement) and not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            inner: list = []
            collect_statements(stmt, inner)
            found.extend((stmt, imp) for _, imp in _imports_in(inner))
    return found


def _torch_binding(imp) -> str | None:
    """What to call for `torch.use_deterministic_algorithms` given this import, if it helps."""
    import libcst as cst

    from opscan.lint.fix.nodes import module_name

    if isinstance(imp, cst.Import):
        for alias in imp.names:
            name = module_name(alias.name)
            if alias.asname is not None:
                if name == "torch":
                    return f"{module_name(alias.asname.name)}.use_deterministic_algorithms"
            elif name == "torch" or name.startswith("torch."):
                return "torch.use_deterministic_algorithms"
    elif (
        isinstance(imp, cst.ImportFrom)
        and not imp.relative
        and module_name(imp.module) == "torch"
        and not isinstance(imp.names, cst.ImportStar)
    ):
        for alias in imp.names:
            if module_name(alias.name) == "use_deterministic_algorithms":
                return module_name(alias.asname.name) if alias.asname else "use_deterministic_algorithms"
    return None
