"""The result shape every command returns: findings plus tables, environment and errors.

`Finding` is one diagnostic at a source location (ruff's shape). `Table` is
anything tabular that is not a finding: a timing comparison, a compatibility
matrix, the spread of a divergence. `Report` holds both, and
`opscan.output` renders any Report in any format without knowing which
command made it.

This module is the base layer: it imports nothing of opscan but `_plain`.
"""

from __future__ import annotations

from opscan._plain import Frozen, Plain

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up ~3 ms; annotations are strings here
    from typing import Any

    from opscan.codes import RuleInfo

ERROR = "error"
WARNING = "warning"
NOTE = "note"


class Fix(Frozen):
    """A fix a finding offers. `applicability` is "safe" or "unsafe".

    `edit` is the engine's own typed description of the change (lint's fixer
    reads it); the formatters show only `description` and `applicability`.
    """

    _fields = ("description", "applicability", "edit")
    _compared = ("description", "applicability")
    __slots__ = _fields

    def __init__(self, description: str, applicability: str = "safe", edit: Any = None):
        self.description = description
        self.applicability = applicability
        self.edit = edit


class Finding(Frozen):
    """One diagnostic: a rule code at a source location, with a message and maybe a fix.

    Lines are 1-based; columns are 1-based, as in ruff's text output.
    `path` is as shown to the user (relative to the working directory where
    possible); `source_path` is the file's real path, for tools that edit it.
    `line_text` is the located line, stripped (None where not read): it anchors SARIF fingerprints
    and lets the fixer refuse a file that changed since it was read.
    `help` and `help_code` say what to do, in prose and as code.
    `properties` are command-specific public fields (an op name, a phase) for
    the machine-readable formats; the formatters pass them through as they are.
    """

    _fields = (
        "code", "message", "path", "line", "col", "end_line", "end_col", "severity", "fix",
        "line_text", "source_path", "help", "help_code", "properties",
    )  # fmt: skip
    _compared = _fields[:9]
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
        *,
        line_text: str | None = None,
        source_path: str | None = None,
        help: str = "",
        help_code: str = "",
        properties: dict[str, Any] | None = None,
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
        self.line_text = line_text
        self.source_path = source_path
        self.help = help
        self.help_code = help_code
        self.properties = {} if properties is None else properties

    @property
    def fixable(self) -> bool:
        return self.fix is not None

    def sort_key(self):
        return (self.path or "", self.line, self.col, self.code, self.message)

    def replace(self, **changes: Any) -> Finding:
        """A copy with some fields changed."""
        values = {name: getattr(self, name) for name in self._fields}
        values.update(changes)
        return Finding(**values)

    def to_dict(self) -> dict[str, Any]:
        """The finding as JSON: ruff's keys, then the properties, then the located line."""
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
        if self.help:
            d["help"] = self.help
        if self.help_code:
            d["help_code"] = self.help_code
        for key, value in self.properties.items():
            d.setdefault(key, value)
        if self.line_text is not None:
            d["line_text"] = self.line_text
        return d


class Column(Frozen):
    """A table column: `key` names it in JSON, `title` in the rendered table."""

    _fields = ("key", "title", "align")
    __slots__ = _fields

    def __init__(self, key: str, title: str | None = None, align: str = "left"):
        self.key = key
        self.title = key if title is None else title
        self.align = align  # "left" or "right" (numbers)


class Chart(Frozen):
    """How the html format draws a table: `kind` "bar" or "line", `x` and `y` column keys."""

    _fields = ("kind", "x", "y", "log")
    __slots__ = _fields

    def __init__(self, kind: str, x: str, y: str, log: bool = False):
        if kind not in ("bar", "line"):
            raise ValueError(f"chart kind must be bar or line, not {kind!r}")
        self.kind = kind
        self.x = x
        self.y = y
        self.log = log


