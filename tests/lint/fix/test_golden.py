"""Golden tests for `opscan lint --fix`: each NAME.in.py, fixed, must equal NAME.out.py byte for byte.

Cases live in tests/fixtures/fix/safe/ (run with `--fix`) and
tests/fixtures/fix/unsafe/ (run with `--fix --unsafe-fixes`). A case is a file
`NAME.in.py` with `NAME.out.py` beside it, or a folder (a small project) in
which every `X.in.py` has an `X.out.py` and every other file must not change.
Fixture bytes are compared exactly: CRLF and Latin-1 cases are stored as such
(.gitattributes keeps git from converting them).

Set OPSCAN_UPDATE_FIXTURES=1 to rewrite the .out.py files from the current
output, then review the diff: an .out.py is a claim about what the fix does.
"""

from __future__ import annotations

import ast
import os

import pytest

from tests.lint.fix.helpers import FIX_FIXTURES, copy_case, fix, fixture_cases

UPDATE = os.environ.get("OPSCAN_UPDATE_FIXTURES") == "1"


@pytest.mark.parametrize("case,unsafe", [pytest.param(c, u, id=str(c.relative_to(FIX_FIXTURES))) for c, u in fixture_cases()])
def test_fix_matches_golden(case, unsafe, tmp_path):
    pairs = copy_case(case, tmp_path)
    originals = {path: path.read_bytes() for path, _ in pairs}
    run = fix(tmp_path, unsafe=unsafe)
    assert "Traceback" not in run.err, run.err
    for path, expected in pairs:
        got = path.read_bytes()
        if expected is None:
            assert got == originals[path], f"{path.name} is not a fix target and must not change"
            continue
        if UPDATE:
            expected.write_bytes(got)
            continue
        assert expected.exists(), f"missing {expected.name}; run with OPSCAN_UPDATE_FIXTURES=1 and review it"
        assert got == expected.read_bytes(), f"{path.name}: fixed output differs from {expected.name}:\n{run.out}{run.err}"
        ast.parse(got)
    # Every case but `clean` and a script that never runs torch (no finding, so no fix) has something to fix.
    changed = any(path.read_bytes() != originals[path] for path, _ in pairs)
    assert changed == (case.name not in ("clean.in.py", "det001_stdlib_only.in.py"))


def test_every_case_has_output():
    for case, _ in fixture_cases():
        inputs = list(case.rglob("*.in.py")) if case.is_dir() else [case]
        assert inputs, f"{case} has no .in.py"
        for src in inputs:
            assert src.with_name(src.name[: -len(".in.py")] + ".out.py").exists(), src


def test_crlf_and_latin1_fixtures_are_stored_as_such():
    """git must not normalise these: the test would then check nothing."""
    crlf = (FIX_FIXTURES / "safe" / "det001_det002_crlf.in.py").read_bytes()
    assert b"\r\n" in crlf and b"\n" not in crlf.replace(b"\r\n", b"")
    latin1 = (FIX_FIXTURES / "safe" / "det002_shebang_cookie.in.py").read_bytes()
    assert b"\xe9" in latin1
