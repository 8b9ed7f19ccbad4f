"""`# noqa` comments: DET010 (unused ones) and `--add-noqa`, on golden fixtures in tests/fixtures/noqa/.

Each input is copied to a temporary folder (with an empty `[tool.opscan]`, so the
repository's own configuration does not apply) and linted there through the CLI:

- `unused.py`, `form_feed.py`, `used_by_helper/`: findings with `--extend-select DET010` against
  `NAME.expected` (the golden format of tests/fixtures/lint/README.md), and the file
  after `--fix` against `NAME.fixed.py`;
- `add*.py`: the file after `--add-noqa` against `NAME.noqa.py`, byte for byte.

OPSCAN_UPDATE_FIXTURES=1 rewrites the golden files; review the diff.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from opscan.cli import main
from tests.util import chdir

ROOT = Path(__file__).resolve().parents[2]
NOQA = ROOT / "tests" / "fixtures" / "noqa"
UPDATE = os.environ.get("OPSCAN_UPDATE_FIXTURES") == "1"
ADD_INPUTS = sorted(p.name for p in NOQA.glob("add*.py") if not p.name.endswith(".noqa.py"))


def _golden(path: Path, actual: bytes) -> None:
    if UPDATE:
        path.write_bytes(actual)
    assert path.exists(), f"{path} is missing: run with OPSCAN_UPDATE_FIXTURES=1 and review it"
    assert actual == path.read_bytes(), f"{path.name} differs"


def golden_text(report) -> str:
    """Each finding's line as the text format prints it, then `  fix (APPLICABILITY): DESCRIPTION`."""
    from opscan.findings import Report
    from opscan.output import render

    out = []
    for f in report.sorted_findings():
        out.append(render(Report("lint", [f]), "text").splitlines()[0])
        if f.fix is not None:
            out.append(f"  fix ({f.fix.applicability}): {f.fix.description}")
    return "".join(line + "\n" for line in out)


def _project(tmp_path: Path, name: str) -> Path:
    src = NOQA / name
    if src.is_dir():
        shutil.copytree(src, tmp_path / name)
    else:
        shutil.copy(src, tmp_path / name)
    (tmp_path / "pyproject.toml").write_text("[tool.opscan]\n")
    return tmp_path


