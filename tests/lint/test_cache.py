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
