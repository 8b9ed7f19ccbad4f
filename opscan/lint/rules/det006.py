"""DET006 deterministic-warn-only: Determinism is enabled with `warn_only=True`, so nothing is enforced.

## What it does
Flags `torch.use_deterministic_algorithms(True, warn_only=True)`,
`torch.set_deterministic_debug_mode("warn")`, Lightning's
`Trainer(deterministic="warn")`, and helpers called with the equivalent
(`enable_full_determinism(seed, warn_only=True)`, torchtune's `set_seed(debug_mode="warn")`).

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
Drops `warn_only=True` (or turns `"warn"` into strict). Unsafe: ops without a
deterministic implementation will then raise.
"""

from __future__ import annotations

from opscan.codes import parse_doc
from opscan.findings import Finding, Fix
from opscan.lint.context import Context, api_name
from opscan.lint.edit import Edit
from opscan.lint.model import Determinism

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.lint.fix.planner import Planner

RULE = parse_doc(__doc__)


def check(ctx: Context) -> None:
    for event in ctx.of(Determinism):
        if event.what.mode is False or event.what.warn_only is not True:
            continue
        ctx.report(
            RULE,
            event.path,
            event.loc,
            f"{api_name(event)} enables determinism in warn-only mode, so nondeterministic ops only warn; enable it strictly",
            Fix("Enable determinism strictly (drop warn_only)", "unsafe", DropWarnOnly(event.api)),
        )


# -- the fix ------------------------------------------------------------------------
# libcst is imported inside the functions below: only the fixer runs them.


class DropWarnOnly(Edit):
    """Make a call that enables determinism in warn-only mode strict: drop `warn_only=True`, or
    turn "warn" (debug mode 1) into "error" (2), or Lightning's `deterministic="warn"` into True."""

    _fields = ("api",)
    __slots__ = _fields
    order = 2  # in place

    def __init__(self, api: str | None):
        self.api = api  # the API called, which says where its arguments are

    def plan(self, planner: Planner, finding: Finding) -> bool:
        import libcst as cst

        from opscan.lint.fix.nodes import is_name, same_quotes, string_value

        start, end = planner.span(finding)
        call = planner.innermost(cst.Call, start, end)
        if call is None:
            return False
        api = self.api or ""
        positional = [a for a in call.args if a.keyword is None and not a.star]
        keyword = {a.keyword.value: a for a in call.args if a.keyword is not None}
        drop = None
        if "warn_only" in keyword and is_name(keyword["warn_only"].value, "True"):
            drop = keyword["warn_only"]
        elif (
            api.endswith(("use_deterministic_algorithms", "enable_full_determinism"))
            and len(positional) > 1
            and is_name(positional[1].value, "True")
        ):
            drop = positional[1]
        if drop is not None:
            index = list(call.args).index(drop)
            if _drops_comment(call, index):
                return False  # would lose a comment; leave it to the user
            planner.claim(call)
            planner.edits.replace[call] = lambda updated, index=index: _without_arg(updated, index)
            return True
        target = None
        if "deterministic" in keyword and string_value(keyword["deterministic"].value) == "warn":
            value = keyword["deterministic"].value
            planner.claim(value)
            planner.edits.replace[value] = lambda updated: cst.Name("True")
            return True
        if "debug_mode" in keyword:
            target = keyword["debug_mode"].value
        elif api.endswith("set_deterministic_debug_mode") and positional:
            target = positional[0].value
        elif "torchtune" in api and api.endswith("set_seed") and len(positional) > 1:
            target = positional[1].value
        if target is not None and string_value(target) == "warn":
            planner.claim(target)
            planner.edits.replace[target] = lambda updated, t=target: same_quotes(t, "error")
            return True
        if isinstance(target, cst.Integer) and target.value == "1":
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
