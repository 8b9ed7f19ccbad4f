"""Many files are linted in forked worker processes: the findings must not change."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from opscan.config import Config
from opscan.lint import engine
from opscan.rules import NEWEST_TORCH
from tests.lint.helpers import chdir

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "lint"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="worker processes are forked; Windows lints serially")


def _corpus(tmp_path: Path) -> Path:
    """Every lint fixture and example, in one tree, with bad files among them."""
    tree = tmp_path / "corpus"
    shutil.copytree(FIXTURES, tree / "fixtures")
    shutil.copytree(ROOT / "examples", tree / "examples")
    (tree / "broken.py").write_bytes(b"def f(:\n")
    (tree / "latin.py").write_bytes(b"x = '\xff'\n")
    return tree


def _findings(tree: Path, monkeypatch, *, parallel: bool, use_cache: bool = False) -> list[dict]:
    calls = []
    if parallel:
        monkeypatch.setattr(engine, "PARALLEL_MIN_FILES", 2)
        monkeypatch.setattr(engine, "PARALLEL_MIN_BYTES", 0)
        monkeypatch.setattr(engine, "_workers", lambda: 2)
        real = engine._lint_in_processes

        def spy(linter, files, workers):
            results = real(linter, files, workers)
            calls.append(results is not None)
            return results

        monkeypatch.setattr(engine, "_lint_in_processes", spy)
    else:
        monkeypatch.setattr(engine, "PARALLEL_MIN_FILES", 10**9)
    with chdir(tree):
        report = engine.run(["."], Config(root=tree), torch_version=NEWEST_TORCH, use_cache=use_cache)
    monkeypatch.undo()
    if parallel:
        assert calls == [True], "the worker processes did not run"
    return [f.to_dict() for f in report.sorted_findings()]


def test_parallel_and_serial_agree(tmp_path, monkeypatch):
    tree = _corpus(tmp_path)
    serial = _findings(tree, monkeypatch, parallel=False)
    assert len({f["path"] for f in serial}) > 10  # a real corpus, with findings in many files
    assert _findings(tree, monkeypatch, parallel=True) == serial


def test_parallel_run_fills_the_cache(tmp_path, monkeypatch):
    tree = _corpus(tmp_path)
    monkeypatch.setenv("OPSCAN_CACHE_DIR", str(tmp_path / "cache"))
    cold = _findings(tree, monkeypatch, parallel=True, use_cache=True)
    monkeypatch.setenv("OPSCAN_CACHE_DIR", str(tmp_path / "cache"))
    assert list((tmp_path / "cache").glob("facts-*/*"))
    warm = _findings(tree, monkeypatch, parallel=False, use_cache=True)
    assert warm == cold == _findings(tree, monkeypatch, parallel=False)


def _parallel_findings(tree: Path, monkeypatch) -> list[dict]:
    """A run with the thresholds lowered so that it forks, whatever happens then."""
    monkeypatch.setattr(engine, "PARALLEL_MIN_FILES", 2)
    monkeypatch.setattr(engine, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(engine, "_workers", lambda: 3)
    with chdir(tree):
        report = engine.run(["."], Config(root=tree), torch_version=NEWEST_TORCH, use_cache=False)
    return [f.to_dict() for f in report.sorted_findings()]


def test_no_fork_lints_serially(tmp_path, monkeypatch):
    tree = _corpus(tmp_path)
    serial = _findings(tree, monkeypatch, parallel=False)
    monkeypatch.delattr(engine.os, "fork")
    assert _parallel_findings(tree, monkeypatch) == serial


def test_fork_refused_lints_here(tmp_path, monkeypatch):
    tree = _corpus(tmp_path)
    serial = _findings(tree, monkeypatch, parallel=False)

    def refuse():
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(engine.os, "fork", refuse)
    assert _parallel_findings(tree, monkeypatch) == serial


def _failing_in_children(monkeypatch, owner, name: str) -> None:
    """owner.name raises in every forked worker, and works in this process."""
    import os

    parent = os.getpid()
    real = getattr(owner, name)

    def or_die_in_child(self, path):
        if os.getpid() != parent:
            raise RuntimeError("a worker that fails")
        return real(self, path)

    monkeypatch.setattr(owner, name, or_die_in_child)


def test_failing_child_is_linted_here(tmp_path, monkeypatch):
    tree = _corpus(tmp_path)
    serial = _findings(tree, monkeypatch, parallel=False)
    _failing_in_children(monkeypatch, engine._EntryLinter, "lint")
    assert _parallel_findings(tree, monkeypatch) == serial


def test_a_process_with_threads_lints_serially(tmp_path, monkeypatch):
    import threading

    tree = _corpus(tmp_path)
    serial = _findings(tree, monkeypatch, parallel=False)
    forks = []
    real_fork = engine.os.fork
    monkeypatch.setattr(engine.os, "fork", lambda: forks.append(1) or real_fork())
    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    try:
        assert _parallel_findings(tree, monkeypatch) == serial
    finally:
        release.set()
        worker.join()
    assert forks == []


def _package_tree(tmp_path: Path) -> Path:
    """A package whose modules import it (as torch's do), with a broken module: the run reads
    every file into facts in worker processes first, and hands them to this one."""
    from tests.lint.test_linker_scaling import _package

    tree = tmp_path / "pkgtree"
    _package(tree, 60, 7)
    (tree / "pkg" / "broken.py").write_bytes(b"import pkg\ndef f(:\n")
    return tree


@pytest.mark.parametrize("spooled", [True, False], ids=["facts-spooled", "facts-piped"])
def test_a_package_read_in_worker_processes_lints_as_serially(tmp_path, monkeypatch, spooled):
    tree = _package_tree(tmp_path)
    serial = _findings(tree, monkeypatch, parallel=False)
    assert len({f["path"] for f in serial}) > 10
    handed = []
    real_unspool = engine._unspool

    def unspool(spool):
        facts = real_unspool(spool)
        handed.append(len(facts))
        return facts

    monkeypatch.setattr(engine, "_unspool", unspool)
    if not spooled:  # no temporary file to be had: the facts come back through the pipe, at the end
        monkeypatch.setattr(engine, "_spools", lambda workers: None)
    assert _parallel_findings(tree, monkeypatch) == serial
    assert len(handed) == (2 if spooled else 0) and all(handed)  # two children, each read some files


def test_a_child_failing_while_reading_leaves_its_share_to_this_process(tmp_path, monkeypatch):
    tree = _package_tree(tmp_path)
    serial = _findings(tree, monkeypatch, parallel=False)
    _failing_in_children(monkeypatch, engine.Project, "entry_module")
    assert _parallel_findings(tree, monkeypatch) == serial


_FORK_PROBE = """
import os, sys
started = set(sys.modules)
real_fork = os.fork
at_fork = []

def fork():
    at_fork.append(sorted(m for m in ("re", "fnmatch", "enum", "functools", "pickle", "_pickle", "struct") if m in sys.modules and m not in started))
    return real_fork()

os.fork = fork
from opscan.cli import main
rc = main(sys.argv[1:])
sys.stderr.write("AT_FORK=%r\\n" % (at_fork[:1],))
"""


def test_the_work_is_shared_before_re_or_pickle_is_imported(tmp_path):
    """Whatever the parent imports before it forks, every run of many files waits for: fnmatch (for the
    default exclusions), re, enum and pickle were ~9 ms of it, where the whole run is a few hundred."""
    import subprocess

    from tests.util import subprocess_env

    if engine._workers() < 2:
        pytest.skip("one core: lint does not fork")
    tree = tmp_path / "scripts"
    tree.mkdir()
    body = "import torch\n\n\ndef step(x):\n    return torch.relu(x)\n\n\n" + "y = step(1)\n" * 3000
    for i in range(12):  # past PARALLEL_MIN_FILES and PARALLEL_MIN_BYTES
        (tree / f"train_{i}.py").write_text(body)
    env = subprocess_env()
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", _FORK_PROBE, "lint", "--no-cache", "scripts"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("AT_FORK=")]
    assert lines == ["AT_FORK=[[]]"], proc.stderr


@pytest.mark.parametrize("n, workers", [(0, 2), (1, 2), (9, 2), (202, 2), (2352, 2), (2352, 16), (100, 3)])
def test_the_deal_covers_every_file_once_and_ends_in_batches_of_one(n, workers):
    """The processes finish together only if the last batches are small (a core otherwise idles half a batch)."""
    batches = engine._batches(n, workers)
    assert [i for batch in batches for i in batch] == list(range(n))
    sizes = [len(batch) for batch in batches]
    assert sizes == sorted(sizes, reverse=True)  # the large ones first: a package's files stay together
    assert all(size <= max(1, n // (workers * 16)) for size in sizes)
    assert sizes[-workers:] == [1] * min(workers, n)
