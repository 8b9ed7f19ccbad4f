"""DET001 seed-without-determinism: Code seeds its RNGs but never enables `torch.use_deterministic_algorithms(True)`.

## What it does
Flags a script that seeds (`torch.manual_seed`, `torch.cuda.manual_seed[_all]`,
`random.seed`, `np.random.seed`, `torch.Generator().manual_seed`,
`np.random.default_rng(seed)`, `random.Random(seed)`, or a framework helper such
as Lightning's `seed_everything` or transformers' `set_seed`) while nothing that
runs from it turns on deterministic algorithms, directly or through a helper
(`Trainer(deterministic=True)`, `enable_full_determinism`, ...). A call with no
seed or a literal `None` seeds nothing: `random.seed()`, `np.random.seed(None)`,
`random.Random()` and `np.random.default_rng()` take fresh entropy from the OS,
and `torch.manual_seed(None)` and transformers' `set_seed(None)` raise.
Lightning's `seed_everything()` does seed (with `PL_GLOBAL_SEED`, else 0, since 2.2).

It points at the first seeding call that executes; when seeding happens inside
a helper of another module, at the script's call of that helper (a helper the
script defines itself is pointed into, where its seeding is). An explicit
`torch.use_deterministic_algorithms(False)` is a deliberate choice and is not flagged.

Code behind a condition counts as running (enabling determinism, or seeding),
except where a project function tests one of its parameters alone (`if
deterministic:`, `if not deterministic:`, `if seed is not None:`, `if
deterministic is True`, `== None`, a comparison with a literal such as `if
n_static_features > 0:` or `if split == "train":`, ...) and the call binds it a literal: passed
by keyword or by position, or, where the call does not pass it, the parameter's
own literal default (`None`, `True`, `0`, a string), as Python binds a call.
`set_seed(0, deterministic=False)` does not run that branch (and `True` does
not run its `else`), and `setup()` of a `def setup(seed=None)` does not run its
`if seed is not None:` seeding. A parameter the function binds again, a
decorated function, a computed argument, a default that is no literal
(`seed=SEED`), a call with `*args` or `**kwargs`, or a method's positional
argument outside a call of its class (through an instance or the class, lint
does not tell) leaves the branch counting.

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
A module without a `__main__` block whose function the project declares a
console script of (`[project.scripts] mytrain = "mypkg.train:main"`, see the
README) runs as that script runs it, its top level then `main()`: seeding in
`main()` is reported there, "when run as the `mytrain` console script".

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

A script that never runs torch is not flagged either: one whose code that
runs (its own, the top level of each project module it imports and each
project function it calls) calls into nothing but the standard library and
libraries that never run torch (numpy, pandas, scikit-learn, PIL, OpenCV,
SimpleITK, nibabel, pydicom, h5py, MXNet, ...) and does no CUDA work, such as
a data-splitting script that seeds `random` and imports a constant from a
project module that imports torch (ultralytics' `data/split.py`): importing
torch is not running it. A call into torch, or into any other library (timm,
Lightning, batchgenerators, one lint does not know, ...), anywhere in that
code or in a function of the script it does not call, counts as running
torch. Keras 3 counts only where the
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
`set_seed(s, reproducible=args.reproducible)`. The framework's keyword takes
the switch too, where it is set before that call:
`Trainer(deterministic=args.deterministic)`.

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

from opscan.codes import parse_doc
from opscan.findings import Finding, Fix
from opscan.lint.branches import branches, is_elif, lines_of, parse_lines, statement_at, suites
from opscan.lint.context import UNKNOWN, Context, api_name, how, process_text, script_text, via_text
from opscan.lint.idiom import Route, route
from opscan.lint.model import Cudnn, Edit, Import, Loc
from opscan.lint.modelled import helper
from opscan.lint.switch import find_switch, scope_of

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
        switch = find_switch(ctx, path, loc, seed_lines, helper_lines, before, hoist[1] if hoist else None)
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
    ctx.report(RULE, path, loc, f"Seeds {how(first)} but never enables determinism{process_text(ctx, path)}{script_text(ctx)}{note}; {advice}", fix)


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
    scope = scope_of(facts, loc)
    others = [line for line in lines if line != loc.line and scope_of(facts, Loc(line, 1, line, 1)) == scope]
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


def _import_locs(ctx: Context) -> set:
    """Where the entry file imports: a project module that seeds on import is no helper call to put the fix before."""
    facts = ctx.trace.entry.facts
    events = [*facts.body, *(e for f in facts.functions.values() for e in f.events)]
    return {e.loc for e in events if e.what.__class__ is Import}


# -- the fix ------------------------------------------------------------------------
# libcst is imported inside the functions below: only the fixer runs them.


class EnableDeterminism(Edit):
    """Insert `torch.use_deterministic_algorithms(True)` where every path that seeds runs it before the work.

    With the project's own switch (`mode`, see opscan.lint.switch), that instead of True; right after the
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
