"""The content-keyed facts cache: same findings cold and warm, and edits are seen."""

from __future__ import annotations

import os

from opscan.cli import main
from tests.lint.helpers import chdir


def _run(tmp_path, capsys, *args):
    with chdir(tmp_path):
        rc = main(["lint", *args, "."])
    return rc, capsys.readouterr().out


def test_warm_run_matches_cold_and_sees_edits(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPSCAN_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "train.py").write_text("import torch\ntorch.manual_seed(0)\n")
    rc_cold, cold = _run(tmp_path, capsys)
    assert list((tmp_path / "cache").glob("facts-*/*"))
    rc_warm, warm = _run(tmp_path, capsys)
    assert (rc_cold, cold) == (rc_warm, warm) and "DET001" in warm
    (tmp_path / "train.py").write_text("import torch\n")
    rc, out = _run(tmp_path, capsys)
    assert rc == 0 and "DET001" not in out


def test_corrupt_cache_is_ignored(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPSCAN_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "train.py").write_text("import torch\ntorch.manual_seed(0)\n")
    _run(tmp_path, capsys)
    entries = list((tmp_path / "cache").glob("facts-*/*"))
    assert entries
    for f in entries:
        f.write_bytes(b"\x80\x04garbage")
    rc, out = _run(tmp_path, capsys)
    assert rc == 1 and "DET001" in out


def test_no_cache_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPSCAN_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "train.py").write_text("import torch\ntorch.manual_seed(0)\n")
    _run(tmp_path, capsys, "--no-cache")
    assert not os.path.exists(tmp_path / "cache")


def test_unused_entries_are_pruned_once_they_outnumber_the_used(tmp_path, capsys, monkeypatch):
    from opscan.lint import cache

    monkeypatch.setenv("OPSCAN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "SPARE_ENTRIES", 3)
    train = tmp_path / "train.py"
    for n in range(5):  # five versions of the file: five entries, each used once
        train.write_text(f"import torch\ntorch.manual_seed({n})\n")
        _run(tmp_path, capsys)
    entries = list((tmp_path / "cache").glob("facts-*/*"))
    assert 1 <= len(entries) <= 2 * 1 + 3
    rc, out = _run(tmp_path, capsys)
    assert rc == 1 and "DET001" in out


def test_facts_survive_pickling_whole():
    """Facts are pickled into the cache and from worker processes, with their events packed flat: every
    fixture, example and opscan module comes back equal, field by field, with and without the call filter."""
    import pickle
    from pathlib import Path

    from opscan.lint.facts import extract
    from opscan.lint.relevance import CallFilter

    root = Path(__file__).resolve().parents[2]
    files = sorted([*(root / "tests" / "fixtures").rglob("*.py"), *(root / "examples").rglob("*.py"), *(root / "opscan").rglob("*.py")])
    assert len(files) > 300
    events = 0
    for calls in (None, CallFilter.for_lint()):
        for path in files:
            facts = extract(str(path), path.read_bytes(), "pkg", calls)
            back = pickle.loads(pickle.dumps(facts, protocol=pickle.HIGHEST_PROTOCOL))
            assert back == facts, path
            assert [type(e.what) for e in back.body] == [type(e.what) for e in facts.body], path
            events += len(facts.body) + sum(len(f.events) for f in facts.functions.values())
    assert events > 10_000
