"""A record's `sources`: which of the project's files the run loaded, by digest (opscan/trace/sources.py)."""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace

import pytest

from opscan._hash import digest
from opscan.trace.sources import module_file, project_sources, target_file
from tests.util import needs_torch


def _project(tmp_path):
    root = (tmp_path / "proj").resolve()
    (root / "models").mkdir(parents=True)
    (root / "train.py").write_text("import models.net\n")
    (root / "models" / "net.py").write_text("W = 1\n")
    return root


def _modules(*paths):
    return {f"m{i}": SimpleNamespace(__file__=str(p)) for i, p in enumerate(paths)}


def test_the_script_and_the_project_modules_it_loaded_by_path_from_its_folder(tmp_path):
    root = _project(tmp_path)
    out = project_sources(str(root / "train.py"), str(root), _modules(root / "models" / "net.py"))
    assert out == {"models/net.py": digest(b"W = 1\n"), "train.py": digest(b"import models.net\n")}


def test_the_keys_do_not_depend_on_the_working_directory(tmp_path):
    root = _project(tmp_path)
    modules = _modules(root / "models" / "net.py")
    here = project_sources(str(root / "train.py"), str(root), modules)
    above = project_sources(str(root / "train.py"), str(tmp_path.resolve()), modules)
    assert here == above


@pytest.mark.parametrize("inside", [".venv/lib/python3.12/site-packages/lib.py", "env/lib/python3.12/dist-packages/lib.py"])
def test_installed_packages_inside_the_project_are_not_its_code(tmp_path, inside):
    root = _project(tmp_path)
    lib = root / inside
    lib.parent.mkdir(parents=True)
    lib.write_text("x = 1\n")
    assert set(project_sources(str(root / "train.py"), str(root), _modules(lib))) == {"train.py"}


def test_pythons_own_files_under_the_working_directory_are_not_the_projects(tmp_path, monkeypatch):
    # A script run from the home folder that holds a conda install: its standard library is no project file.
    home = tmp_path.resolve()
    stdlib = home / "miniconda3" / "lib" / "python3.12" / "os.py"
    stdlib.parent.mkdir(parents=True)
    stdlib.write_text("# os\n")
    monkeypatch.setattr(sys, "base_prefix", str(home / "miniconda3"))
    (home / "train.py").write_text("pass\n")
    assert set(project_sources(str(home / "train.py"), str(home), _modules(stdlib))) == {"train.py"}


def test_a_prefix_that_holds_the_project_still_leaves_its_files_in(tmp_path, monkeypatch):
    # A system Python with prefix /usr and a project in /usr/src/app.
    root = _project(tmp_path)
    monkeypatch.setattr(sys, "prefix", str(tmp_path.resolve()))
    out = project_sources(str(root / "train.py"), str(root), _modules(root / "models" / "net.py"))
    assert set(out) == {"models/net.py", "train.py"}


def test_modules_outside_the_project_opscans_own_and_non_python_files_are_left_out(tmp_path):
    root = _project(tmp_path)
    (root / "ext.so").write_bytes(b"\0")
    elsewhere = tmp_path / "other.py"
    elsewhere.write_text("y = 2\n")
    modules = {
        **_modules(root / "ext.so", elsewhere),
        "opscan.trace.sources": sys.modules["opscan.trace.sources"],
        "builtin": SimpleNamespace(),  # no __file__
        "odd": SimpleNamespace(__file__=None),
    }
    assert set(project_sources(str(root / "train.py"), str(root), modules)) == {"train.py"}


def test_an_unreadable_file_is_left_out(tmp_path):
    root = _project(tmp_path)
    gone = root / "gone.py"  # a module whose file was deleted after it was imported
    assert set(project_sources(str(root / "train.py"), str(root), _modules(gone))) == {"train.py"}


def test_a_target_without_a_file_digests_the_project_modules_under_the_working_directory(tmp_path):
    root = _project(tmp_path)
    out = project_sources(None, str(root), _modules(root / "models" / "net.py"))
    assert list(out) == ["models/net.py"]


