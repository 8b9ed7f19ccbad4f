"""docs/rules.md is generated from the rules' own docstrings and must be up to date."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from opscan.lint.rules import lint_codes
from opscan.registry import all_rules

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gen_rule_docs.py"
DOC = ROOT / "docs" / "rules.md"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_rule_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rules_md_is_up_to_date():
    expected = _generator().render()
    assert DOC.read_text(encoding="utf-8") == expected, "docs/rules.md is stale: run `python scripts/gen_rule_docs.py`"


def test_check_mode_reports_a_stale_file(tmp_path):
    stale = tmp_path / "rules.md"
    stale.write_text("# Rules\n")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check", "--output", str(stale)], capture_output=True, text=True)
    assert proc.returncode == 1 and "out of date" in proc.stderr
    proc = subprocess.run([sys.executable, str(SCRIPT), "--output", str(stale)], capture_output=True, text=True)
    assert proc.returncode == 0
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check", "--output", str(stale)], capture_output=True, text=True)
    assert proc.returncode == 0
    assert stale.read_text() == DOC.read_text()


@pytest.mark.parametrize("code", sorted(all_rules()))
def test_every_rule_is_documented_in_full(code):
    info = all_rules()[code]
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f'<a id="{code.lower()}"></a>\n', 1)[1].split("<a id=", 1)[0]
    assert section.startswith(f"## {code} {info.name}\n\n{info.summary}\n")
    for title in ("What it does", "Why is this bad?", "Example", "Use instead", "Fix"):
        assert info.section(title).strip(), f"{code} has no '{title}' text in its docstring"
        assert f"\n### {title}\n\n" in section
    # A bad and a good example, as code (the good one may be a shell line, as for DET008).
    assert "```python" in info.section("Example") and "```" in info.section("Use instead")
    assert re.search(rf"\| \[{code}\]\(#{code.lower()}\) \| {re.escape(info.name)} \|", text)


def test_every_lint_code_is_listed():
    text = DOC.read_text(encoding="utf-8")
    for code in lint_codes():
        assert f"## {code} " in text


def test_rendering_does_not_depend_on_the_working_directory(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
