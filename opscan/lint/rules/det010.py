"""DET010 unused-noqa: A `# noqa: DETxxx` comment suppresses nothing.

## What it does
Flags the `DET` codes of a line's `# noqa: ...` comment that no finding on that
line needed in this run, as ruff's RUF100 does: codes that suppressed nothing
(`unused`), codes of rules that are not enabled for the file (`non-enabled`),
and codes opscan does not know (`unknown`). Codes of other tools (`F401`,
`E501`) and a bare `# noqa` are left alone: they may be there for another
linter. A `# noqa` in a helper module counts as used when a finding reached
through any script linted in the same run needed it.

Not enabled by default, like RUF100: select it with `--extend-select DET010`
(or `extend-select = ["DET010"]`, or `select = ["ALL"]` written out).

## Why is this bad?
A stale suppression hides the next real finding on that line, and tells the
reader that something is wrong there when nothing is.

## Example
```python
torch.manual_seed(0)  # noqa: DET001, DET005
torch.use_deterministic_algorithms(True)
```

## Use instead
```python
torch.manual_seed(0)  # noqa: DET002
torch.use_deterministic_algorithms(True)
```

## Fix
Safe: removes the unused codes from the comment, or the whole `# noqa` directive
(and the comment, if nothing else is in it) when none is left.
"""

from __future__ import annotations

from opscan.codes import parse_doc
from opscan.findings import Finding, Fix
from opscan.lint.facts import NOQA_DIRECTIVE
from opscan.lint.model import Edit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.lint.fix.planner import Planner

RULE = parse_doc(__doc__)

# The same directive the facts pass reads, with the span of its codes; matched with re.I.
NOQA = NOQA_DIRECTIVE


def unused_in(text: str, used: set[str], enabled: set[str], known: set[str]) -> tuple[int, int, list[str], dict[str, list[str]]] | None:
    """For one line's text: (start, end) of its noqa directive, the codes to drop, and why, or None.

    `used`: the codes of this line that suppressed a finding; `enabled`: the codes
    enabled for the file; `known`: every lint code.
    """
    import re  # here, not at the top: every lint run imports this module, and this rule is opt-in

    m = re.search(NOQA, text, re.I)
    if m is None or not m.group("codes"):
        return None
    why: dict[str, list[str]] = {}
    drop = []
    for code in re.split(r"[\s,]+", m.group("codes").strip()):
        code = code.upper()
        if not re.match(r"DET[0-9]{3}\Z", code) or code in used or code == RULE.code or code in drop:
            continue
        reason = "unknown" if code not in known else "non-enabled" if code not in enabled else "unused"
        why.setdefault(reason, []).append(code)
        drop.append(code)
    if not drop:
        return None
    return m.start(), m.end(), drop, why


def finding(path: str, line: int, text: str, start: int, end: int, drop: list[str], why: dict[str, list[str]]) -> Finding:
    """The DET010 finding for a directive at text[start:end] on `line`."""
    detail = "; ".join(f"{reason}: " + ", ".join(f"`{c}`" for c in codes) for reason, codes in why.items())
    return Finding(
        code=RULE.code,
        message=f"Unused `noqa` directive ({detail})",
        path=path,
        line=line,
        col=start + 1,
        end_line=line,
        end_col=end + 1,
        severity=RULE.severity,
        fix=Fix("Remove unused `noqa` directive", "safe", RemoveNoqaCodes(tuple(drop))),
    )


def without_codes(comment: str, drop: tuple[str, ...]) -> str:
    """A comment's text with `drop` taken out of its noqa directive; the directive goes when no code is left."""
    import re

    m = re.search(NOQA, comment, re.I)
    if m is None or not m.group("codes"):
        return comment
    codes = re.split(r"[\s,]+", m.group("codes").strip())
    kept = [c for c in codes if c.upper() not in drop]
    if kept:
        head = comment[: m.start("codes")]
        return head + ", ".join(kept) + comment[m.end("codes") :]
    before, after = comment[: m.start()].rstrip(), comment[m.end() :].strip()
    if after.startswith("#"):  # `# noqa: DET005 # pylint: ...`: the next comment stays
        return (before + "  " + after).strip() if before else after
    return before  # what followed the codes explained them: it goes with them, as in ruff


# -- the fix ------------------------------------------------------------------------


class RemoveNoqaCodes(Edit):
    """Take the unused codes out of a line's `# noqa` comment (the whole directive when none is left)."""

    _fields = ("codes",)
    __slots__ = _fields
    order = 0  # in place

    def __init__(self, codes: tuple[str, ...]):
        self.codes = codes

    def plan(self, planner: Planner, finding: Finding) -> bool:
        import libcst as cst

        start, end = planner.span(finding)
        comment = planner.innermost(cst.Comment, start, end)
        if comment is None:
            return False
        new = without_codes(comment.value, self.codes)
        if new == comment.value:
            return False
        holder = planner.parent.get(comment)
        if new:
            planner.claim(comment)
            planner.edits.replace[comment] = lambda updated: updated.with_changes(value=new)
            return True
        if not isinstance(holder, cst.TrailingWhitespace):
            return False  # a comment on a line of its own: left to the user
        planner.claim(holder)
        planner.edits.replace[holder] = lambda updated: updated.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)
        return True