def _lint(folder: Path, capsys, *args: str) -> tuple[int, str, str]:
    with chdir(folder):
        rc = main(["lint", "--no-cache", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


# ---------------------------------------------------------------- DET010


@pytest.mark.parametrize("name", ["unused.py", "form_feed.py", "used_by_helper"])
def test_unused_noqa_findings_and_fix(tmp_path, capsys, name):
    folder = _project(tmp_path, name)
    target = folder / name
    with chdir(target if target.is_dir() else folder):
        from opscan.config import Config
        from opscan.lint import engine

        cfg = Config(root=folder)
        cfg.extend_select = ["DET010"]
        # The releases the CLI runs below target (the fixture pins none): every one the rules know.
        report = engine.run(["." if target.is_dir() else name], cfg, use_cache=False)
    expected = NOQA / (f"{name}/expected" if target.is_dir() else name.replace(".py", ".expected"))
    _golden(expected, golden_text(report).encode())
    if target.is_file():
        rc, _, _ = _lint(folder, capsys, "--extend-select", "DET010", "--fix", name)
        _golden(NOQA / name.replace(".py", ".fixed.py"), target.read_bytes())
        # Fixed: nothing is left for DET010, and the suppressions that are used still hold.
        rc, out, _ = _lint(folder, capsys, "--extend-select", "DET010", name)
        assert "DET010" not in out and "DET009" not in out, out


def test_unused_noqa_is_opt_in(tmp_path, capsys):
    folder = _project(tmp_path, "unused.py")
    rc, out, _ = _lint(folder, capsys, "unused.py")
    assert "DET010" not in out
    for selection in (["--select", "DET010"], ["--select", "ALL"], ["--extend-select", "DET01"]):
        rc, out, _ = _lint(folder, capsys, *selection, "unused.py")
        assert "DET010" in out, selection
    rc, out, _ = _lint(folder, capsys, "--extend-select", "DET010", "--ignore", "DET010", "unused.py")
    assert "DET010" not in out


def test_unused_noqa_respects_per_file_ignores(tmp_path, capsys):
    folder = _project(tmp_path, "unused.py")
    (folder / "pyproject.toml").write_text('[tool.opscan.lint]\nextend-select = ["DET010"]\nper-file-ignores = {"unused.py" = ["DET010"]}\n')
    rc, out, _ = _lint(folder, capsys, "unused.py")
    assert "DET010" not in out


def test_unused_noqa_in_parallel_runs_sees_every_workers_suppressions(tmp_path, capsys, monkeypatch):
    """A helper's `# noqa` used by a script another worker process linted still counts as used."""
    from opscan.lint import engine

    monkeypatch.setattr(engine, "PARALLEL_MIN_FILES", 2)
    monkeypatch.setattr(engine, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(engine, "_workers", lambda: 2)
    folder = _project(tmp_path, "used_by_helper")
    for n in range(4):  # more scripts, so that the helper is linted by one process and used by another
        shutil.copy(folder / "used_by_helper" / "train.py", folder / "used_by_helper" / f"train{n}.py")
    rc, out, _ = _lint(folder / "used_by_helper", capsys, "--extend-select", "DET010", ".")
    assert "DET010" not in out, out


# ---------------------------------------------------------------- --add-noqa


@pytest.mark.parametrize("name", ADD_INPUTS)
def test_add_noqa(tmp_path, capsys, name):
    folder = _project(tmp_path, name)
    target = folder / name
    rc, out, err = _lint(folder, capsys, "--add-noqa", name)
    assert rc == 0 and out == ""
    assert "Added " in err
    skipped = err.count("no noqa added at")
    _golden(NOQA / name.replace(".py", ".noqa.py"), target.read_bytes())
    # Idempotent: a second run adds nothing and says nothing of it.
    before = target.read_bytes()
    rc, out, err = _lint(folder, capsys, "--add-noqa", name)
    assert rc == 0 and target.read_bytes() == before and "Added" not in err
    # Every finding on a line that could take a comment is now suppressed.
    rc, out, err = _lint(folder, capsys, name)
    assert out.count(": DET") == skipped


def test_add_noqa_says_which_lines_it_could_not_mark(tmp_path, capsys):
    folder = _project(tmp_path, "add.py")
    rc, out, err = _lint(folder, capsys, "--add-noqa", "add.py")
    for line in (9, 11):  # a backslash continuation; a string that goes on to the next line
        assert f"warning: no noqa added at add.py:{line}: the line ends inside a string or goes on with a backslash" in err
    assert "Added 2 noqa directives." in err


def test_add_noqa_writes_atomically_and_refuses_a_file_changed_meanwhile(tmp_path, capsys, monkeypatch):
    from opscan.lint import noqa

    folder = _project(tmp_path, "add_crlf.py")
    target = folder / "add_crlf.py"
    real = noqa.tokenize.detect_encoding

    def edit_meanwhile(readline):  # the file changes between lint reading it and the write
        target.write_bytes(b"import torch\n")
        return real(readline)

    monkeypatch.setattr(noqa.tokenize, "detect_encoding", edit_meanwhile)
    rc, out, err = _lint(folder, capsys, "--add-noqa", "add_crlf.py")
    assert "changed on disk" in err
    assert target.read_bytes() == b"import torch\n"
    assert not [p for p in folder.iterdir() if p.name.startswith(".") or p.suffix == ".tmp"]


def test_add_noqa_that_cannot_write_a_file_is_an_error(tmp_path, capsys, monkeypatch):
    from opscan.lint import noqa

    folder = _project(tmp_path, "add.py")
    before = (folder / "add.py").read_bytes()

    def read_only(path, data, expect=None):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(noqa, "atomic_write_bytes", read_only)
    rc, out, err = _lint(folder, capsys, "--add-noqa", "add.py")
    assert rc == 2 and out == ""
    assert "opscan: error: no noqa added to add.py: Permission denied" in err and "Added" not in err
    assert (folder / "add.py").read_bytes() == before


def test_add_noqa_refuses_stdin_and_fix(tmp_path, capsys):
    folder = _project(tmp_path, "add.py")
    assert _lint(folder, capsys, "--add-noqa", "-")[0] == 2
    assert _lint(folder, capsys, "--add-noqa", "--fix", "add.py")[0] == 2


def test_with_noqa_merges_sorted_codes_and_keeps_the_rest_of_the_line():
    from opscan.lint.noqa import with_noqa

    text = "a()  # noqa: DET005 why\r\nb()\r\nc()  # noqa\r\n"
    new, count, skipped = with_noqa(text, {1: {"DET001"}, 2: {"DET002", "DET001"}, 3: {"DET001"}})
    assert new == "a()  # noqa: DET001, DET005 why\r\nb()  # noqa: DET001, DET002\r\nc()  # noqa\r\n"
    assert (count, skipped) == (2, [])
    # A `# noqa` in a string is what lint reads on that line: adding another would not suppress.
    assert with_noqa('s = "# noqa: X1"\n', {1: {"DET001"}})[1:] == (0, [1])


def test_with_noqa_puts_no_comment_inside_a_multiline_fstring():
    """3.12+ tokenizes f-strings (PEP 701), and a comment in a replacement field parses there but not on
    3.10 or 3.11: the line is skipped, as on those versions, so the file still runs on each."""
    from opscan.lint.noqa import with_noqa

    text = 'import torch\nmsg = f"""seeded {\n    torch.manual_seed(0)\n}"""\n'
    assert with_noqa(text, {3: {"DET001"}}) == (text, 0, [3])
