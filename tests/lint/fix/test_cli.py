"""`opscan lint --fix / --diff / --show-fixes / --unsafe-fixes`: flags, output, exit codes and file safety."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from opscan import fsutil
from tests.lint.fix.helpers import FIX_FIXTURES, opscan

ROOT = Path(__file__).resolve().parents[3]
SEEDS_ONLY = FIX_FIXTURES / "safe" / "det001_module_level.in.py"  # DET001 + DET002, both safe
WARN_ONLY = FIX_FIXTURES / "unsafe" / "det006_warn_only.in.py"  # DET006 only, unsafe

UNFIXABLE = """import os
import random

os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"

import torch

torch.manual_seed(0)
print(random.random())
"""  # DET001 (fixable) and DET009 (no fix)


def put(folder: Path, source: Path | str, name: str = "train.py") -> Path:
    path = folder / name
    if isinstance(source, Path):
        shutil.copyfile(source, path)
    else:
        path.write_text(source)
    return path


def expected(case: Path) -> bytes:
    return case.with_name(case.name.replace(".in.py", ".out.py")).read_bytes()


# ---------------------------------------------------------------- --diff


def test_diff_prints_a_unified_diff_and_writes_nothing(tmp_path):
    path = put(tmp_path, SEEDS_ONLY)
    before = path.read_bytes()
    run = opscan(tmp_path, "lint", "--diff", "--no-cache", "train.py")
    assert run.rc == 1
    assert path.read_bytes() == before
    assert run.out.startswith("--- train.py\n+++ train.py\n@@ ")
    assert "+torch.use_deterministic_algorithms(True)\n" in run.out
    assert '+os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")\n' in run.out
    assert "Would fix 2 errors." in run.err  # stdout stays a clean patch


def test_diff_writes_its_report_to_the_output_file(tmp_path):
    """As ruff: the patch stays on stdout, and -o FILE gets the report (the summary line) in --output-format.

    -o was ignored: the summary went to stderr and FILE was never written. A missing path beside the others was
    dropped without a word, and --exit-zero did not cover the diff's exit of 1. Beside a missing path, the
    summary said "nothing found in the rest", then "Would fix 2 errors.".
    """
    put(tmp_path, SEEDS_ONLY)
    alone = opscan(tmp_path, "lint", "--diff", "--no-cache", "train.py")
    run = opscan(tmp_path, "lint", "--diff", "--no-cache", "-o", "report.txt", "train.py")
    assert (run.rc, run.out, run.err) == (1, alone.out, "")
    assert (tmp_path / "report.txt").read_text() == "Would fix 2 errors.\n"
    run = opscan(tmp_path, "lint", "--diff", "--no-cache", "--output-format", "json", "-o", "report.json", "train.py")
    assert (run.rc, run.out, run.err) == (1, alone.out, "")
    assert json.loads((tmp_path / "report.json").read_text()) == []  # no findings: --diff shows none, as ruff's
    run = opscan(tmp_path, "lint", "--diff", "--no-cache", "-o", "report.txt", "train.py", "missing.py")
    assert (run.rc, run.out) == (2, alone.out)
    assert (tmp_path / "report.txt").read_text() == (
        "error: no such file or directory: missing.py\n1 problem stopped part of the run.\nWould fix 2 errors.\n"
    )
    assert run.err == "opscan: error: no such file or directory: missing.py\n"
    (tmp_path / "report.txt").write_text("last good report\n")
    run = opscan(tmp_path, "lint", "--diff", "--no-cache", "-o", "report.txt", "missing.py")
    assert run.rc == 2 and (tmp_path / "report.txt").read_text() == "last good report\n"
    run = opscan(tmp_path, "lint", "--diff", "--exit-zero", "--no-cache", "train.py")
    assert (run.rc, run.out, run.err) == (0, alone.out, "Would fix 2 errors.\n")


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs patch(1)")
def test_diff_applies_to_the_same_result_as_fix(tmp_path):
    for case in (SEEDS_ONLY, FIX_FIXTURES / "safe" / "det001_det002_crlf.in.py"):
        path = put(tmp_path, case)
        diff = opscan(tmp_path, "lint", "--diff", "--no-cache", "train.py").out
        (tmp_path / "fix.patch").write_bytes(diff.encode())
        subprocess.run(["patch", "-s", "-p0", "-i", "fix.patch", "--binary"], cwd=tmp_path, check=True)
        assert path.read_bytes() == expected(case)


def test_diff_without_fixes_exits_0(tmp_path):
    put(tmp_path, FIX_FIXTURES / "safe" / "clean.in.py")
    run = opscan(tmp_path, "lint", "--diff", "--no-cache", "train.py")
    assert (run.rc, run.out) == (0, "")


def test_diff_counts_unsafe_fixes_it_left_out(tmp_path):
    put(tmp_path, WARN_ONLY)
    run = opscan(tmp_path, "lint", "--diff", "--no-cache", "train.py")
    assert (run.rc, run.out) == (0, "")
    assert "No errors would be fixed (2 fixes available with `--unsafe-fixes`)." in run.err
    run = opscan(tmp_path, "lint", "--diff", "--unsafe-fixes", "--no-cache", "train.py")
    assert run.rc == 1 and "-torch.use_deterministic_algorithms(True, warn_only=True)" in run.out


# ---------------------------------------------------------------- --fix, --show-fixes, --unsafe-fixes


def test_show_fixes_lists_what_was_fixed(tmp_path):
    put(tmp_path, SEEDS_ONLY)
    run = opscan(tmp_path, "lint", "--fix", "--show-fixes", "--no-cache", "train.py")
    assert run.rc == 0
    assert (
        "Fixed 2 errors:\n"
        "- train.py:\n"
        "    1 \u00d7 DET001 (seed-without-determinism)\n"
        "    1 \u00d7 DET002 (missing-cublas-workspace-config)\n"
    ) in run.out
    assert run.out.rstrip().endswith("All checks passed!")


def test_fix_reports_count_without_show_fixes(tmp_path):
    put(tmp_path, SEEDS_ONLY)
    run = opscan(tmp_path, "lint", "--fix", "--no-cache", "train.py")
    assert run.out == "Fixed 2 errors.\nAll checks passed!\n"


def test_fix_says_nothing_of_python_warnings_about_the_users_code(tmp_path):
    """An invalid escape is a SyntaxWarning that Python 3.12+ prints on parsing; plain lint keeps it quiet, so must --fix."""
    put(tmp_path, 'import re\nimport torch\n\nDIGITS = re.compile("\\d+")\ntorch.manual_seed(0)\n')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = opscan(tmp_path, "lint", "--fix", "--no-cache", "train.py")
    assert run.rc == 0 and "Fixed" in run.out
    assert [str(w.message) for w in caught if "escape sequence" in str(w.message)] == []


def test_unsafe_fixes_need_the_flag(tmp_path):
    path = put(tmp_path, WARN_ONLY)
    before = path.read_bytes()
    run = opscan(tmp_path, "lint", "--fix", "--no-cache", "train.py")
    assert path.read_bytes() == before
    assert run.rc == 1 and "DET006" in run.out and "hidden fixes can be enabled with the `--unsafe-fixes` option" in run.out
    assert "[*]" not in run.out  # only safe fixes are marked fixable
    run = opscan(tmp_path, "lint", "--fix", "--unsafe-fixes", "--no-cache", "train.py")
    assert run.rc == 0 and path.read_bytes() == expected(WARN_ONLY)


def test_text_output_marks_safe_fixes(tmp_path):
    put(tmp_path, SEEDS_ONLY)
    run = opscan(tmp_path, "lint", "--no-cache", "train.py")
    assert run.out.count(" [*] ") == 2 and "[*] 2 fixable with the `--fix` option." in run.out


# ---------------------------------------------------------------- exit codes


def test_exit_code_reflects_what_remains(tmp_path):
    put(tmp_path, UNFIXABLE)
    run = opscan(tmp_path, "lint", "--fix", "--no-cache", "train.py")
    assert run.rc == 1
    assert "DET009" in run.out and "DET001" not in run.out and "Fixed 1 error." in run.out


def test_all_fixed_exits_0_unless_asked(tmp_path):
    put(tmp_path, SEEDS_ONLY)
    assert opscan(tmp_path, "lint", "--fix", "--no-cache", "train.py").rc == 0
    put(tmp_path, SEEDS_ONLY)
    run = opscan(tmp_path, "lint", "--fix", "--exit-non-zero-on-fix", "--no-cache", "train.py")
    assert (run.rc, run.out) == (1, "Fixed 2 errors.\n")  # not "All checks passed!" beside exit 1
    # Nothing left to fix: --exit-non-zero-on-fix has nothing to report.
    run = opscan(tmp_path, "lint", "--fix", "--exit-non-zero-on-fix", "--no-cache", "train.py")
    assert (run.rc, run.out) == (0, "All checks passed!\n")


def test_exit_zero_wins(tmp_path):
    put(tmp_path, UNFIXABLE)
    assert opscan(tmp_path, "lint", "--fix", "--exit-zero", "--no-cache", "train.py").rc == 0


def test_fix_with_json_output_reports_what_remains(tmp_path):
    put(tmp_path, UNFIXABLE)
    run = opscan(tmp_path, "lint", "--fix", "--output-format", "json", "--no-cache", "train.py")
    assert [f["code"] for f in json.loads(run.out)] == ["DET009"]


# ---------------------------------------------------------------- file safety


def test_file_changed_on_disk_is_reported_not_overwritten(tmp_path, monkeypatch):
    path = put(tmp_path, SEEDS_ONLY)
    edited = path.read_bytes() + b"# edited in another window\n"
    real_mkstemp = fsutil.tempfile.mkstemp

    def someone_saves_first(*args, **kwargs):
        path.write_bytes(edited)  # between the fixer's read and its write
        return real_mkstemp(*args, **kwargs)

    monkeypatch.setattr(fsutil.tempfile, "mkstemp", someone_saves_first)
    run = opscan(tmp_path, "lint", "--fix", "--no-cache", "train.py")
    assert path.read_bytes() == edited
    assert "warning: not fixed: train.py changed on disk since it was read" in run.err
    assert run.rc == 1  # the findings are still there
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]  # no temporary file left


def test_file_changed_between_lint_and_fix_is_refused(tmp_path):
    from opscan import config as config_mod
    from opscan.lint import engine
    from opscan.lint import fix as fixer
    from opscan.rules import NEWEST_TORCH
    from tests.lint.fix.helpers import chdir

    path = put(tmp_path, SEEDS_ONLY)
    with chdir(tmp_path):
        report = engine.run(["train.py"], config_mod.load(["train.py"], None), torch_version=NEWEST_TORCH, use_cache=False)
        moved = b"# a new first line moves every line down\n" + path.read_bytes()
        path.write_bytes(moved)
        outcome = fixer.apply(report, unsafe=False, write=True)
    assert path.read_bytes() == moved
    assert outcome.notices == ["warning: not fixed: train.py: changed on disk since it was read"]
    assert not outcome.fixed


def test_mode_is_kept(tmp_path):
    path = put(tmp_path, SEEDS_ONLY)
    path.chmod(0o751)
    opscan(tmp_path, "lint", "--fix", "--no-cache", "train.py")
    assert path.read_bytes() == expected(SEEDS_ONLY)
    assert stat.S_IMODE(path.stat().st_mode) == 0o751


def test_file_with_det000_is_never_rewritten(tmp_path):
    broken = put(tmp_path, "import torch\ntorch.manual_seed(0\n", "broken.py")
    before = broken.read_bytes()
    put(tmp_path, SEEDS_ONLY)
    run = opscan(tmp_path, "lint", "--fix", "--no-cache", ".")
    assert broken.read_bytes() == before
    assert (tmp_path / "train.py").read_bytes() == expected(SEEDS_ONLY)
    assert run.rc == 1 and "DET000" in run.out


def test_symlink_is_followed_and_kept(tmp_path):
    real = put(tmp_path, SEEDS_ONLY, "real_train.py")
    (tmp_path / "link").mkdir()
    link = tmp_path / "link" / "train.py"
    link.symlink_to(real)
    opscan(tmp_path, "lint", "--fix", "--no-cache", "link/train.py")
    assert link.is_symlink() and real.read_bytes() == expected(SEEDS_ONLY)


def test_unwritable_folder_is_an_error(tmp_path, monkeypatch):
    path = put(tmp_path, SEEDS_ONLY)
    before = path.read_bytes()

    def no_write_permission(*args, **kwargs):  # chmod is no test under root: fail as the OS would
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(fsutil.tempfile, "mkstemp", no_write_permission)
    run = opscan(tmp_path, "lint", "--fix", "--no-cache", "train.py")
    assert path.read_bytes() == before
    assert "error: cannot write train.py: Permission denied; its fixes were not applied" in run.out and "Traceback" not in run.err
    assert run.rc == 2


def test_read_only_file_is_an_error_and_the_others_are_fixed(tmp_path, monkeypatch):
    """As ruff reports an I/O error: it was a warning, and the run exited 1 as if the findings alone remained."""
    locked = put(tmp_path, SEEDS_ONLY, "locked.py")
    put(tmp_path, SEEDS_ONLY)
    before = locked.read_bytes()
    access = os.access

    def read_only(path, mode, *args, **kwargs):  # chmod 444 is no test under root: refuse as the OS would
        return False if mode == os.W_OK and os.path.basename(path) == "locked.py" else access(path, mode, *args, **kwargs)

    monkeypatch.setattr(fsutil.os, "access", read_only)
    run = opscan(tmp_path, "lint", "--fix", "--no-cache", "--output-format", "json", "locked.py", "train.py")
    assert run.rc == 2 and "Traceback" not in run.err
    assert run.err == "opscan: error: cannot write locked.py: Permission denied; its fixes were not applied\n"
    assert locked.read_bytes() == before and (tmp_path / "train.py").read_bytes() == expected(SEEDS_ONLY)
    assert {f["path"] for f in json.loads(run.out)} == {"locked.py"}  # its findings remain
    assert not any(f["fixable"] for f in json.loads(run.out))  # --fix could not apply them


def test_byte_order_mark_is_kept(tmp_path):
    path = tmp_path / "train.py"
    path.write_bytes(b"\xef\xbb\xbf" + SEEDS_ONLY.read_bytes())
    opscan(tmp_path, "lint", "--fix", "--no-cache", "train.py")
    assert path.read_bytes() == b"\xef\xbb\xbf" + expected(SEEDS_ONLY)


def test_file_libcst_cannot_reproduce_is_left_alone(tmp_path):
    path = tmp_path / "train.py"
    path.write_bytes(b"import torch\rtorch.manual_seed(0)\r")  # old Mac line endings: Python reads them
    run = opscan(tmp_path, "lint", "--fix", "--no-cache", "train.py")
    assert path.read_bytes() == b"import torch\rtorch.manual_seed(0)\r"
    assert "warning: not fixed: train.py: libcst does not reproduce it byte for byte" in run.err
    assert run.rc == 1 and "Traceback" not in run.err


def test_long_expression_chain_is_fixed(tmp_path):
    """libcst recurses per level; the fixer gives it the stack for a few hundred levels."""
    path = tmp_path / "train.py"
    chain = "x = " + "+".join(["1"] * 600) + "\n"
    path.write_text("import torch\ntorch.manual_seed(0)\n" + chain)
    limit = sys.getrecursionlimit()
    run = opscan(tmp_path, "lint", "--fix", "--no-cache", "train.py")
    assert run.rc == 0, run.err
    assert path.read_text().endswith("torch.manual_seed(0)\ntorch.use_deterministic_algorithms(True)\n" + chain)
    assert sys.getrecursionlimit() == limit  # no global state left changed


TOO_DEEP = "x = " + "+".join(["1"] * 1500) + "\n"  # 1502 levels: more than the fixer rewrites


def test_too_deep_file_is_left_alone(tmp_path):
    path = tmp_path / "train.py"
    source = "import torch\ntorch.manual_seed(0)\n" + TOO_DEEP
    path.write_text(source)
    run = opscan(tmp_path, "lint", "--fix", "--no-cache", "train.py")
    assert path.read_text() == source
    assert "warning: not fixed: train.py: nested 1502 levels deep" in run.err and "Traceback" not in run.err
    assert run.rc == 1
    # --fix has just left it alone: its finding is not offered as "[*] fixable with --fix" (it was)
    assert "train.py:2:1: DET001 Seeds" in run.out and "[*]" not in run.out and "fixable" not in run.out


def test_fix_counts_only_the_fixes_it_applied(tmp_path):
    """Fixed, fixable and the hidden-fix hint count what --fix did and can do, not a file it left alone."""
    put(tmp_path, SEEDS_ONLY)
    deep = put(tmp_path, SEEDS_ONLY.read_text() + TOO_DEEP, "deep.py")
    before = deep.read_bytes()
    run = opscan(tmp_path, "lint", "--fix", "--show-fixes", "--no-cache", "train.py", "deep.py")
    assert run.rc == 1 and deep.read_bytes() == before
    fixed, remaining = run.out.split("Fixed ")[1], run.out.split("\nFixed ")[0]
    assert fixed.startswith("2 errors:\n- train.py:\n") and "deep.py" not in fixed  # DET001 and DET002
    assert remaining.count(": DET") == 2 and remaining.count("deep.py:") == 2
    assert "[*]" not in run.out and "fixable" not in run.out
    deep.write_bytes(before)
    run = opscan(tmp_path, "lint", "--fix", "--no-cache", "--statistics", "deep.py")
    assert "DET001\t    seed-without-determinism" in run.out
    run = opscan(tmp_path, "lint", "--fix", "--no-cache", "--output-format", "json", "deep.py")
    assert [(f["code"], f["fixable"], f["fix"]) for f in json.loads(run.out)] == [("DET001", False, None), ("DET002", False, None)]


def test_fix_withdraws_the_unsafe_fixes_of_a_file_it_left_alone(tmp_path):
    source = WARN_ONLY.read_text().replace(":4096:8", ":4096:2") + TOO_DEEP  # DET003 (safe), DET006 twice (unsafe)
    put(tmp_path, source)
    run = opscan(tmp_path, "lint", "--fix", "--no-cache", "--torch-version", "2.5", "train.py")
    assert run.rc == 1 and run.out.count(": DET") == 3
    assert "[*]" not in run.out and "hidden fix" not in run.out
    run = opscan(tmp_path, "lint", "--diff", "--no-cache", "--torch-version", "2.5", "train.py")
    assert "No errors would be fixed.\n" in run.err  # not "(2 fixes available with `--unsafe-fixes`)"


def test_plain_lint_does_not_import_libcst(tmp_path):
    put(tmp_path, SEEDS_ONLY)
    code = "import sys; from opscan import cli; cli.main(['lint', '--no-cache', 'train.py']); assert 'libcst' not in sys.modules"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------- pre-commit


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_pre_commit_hook_with_fix_fails_then_passes(tmp_path):
    """pre-commit fails a hook that modified files, and passes once nothing is left to fix."""
    pre_commit = Path(sys.executable).with_name("pre-commit")
    if not pre_commit.exists():
        pytest.skip("pre-commit is not installed in this environment")
    repo = tmp_path / "repo"
    repo.mkdir()
    put(repo, SEEDS_ONLY)
    (repo / ".pre-commit-config.yaml").write_text(
        "repos:\n"
        "  - repo: local\n"
        "    hooks:\n"
        "      - id: opscan-lint\n"
        "        name: opscan lint --fix\n"
        f"        entry: {sys.executable} -m opscan lint --fix --no-cache --force-exclude\n"
        "        language: system\n"
        "        types: [python]\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PRE_COMMIT_HOME": str(tmp_path / "cache"),
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    }  # fmt: skip

    def git(*args):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "bad script")
    first = subprocess.run(
        [str(pre_commit), "run", "--all-files"], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    assert first.returncode == 1, first.stdout + first.stderr
    assert "files were modified by this hook" in first.stdout
    assert (repo / "train.py").read_bytes() == expected(SEEDS_ONLY)
    git("add", ".")
    second = subprocess.run(
        [str(pre_commit), "run", "--all-files"], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    assert second.returncode == 0, second.stdout + second.stderr
