"""The run cache: a rerun over an unchanged tree replays the last output, and any change that could alter it is seen."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.util import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
SEEDS = "import torch\n\nfrom helpers import seed\n\nseed()\n"


def _age(*paths: Path, seconds: float = 10) -> None:
    """Date files back, as an untouched tree is: the cache trusts only mtimes older than two seconds."""
    past = time.time() - seconds
    for p in paths:
        os.utime(p, (past, past))


def _tree(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.opscan]\n")
    (project / "train.py").write_text(SEEDS)
    (project / "helpers.py").write_text("import torch\n\n\ndef seed():\n    torch.manual_seed(0)\n")
    _age(*project.iterdir(), project)
    return project


def _lint(project: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = subprocess_env()
    environ["PYTHONPATH"] = str(ROOT)
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "opscan", "lint", *args], cwd=project, env=environ, capture_output=True, text=True)


def _replayed(project: Path, *args: str, env: dict | None = None) -> tuple[bool, subprocess.CompletedProcess]:
    """Whether a run was a replay: the linter's modules were never imported."""
    probe = (
        # main(), not `python -m opscan`: the command's entry leaves lint by os._exit (cli.entry).
        "import sys; from opscan.cli import main\n"
        "code = main(['lint', *sys.argv[1:]])\n"
        "sys.stderr.write('ENGINE=%s\\n' % ('opscan.lint.engine' in sys.modules))\n"
        "sys.exit(code)\n"
    )
    environ = subprocess_env()
    environ["PYTHONPATH"] = str(ROOT)
    environ.update(env or {})
    proc = subprocess.run([sys.executable, "-c", probe, *args], cwd=project, env=environ, capture_output=True, text=True)
    return "ENGINE=False" in proc.stderr, proc


def _warm(project: Path, *args: str) -> subprocess.CompletedProcess:
    """Fill the cache: the first run creates `.opscan_cache`, a change to the folder it lints, so
    it records nothing; the next one records."""
    _lint(project, *args)
    _age(project)
    first = _lint(project, *args)
    assert _replayed(project, *args)[0], "the third run was not a replay"
    return first


def test_an_unchanged_tree_replays_output_and_exit_code(tmp_path):
    project = _tree(tmp_path)
    first = _warm(project, ".")
    replayed, again = _replayed(project, ".")
    assert replayed
    assert (again.returncode, again.stdout) == (first.returncode, first.stdout) == (1, again.stdout)
    assert "DET001" in again.stdout


@pytest.mark.parametrize(
    "change",
    [
        "edit a helper",  # a module reached through an import, not named on the command line
        "add a module that shadows an import",
        "add a script",
        "edit the configuration",
        "add a configuration above",
        "pin torch in a requirements file",  # the targeted releases: DET002 holds only before 2.10
        "pin torch in a folder above",
    ],
)
def test_a_change_that_could_alter_the_result_is_linted_afresh(tmp_path, change):
    project = _tree(tmp_path)
    _warm(project, "train.py")
    if change == "edit a helper":
        (project / "helpers.py").write_text("import torch\n\n\ndef seed():\n    torch.use_deterministic_algorithms(True)\n")
    elif change == "add a module that shadows an import":
        (project / "helpers").mkdir()
        (project / "helpers" / "__init__.py").write_text("def seed():\n    pass\n")
    elif change == "add a script":
        (project / "eval.py").write_text(SEEDS)
    elif change == "edit the configuration":
        (project / "pyproject.toml").write_text('[tool.opscan]\nignore = ["DET001"]\n')
    elif change == "pin torch in a requirements file":
        (project / "requirements.txt").write_text("torch==2.14.1\n")
    elif change == "pin torch in a folder above":
        (tmp_path / "requirements.txt").write_text("torch==2.14.1\n")
    else:
        (project / "pyproject.toml").unlink()
        (tmp_path / "pyproject.toml").write_text('[tool.opscan]\nignore = ["DET001"]\n')
    replayed, proc = _replayed(project, "train.py")
    assert not replayed, change
    fresh = _lint(project, "--no-cache", "train.py")
    assert (proc.returncode, proc.stdout) == (fresh.returncode, fresh.stdout), change


def test_an_unrelated_change_above_the_project_still_replays(tmp_path):
    # The walk up for the torch requirement reads the folders above; only names that could declare it count.
    project = _tree(tmp_path)
    _warm(project, "train.py")
    (tmp_path / "notes.txt").write_text("x\n")
    (tmp_path / "scratch").mkdir()
    assert _replayed(project, "train.py")[0]


def test_files_changed_just_before_a_run_are_not_trusted(tmp_path):
    project = _tree(tmp_path)
    (project / "train.py").write_text(SEEDS + "\n")  # just now: within the file system's clock tick of the next edit
    _lint(project, "train.py")
    assert not _replayed(project, "train.py")[0]


def test_other_flags_and_other_folders_are_other_runs(tmp_path):
    project = _tree(tmp_path)
    _warm(project, "train.py")
    assert not _replayed(project, "--output-format", "json", "train.py")[0]
    (project / "sub").mkdir()
    _age(project / "sub", project)
    assert not _replayed(project / "sub", "../train.py")[0]


