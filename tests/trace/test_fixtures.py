"""Fixture-driven: each `tests/fixtures/scan/NAME.py` beside `NAME.expected.json` (the findings it must give).

These run on the CPU, where the real alerts of `put_` and `max_unpool` fire,
and pin the whole finding: op, caller, phase, module path and class, file,
line and line text (for backward ops, the forward line that made the node),
shapes, dtypes and count.
"""

from __future__ import annotations

import json

import pytest

from tests.trace.helpers import FIXTURES, expected, project, scan
from tests.util import needs_torch

NAMES = sorted(p.name.removesuffix(".expected.json") for p in FIXTURES.glob("*.expected.json"))


def test_fixtures_exist():
    assert {"unpool_model", "put_model", "clean_model", "function_model"} <= set(NAMES)


@needs_torch
@pytest.mark.parametrize("name", NAMES)
def test_fixture_findings(capsys, name):
    rc, out, err = scan(capsys, f"{name}.py:build", "--device", "cpu", "--output-format", "json")
    doc = json.loads(out)
    assert doc["errors"] == []
    assert project(doc["findings"]) == expected(name)
    want = expected(name)
    assert rc == (1 if want else 0)
    for finding in doc["findings"]:
        assert finding["code"] == "DET100"
        assert finding["target"] == f"{name}.py:build"
        assert finding["path"] == finding["file"] and finding["line"] >= 1
        assert finding["help"] and finding["help_code"]
    assert "scanned on the CPU" in err  # json on stdout: the notice is repeated on stderr
