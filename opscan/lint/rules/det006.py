"""DET006 deterministic-warn-only: Determinism is enabled with `warn_only=True`, so nothing is enforced.

## What it does
Flags `torch.use_deterministic_algorithms(True, warn_only=True)`,
`torch.set_deterministic_debug_mode("warn")`, Lightning's
`Trainer(deterministic="warn")`, and helpers called with the equivalent
(`enable_full_determinism(seed, warn_only=True)`, torchtune's `set_seed(debug_mode="warn")`).

Last write wins: a later call that enables determinism strictly, or turns it
off, clears the finding when it runs before the first CUDA work after the
warn-only call, in execution order. One in another branch of the `if` that
holds the warn-only call (`if args.lenient: ... warn_only=True` / `else:
... (True)`) runs on another path and clears nothing, as for DET005.

## Why is this bad?
With `warn_only`, an op that has no deterministic implementation only warns
and runs its nondeterministic kernel, and the warning does not say where it came
from. SDPA's memory-efficient and cuDNN attention also keep their
nondeterministic backward paths; in strict mode they switch to deterministic ones.

## Example
```python
torch.use_deterministic_algorithms(True, warn_only=True)
```

## Use instead
```python
torch.use_deterministic_algorithms(True)
```
Run `opscan scan` first to list every op that would then raise.

## Fix
Drops `warn_only=True` (or turns `"warn"` into strict), where the call's own
arguments choose warn-only mode; a helper that always enables it warn-only
(ultralytics' `init_seeds(deterministic=True)`) has no fix: call
`torch.use_deterministic_algorithms(True)` after it. Unsafe: ops without a
deterministic implementation will then raise.
"""

from __future__ import annotations

from opscan.codes import parse_doc
from opscan.findings import Finding, Fix
from opscan.lint.context import Context, api_name
from opscan.lint.model import Determinism, Edit
from opscan.lint.modelled import strict_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.lint.fix.planner import Planner
    from opscan.lint.frameworks import Strict

RULE = parse_doc(__doc__)


def check(ctx: Context) -> None:
    for event in ctx.of(Determinism):
        if event.what.mode is False or event.what.warn_only is not True:
            continue
        if ctx.overridden(event, _strict_or_off, branches=True) is not None:
            continue  # made strict (or turned off) again before any CUDA work ran in warn-only mode
        strict = strict_for(event.api)
        if strict is not None:
            advice, fix = "enable it strictly", Fix("Enable determinism strictly (drop warn_only)", "unsafe", DropWarnOnly(strict))
        else:  # the helper itself chooses warn-only mode
            advice, fix = "call `torch.use_deterministic_algorithms(True)` after it to enable it strictly", None
        ctx.report(
            RULE,
            event.path,
            event.loc,
            f"{api_name(event)} enables determinism in warn-only mode, so nondeterministic ops only warn; {advice}",
            fix,
        )


def _strict_or_off(what) -> bool:
    """A later flag write that leaves warn-only mode: strict determinism, or determinism off."""
    return what.__class__ is Determinism and (what.mode is False or (what.mode is True and what.warn_only is False))


# -- the fix ------------------------------------------------------------------------
# libcst is imported inside the functions below: only the fixer runs them.


class DropWarnOnly(Edit):
    """Make a call that enables determinism in warn-only mode strict, along the route the catalogue
    gives its API (`frameworks.Strict`): drop `warn_only=True`, turn "warn" (debug mode 1) into
    "error" (2), or Lightning's `deterministic="warn"` into True."""

    _fields = ("strict",)
    __slots__ = _fields
    order = 2  # in place

    def __init__(self, strict: Strict):
        self.strict = strict  # which argument says warn-only, and how to make it strict

    def plan(self, planner: Planner, finding: Finding) -> bool:
        import libcst as cst

        from opscan.lint.fix.nodes import is_name, same_quotes, string_value

        start, end = planner.span(finding)
        call = planner.innermost(cst.Call, start, end)
        if call is None:
            return False
        strict = self.strict
        positional = [a for a in call.args if a.keyword is None and not a.star]
        arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == strict.param), None)
        if arg is None and strict.pos is not None and len(positional) > strict.pos:
            arg = positional[strict.pos]
        if arg is None:
            return False
        if strict.how == "drop":
            if not is_name(arg.value, "True"):
                return False
            index = list(call.args).index(arg)
            if _drops_comment(call, index):
                return False  # would lose a comment; leave it to the user
            planner.claim(call)
            planner.edits.replace[call] = lambda updated, index=index: _without_arg(updated, index)
            return True
        target = arg.value
        if string_value(target) == "warn":
            planner.claim(target)
            if strict.how == "true":
                planner.edits.replace[target] = lambda updated: cst.Name("True")
            else:
                planner.edits.replace[target] = lambda updated, t=target: same_quotes(t, "error")
            return True
        if strict.how == "error" and isinstance(target, cst.Integer) and target.value == "1":
            planner.claim(target)
            planner.edits.replace[target] = lambda updated: updated.with_changes(value="2")
            return True
        return False


def _without_arg(call, index: int):
    """The call without its `index`-th argument; the commas and the closing layout stay right."""
    import libcst as cst

    args = list(call.args)
    removed = args.pop(index)
    if index == len(args) and args:  # removed the last one: the new last takes its ending
        prev = args[-1]
        if isinstance(removed.comma, cst.Comma) and isinstance(prev.comma, cst.Comma):
            comma = prev.comma.with_changes(whitespace_after=removed.comma.whitespace_after)
        else:
            comma = removed.comma
        args[-1] = prev.with_changes(comma=comma, whitespace_after_arg=removed.whitespace_after_arg)
    return call.with_changes(args=args)


def _drops_comment(call, index: int) -> bool:
    """Would removing this argument lose a comment?"""
    import libcst as cst

    code = cst.Module([]).code_for_node
    return _comments(code(call)) != _comments(code(_without_arg(call, index)))


def _comments(code: str) -> list[str]:
    import io
    import tokenize

    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):  # pragma: no cover - code printed by libcst
        return ["?"]
