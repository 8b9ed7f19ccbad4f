"""Fixture-driven rule tests: each fixture's findings, whole, against its golden file.

Inputs and their golden files:

- each `tests/fixtures/lint/**/NAME.py` (outside a project folder) is linted
  alone, from its own folder, and its golden file is the sibling `NAME.expected`;
  a `NAME.toml` beside it may set `torch-version`;
- each folder `tests/fixtures/lint/**/project_*/` is linted as a whole (`.`, from
  inside it) and its golden file is `project_*/expected`;
- `tests/fixtures/output/train.py` is linted like a file fixture; its golden
  file `train.expected` also gives `tests/lint/test_output_formats.py` the
  findings every output format must report.

Golden format (tests/fixtures/lint/README.md has it too): UTF-8, one line per
line of output, no comments. For each finding, sorted as the text format sorts
them, the lines `opscan lint` prints for it in text format, then, if it
offers a fix, one line of two spaces and `fix (safe): DESCRIPTION` or
`fix (unsafe): DESCRIPTION`:

    seed_without_determinism.py:7:1: DET001 [*] Seeds with `random.seed` but never enables determinism; ...
      fix (safe): Insert `torch.use_deterministic_algorithms(True)` after seeding
    pkg/helpers.py:8:5: DET006 `torch.use_deterministic_algorithms` enables determinism in warn-only mode, ...
      fix (unsafe): Enable determinism strictly (drop warn_only)

Paths are as that lint run prints them, relative to the folder it runs in
(the file fixture's own folder, or the project folder), so the files do not
depend on where the checkout is. No summary line. A fixture with no findings
has an empty golden file.

A message, fix description or applicability that changes without its golden
file fails here with a diff. To accept the change, run
`python scripts/gen_golden.py` (which lints exactly as these tests do, through
`tests/lint/helpers.py`) and review the diff: a golden file is a claim about
what is true. `python scripts/gen_golden.py --check` lists stale ones.
OPSCAN_UPDATE_FIXTURES=1 still rewrites the golden files of the tests it runs.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from tests.lint.helpers import (
    FIXTURES,
    GOLDEN_HINT,
    LINT_FIXTURES,
    OUTPUT_FIXTURE,
    file_fixtures,
    fixture_id,
    golden_fixtures,
    golden_findings,
    golden_path,
    golden_text,
    lint_lines,
    orphaned_goldens,
    project_fixtures,
    read_expected,
    read_golden,
    torch_version_for,
)

UPDATE = os.environ.get("OPSCAN_UPDATE_FIXTURES") == "1"


def _params(fixtures):
    return [pytest.param(path, id=fixture_id(path)) for path in fixtures]


def _check_golden(fixture: Path) -> str:
    """Compare the fixture's whole findings text with its golden file; return the text."""
    expected_file = golden_path(fixture)
    got = golden_text(fixture)
    if UPDATE:
        expected_file.write_text(got, encoding="utf-8", newline="\n")
    assert expected_file.exists(), f"missing {expected_file.relative_to(FIXTURES)}; {GOLDEN_HINT}"
    want = read_golden(expected_file)
    if got != want:
        name = expected_file.relative_to(FIXTURES).as_posix()
        diff = "".join(
            difflib.unified_diff(
                want.splitlines(keepends=True), got.splitlines(keepends=True), f"{name} (golden)", f"{name} (opscan now)"
            )
        )
        pytest.fail(f"the findings of {fixture_id(fixture)} differ from its golden file:\n{diff}\n{GOLDEN_HINT}", pytrace=False)
    return got


@pytest.mark.parametrize("fixture", _params([*file_fixtures(), OUTPUT_FIXTURE]))
def test_file_fixture(fixture: Path):
    text = _check_golden(fixture)
    expected_file = golden_path(fixture)
    kwargs = {}
    if torch_version_for(fixture):
        kwargs["torch_version"] = torch_version_for(fixture)
    got = lint_lines(fixture, with_path=False, **kwargs)
    assert got == read_expected(expected_file) == golden_findings(text, with_path=False)


@pytest.mark.parametrize("fixture", _params(project_fixtures()))
def test_project_fixture(fixture: Path):
    text = _check_golden(fixture)
    expected_file = golden_path(fixture)
    got = lint_lines(fixture, with_path=True)
    assert got == read_expected(expected_file) == golden_findings(text, with_path=True)


def test_golden_set_is_complete():
    """Every fixture input has its golden file, and every golden file has its input."""
    fixtures = golden_fixtures()
    assert file_fixtures() and len(project_fixtures()) >= 10
    missing = [golden_path(f).relative_to(FIXTURES).as_posix() for f in fixtures if not golden_path(f).is_file()]
    assert missing == [], f"fixtures with no golden file: {missing}; {GOLDEN_HINT}"
    orphans = [p.relative_to(FIXTURES).as_posix() for p in orphaned_goldens()]
    assert orphans == [], f"golden files with no fixture (delete them, or restore their input): {orphans}"
    # The generator and this module walk the same set.
    assert len({golden_path(f) for f in fixtures}) == len(fixtures)


def test_golden_files_are_plain_lines():
    """Diff-friendly: UTF-8 with LF endings and a final newline; each fix line right under its finding."""
    for fixture in golden_fixtures():
        path = golden_path(fixture)
        data = path.read_bytes()
        name = path.relative_to(FIXTURES).as_posix()
        text = data.decode("utf-8")
        assert b"\r" not in data and (text == "" or text.endswith("\n")), name
        lines = text.splitlines()
        assert not lines or golden_findings(lines[0], with_path=True), (name, "the first line is no finding")
        for i, line in enumerate(lines):
            if line.startswith("  fix ("):
                assert line.startswith(("  fix (safe): ", "  fix (unsafe): ")), (name, i + 1, line)
                assert not lines[i - 1].startswith("  fix ("), (name, i + 1, "two fix lines for one finding")


def test_fixtures_exist_for_every_rule():
    from opscan.lint.rules import lint_codes

    text = "\n".join(p.read_text() for p in LINT_FIXTURES.rglob("expected*")) + "\n".join(
        p.read_text() for p in LINT_FIXTURES.rglob("*.expected")
    )
    # DET010 is opt-in, so its golden files live beside the --add-noqa ones (tests/lint/test_noqa.py).
    text += "\n".join(p.read_text() for p in (LINT_FIXTURES.parent / "noqa").rglob("*.expected"))
    for code in lint_codes():
        assert code in text, f"no fixture expects {code}"
