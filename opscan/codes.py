"""The registry of rule codes and their documentation.

A rule's documentation lives in its own module's docstring, ruff-style:
a first line `CODE name: summary`, then `## What it does`, `## Why is this bad?`,
`## Example`, `## Use instead` and `## Fix` sections. This module turns those
into RuleInfo for `--help`, SARIF and docs/rules.md. It is base-layer code:
each engine keeps its own registry (`opscan.lint.rules.RULES`,
`opscan.trace.codes.RULE`), and `opscan.registry` joins them for the commands.
"""

from __future__ import annotations

import re

from opscan._plain import Frozen

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
        return re.sub(r"```\w*\n?", "", self.help_markdown)


def parse_doc(doc: str, *, severity: str = "error", command: str = "lint") -> RuleInfo:
    """Parse a rule module's docstring."""
    head, _, rest = doc.strip().partition("\n")
    m = re.match(r"(?P<code>[A-Z]+\d{3}) (?P<name>[a-z0-9-]+): (?P<summary>.+)", head.strip())
    if not m:
        raise ValueError(f"rule docstring must start 'CODE name: summary', got {head!r}")
    sections = []
    for block in re.split(r"^## ", rest, flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        sections.append((title.strip(), body.strip()))
    return RuleInfo(m["code"], m["name"], m["summary"].strip(), tuple(sections), severity, command)


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
        if not matched or not re.fullmatch(r"[A-Z]+\d{0,3}", sel):
            raise UnknownCodeError(f"unknown rule selector {raw.strip()!r}; known codes: {', '.join(sorted(universe))}")
        out.update(matched)
    return out
