"""The pre-commit hook, run by the real pre-commit in a temporary git repository.

The hook repository is a git copy of this working tree (tracked and untracked,
not ignored, files, committed), so the test checks what is on disk now, not
the last commit. pre-commit installs it into its own virtualenv with pip, as
it does for users: that needs PyPI and takes a while, hence `slow`. It must
not pull torch.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BAD = "import torch\n\ntorch.manual_seed(0)\nmodel = torch.nn.Linear(2, 2).cuda()\n"
FIXED = (
    "import os\n\nos.environ.setdefault(\"CUBLAS_WORKSPACE_CONFIG\", \":4096:8\")\n\nimport torch\n\n"
    "torch.manual_seed(0)\ntorch.use_deterministic_algorithms(True)\nmodel = torch.nn.Linear(2, 2).cuda()\n"
)
NETWORK_ERRORS = ("Failed to establish a new connection", "Temporary failure in name resolution", "Network is unreachable")

pytestmark = pytest.mark.slow
pytest.importorskip("pre_commit", reason="pre-commit is in requirements-test.txt; this interpreter lacks it")


class GitError(RuntimeError):
    """A git command failed; the message holds what it printed."""


@functools.cache
def _empty_git_config() -> str:
    """An empty file for GIT_CONFIG_GLOBAL: the user's config stays out of the test.

    Not os.devnull: on a machine where /dev/null was once replaced by a plain file
    with something in it, git stops at "bad config line 1 in file /dev/null".
    """
    folder = tempfile.mkdtemp(prefix="opscan-git-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = os.path.join(folder, "gitconfig")
    open(path, "w").close()
    return path


def _git(*args: str, cwd: Path) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "opscan tests", "GIT_AUTHOR_EMAIL": "tests@opscan.invalid",
        "GIT_COMMITTER_NAME": "opscan tests", "GIT_COMMITTER_EMAIL": "tests@opscan.invalid",
        "GIT_CONFIG_GLOBAL": _empty_git_config(), "GIT_CONFIG_NOSYSTEM": "1",
    }  # fmt: skip
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode:  # say what git said: a bare CalledProcessError hides it
        raise GitError(f"git {' '.join(args)} in {cwd}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def _working_tree_files() -> list[str]:
    """The files a user's clone would have: tracked and untracked-but-not-ignored, as they are now."""
    if (ROOT / ".git").exists():
        # A CI checkout may belong to another user: git then refuses the tree ("dubious
        # ownership", exit 128) since the global config, where safe.directory lives, is off here.
        try:
            out = _git("-c", f"safe.directory={ROOT}", "ls-files", "--cached", "--others", "--exclude-standard", "-z", cwd=ROOT)
        except GitError:
            out = None
        if out is not None:
            return sorted({f for f in out.split("\0") if f and (ROOT / f).is_file()})
    skip = {".git", ".venv", "__pycache__", ".opscan_cache", ".pytest_cache", ".hypothesis", "build", "dist", "data"}
    return sorted(
        str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts)
    )


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> tuple[Path, str]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path_factory.mktemp("hook-repo")
    for rel in _working_tree_files():
        if rel.startswith(("benchmarks/data/", "tests/")):  # not needed to install the hook
            continue
        target = repo / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)
    assert (repo / ".pre-commit-hooks.yaml").is_file()
    _git("init", "-q", cwd=repo)
    _git("add", "-A", cwd=repo)
    _git("commit", "-q", "-m", "opscan under test", cwd=repo)
    return repo, _git("rev-parse", "HEAD", cwd=repo).strip()


def _pre_commit(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPSCAN_", "GIT_", "PRE_COMMIT"))}
    env.update(PRE_COMMIT_HOME=str(home), GIT_CONFIG_GLOBAL=_empty_git_config(), GIT_CONFIG_NOSYSTEM="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--color", "never", *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    log = home / "pre-commit.log"
    text = proc.stdout + proc.stderr + (log.read_text() if log.exists() else "")
    if any(e in text for e in NETWORK_ERRORS):
        pytest.skip("pre-commit could not reach the package index to install the hook:\n" + text[-2000:])
    return proc


def test_hook_fails_on_a_bad_script_and_passes_once_fixed(hook_repo, tmp_path):
    repo, sha = hook_repo
    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "pre-commit-home"
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {repo}\n    rev: {sha}\n    hooks:\n      - id: opscan-lint\n"
    )
    # Excluded code is not checked even though pre-commit names it (--force-exclude).
    (project / "pyproject.toml").write_text('[tool.opscan]\nextend-exclude = ["legacy"]\n')
    (project / "legacy").mkdir()
    (project / "legacy" / "old_train.py").write_text(BAD)
    (project / "train.py").write_text(BAD)
    (project / "notes.txt").write_text("import torch\ntorch.manual_seed(0)\n")  # not Python: not passed
    _git("init", "-q", cwd=project)
    _git("add", "-A", cwd=project)

    failed = _pre_commit(project, home, "--all-files")
    out = failed.stdout
    assert failed.returncode == 1, out + failed.stderr
    assert "opscan lint" in out and "Failed" in out
    assert "train.py:3:1: DET001" in out and "train.py:3:1: DET002" in out
    assert "legacy/old_train.py" not in out
    assert "notes.txt" not in out

    (project / "train.py").write_text(FIXED)
    _git("add", "-A", cwd=project)
    passed = _pre_commit(project, home, "--all-files")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "opscan lint" in passed.stdout and "Passed" in passed.stdout

    # The hook's environment holds opscan and its light dependencies, not torch.
    envs = list(home.glob("repo*/py_env-*"))
    assert envs, list(home.iterdir())
    site = [p for env in envs for p in env.glob("lib/python*/site-packages")]
    installed = {p.name.split("-")[0].lower() for s in site for p in s.iterdir()}
    assert "opscan" in installed
    assert "torch" not in installed and "torchvision" not in installed


def test_manifest_is_valid():
    yaml = pytest.importorskip("yaml")
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "opscan-lint"
    assert hook["entry"].split()[:2] == ["opscan", "lint"] and "--force-exclude" in hook["entry"]
    assert hook["language"] == "python" and hook["types"] == ["python"]
    assert hook["require_serial"] is True
