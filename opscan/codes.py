"""The registry of rule codes and their documentation.

A rule's documentation lives in its own module's docstring, ruff-style:
a first line `CODE name: summary`, then `## What it does`, `## Why is this bad?`,
`## Example`, `## Use instead` and `## Fix` sections. This module turns those
into RuleInfo for `--help`, SARIF and docs/rules.md. It is base-layer code:
each engine keeps its own registry (`opscan.lint.rules.RULES`,
`opscan.trace.codes.RULE`), and `opscan.registry` joins them for the commands.
"""

from __future__ import annotations

from opscan._plain import Frozen

# `re` is imported where a pattern is needed: this module loads on every lint run, which needs none.

class RuleInfo(Frozen):
    _fields = ("code", "name", "summary", "sections", "severity", "command")
    __slots__ = _fields

    def __init__(self, code: str, name: str, summary: str, sections: tuple[tuple[str, str], ...], severity: str = "error", command: str = "lint"):
        self.code = code
        self.name = name  # kebab-case
        self.summary = summary
        self.sections = sections
        self.severity = severity
        self.command = command

    def section(self, title: str) -> str:
        for t, body in self.sections:
            if t.lower() == title.lower():
                return body
        return ""

    @property
    def why(self) -> str:
        return self.section("Why is this bad?")

    @property
    def pascal_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("-"))

    @property
    def help_markdown(self) -> str:
        return "\n\n".join(f"## {t}\n{body}" for t, body in self.sections)

    @property
    def help_text(self) -> str:
        import re

        return re.sub(r"```\w*\n?", "", self.help_markdown)


_HEAD = r"(?P<code>[A-Z]+\d{3}) (?P<name>[a-z0-9-]+): (?P<summary>.+)"
_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_NAME = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


def _head(line: str) -> tuple[str, str, str] | None:
    """`CODE name: summary` as _HEAD reads it, with str methods: every rule module parses its
    docstring at import, on every lint run, where compiling the pattern alone cost more."""
    code, _, rest = line.partition(" ")
    name, colon, summary = rest.partition(": ")
    if (
        len(code) >= 4 and all(c in _UPPER for c in code[:-3]) and code[-3:].isdecimal()
        and name and all(c in _NAME for c in name) and colon and summary and "\n" not in summary
    ):  # fmt: skip
        return code, name, summary
    import re

    m = re.match(_HEAD, line)  # anything else: the pattern decides (and, so far, refuses it)
    return (m["code"], m["name"], m["summary"]) if m else None


def parse_doc(doc: str, *, severity: str = "error", command: str = "lint") -> RuleInfo:
    """Parse a rule module's docstring."""
    head, _, rest = doc.strip().partition("\n")
    found = _head(head.strip())
    if found is None:
        raise ValueError(f"rule docstring must start 'CODE name: summary', got {head!r}")
    code, name, summary = found
    sections = []
    # The blocks re.split(r"^## ", rest, flags=re.M)[1:] gives, up to the newline before each
    # next `## ` (which body.strip() drops anyway).
    for block in ("\n" + rest).split("\n## ")[1:]:
        title, _, body = block.partition("\n")
        sections.append((title.strip(), body.strip()))
    return RuleInfo(code, name, summary.strip(), tuple(sections), severity, command)


def _selector(sel: str) -> bool:
    """re.fullmatch(r"[A-Z]+\\d{0,3}", sel), for a selector that prefixes a code (so is ASCII), with str methods."""
    letters = sel.rstrip("0123456789")
    return bool(letters) and all(c in _UPPER for c in letters) and len(sel) - len(letters) <= 3


class UnknownCodeError(ValueError):
    pass


def expand_selectors(selectors, universe) -> set[str]:
    """Expand codes and prefixes ("DET", "DET00", "ALL") against the known codes.

    Raises UnknownCodeError naming the first selector that matches nothing.
    """
    out: set[str] = set()
    for raw in selectors:
        sel = raw.strip().upper()
        if not sel:
            continue
        if sel == "ALL":
            out.update(universe)
            continue
        matched = {c for c in universe if c.startswith(sel)}
        if not matched or not _selector(sel):
            raise UnknownCodeError(f"unknown rule selector {raw.strip()!r}; known codes: {', '.join(sorted(universe))}")
        out.update(matched)
    return out
