"""The one finding type shared by lint, scan and report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ERROR = "error"
WARNING = "warning"
NOTE = "note"


@dataclass(frozen=True)
class Fix:
    """A fix a finding offers. `applicability` is "safe" or "unsafe"; `data` tells the fixer what to do."""

    description: str
    applicability: str = "safe"
    data: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Finding:
    """One diagnostic: a rule code at a source location, with a message and maybe a fix.

    Lines are 1-based; columns are 1-based, as in ruff's text output.
    `path` is as given (relative to the working directory where possible);
    `extra` carries command-specific fields (op, phase, module, remedy, ...).
    """

    code: str
    message: str
    path: str | None = None
    line: int = 1
    col: int = 1
    end_line: int | None = None
    end_col: int | None = None
    severity: str = ERROR
    fix: Fix | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def fixable(self) -> bool:
        return self.fix is not None

    def sort_key(self):
        return (self.path or "", self.line, self.col, self.code, self.message)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "code": self.code,
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "end_line": self.end_line if self.end_line is not None else self.line,
            "end_col": self.end_col if self.end_col is not None else self.col,
            "message": self.message,
            "severity": self.severity,
            "fixable": self.fixable,
            "fix": (
                {"description": self.fix.description, "applicability": self.fix.applicability}
                if self.fix
                else None
            ),
        }
        for key, value in self.extra.items():
            if not key.startswith("_"):  # private keys are for opscan itself (e.g. the fixer)
                d.setdefault(key, value)
        return d


@dataclass
class Report:
    """What a command produced: findings, plus environment facts and errors that are not findings."""

    command: str
    findings: list[Finding] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    # Messages for the user that are not findings (skipped files, fixes applied).
    notices: list[str] = field(default_factory=list)

    def sorted_findings(self) -> list[Finding]:
        return sorted(self.findings, key=Finding.sort_key)
