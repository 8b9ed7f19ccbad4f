"""The compatibility matrix: one row per op, device and dtype, and the Report that carries it.

A row is a dict with every key of COLUMNS. The Report has a Table named `ops`
whose rows these are (in json: `tables[name=ops].rows`, one object per row),
and a `summary` table of counts. Rows come from three places:

- `rule_rows`: what `rules/*.toml` says for a torch version, marked "not
  measured" (no torch needed);
- `opscan.report.measure`: a rule's reproducer run here;
- `opscan.report.sweep`: torch's OpInfo and ModuleInfo samples run here.

No torch is imported here.
"""

from __future__ import annotations

import json

from opscan.findings import Column, Problem, Report, Table

COLUMNS = (
    Column("source"),
    Column("rule"),
    Column("op"),
    Column("aten", "aten ops"),
    Column("device"),
    Column("dtype"),
    Column("phase"),
    Column("expected", "rules say"),
    Column("strict", "strict mode"),
    Column("caller", "alert caller"),
    Column("raised_by", "raised by"),
    Column("default", "default mode bits"),
    Column("strict_bits", "strict mode bits"),
    Column("differs_at", "first op that differed"),
    Column("verdict"),
    Column("remedy", "remedy probe"),
    Column("measured"),
    Column("note"),
)
KEYS = tuple(c.key for c in COLUMNS)

# `expected` and `strict`
RAISES, NO_ALERT, NOT_MEASURED, ERROR = "raises", "no alert", "not measured", "error"
# `default` and `strict_bits`: the bits of every op's results across the runs
IDENTICAL, DIFFERS = "identical", "differs"
# `verdict`
V_RAISES = "raises"
V_SWITCHES = "nondeterministic by default, deterministic in strict mode"
V_SILENT = "differs in strict mode without raising"
V_DETERMINISTIC = "deterministic in both modes"
# measured in default mode only (a sweep sample that raised in strict mode is V_RAISES)
V_NONDETERMINISTIC = "nondeterministic by default"
V_DEFAULT_ONLY = "deterministic by default"
V_ERROR = "error"
V_NOT_MEASURED = "not measured"
VERDICTS = (V_RAISES, V_SILENT, V_SWITCHES, V_NONDETERMINISTIC, V_DETERMINISTIC, V_DEFAULT_ONLY, V_ERROR, V_NOT_MEASURED)

FROM_RULES = "from the rule database, not measured here"
NO_REMEDY_PROBE = "not probed: the remedy is a code change"

SCOPE_RULES, SCOPE_SWEEP = "rules", "sweep"


def row(**values) -> dict:
    """A row with every column, "" where not given."""
    unknown = set(values) - set(KEYS)
    if unknown:
        raise ValueError(f"unknown report columns {sorted(unknown)}")
    return {key: values.get(key, "") for key in KEYS}


def row_key(r: dict) -> tuple:
    """What identifies a row across reports: where it came from, which op, device and dtype."""
    return (r.get("source", ""), r.get("rule") or r.get("op", ""), r.get("device", ""), r.get("dtype", ""))


def api_label(rule) -> str:
    """A rule's first user API, short: F.interpolate, nn.AdaptiveAvgPool2d, Tensor.put_."""
    if not rule.apis:
        return rule.id
    api = rule.apis[0]
    if api.kind == "method":
        return f"Tensor.{api.name}"
    for long, short in (("torch.nn.functional.", "F."), ("torch.nn.", "nn.")):
        if api.name.startswith(long):
            return short + api.name[len(long) :]
    return api.name


def verdict(raised: bool, strict_bits: str, default: str, error: str = "") -> str:
    if error:
        return V_ERROR
    if raised:
        return V_RAISES
    if strict_bits == DIFFERS:
        return V_SILENT
    if default == DIFFERS:
        return V_SWITCHES if strict_bits == IDENTICAL else V_NONDETERMINISTIC
    if strict_bits == IDENTICAL:
        return V_DETERMINISTIC
    return V_DEFAULT_ONLY if default == IDENTICAL else V_NOT_MEASURED


def rule_row(rule, device: str, dtype: str, torch_version: str) -> dict:
    """What the rules data says about one rule on a device, for a torch version: not measured."""
    raises = rule.raises_on(torch_version, device)
    return row(
        source="rule",
        rule=rule.id,
        op=api_label(rule),
        aten=list(rule.aten),
        device=device,
        dtype=dtype,
        phase=rule.phase,
        expected=RAISES if raises else NO_ALERT,
        strict=NOT_MEASURED,
        verdict=V_NOT_MEASURED,
        remedy="",
        measured=False,
        note=FROM_RULES,
    )


def rule_rows(db, torch_version: str, *, measured=()) -> list[dict]:
    """A row per rule, device and dtype the rules name, except those in `measured` ((rule id, device) pairs)."""
    rows = []
    for rule in db.ops:
        for device in rule.devices:
            if (rule.id, device) in measured:
                continue
            rows.extend(rule_row(rule, device, dtype, torch_version) for dtype in rule.dtypes)
    return rows


