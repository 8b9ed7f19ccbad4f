"""Fixture-driven rule tests.

Each `tests/fixtures/lint/**/NAME.py` has a sibling `NAME.expected` listing the
findings, one `LINE:COL CODE` per line (an empty file: no findings). Each
folder `tests/fixtures/lint/**/project_*/` is linted as a whole and has an
`expected` file of `path:LINE:COL CODE` lines. A `NAME.toml` beside a file
fixture may set `torch-version`.

Set OPSCAN_UPDATE_FIXTURES=1 to rewrite the expected files from the current output
(then review the diff: an expected file is a claim about what is true).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.lint.helpers import lint_lines, read_expected

LINT_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lint"
UPDATE = os.environ.get("OPSCAN_UPDATE_FIXTURES") == "1"


def _file_fixtures():
    for path in sorted(LINT_FIXTURES.rglob("*.py")):
        if any(part.startswith("project_") for part in path.relative_to(LINT_FIXTURES).parts):
            continue
        yield pytest.param(path, id=str(path.relative_to(LINT_FIXTURES)))


def _project_fixtures():
    for path in sorted(LINT_FIXTURES.rglob("project_*")):
        if path.is_dir():
            yield pytest.param(path, id=str(path.relative_to(LINT_FIXTURES)))


def _torch_version(path: Path):
    import re

    cfg = path.with_suffix(".toml")
    if cfg.exists():
        m = re.search(r'torch-version\s*=\s*"([^"]+)"', cfg.read_text())
        if m:
            return m.group(1)
    return None


@pytest.mark.parametrize("fixture", list(_file_fixtures()))
def test_file_fixture(fixture: Path):
    expected_file = fixture.with_suffix(".expected")
    kwargs = {}
    if _torch_version(fixture):
        kwargs["torch_version"] = _torch_version(fixture)
    got = lint_lines(fixture, with_path=False, **kwargs)
    if UPDATE:
        expected_file.write_text("".join(line + "\n" for line in got))
    assert expected_file.exists(), f"missing {expected_file.name}"
    assert got == read_expected(expected_file)


@pytest.mark.parametrize("fixture", list(_project_fixtures()))
def test_project_fixture(fixture: Path):
    expected_file = fixture / "expected"
    got = lint_lines(fixture, with_path=True)
    if UPDATE:
        expected_file.write_text("".join(line + "\n" for line in got))
    assert got == read_expected(expected_file)


def test_fixtures_exist_for_every_rule():
    from opscan.lint.rules import lint_codes

    text = "\n".join(p.read_text() for p in LINT_FIXTURES.rglob("expected*")) + "\n".join(
        p.read_text() for p in LINT_FIXTURES.rglob("*.expected")
    )
    for code in lint_codes():
        assert code in text, f"no fixture expects {code}"
