"""Run `opscan report` in this process and read its json."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "report" / "fixtures"


def opscan_report(*args: str) -> tuple[int, str, str]:
    """`opscan report ARGS`; returns (exit code, stdout, stderr)."""
    from opscan.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(["report", *args])
        except SystemExit as exc:  # argparse refuses a flag's value
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def table(doc: dict, name: str) -> dict:
    return next(t for t in doc["tables"] if t["name"] == name)


def ops_rows(doc: dict) -> list[dict]:
    """`ops` is `tables[name=ops].rows` (docs/report.md)."""
    return table(doc, "ops")["rows"]