@pytest.mark.parametrize(
    "spec, kind, file",
    [
        ("train.py", "script", "train.py"),
        ("models/tiny.py:build", "callable", "models/tiny.py"),
        (f"pkg{os.sep}mod:build", "callable", f"pkg{os.sep}mod"),
        ("mypkg.models:build", "callable", None),
        ("torchvision:resnet18", "zoo", None),
    ],
)
def test_the_file_a_target_names(spec, kind, file):
    assert target_file(spec, kind) == file


def test_the_file_a_module_target_was_imported_from(tmp_path):
    (tmp_path / "m.py").write_text("")
    modules = {"m": SimpleNamespace(__file__=str(tmp_path / "m.py")), "pkg": SimpleNamespace(__file__=None)}
    assert module_file("m:build", "callable", modules) == os.path.realpath(tmp_path / "m.py")
    assert module_file("pkg:build", "callable", modules) is None  # a namespace package: no file
    assert module_file("other:build", "callable", modules) is None  # not imported
    assert module_file("m.py:build", "callable", modules) is None  # a file: target_file's
    assert module_file("torchvision:resnet18", "zoo", modules) is None


@needs_torch
def test_records_of_one_target_typed_from_two_folders_are_of_one_target(tmp_path):
    """The header keeps the target as typed (`../m.py:build` from sub/), and `target_file`, its real path: compare
    warned that the records were of different targets, and listed the target as an environment difference."""
    from tests.record.helpers import CPU, opscan

    (tmp_path / "m.py").write_text("import torch\nfrom torch import nn\n\n\ndef build():\n    return nn.Linear(8, 4), torch.randn(4, 8)\n")
    (tmp_path / "sub").mkdir()
    assert opscan("record", "m.py:build", *CPU, "-o", "a.jsonl", cwd=tmp_path).returncode == 0
    assert opscan("record", "../m.py:build", *CPU, "-o", "../b.jsonl", cwd=tmp_path / "sub").returncode == 0
    headers = [json.loads((tmp_path / name).read_text().splitlines()[0]) for name in ("a.jsonl", "b.jsonl")]
    assert [h["target"] for h in headers] == ["m.py:build", "../m.py:build"]  # as typed
    assert {h["target_file"] for h in headers} == {str((tmp_path / "m.py").resolve())}
    proc = opscan("compare", "a.jsonl", "b.jsonl", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "different targets" not in proc.stdout and "target=" not in proc.stdout  # nor an environment difference




@needs_torch
def test_compare_of_two_records_of_one_unchanged_script_says_the_same_code_took_another_path(tmp_path):
    from tests.record.helpers import BRANCHING_SCRIPT, CPU, opscan

    (tmp_path / "train.py").write_text(BRANCHING_SCRIPT)
    for name in ("a.jsonl", "b.jsonl"):
        proc = opscan("record", "--steps", "1", *CPU, "-o", name, "--run", "train.py", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    proc = opscan("compare", "a.jsonl", "b.jsonl", "--output-format", "json", cwd=tmp_path)
    doc = json.loads(proc.stdout)
    (finding,) = [f for f in doc["findings"] if f["code"] == "DET203"]
    assert "Both records are of the same code (the digests of 1 project file match), so something outside it chose the path" in finding["message"]
    assert "change to the code" not in finding["help"] and not any("different code" in n for n in doc["notices"])


@needs_torch
def test_compare_of_records_of_an_edited_script_says_the_code_differs(tmp_path):
    from tests.record.helpers import BRANCHING_SCRIPT, CPU, opscan

    script = tmp_path / "train.py"
    script.write_text(BRANCHING_SCRIPT)
    assert opscan("record", "--steps", "1", *CPU, "-o", "a.jsonl", "--run", "train.py", cwd=tmp_path).returncode == 0
    script.write_text(BRANCHING_SCRIPT.replace("lr=0.1", "lr=0.2"))
    assert opscan("record", "--steps", "1", *CPU, "-o", "b.jsonl", "--run", "train.py", cwd=tmp_path).returncode == 0
    proc = opscan("compare", "a.jsonl", "b.jsonl", "--output-format", "json", cwd=tmp_path)
    doc = json.loads(proc.stdout)
    assert "warning: the records are of different code: train.py differs between them" in doc["notices"]
    (finding,) = [f for f in doc["findings"] if f["code"] == "DET203"]
    assert "same code" not in finding["message"] and "the code differs" in finding["message"]
    assert "different code" in finding["help"]
