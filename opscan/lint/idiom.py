"""Fixes in the framework's own idiom, for the absence rules (DET001, DET002).

A Lightning script turns determinism on with `Trainer(deterministic=True)`, which
also sets CUBLAS_WORKSPACE_CONFIG; a transformers Trainer script with
`TrainingArguments(full_determinism=True)`; an accelerate script with
`set_seed(seed, deterministic=True)`. When the script already calls such a
helper, the finding suggests that keyword and its fix adds it to the call,
rather than raw torch calls; where the script sets `cudnn.deterministic` from
its own switch before that call, the keyword takes the switch rather than True
(opscan.lint.switch). The catalogue says which helpers have an idiom and
what it covers (`frameworks.Idiom`); this module finds the call to edit.

An idiom that only later releases of its package provide (`Idiom.since`:
accelerate's `deterministic` from 0.29.0, transformers' `full_determinism`
from 4.19.0; `Idiom.later`: composer's `deterministic_mode` sets
CUBLAS_WORKSPACE_CONFIG from 0.4.0) is used only where every version the project may use has it, as
its requirements, lock file or installed package say (opscan.lint.target): on
an older one the fixed script would raise `TypeError`. Elsewhere the rule
gives its raw fix, and its message names the idiom with that condition.
"""

from __future__ import annotations

from opscan._plain import Plain
from opscan.lint.model import MISSING, Built, Call, CudaWork, Edit, Loc
from opscan.lint.modelled import helper

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.findings import Finding
    from opscan.lint.context import Context
    from opscan.lint.fix.planner import Planner


class Route(Plain):
    """Where the script's idiom turns on what a rule finds missing: `keyword=value` on the call of `callee` at `loc`.

    `since` = (distribution, version) where the project may use a release of
    the package older than the idiom: the rule then gives its raw fix and names
    this route only as `alternative`. None where the route is the fix.
    """

    _fields = ("callee", "keyword", "value", "loc", "covers", "since")
    __slots__ = _fields

    def __init__(self, callee: str, keyword: str, value: str, loc: Loc, covers: tuple[str, ...], since: tuple[str, str] | None = None):
        self.callee = callee
        self.keyword = keyword
        self.value = value
        self.loc = loc
        self.covers = covers
        self.since = since

    @property
    def advice(self) -> str:
        return f"pass `{self.keyword}={self.value}` to `{self.callee}` (line {self.loc.line})"

    def alternative(self, then: str = "") -> str:
        """' (or, on accelerate >= 0.29.0, pass `deterministic=True` to `accelerate.utils.set_seed` on line 7)',
        after the raw advice where the project may be on an older release; `then` follows the call
        (", which sets it")."""
        package, version = self.since or ("", "")
        return f" (or, on {package} >= {version}, pass `{self.keyword}={self.value}` to `{self.callee}` on line {self.loc.line}{then})"

    def fix_description(self) -> str:
        return f"Pass `{self.keyword}={self.value}` to `{self.callee}`"

    def edit(self) -> AddKeyword:
        return AddKeyword(self.loc, self.keyword, self.value)


def route(ctx: Context, path: str, wants: str) -> Route | None:
    """The first call, in the file `path` and in execution order, of a helper whose idiom covers `wants`
    ("determinism" or "cublas") and that does not pass its keyword yet.

    For "cublas", the call must run before any CUDA work: the variable is read when cuBLAS starts.
    A call whose idiom the project's release of the package may lack (`Idiom.since_for(wants)`) gives way to
    a later call whose idiom it has; where there is none, it is returned with `since` set.
    """
    older = None  # the first route the project's release may lack
    # Each place's first run is enough: a call met again at a place is the same call, judged the same.
    for event in ctx.trace.first_calls(also=CudaWork):
        what = event.what
        if what.__class__ is CudaWork and wants == "cublas":
            break
        if what.__class__ is not Call or event.path != path or event.anchor != (event.path, event.loc):
            continue
        entry = helper(event.api)
        idiom = entry.idiom if entry is not None else None
        if idiom is None or wants not in idiom.covers:
            continue
        args, loc, callee, pos = what.args, event.loc, event.api, entry.position(idiom.keyword)
        if idiom.via is not None:  # on the settings object the call gets (TrainingArguments)
            settings = args.get(*idiom.via)
            if not isinstance(settings, Built):
                continue
            args, loc, callee, pos = settings.args, settings.loc, settings.qualname, None
        if args.star or args.get(idiom.keyword, pos, MISSING) not in (MISSING, None):
            continue  # passed already, or may be: the call's own choice
        if pos is not None and pos < len(args.args):
            continue  # passed by position as None: leave that call to the user
        since = idiom.since_for(wants)
        if since is not None and not ctx.at_least(*since):
            if older is None:
                older = Route(callee, idiom.keyword, _value(ctx, path, idiom.value, loc), loc, idiom.covers, since)
            continue
        return Route(callee, idiom.keyword, _value(ctx, path, idiom.value, loc), loc, idiom.covers)
    return older