@pytest.mark.parametrize("flags", [["--fix"], ["--diff"], ["--no-cache"], ["--add-noqa"], ["-o", "out.txt"], ["-v"], ["--show-settings"]])
def test_runs_that_write_or_skip_the_cache_are_never_replayed(tmp_path, flags):
    project = _tree(tmp_path)
    for _ in range(2):
        _lint(project, *flags, "train.py")
        _age(*project.iterdir(), project)
    assert not _replayed(project, *flags, "train.py")[0]


def test_progress_and_replay_never_mix(tmp_path):
    from opscan.lint import runcache

    assert not runcache.eligible(["--stdin-filename", "x.py"]) and not runcache.eligible(["-"])
    assert runcache.eligible(["--select", "DET001", "."])


def test_a_package_root_that_changes_is_linted_afresh(tmp_path):
    # checkout/pkg/train.py finds `pkg` from its package root checkout/ (no __init__.py), which only the
    # walk up the package's folders lists: no other lookup, and no discovery (one file is linted), reads
    # it. An __init__.py there moves the package root up to the project, where `pkg` is found nowhere.
    project = tmp_path / "project"
    package = project / "checkout" / "pkg"
    package.mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.opscan]\n")
    (package / "__init__.py").write_text("")
    (package / "util.py").write_text("import torch\n\n\ndef init_seeds():\n    torch.manual_seed(0)\n")
    (package / "train.py").write_text("import torch\n\nfrom pkg.util import init_seeds\n\ninit_seeds()\n")
    _age(*package.iterdir(), package, package.parent, project / "pyproject.toml", project)
    first = _warm(project, "checkout/pkg/train.py")
    assert "checkout/pkg/train.py:5:1: DET001" in first.stdout
    (project / "checkout" / "__init__.py").write_text("")
    replayed, proc = _replayed(project, "checkout/pkg/train.py")
    assert not replayed
    assert "DET001" not in proc.stdout
    assert proc.stdout == _lint(project, "--no-cache", "checkout/pkg/train.py").stdout


def test_a_project_root_that_appears_is_linted_afresh(tmp_path):
    # Without a config, the imports of a file also resolve against its project's root (the nearest folder
    # with a pyproject.toml, setup.py or setup.cfg). With torch configured no walk reads the folders for a
    # requirement, so the walk for the project's root must list them itself: a setup.cfg made later puts
    # `mylib` in reach of proj/scripts/train.py, linted from a folder beside the project.
    (tmp_path / ".git").mkdir()
    proj = tmp_path / "proj"
    (proj / "scripts").mkdir(parents=True)
    (proj / "mylib").mkdir()
    (proj / "mylib" / "__init__.py").write_text("")
    (proj / "mylib" / "utils.py").write_text("import torch\n\n\ndef seed():\n    torch.manual_seed(0)\n")
    (proj / "scripts" / "train.py").write_text("import torch\n\nfrom mylib.utils import seed\n\nseed()\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _age(*proj.rglob("*"), proj, elsewhere, tmp_path)
    args = ("--torch-version", "2.12", "../proj/scripts/train.py")
    first = _warm(elsewhere, *args)
    assert "DET001" not in first.stdout
    (proj / "setup.cfg").write_text("[metadata]\nname = mylib\n")
    replayed, proc = _replayed(elsewhere, *args)
    assert not replayed
    assert "../proj/scripts/train.py:5:1: DET001" in proc.stdout


@pytest.mark.parametrize("declared", ["pyproject.toml", "setup.cfg", "setup.py"])
def test_a_console_script_declared_later_is_linted_afresh(tmp_path, declared):
    # A module without a `__main__` block runs as the console scripts its project declares: main() seeds
    # then runs CUDA work, which lint sees only once a packaging file names `mypkg.train:main`. With
    # torch configured no walk reads setup.cfg for a requirement: an edit of it is seen only because
    # reading it for scripts made it a dep; a setup.py made later, by the folder's listing.
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "mypkg"\n')
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = mypkg\n")
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "train.py").write_text("import torch\n\n\ndef main():\n    torch.manual_seed(0)\n    torch.zeros(1).cuda()\n")
    _age(*tmp_path.rglob("*"), tmp_path)
    args = ("--torch-version", "2.12", "mypkg/train.py")
    first = _warm(tmp_path, *args)
    assert "DET001" not in first.stdout
    if declared == "pyproject.toml":
        (tmp_path / declared).write_text('[project]\nname = "mypkg"\n\n[project.scripts]\nmytrain = "mypkg.train:main"\n')
    elif declared == "setup.cfg":
        (tmp_path / declared).write_text("[metadata]\nname = mypkg\n\n[options.entry_points]\nconsole_scripts = mytrain = mypkg.train:main\n")
    else:
        (tmp_path / declared).write_text("from setuptools import setup\n\nsetup(entry_points={'console_scripts': ['mytrain = mypkg.train:main']})\n")
    replayed, proc = _replayed(tmp_path, *args)
    assert not replayed
    assert "mypkg/train.py:5:5: DET001" in proc.stdout and "`mytrain` console script" in proc.stdout
