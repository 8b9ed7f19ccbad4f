"""The fixes keep a file that ruff's import rules accept acceptable: `ruff check --select E402,I`.

For every golden fix case (tests/fixtures/fix/), when its input passes
`ruff check --select E402,I`, its fixed output (the `.out.py` files, which
test_golden.py checks are what `--fix` writes) must pass too. The DET002 fix
puts `os.environ.setdefault(...)` between imports, which E402 allows for
`os.environ`; isort (I001) then wants `import os` in sorted place and a blank
line after the import block, and an added `import torch` in its section.

Skipped where ruff is not installed (requirements-test.txt installs it).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from tests.lint.fix.helpers import FIX_FIXTURES, fixture_cases


def _ruff() -> list[str] | None:
    if find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    found = shutil.which("ruff")
    return [found] if found else None


RUFF = _ruff()


def _lay_out(case: Path, dest: Path, suffix: str) -> None:
    """The case's files under their real names, taking NAME`suffix` (".in.py" or ".out.py") as NAME.py."""
    sources = sorted(p for p in case.rglob("*") if p.is_file()) if case.is_dir() else [case.with_name(case.name.replace(".in.py", suffix))]
    root = case if case.is_dir() else case.parent
    for src in sources:
        name = src.name
        if name.endswith((".in.py", ".out.py")):
            if not name.endswith(suffix):
                continue
            name = name[: -len(suffix)] + ".py"
        target = dest / src.relative_to(root).parent / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)


def _clean(folder: Path) -> tuple[bool, str]:
    run = subprocess.run(
        [*RUFF, "check", "--no-cache", "--isolated", "--select", "E402,I", "--output-format", "concise", "."],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    return run.returncode == 0, run.stdout + run.stderr


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed")
@pytest.mark.parametrize("case", [pytest.param(c, id=str(c.relative_to(FIX_FIXTURES))) for c, _ in fixture_cases()])
def test_fix_keeps_ruff_import_rules_clean(case, tmp_path):
    before, after = tmp_path / "in", tmp_path / "out"
    _lay_out(case, before, ".in.py")
    _lay_out(case, after, ".out.py")
    clean, _ = _clean(before)
    if not clean:
        pytest.skip("the input itself does not pass ruff's E402/I rules")
    clean, report = _clean(after)
    assert clean, f"the fix made a ruff-clean file fail `ruff check --select E402,I`:\n{report}"


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed")
def test_most_inputs_are_checked(tmp_path):
    # The test above skips a case whose input already fails; it must not skip most of them.
    clean = 0
    for i, (case, _) in enumerate(fixture_cases()):
        _lay_out(case, tmp_path / str(i), ".in.py")
        clean += _clean(tmp_path / str(i))[0]
    assert clean >= 25
