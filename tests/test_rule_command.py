"""`opscan rule`: a rule's documentation, or the list of every rule, as ruff's `rule` prints them."""

from __future__ import annotations

import json

import pytest

from opscan.cli import main
from opscan.registry import all_rules


@pytest.mark.parametrize("code", sorted(all_rules()))
def test_every_rule_prints_its_whole_documentation(capsys, code):
    assert main(["rule", code.lower()]) == 0
    out = capsys.readouterr().out
    info = all_rules()[code]
    assert out.startswith(f"# {info.name} ({code})\n")
    for title, body in info.sections:
        assert f"## {title}\n{body}" in out


def test_all_lists_every_code_once(capsys):
    assert main(["rule", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[2:]] == sorted(all_rules())


def test_json(capsys, tmp_path):
    assert main(["rule", "DET001", "--output-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["code"] == "DET001" and doc["command"] == "lint" and "## Why is this bad?" in doc["explanation"]
    target = tmp_path / "rules.json"
    assert main(["rule", "--all", "--output-format", "json", "-o", str(target)]) == 0
    assert [r["code"] for r in json.loads(target.read_text())] == sorted(all_rules())


@pytest.mark.parametrize("argv, message", [(["rule"], "give a rule CODE or --all"), (["rule", "DET999"], "unknown rule 'DET999'"), (["rule", "DET001", "--all"], "a rule CODE and --all cannot be combined: give one"), (["rule", "--all", "DET001"], "a rule CODE and --all cannot be combined: give one")])
def test_bad_requests(capsys, argv, message):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""
