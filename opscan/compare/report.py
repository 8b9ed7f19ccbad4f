"""Turn a Comparison into the Report every formatter renders: findings, then the tables the diff command relies on.

Tables, in order (docs/record-format.md, "compare output"):
`env_diff` (only when the environments differ), `first_divergence` (one row,
none when the runs match), `spread` (one row per step, with a line chart of
the parameter difference) and `structure` (only when the op sequences differ).
"""

from __future__ import annotations

import json
import math
from typing import Any

from opscan.compare import codes
from opscan.compare.cause import Cause, Comparison, StructDiff, norm_gap
from opscan.findings import Chart, Column, Finding, Report, Table

ABSENT = "(not recorded)"

FIRST_DIVERGENCE_COLUMNS = (
    Column("op"),
    Column("module"),
    Column("file"),
    Column("line", align="right"),
    Column("step", align="right"),
    Column("phase"),
    Column("cause"),
    Column("code"),
    Column("i_a", "i (a)", align="right"),
    Column("i_b", "i (b)", align="right"),
    Column("norm_a", "norm (a)", align="right"),
    Column("norm_b", "norm (b)", align="right"),
    Column("norm_diff", "norm diff", align="right"),
    Column("rel_diff", "relative", align="right"),
)

SPREAD_COLUMNS = (
    Column("step", align="right"),
    Column("first_op", "first op that differs"),
    Column("module"),
    Column("ops_differ", "ops differ", align="right"),
    Column("structural", align="right"),
    Column("params_differ", "params differ", align="right"),
    Column("max_param_diff", "max param diff", align="right"),
    Column("loss_a", "loss (a)", align="right"),
    Column("loss_b", "loss (b)", align="right"),
)

SPREAD_NOTE = (
    "max param diff: max |a-b| over the sampled elements of every parameter (up to 256 each): "
    "exactly 0 where the fingerprints match, otherwise a lower bound of the true maximum."
)

STRUCTURE_COLUMNS = (
    Column("step", "first step", align="right"),
    Column("steps", align="right"),
    Column("change"),
    Column("op"),
    Column("module"),
    Column("phase"),
    Column("where_a", "in a"),
    Column("where_b", "in b"),
)


def _number(value: float | None) -> Any:
    """A float for the tables; NaN and infinities as text (JSON has no spelling for them)."""
    if value is None or math.isfinite(value):
        return value
    return str(value)


def shown(value: Any) -> str:
    """An environment value as the report's env line shows it: JSON spelling, strings bare."""
    if value is ABSENT or isinstance(value, str):
        return value
    return json.dumps(value)


def env_table(rows: list[tuple[str, Any, Any]]) -> Table:
    return Table(
        "env_diff",
        "Environment differences",
        (Column("field"), Column("a"), Column("b")),
        [(name, shown(a), shown(b)) for name, a, b in rows],
    )


def first_divergence_table(cause: Cause | None) -> Table:
    table = Table("first_divergence", "First divergence", FIRST_DIVERGENCE_COLUMNS)
    if cause is not None:
        at = cause.at
        gap, rel = norm_gap(cause.a, cause.b)
        table.add(
            at.op,
            at.module,
            at.file,
            at.line,
            cause.step,
            at.phase,
            codes.CAUSES[cause.code],
            cause.code,
            cause.a.i if cause.a else None,
            cause.b.i if cause.b else None,
            _number(cause.a.norm) if cause.a else None,
            _number(cause.b.norm) if cause.b else None,
            _number(gap),
            _number(rel),
        )
    return table


def spread_table(comparison: Comparison) -> Table:
    table = Table(
        "spread",
        "Spread per step",
        SPREAD_COLUMNS,
        chart=Chart("line", x="step", y="max_param_diff", log=True),
        note=SPREAD_NOTE,
    )
    for row in comparison.spread:
        table.add(
            row.step,
            row.first_op,
            row.first_module,
            row.ops_differ,
            row.structural,
            row.params_differ,
            _number(row.max_param_diff),
            _number(row.loss_a),
            _number(row.loss_b),
        )
    return table


def structure_table(comparison: Comparison) -> Table:
    table = Table("structure", "Structural differences (aligned op by op)", STRUCTURE_COLUMNS)
    for d in comparison.structure:
        table.add(*_structure_row(d))
    if comparison.structure_dropped:
        table.note = f"{comparison.structure_dropped} more distinct structural differences are not listed"
    return table


def _structure_row(d: StructDiff) -> tuple:
    op = d.op
    return (
        d.step,
        d.steps,
        d.change,
        op.op,
        op.module,
        op.phase,
        d.a.where if d.a else None,
        d.b.where if d.b else None,
    )


def finding(cause: Cause) -> Finding:
    at = cause.at
    message = cause.message
    later = len(cause.steps) - 1
    if later > 0:
        message = message.removesuffix(".") + f"; the same at {later} later step{'s' if later != 1 else ''}"
    return Finding(
        cause.code,
        message,
        path=at.file,
        line=at.line or 1,
        severity=cause.severity,
        help=cause.help,
        help_code=cause.help_code,
        properties={
            "op": at.op,
            "module": at.module,
            "step": cause.step,
            "phase": at.phase,
            "cause": codes.CAUSES[cause.code],
            "steps": list(cause.steps),
        },
    )


def build(
    comparison: Comparison | None,
    *,
    env_rows: list[tuple[str, Any, Any]],
    notices: list[str],
    errors: list,
) -> Report:
    """The compare Report. Without a comparison (the records could not be read) it holds only errors and notices."""
    report = Report(
        "compare",
        env={name: f"{shown(a)} | {shown(b)}" for name, a, b in env_rows},
        notices=notices,
        errors=errors,
        rules=codes.RULES,
    )
    if comparison is None:
        return report
    if env_rows:
        report.tables.append(env_table(env_rows))
    report.tables.append(first_divergence_table(comparison.primary))
    report.tables.append(spread_table(comparison))
    if comparison.structure:
        report.tables.append(structure_table(comparison))
    report.findings = [finding(c) for c in comparison.causes]
    return report
