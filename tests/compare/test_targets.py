"""Which records are of one target: the target as typed, or its file's real path (the header's `target_file`) with
the same callable or script arguments, so that `../m.py:build` and `m.py:build` of one file are no "different targets"."""

from __future__ import annotations

import pytest

from opscan.compare import compare_records
from opscan.output import render
from tests.compare.records import run, variant
from tests.util import chdir

DIFFERENT = "warning: the records are of different targets"


def _compare(tmp_path, header_a: dict, header_b: dict):
    run(variant(header=header_a), steps=2).write(tmp_path / "a.jsonl")
    run(variant(header=header_b), steps=2).write(tmp_path / "b.jsonl")
    with chdir(tmp_path):
        report = compare_records("a.jsonl", "b.jsonl")
    return report, render(report, "text")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"target": "../m.py:build", "target_file": "/p/m.py"}, {"target": "m.py:build", "target_file": "/p/m.py"}),
        ({"target": "m:build", "target_file": "/p/m.py"}, {"target": "./m.py:build", "target_file": "/p/m.py"}),
        (
            {"target": "../t.py", "kind": "script", "argv": ["--lr", "1"], "target_file": "/p/t.py"},
            {"target": "t.py", "kind": "script", "argv": ["--lr", "1"], "target_file": "/p/t.py"},
        ),
        # Typed alike on two machines: one target, wherever each checkout is.
        ({"target": "m.py:build", "target_file": "/home/a/m.py"}, {"target": "m.py:build", "target_file": "/home/b/m.py"}),
    ],
    ids=["parent folder", "module and file", "script", "two machines"],
)
def test_one_target_typed_two_ways_is_no_difference(tmp_path, a, b):
    report, text = _compare(tmp_path, a, b)
    assert DIFFERENT not in text
    assert "target" not in report.env and "target=" not in text  # not an environment difference either


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"target": "m.py:build", "target_file": "/p/m.py"}, {"target": "m.py:build_v2", "target_file": "/p/m.py"}),
        ({"target": "m.py:build", "target_file": "/p/m.py"}, {"target": "../m.py:build", "target_file": "/q/m.py"}),
        (
            {"target": "t.py", "kind": "script", "argv": ["--lr", "1"], "target_file": "/p/t.py"},
            {"target": "../t.py", "kind": "script", "argv": ["--lr", "2"], "target_file": "/p/t.py"},
        ),
        # Records made before the header had target_file: the target as typed, as before.
        ({"target": "../m.py:build"}, {"target": "m.py:build"}),
    ],
    ids=["another callable", "another file", "other arguments", "older records"],
)
def test_different_targets_are_still_said_as_typed(tmp_path, a, b):
    report, text = _compare(tmp_path, a, b)
    assert f"{DIFFERENT} (a.jsonl: {a['target']}" in text and f"b.jsonl: {b['target']}" in text
