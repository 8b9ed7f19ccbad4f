"""What changed between two reports: another torch, another GPU, another machine. No torch.

Rows are matched by (source, rule or op, device, dtype); for each pair the
fields below are compared, and each change is a row of the `changes` table.
Rows in one report only are "added" or "removed". The header's differences
(torch, CUDA, GPU, driver...) are a table of their own.
"""

from __future__ import annotations

from opscan.findings import Column, Report, Table
from opscan.report import matrix

COMPARED = ("expected", "strict", "caller", "default", "strict_bits", "verdict", "remedy", "measured")
ENV_COMPARED = ("scope", "rules_torch", "torch", "cuda", "cudnn", "torchvision", "device", "gpu", "driver", "runs")


def _label(env: dict) -> str:
    date = env.get("date", "undated")
    if env.get("device") in (None, "none"):
        return f"torch {env.get('rules_torch')} from the rules ({date})"
    return f"torch {env.get('torch')} on {env.get('gpu') or env.get('device')} ({date})"


def diff(before: Report, after: Report) -> tuple[Report, int]:
    """The report of what changed from `before` to `after`, and how many row changes there are."""
    old = {matrix.row_key(r): r for r in matrix.rows_of(before)}
    new = {matrix.row_key(r): r for r in matrix.rows_of(after)}
    changes = Table(
        "changes",
        "Changed rows",
        (Column("source"), Column("op"), Column("device"), Column("dtype"), Column("change"), Column("field"), Column("before"), Column("after")),
    )
    for key in sorted(old.keys() | new.keys(), key=lambda k: tuple(map(str, k))):
        source, op, device, dtype = key
        a, b = old.get(key), new.get(key)
        if a is None:
            changes.add(source, op, device, dtype, "added", "verdict", "", b["verdict"])
        elif b is None:
            changes.add(source, op, device, dtype, "removed", "verdict", a["verdict"], "")
        else:
            for field in COMPARED:
                if a.get(field, "") != b.get(field, ""):
                    changes.add(source, op, device, dtype, "changed", field, a.get(field, ""), b.get(field, ""))
    environment = Table("environment", "Changed environment", (Column("key"), Column("before"), Column("after")))
    for key in ENV_COMPARED:
        if before.env.get(key) != after.env.get(key):
            environment.add(key, before.env.get(key), after.env.get(key))
    rows_changed = len({(r[0], r[1], r[2], r[3]) for r in changes.rows})
    env = {"before": _label(before.env), "after": _label(after.env), "rows_changed": rows_changed}
    said = f"{rows_changed} row{'s' if rows_changed != 1 else ''} changed." if rows_changed else "No row changed."
    return Report("report", tables=[changes, environment], env=env, summary=said, outcome=1 if rows_changed else 0), rows_changed
