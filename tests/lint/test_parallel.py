"""The facts of many files are built in worker processes: the findings must not change."""

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
        real = engine._extract_in_processes

        def spy(jobs, workers):
            results = real(jobs, workers)
            calls.append(results is not None)
            return results

        monkeypatch.setattr(engine, "_extract_in_processes", spy)
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
    assert list((tmp_path / "cache").glob("facts-*.pickle"))
    warm = _findings(tree, monkeypatch, parallel=False, use_cache=True)
    assert warm == cold == _findings(tree, monkeypatch, parallel=False)


def test_no_fork_falls_back_to_serial(tmp_path, monkeypatch):
    import multiprocessing

    tree = _corpus(tmp_path)
    serial = _findings(tree, monkeypatch, parallel=False)
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    assert engine._extract_in_processes([("x.py", b"", "")], 2) is None
    monkeypatch.undo()

    def refuse(*args, **kwargs):
        raise OSError(38, "Function not implemented")  # e.g. no /dev/shm for the pool's semaphores

    monkeypatch.setattr(multiprocessing.get_context("fork"), "Pool", refuse)
    assert engine._extract_in_processes([("x.py", b"", "")], 2) is None
    monkeypatch.undo()
    assert _findings(tree, monkeypatch, parallel=False) == serial