def summary(rows: list[dict]) -> Table:
    """How many rows have each verdict, measured and from the rules."""
    table = Table("summary", "Verdicts", (Column("verdict"), Column("measured", align="right"), Column("from_rules", "from the rules", align="right")))
    for name in VERDICTS:
        measured = sum(1 for r in rows if r["verdict"] == name and r["measured"] is True)
        ruled = sum(1 for r in rows if r["verdict"] == name and r["measured"] is not True)
        if name == V_NOT_MEASURED:
            ruled_raises = sum(1 for r in rows if r["measured"] is not True and r["expected"] == RAISES)
            if ruled:
                table.add("not measured: the rules say it raises", 0, ruled_raises)
                table.add("not measured: the rules say no alert", 0, ruled - ruled_raises)
            continue
        if measured or ruled:
            table.add(name, measured, ruled)
    return table


def ops_table(rows: list[dict], title: str = "Ops", note: str = "") -> Table:
    return Table("ops", title, COLUMNS, [tuple(r[k] for k in KEYS) for r in rows], note=note)


def make_report(rows: list[dict], env: dict, *, title: str = "Ops", notices=(), errors=(), note: str = "") -> Report:
    """The report: the ops table, then the summary. `env` is its header."""
    return Report(
        "report",
        tables=[ops_table(rows, title, note), summary(rows)],
        env=dict(env),
        notices=list(notices),
        errors=list(errors),
        summary=headline(rows),
    )


def headline(rows: list[dict]) -> str:
    """One closing line: how many rows, and how many of them have each verdict."""
    counts = {name: sum(1 for r in rows if r["verdict"] == name) for name in VERDICTS}
    parts = ", ".join(f"{n} {name}" for name, n in counts.items() if n)
    measured = sum(1 for r in rows if r["measured"] is True)
    return f"{len(rows)} rows ({measured} measured here): {parts or 'none'}."


def rows_of(report: Report) -> list[dict]:
    """The ops table's rows as dicts."""
    table = report.table("ops")
    if table is None:
        return []
    keys = [c.key for c in table.columns]
    return [dict(zip(keys, r)) for r in table.rows]


# ---------------------------------------------------------------- a saved report


# The largest report opscan writes, a full sweep as json, is about 0.5 MB.
MAX_REPORT_BYTES = 64 * 1024 * 1024


class ReportFileError(ValueError):
    """A file that is not a saved `opscan report --output-format json`; `path` names it where known."""

    def __init__(self, message: str, path: str | None = None):
        super().__init__(message)
        self.path = path


def load(path: str) -> Report:
    """Read a report saved as json back into a Report (to render it again, or to diff it)."""
    from opscan._read import NotReadable, read_bytes

    try:
        raw = read_bytes(path, what="a saved report", limit=MAX_REPORT_BYTES)
    except NotReadable as exc:  # /dev/zero never ends, a named pipe blocks: refused before reading
        raise ReportFileError(str(exc), path) from None
    except OSError as exc:
        raise ReportFileError(f"cannot read {path}: {exc.strerror or exc}", path) from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ReportFileError(f"{path} is not json: {exc}", path) from None
    try:
        return from_json(data, path)
    except ReportFileError as exc:
        raise ReportFileError(str(exc), path) from None


def from_json(data, where: str = "the report") -> Report:
    if not isinstance(data, dict) or data.get("tool") != "opscan" or data.get("command") != "report":
        raise ReportFileError(f"{where} is not a report made by `opscan report --output-format json`")
    tables = data.get("tables")
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ReportFileError(f"{where}: `tables` must be a list of tables")
    if not any(t.get("name") == "ops" for t in tables):
        raise ReportFileError(f"{where} has no `ops` table")
    env = data.get("env")
    if not isinstance(env, dict):
        raise ReportFileError(f"{where}: `env` must be an object")
    out = []
    for t in tables:
        columns = t.get("columns")
        rows = t.get("rows")
        if not isinstance(columns, list) or not isinstance(rows, list) or not all(isinstance(c, dict) and "key" in c for c in columns):
            raise ReportFileError(f"{where}: table {t.get('name')!r} needs `columns` (with keys) and `rows`")
        if not all(isinstance(r, dict) for r in rows):
            raise ReportFileError(f"{where}: the rows of table {t.get('name')!r} must be objects")
        keys = [str(c["key"]) for c in columns]
        if t.get("name") == "ops":
            keys = list(KEYS)  # older or newer files: every column this version knows, "" where absent
            columns = [{"key": c.key, "title": c.title} for c in COLUMNS]
        table = Table(
            str(t.get("name", "")),
            str(t.get("title", "")),
            [Column(str(c["key"]), str(c.get("title", c["key"]))) for c in columns],
            [tuple(r.get(k, "") for k in keys) for r in rows],
            note=str(t.get("note", "")),
        )
        out.append(table)
    errors = [Problem(str(e.get("message", e))) if isinstance(e, dict) else Problem(str(e)) for e in data.get("errors", [])]
    notices = [str(n) for n in data.get("notices", [])]
    report = Report("report", tables=out, env=env, notices=notices, errors=errors)
    report.summary = headline(rows_of(report))  # counted again: a file from before the summary line has none
    return report