def _value(ctx: Context, path: str, value: str, loc: Loc) -> str:
    """The keyword's value: the project's own switch where it sets `cudnn.deterministic` before the call
    (`Trainer(deterministic=args.torch_deterministic)`), so that turning it off still turns determinism
    off; else the idiom's own (True)."""
    from opscan.lint.switch import find_switch

    switch = find_switch(ctx, path, loc, (), (), False, None)
    return switch.text if switch is not None and not switch.after else value


# -- the fix ------------------------------------------------------------------------
# libcst is imported inside the functions below: only the fixer runs them.


class AddKeyword(Edit):
    """Pass `keyword=value` to the call at `loc` (or replace its `keyword=None`), keeping its layout."""

    _fields = ("loc", "keyword", "value")
    __slots__ = _fields
    order = 2  # in place

    def __init__(self, loc: Loc, keyword: str, value: str):
        self.loc = loc
        self.keyword = keyword
        self.value = value  # source text

    def plan(self, planner: Planner, finding: Finding) -> bool:
        import libcst as cst

        from opscan.lint.fix.nodes import is_name

        loc = self.loc
        start, end = planner.at(loc.line, loc.col), planner.at(loc.end_line, loc.end_col)
        call = planner.innermost(cst.Call, start, end)
        if call is None or planner.range(call) != (start, end):
            return False
        key = ("keyword", call, self.keyword)
        if key in planner.shared:
            return True  # DET001 and DET002 share one edit
        value = cst.parse_expression(self.value)
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == self.keyword:
                if not is_name(arg.value, "None"):
                    return False
                planner.claim(arg.value)
                planner.edits.replace[arg.value] = lambda updated: value
                planner.shared[key] = True
                return True
        if any(arg.star for arg in call.args):
            return False
        planner.claim(call)
        planner.edits.replace[call] = lambda updated: _with_keyword(updated, self.keyword, value)
        planner.shared[key] = True
        return True


def _with_keyword(call, keyword: str, value):
    """`call` with `keyword=value` after its last argument, laid out as the others are."""
    import libcst as cst

    new = cst.Arg(
        value=value,
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    before = args[-2].comma if len(args) >= 2 else None
    if isinstance(before, cst.Comma) and isinstance(before.whitespace_after, cst.ParenthesizedWhitespace):
        between = before.whitespace_after  # one argument per line, as the ones before
    elif isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        between = call.whitespace_before_args  # `(` then a line per argument
    else:
        between = None
    ending = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
    if isinstance(ending, cst.ParenthesizedWhitespace) and between is not None:
        # `x=1,  # note` then `)` on its own line: the note stays on x's line, the new argument
        # gets a line of its own and the trailing comma.
        args[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=between.with_changes(first_line=ending.first_line)))
        args.append(new.with_changes(comma=last.comma.with_changes(whitespace_after=ending.with_changes(first_line=cst.TrailingWhitespace()))))
        return call.with_changes(args=args)
    if between is not None:
        separator = cst.Comma(whitespace_after=between)
    elif isinstance(before, cst.Comma):
        separator = before  # as the arguments before are separated
    else:
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    # The new argument takes the old last one's ending: its trailing comma and what follows it.
    args[-1] = last.with_changes(comma=separator, whitespace_after_arg=cst.SimpleWhitespace(""))
    args.append(new.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg))
    return call.with_changes(args=args)