class Table(Plain):
    """Rows under named columns. Each row is a tuple with one value per column."""

    _fields = ("name", "title", "columns", "rows", "chart", "note")
    __slots__ = _fields

    def __init__(
        self,
        name: str,
        title: str,
        columns: tuple[Column, ...] | list[Column],
        rows: list[tuple] | None = None,
        *,
        chart: Chart | None = None,
        note: str = "",
    ):
        self.name = name
        self.title = title
        self.columns = tuple(columns)
        self.rows = [] if rows is None else rows
        self.chart = chart
        self.note = note  # one line shown under the table
        keys = [c.key for c in self.columns]
        if len(set(keys)) != len(keys):
            raise ValueError(f"table {name!r} has duplicate column keys")
        if chart is not None and not {chart.x, chart.y} <= set(keys):
            raise ValueError(f"table {name!r}: chart columns {chart.x!r}, {chart.y!r} are not all columns")

    def add(self, *values: Any) -> None:
        """Append a row; it must have one value per column."""
        if len(values) != len(self.columns):
            raise ValueError(f"table {self.name!r} has {len(self.columns)} columns, got a row of {len(values)}")
        self.rows.append(tuple(values))

    def column(self, key: str) -> list[Any]:
        """Every row's value in one column."""
        index = [c.key for c in self.columns].index(key)
        return [row[index] for row in self.rows]

    def to_dict(self) -> dict[str, Any]:
        keys = [c.key for c in self.columns]
        out: dict[str, Any] = {
            "name": self.name,
            "title": self.title,
            "columns": [{"key": c.key, "title": c.title} for c in self.columns],
            "rows": [dict(zip(keys, row)) for row in self.rows],
        }
        if self.note:
            out["note"] = self.note
        return out


class Problem(Frozen):
    """Something that stopped part of a run (a target that would not load, a record that is cut short)."""

    _fields = ("message", "target", "detail")
    __slots__ = _fields

    def __init__(self, message: str, target: str | None = None, detail: str = ""):
        self.message = message
        self.target = target
        self.detail = detail  # a traceback or other long text, for the machine-readable formats

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message": self.message}
        if self.target is not None:
            out["target"] = self.target
        if self.detail:
            out["detail"] = self.detail
        return out


class Report(Plain):
    """What a command produced.

    `env` holds flat facts about where it ran (versions, device, flags), in
    display order. `rules` documents the codes the command can report, for
    SARIF and `--statistics`. `flat_json` asks the json format for ruff's flat
    list of findings instead of the report object (lint's contract).
    """

    _fields = ("command", "findings", "tables", "env", "errors", "notices", "rules", "flat_json", "summary", "outcome", "checked")
    __slots__ = _fields

    def __init__(
        self,
        command: str,
        findings: list[Finding] | None = None,
        *,
        tables: list[Table] | None = None,
        env: dict[str, Any] | None = None,
        errors: list[Problem] | None = None,
        notices: list[str] | None = None,
        rules: tuple[RuleInfo, ...] = (),
        flat_json: bool = False,
        summary: str | None = None,
        outcome: int | None = None,
        checked: int | None = None,
    ):
        self.command = command
        self.findings = [] if findings is None else findings
        self.tables = [] if tables is None else tables
        self.env = {} if env is None else env
        self.errors = [] if errors is None else errors
        # Messages for the user that are not findings (skipped files, fixes applied, a partial scan).
        self.notices = [] if notices is None else notices
        self.rules = rules
        self.flat_json = flat_json
        # The closing line, for a report whose point is its tables (a benchmark's verdict, a
        # matrix's counts); None closes with the check summary ("All checks passed!", "Found N errors.").
        self.summary = summary
        # The exit code (0 or 1) of a report whose tables are its result (report --diff: 1 when rows changed), so that
        # the exit code and the closing line come from one place; None: 1 with findings, else 0. Errors make it 2.
        self.outcome = outcome
        # How many of the run's parts (files linted, targets scanned) it came to the end of, for a command whose
        # parts can all end clean; None: judged by what the report holds (has_result).
        self.checked = checked

    def sorted_findings(self) -> list[Finding]:
        return sorted(self.findings, key=Finding.sort_key)

    def table(self, name: str) -> Table | None:
        for t in self.tables:
            if t.name == name:
                return t
        return None

    def rule(self, code: str) -> RuleInfo | None:
        for info in self.rules:
            if info.code == code:
                return info
        return None

    def exit_code(self) -> int:
        """0 clean, 1 findings (or an `outcome` of 1), 2 when something stopped part of the run."""
        if self.errors:
            return 2
        if self.outcome is not None:
            return self.outcome
        return 1 if self.findings else 0

    def has_result(self) -> bool:
        """Whether the run produced anything besides its errors: a finding, a table row, a part checked.

        False only for a run whose whole result is an error, which is not written to -o (opscan.output.withhold).
        """
        if not self.errors:
            return True
        if self.checked is not None:
            return self.checked > 0
        return bool(self.findings) or any(table.rows for table in self.tables)

    def to_dict(self) -> dict[str, Any]:
        """The report object that every command but lint prints as json (docs/json.md)."""
        from opscan._version import __version__

        return {
            "tool": "opscan",
            "version": __version__,
            "command": self.command,
            "env": self.env,
            "findings": [f.to_dict() for f in self.sorted_findings()],
            "tables": [t.to_dict() for t in self.tables],
            "errors": [e.to_dict() for e in self.errors],
            "notices": list(self.notices),
            "summary": self.summary,
        }
