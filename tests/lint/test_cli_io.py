"""What `opscan lint` reads and prints beyond the findings: stdin (for editors), paths, the progress line."""

from __future__ import annotations

import io
import json
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from opscan.cli import main
from tests.util import chdir, subprocess_env

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "lint"
SEEDS = b"import torch\n\ntorch.manual_seed(0)\n"


def _cli(args: list[str], cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess:
    env = subprocess_env()
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "opscan", "lint", "--no-cache", *args], cwd=cwd, env=env, input=stdin, capture_output=True)


def _project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text('[tool.opscan.lint]\nper-file-ignores = {"quiet/*.py" = ["DET002"]}\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "seeding.py").write_text("import torch\n\n\ndef seed_all():\n    torch.manual_seed(0)\n")
    return tmp_path


# ---------------------------------------------------------------- stdin


def test_stdin_is_linted_as_the_file_it_names(tmp_path):
    project = _project(tmp_path)
    proc = _cli(["--stdin-filename", "train.py", "-"], project, SEEDS)
    assert proc.returncode == 1
    out = proc.stdout.decode()
    assert out.startswith("train.py:3:1: DET001 ") and "train.py:3:1: DET002 " in out
    assert not (project / "train.py").exists()  # never written


def test_stdin_without_a_name_is_shown_as_a_dash(tmp_path):
    proc = _cli(["-"], _project(tmp_path), SEEDS)
    assert proc.stdout.decode().startswith("-:3:1: DET001 ")


def test_stdin_with_only_stdin_filename_reads_stdin(tmp_path):
    proc = _cli(["--stdin-filename", "train.py"], _project(tmp_path), SEEDS)
    assert proc.returncode == 1 and "train.py:3:1: DET001 " in proc.stdout.decode()


def test_stdin_takes_the_named_files_config_and_per_file_ignores(tmp_path):
    project = _project(tmp_path)
    (project / "quiet").mkdir()
    out = _cli(["--stdin-filename", "quiet/train.py", "-"], project, SEEDS).stdout.decode()
    assert "DET001" in out and "DET002" not in out


def test_stdin_imports_resolve_from_the_named_file(tmp_path):
    """A relative import in the source on stdin resolves from --stdin-filename's package."""
    project = _project(tmp_path)
    source = b"from .seeding import seed_all\n\nseed_all()\n"
    out = _cli(["--stdin-filename", "pkg/train.py", "-"], project, source).stdout.decode()
    assert "pkg/train.py:3:1: DET001 [*] Seeds via `pkg.seeding.seed_all` (`torch.manual_seed`)" in out


def test_stdin_fix_prints_the_fixed_source_and_writes_nothing(tmp_path):
    project = _project(tmp_path)
    proc = _cli(["--stdin-filename", "train.py", "--fix", "-"], project, SEEDS)
    fixed = proc.stdout.decode()
    assert "torch.use_deterministic_algorithms(True)" in fixed and 'CUBLAS_WORKSPACE_CONFIG", ":4096:8"' in fixed
    assert proc.returncode == 0, proc.stderr
    assert "Fixed 2 errors." in proc.stderr.decode()
    assert not (project / "train.py").exists()
    # What it printed is clean.
    again = _cli(["--stdin-filename", "train.py", "-"], project, proc.stdout)
    assert again.returncode == 0, again.stdout


def test_stdin_fix_writes_what_remains_to_the_output_file(tmp_path):
    """-o gets the report, in --output-format, and stdout the fixed source: -o was ignored, and the report went to stderr as text."""
    project = _project(tmp_path)
    source = b"import random\n\nimport torch\n\ntorch.manual_seed(0)\nrandom.random()\n"  # DET001, DET002 fixed; DET009 remains
    proc = _cli(["--stdin-filename", "train.py", "--fix", "--output-format", "json", "-o", "report.json", "-"], project, source)
    assert proc.returncode == 1, proc.stderr
    assert b"torch.use_deterministic_algorithms(True)" in proc.stdout and proc.stderr == b""
    assert [f["code"] for f in json.loads((project / "report.json").read_text())] == ["DET009"]
    text = _cli(["--stdin-filename", "train.py", "--fix", "-o", "report.txt", "-"], project, source)
    assert text.stdout == proc.stdout and text.stderr == b""
    assert re.match(r"train\.py:\d+:1: DET009 .*\nFixed 2 errors\.\nFound 1 error\.\n$", (project / "report.txt").read_text())


def test_stdin_fix_without_fixes_echoes_the_source(tmp_path):
    source = b"import torch\r\nx = 1  # no findings\r\n"
    proc = _cli(["--fix", "-"], _project(tmp_path), source)
    assert proc.returncode == 0 and proc.stdout == source


def test_stdin_diff_prints_the_patch(tmp_path):
    proc = _cli(["--stdin-filename", "train.py", "--diff", "-"], _project(tmp_path), SEEDS)
    assert proc.returncode == 1
    assert proc.stdout.decode().startswith("--- train.py\n+++ train.py\n")


def test_stdin_with_other_paths_is_an_error(tmp_path):
    proc = _cli(["-", "train.py"], _project(tmp_path), SEEDS)
    assert proc.returncode == 2 and b"stdin" in proc.stderr


def test_stdin_force_exclude_skips_an_excluded_name(tmp_path):
    project = _project(tmp_path)
    (project / "pyproject.toml").write_text('[tool.opscan]\nextend-exclude = ["gen"]\n')
    args = ["--stdin-filename", "gen/train.py", "-"]
    assert "DET001" in _cli(args, project, SEEDS).stdout.decode()
    assert _cli(["--force-exclude", *args], project, SEEDS).returncode == 0


# A notebook whose one cell seeds: as JSON, it parses as Python, a dict, with nothing to find in it.
NOTEBOOK = json.dumps({"cells": [{"cell_type": "code", "source": ["import torch\n", "torch.manual_seed(0)\n"]}], "nbformat": 4}).encode()


@pytest.mark.parametrize("source", [NOTEBOOK, SEEDS], ids=["notebook", "python"])
def test_stdin_named_as_a_notebook_is_refused_as_a_named_notebook_is(tmp_path, source):
    """`--stdin-filename x.ipynb`: its JSON was linted as Python ("All checks passed!", exit 0), and Python was linted
    and fixed as if the notebook held it; a notebook named as a path is an error (f976e1f), and so is this."""
    project = _project(tmp_path)
    proc = _cli(["--stdin-filename", "nb.ipynb", "-"], project, source)
    assert (proc.returncode, proc.stderr) == (2, b""), proc.stderr
    assert proc.stdout == b"error: Jupyter notebooks are not linted: nb.ipynb\n1 problem stopped part of the run; nothing found in the rest.\n"
    proc = _cli(["--stdin-filename", "nb.ipynb", "--output-format", "json"], project, source)
    assert (proc.returncode, json.loads(proc.stdout)) == (2, [])
    assert proc.stderr == b"opscan: error: Jupyter notebooks are not linted: nb.ipynb\n"
    proc = _cli(["--stdin-filename", "nb.ipynb", "--show-settings"], project, source)  # as for a named one: no file
    assert proc.returncode == 2 and re.search(rb"^files +0$", proc.stdout, re.M), proc.stdout


@pytest.mark.parametrize("source", [NOTEBOOK, SEEDS], ids=["notebook", "python"])
def test_stdin_fix_of_a_notebook_echoes_it_unchanged(tmp_path, source):
    """An editor puts stdout in the buffer: the source unchanged, as for a file lint cannot parse, and the error on stderr."""
    proc = _cli(["--stdin-filename", "nb.ipynb", "--fix", "-"], _project(tmp_path), source)
    assert (proc.returncode, proc.stdout) == (2, source)
    assert proc.stderr == b"error: Jupyter notebooks are not linted: nb.ipynb\n1 problem stopped part of the run; nothing found in the rest.\n"


def test_stdin_notebook_excluded_with_force_exclude_is_skipped(tmp_path):
    project = _project(tmp_path)
    (project / "pyproject.toml").write_text('[tool.opscan]\nextend-exclude = ["*.ipynb"]\n')
    proc = _cli(["--force-exclude", "--stdin-filename", "nb.ipynb", "-"], project, NOTEBOOK)
    assert (proc.returncode, proc.stderr) == (0, b""), proc.stderr


@pytest.mark.parametrize(
    ("args", "config", "said"),
    [
        (["--select", "NOPE"], None, b"unknown rule selector 'NOPE'"),
        ([], "[tool.opscan]\nselect = 3\n", b"select must be a list of strings"),
        (["-o", "pyproject.toml"], "[tool.opscan]\n", b"-o pyproject.toml is an input of this run"),
        (["--exit-zero", "--exit-non-zero-on-fix"], None, b"cannot be combined"),
    ],
    ids=["selector", "config", "output", "flags"],
)
def test_stdin_fix_that_stops_on_an_error_echoes_the_source(tmp_path, args, config, said):
    """Exit 2 before anything was printed left stdout empty: an editor that takes stdout as the buffer emptied it.
    The source goes to stdout unchanged, as it does for a syntax error (DET000), and as ruff's does."""
    if config is not None:
        (tmp_path / "pyproject.toml").write_text(config)
    proc = _cli(["--stdin-filename", "train.py", "--fix", *args, "-"], tmp_path, SEEDS)
    assert (proc.returncode, proc.stdout) == (2, SEEDS)
    assert said in proc.stderr and b"Traceback" not in proc.stderr
    syntax_error = b"import torch\ntorch.manual_seed(0\n"
    proc = _cli(["--stdin-filename", "train.py", "--fix", "-"], tmp_path, syntax_error)
    assert proc.stdout == syntax_error  # what it does already, and what the errors above do now
    proc = _cli(["--stdin-filename", "train.py", *args, "-"], tmp_path, SEEDS)  # without --fix: stdout is the report
    assert proc.returncode == 2 and SEEDS not in proc.stdout


# ---------------------------------------------------------------- paths


def test_paths_are_relative_to_the_working_directory_even_above_it(tmp_path, capsys):
    project = _project(tmp_path)
    (project / "train.py").write_bytes(SEEDS)
    (project / "sub").mkdir()
    (project / "sub" / "eval.py").write_bytes(SEEDS)
    with chdir(project / "sub"):
        main(["lint", "--no-cache", ".."])
    out = capsys.readouterr().out
    assert "../train.py:3:1: DET001 " in out
    assert "\neval.py:3:1: DET001 " in "\n" + out
    assert str(project) not in out


def test_each_file_is_shown_and_matched_once_however_many_findings_it_has(tmp_path, capsys, monkeypatch):
    """The per-finding filtering asks each file's shown path once, and resolves nothing for
    per-file-ignores where the config has none (~2% of a run of many files did that per finding)."""
    from opscan.config import Config
    from opscan.lint import engine

    (tmp_path / "train.py").write_text("import torch\n\ntorch.manual_seed(0)\ntorch.backends.cudnn.benchmark = True\n")
    shown = []
    real_display_path = engine.display_path
    monkeypatch.setattr(engine, "display_path", lambda path: shown.append(path) or real_display_path(path))

    def no_relpath(self, path, resolved=None):
        raise AssertionError(f"resolved {path} for per-file-ignores that the config does not have")

    monkeypatch.setattr(Config, "relpath", no_relpath)  # a named file: nothing else asks for it
    with chdir(tmp_path):
        main(["lint", "--no-cache", "train.py"])
    out = capsys.readouterr().out
    assert [line.split()[1] for line in out.splitlines() if ": DET" in line] == ["DET001", "DET002", "DET005"]
    assert len(shown) == 1


# ---------------------------------------------------------------- progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_is_drawn_on_a_terminal_only_after_a_second():
    from opscan.lint.engine import Progress

    now = [100.0]
    out = _Terminal()
    progress = Progress(out)
    progress.clock = lambda: now[0]
    progress.started = now[0]
    progress.phase("Linting", 3)
    progress.advance(1)
    assert out.getvalue() == ""  # under a second: nothing
    now[0] += 1.5
    progress.advance(1)
    assert out.getvalue() == "\r\x1b[KLinting 2/3 files"
    progress.close()
    assert out.getvalue().endswith("\r\x1b[K")  # the line is wiped before the report


def test_progress_goes_to_a_terminal_and_never_into_pipes(tmp_path, monkeypatch, capsys):
    from opscan.commands import lint as lint_command

    monkeypatch.setattr(sys, "stderr", _Terminal())
    monkeypatch.delenv("TERM", raising=False)
    assert lint_command._progress() is not None
    monkeypatch.setenv("TERM", "dumb")
    assert lint_command._progress() is None
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert lint_command._progress() is None


def test_progress_counts_the_files_of_every_worker_process(tmp_path, monkeypatch):
    from opscan.config import Config
    from opscan.lint import engine
    from opscan.rules import NEWEST_TORCH

    (tmp_path / "__init__.py").write_text("")  # a package: its modules are read on every core first
    for n in range(12):
        (tmp_path / f"train{n}.py").write_bytes(SEEDS)
    monkeypatch.setattr(engine, "PARALLEL_MIN_FILES", 2)
    monkeypatch.setattr(engine, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(engine, "_workers", lambda: 2)
    seen = []

    class Counting(engine.Progress):
        DELAY = 0.0
        INTERVAL = 0.0

        def advance(self, n):
            super().advance(n)
            seen.append((self.label, self.count))

    progress = Counting(_Terminal())
    with chdir(tmp_path):
        report = engine.run(["."], Config(root=tmp_path), torch_version=NEWEST_TORCH, use_cache=False, progress=progress)
    assert len({f.path for f in report.findings}) == 12
    assert max(c for label, c in seen if label == "Reading") == 13  # with __init__.py
    assert max(c for label, c in seen if label == "Linting") == 13


# ---------------------------------------------------------------- the command's exit (cli.entry)


def _many_findings(tmp_path: Path, n: int = 300) -> Path:
    """A folder whose lint output is far larger than a pipe's buffer."""
    for i in range(n):
        (tmp_path / f"train_{i:03d}.py").write_bytes(SEEDS)
    return tmp_path


def test_the_command_delivers_all_its_output_before_it_exits(tmp_path, capsys):
    """`python -m opscan lint` leaves by os._exit; everything printed is flushed first."""
    project = _many_findings(tmp_path)
    for fmt in ("text", "json"):
        proc = _cli(["--output-format", fmt, "."], project)
        with chdir(project):
            code = main(["lint", "--no-cache", "--output-format", fmt, "."])
        assert (proc.returncode, proc.stdout.decode()) == (code, capsys.readouterr().out) == (1, proc.stdout.decode())
        assert proc.stderr == b""
    assert proc.stdout.decode().count('"code": "DET001"') == 300


def test_main_leaves_the_cycle_collector_as_it_found_it(tmp_path, capsys):
    import gc

    project = _many_findings(tmp_path, 3)
    assert gc.isenabled()
    with chdir(project):
        assert main(["lint", "--no-cache", "."]) == 1
    assert gc.isenabled()


def test_other_commands_exit_the_ordinary_way(tmp_path):
    """Only lint skips the interpreter's teardown: torch and the record writer have exit handlers."""
    env = subprocess_env()
    env["PYTHONPATH"] = str(ROOT)
    probe = "import atexit, sys; atexit.register(lambda: print('TORN-DOWN')); sys.argv[1:] = ['rule', 'DET001']; from opscan.cli import entry; entry()"
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and "DET001" in proc.stdout and proc.stdout.rstrip().endswith("TORN-DOWN")
    lint = probe.replace("['rule', 'DET001']", "['lint', '--no-cache', '.']")
    (tmp_path / "train.py").write_bytes(SEEDS)
    proc = subprocess.run([sys.executable, "-c", lint], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 1 and "DET001" in proc.stdout and "TORN-DOWN" not in proc.stdout


_FAULTS_PROBE = """
import resource, sys
from opscan.lint import facts
real = facts.parse

def parse(text, path):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    tree = real(text, path)
    sys.stderr.write("FAULTS=%d\\n" % (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before))
    return tree

facts.parse = parse
sys.argv[1:] = ["lint", "--no-cache", "."]
from opscan.cli import entry
entry()
"""


@pytest.mark.skipif(sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc trims its heap")
def test_the_command_parses_each_file_in_memory_it_already_has(tmp_path):
    """glibc gave the parser's freed memory back after every file, to fault it in again for the
    next (~90 pages a 200-line script, a tenth of the parse floor's time); entry() keeps it."""
    body = "import torch\n\n\ndef step(model, x):\n    y = model(x)\n    return torch.relu(y).sum()\n\n\n" * 60
    for i in range(4):  # below the sizes at which the work is shared: one process parses all four
        (tmp_path / f"train_{i}.py").write_text(body)
    env = subprocess_env()
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", _FAULTS_PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    faults = [int(line[len("FAULTS="):]) for line in proc.stderr.splitlines() if line.startswith("FAULTS=")]
    assert len(faults) == 4, proc.stderr
    assert max(faults[1:]) < 20, faults  # the first parse may grow the heap; the others reuse it


# ---------------------------------------------------------------- no files


def test_a_folder_with_no_python_files_says_so_as_ruff_does(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not python\n")
    proc = _cli(["empty"], tmp_path)
    assert proc.returncode == 0
    assert proc.stderr.decode() == "warning: No Python files found under the given path(s)\n"
    assert proc.stdout.decode() == "All checks passed!\n"


def test_a_folder_with_python_files_gives_no_such_warning(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "ok.py").write_text("x = 1\n")
    proc = _cli(["src"], tmp_path)
    assert proc.returncode == 0
    assert b"No Python files" not in proc.stderr


# ---------------------------------------------------------------- selectors


def test_an_empty_rule_selector_is_an_error_as_in_ruff(tmp_path):
    """`--select ""` (an unset shell variable) selected no rule and passed; ruff refuses it."""
    (tmp_path / "train.py").write_bytes(SEEDS)
    for flag, value in (("--select", ""), ("--select", "DET001,,DET002"), ("--select", "DET001,"), ("--ignore", "")):
        proc = _cli([flag, value, "train.py"], tmp_path)
        assert proc.returncode == 2, (flag, value)
        assert proc.stderr.decode() == f"opscan: error: unknown rule selector '' in {flag}: give comma-separated codes or prefixes\n"
        assert proc.stdout == b""
    proc = _cli(["--select", " DET001 , DET002", "train.py"], tmp_path)
    assert proc.returncode == 1 and b"DET001" in proc.stdout


def test_exit_zero_and_exit_non_zero_on_fix_refuse_each_other_as_in_ruff(tmp_path):
    (tmp_path / "train.py").write_bytes(SEEDS)
    proc = _cli(["--fix", "--exit-zero", "--exit-non-zero-on-fix", "train.py"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.decode() == "opscan: error: --exit-zero cannot be combined with --exit-non-zero-on-fix\n"
    assert (tmp_path / "train.py").read_bytes() == SEEDS  # refused before any fix


def test_stdin_filename_beside_paths_reads_stdin_and_says_it_ignores_them(tmp_path):
    """As ruff: the paths were linted and the flag ignored, without a word."""
    (tmp_path / "other.py").write_text("x = 1\n")
    proc = _cli(["--stdin-filename", "train.py", "other.py"], tmp_path, SEEDS)
    assert proc.returncode == 1
    assert proc.stdout.decode().startswith("train.py:3:1: DET001 ")
    assert "other.py" not in proc.stdout.decode()
    assert proc.stderr.decode() == "warning: Ignoring file other.py in favor of standard input.\n"


def test_diff_and_statistics_refuse_each_other_as_in_ruff(tmp_path):
    """The patch holds no finding to count: ruff refuses the pair, and opscan printed the patch alone."""
    (tmp_path / "train.py").write_bytes(SEEDS)
    proc = _cli(["--diff", "--statistics", "train.py"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.decode() == "opscan: error: --diff cannot be combined with --statistics\n"
    assert proc.stdout == b""
    assert (tmp_path / "train.py").read_bytes() == SEEDS


@pytest.mark.parametrize(("args", "files"), [(["-"], "1 (stdin)"), (["--stdin-filename", "sub/train.py"], "1 (stdin, as sub/train.py)")])
def test_show_settings_for_stdin_are_those_of_the_file_it_is_linted_as(tmp_path, args, files):
    """`-` was "skipped -: no such file or directory", and a --stdin-filename that is not on disk too, with no file counted."""
    proc = _cli(["--show-settings", *args], _project(tmp_path))
    assert proc.returncode == 0 and proc.stderr == b""
    out = proc.stdout.decode()
    assert re.search(rf"^files +{re.escape(files)}$", out, re.M), out
    assert re.search(r"^torch +.*\(1 file\)$", out, re.M), out  # the range that file gets


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_show_settings_refuses_a_format_it_cannot_print(tmp_path, fmt):
    """The settings are text: --output-format json printed that text all the same, which no JSON reader takes."""
    proc = _cli(["--show-settings", "--output-format", fmt, "."], _project(tmp_path))
    assert (proc.returncode, proc.stdout) == (2, b"")
    assert proc.stderr.decode() == f"opscan: error: --show-settings cannot be printed as {fmt}: use --output-format text\n"


def test_stdin_is_what_the_branch_reading_parses_not_the_file_on_disk(tmp_path):
    """DET001's placement (opscan.lint.branches, which DET005 shares) reads the text linted; with
    --stdin-filename it read the file on disk, which an editor's unsaved buffer differs from."""
    source = (FIXTURES / "det001" / "seed_in_each_branch.py").read_bytes()
    (tmp_path / "train.py").write_text("# saved earlier\n" * 40)
    proc = _cli(["--stdin-filename", "train.py"], tmp_path, source)
    assert proc.returncode == 1, proc.stderr
    assert "before the `if` around it" in proc.stdout.decode()
