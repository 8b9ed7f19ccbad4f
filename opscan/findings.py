"""The one finding type shared by lint, scan and report."""

from __future__ import annotations

from opscan._plain import Frozen, Plain

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up ~3 ms; annotations are strings here
    from typing import Any

ERROR = "error"
WARNING = "warning"
NOTE = "note"


class Fix(Frozen):
    """A fix a finding offers. `applicability` is "safe" or "unsafe"; `data` tells the fixer what to do."""

    _fields = ("description", "applicability", "data")
    _compared = ("description", "applicability")
    __slots__ = _fields

    def __init__(self, description: str, applicability: str = "safe", data: dict[str, Any] | None = None):
        self.description = description
        self.applicability = applicability
        self.data = {} if data is None else data


class Finding(Frozen):
    """One diagnostic: a rule code at a source location, with a message and maybe a fix.

    Lines are 1-based; columns are 1-based, as in ruff's text output.
    `path` is as given (relative to the working directory where possible);
    `extra` carries command-specific fields (op, phase, module, remedy, ...).
    """

    _fields = ("code", "message", "path", "line", "col", "end_line", "end_col", "severity", "fix", "extra")
    _compared = _fields[:-1]
    __slots__ = _fields

    def __init__(
        self,
        code: str,
        message: str,
        path: str | None = None,
        line: int = 1,
        col: int = 1,
        end_line: int | None = None,
        end_col: int | None = None,
        severity: str = ERROR,
        fix: Fix | None = None,
        extra: dict[str, Any] | None = None,
    ):
        self.code = code
        self.message = message
        self.path = path
        self.line = line
        self.col = col
        self.end_line = end_line
        self.end_col = end_col
        self.severity = severity
        self.fix = fix
        self.extra = {} if extra is None else extra

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


class Report(Plain):
    """What a command produced: findings, plus environment facts and errors that are not findings."""

    _fields = ("command", "findings", "env", "errors", "notices")
    __slots__ = _fields

    def __init__(
        self,
        command: str,
        findings: list[Finding] | None = None,
        env: dict[str, Any] | None = None,
        errors: list[dict[str, Any]] | None = None,
        notices: list[str] | None = None,
    ):
        self.command = command
        self.findings = [] if findings is None else findings
        self.env = {} if env is None else env
        self.errors = [] if errors is None else errors
        # Messages for the user that are not findings (skipped files, fixes applied).
        self.notices = [] if notices is None else notices

    def sorted_findings(self) -> list[Finding]:
        return sorted(self.findings, key=Finding.sort_key)
