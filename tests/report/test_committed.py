"""The reports committed under docs/report/ agree with rules/*.toml, rule by rule (regenerate them when the rules change).

A report of the rules' reproducers (scope "rules") must have a row for each
rule, device and the reproducer's own dtype, saying what the rules say for its
torch; a row measured on a machine must have raised exactly where the rules
say, with a caller the rule lists. A committed sweep must say honestly how
much of it ran.
"""

from __future__ import annotations

import json

import pytest

from opscan.rules import load
from tests.report.helpers import ROOT, ops_rows

REPORTS = sorted((ROOT / "docs" / "report").glob("*.json"))
DOCS = {path.name: json.loads(path.read_text(encoding="utf-8")) for path in REPORTS}
RULE_REPORTS = [name for name, doc in DOCS.items() if doc["env"].get("scope") == "rules"]
SWEEPS = [name for name, doc in DOCS.items() if doc["env"].get("scope") == "sweep"]
DB = load()


def test_a_report_is_committed():
    assert RULE_REPORTS, "docs/report/ holds no report of the rules (opscan report --output-format json)"
    for name in RULE_REPORTS:
        assert (ROOT / "docs" / "report" / name).with_suffix(".md").exists(), f"{name} has no markdown twin"


@pytest.mark.parametrize("name", RULE_REPORTS)
@pytest.mark.parametrize("rule", DB.ops, ids=[op.id for op in DB.ops])
def test_committed_report_agrees_with_the_rules(name, rule):
    doc = DOCS[name]
    version = doc["env"]["rules_torch"]
    rows = [r for r in ops_rows(doc) if r["source"] == "rule" and r["rule"] == rule.id]
    for device in rule.devices:
        own = [r for r in rows if r["device"] == device and r["dtype"] == rule.dtypes[0]]
        assert len(own) == 1, f"{name} has no row for {rule.id} on {device}: regenerate it"
        (row,) = own
        raises = rule.raises_on(version, device)
        assert row["expected"] == ("raises" if raises else "no alert"), f"{name}: the rules changed since it was made"
        if row["measured"]:
            assert row["strict"] == ("raises" if raises else "no alert"), f"{name}: {row['note']}"
            if raises:
                assert row["caller"] in rule.callers
        else:
            assert row["strict"] == "not measured" and row["note"] == "from the rule database, not measured here"


@pytest.mark.parametrize("name", SWEEPS)
def test_committed_sweep_says_how_much_ran(name):
    env = DOCS[name]["env"]
    rows = ops_rows(DOCS[name])
    assert env["sweep_done"] == len(rows) <= env["sweep_cases"]
    if env["sweep_done"] < env["sweep_cases"]:
        assert env["sweep"].startswith("partial: ")
    else:
        assert env["sweep"].startswith("complete: ")
    assert all(r["measured"] is True for r in rows)
