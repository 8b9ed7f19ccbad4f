"""Imports resolve as Python's path finder resolves them, from the roots and from a linted file's package root.

A regular package (a folder with `__init__.py`) or a module on any search folder
wins over a folder without `__init__.py` (a namespace portion, PEP 420); a file
inside a package also finds its own package from the folder above the topmost
`__init__.py` (its package root, where it is run from or installed). The
fixtures `project_checkout_named_like_package`, `project_package_over_namespace_folder`
and `project_namespace_package` hold the layouts linted from inside the project;
here, what a fixture cannot say: the same tree linted from other folders, what
`-v` lists, and that entries of different package roots share no wrong walk.
Without a config, a file's imports also resolve against its project's root (the
nearest folder with a pyproject.toml, setup.py or setup.cfg) and that root's src,
after the working directory's: a project lints the same from any folder.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from opscan.cli import main
from tests.lint.test_linker_scaling import _new_project, _trace_text
from tests.util import chdir

UTIL = "import torch\n\n\ndef init_seeds(seed=0):\n    torch.manual_seed(seed)\n"
TRAIN = "import torch\nfrom pkg.util import init_seeds\n\ninit_seeds(0)\nmodel = torch.nn.Linear(2, 2).cuda()\n"
MESSAGE = "DET001 [*] Seeds via `pkg.util.init_seeds` (`torch.manual_seed`) but never enables determinism"


def _write(folder: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def _lint(folder: Path, capsys, *args: str) -> tuple[int, str, str]:
    with chdir(folder):
        rc = main(["lint", "--no-cache", "--select", "DET001", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def _findings(out: str) -> list[str]:
    return [line for line in out.splitlines() if re.match(r"^\S+:\d+:\d+: [A-Z]+\d+ ", line)]


def _checkout(tmp_path: Path) -> Path:
    """A checkout `pkg/` named like the package `pkg/pkg/` it holds, as fairseq/fairseq is."""
    return _write(tmp_path, {"pkg/pkg/__init__.py": "", "pkg/pkg/util.py": UTIL, "pkg/pkg/train.py": TRAIN, "pkg/README.md": "x\n"})


def test_a_checkout_named_like_its_package_lints_the_same_from_any_folder(tmp_path, capsys):
    _checkout(tmp_path)
    runs = [
        (tmp_path, ("-v", "pkg"), "pkg/pkg/train.py"),  # from above the checkout: `pkg` is not the checkout folder
        (tmp_path, ("-v", "pkg/pkg/train.py"), "pkg/pkg/train.py"),
        (tmp_path / "pkg", ("-v", "."), "pkg/train.py"),  # from inside the checkout, as before
        (tmp_path / "pkg" / "pkg", ("-v", "train.py"), "train.py"),  # from inside the package: found from its package root
    ]
    for folder, args, shown in runs:
        rc, out, err = _lint(folder, capsys, *args)
        assert _findings(out) == [f"{shown}:4:1: {MESSAGE}; call `torch.use_deterministic_algorithms(True)` before calling it"], (folder, args)
        assert rc == 1 and "resolve to no file" not in err, (folder, args, err)


def test_verbose_lists_a_module_a_namespace_folder_lacks(tmp_path, capsys):
    # `utils/` (no __init__.py) is what `utils` imports; it holds no `seeding`, so the import fails,
    # where it used to pass silently as the project's own package.
    _write(tmp_path, {
        "utils/notes.py": "",
        "lib/utils/__init__.py": "",
        "lib/utils/seeding.py": "import torch\n\n\ndef seed_all(s):\n    torch.manual_seed(s)\n",
        "train.py": "import torch\nfrom utils.seeding import seed_all\n\nseed_all(0)\n",
    })  # fmt: skip
    _, _, err = _lint(tmp_path, capsys, "-v", "train.py")
    listed = [line for line in err.splitlines() if line.startswith("opscan:   ")]
    assert listed == [
        (
            "opscan:   utils.seeding (imported at train.py:2): `utils` is a folder without __init__.py that holds no `seeding`;"
            " lib holds it; add that folder to `roots` under [tool.opscan] in pyproject.toml"
        )
    ]
    # With a config, the hint names the file that would take the folder.
    _write(tmp_path, {"pyproject.toml": '[tool.opscan]\nselect = ["DET001"]\n'})
    _, _, err = _lint(tmp_path, capsys, "-v", "train.py")
    assert [line for line in err.splitlines() if line.startswith("opscan:   ")][0].endswith(
        " lib holds it; add that folder to `roots` in pyproject.toml"
    )
    (tmp_path / "pyproject.toml").unlink()
    # A namespace package imported whole, or a module it holds, is no miss.
    (tmp_path / "train.py").write_text("import torch\nimport utils\nimport utils.notes\n")
    _, _, err = _lint(tmp_path, capsys, "-v", "train.py")
    assert "resolve to no file" not in err


def test_a_regular_package_in_the_scripts_folder_wins_over_a_namespace_folder_in_a_root(tmp_path, capsys):
    # The script's folder comes first, but a folder without __init__.py there is only a portion: the
    # regular package of the root wins, as `python scripts/train.py` would import it.
    _write(tmp_path, {
        "scripts/pkg/util.py": "def init_seeds(seed=0):\n    return seed\n",
        "pkg/__init__.py": "",
        "pkg/util.py": UTIL,
        "scripts/train.py": TRAIN,
    })  # fmt: skip
    _, out, _ = _lint(tmp_path, capsys, "scripts/train.py")
    assert _findings(out) == [f"scripts/train.py:4:1: {MESSAGE}; call `torch.use_deterministic_algorithms(True)` before calling it"]


def test_entries_of_different_package_roots_share_no_wrong_walk(tmp_path):
    """Walks are shared by entries whose folder and package root hold none of the names looked up
    (project._Record.heads): entries in two checkouts of a package `pkg`, one seeding and one not,
    beside a namespace folder `pkg/` and a script of the root, each get their own `pkg`."""
    _write(tmp_path, {
        "a/pkg/__init__.py": "",
        "a/pkg/util.py": UTIL,
        "a/pkg/train.py": "import common\nfrom pkg.util import init_seeds\n\ninit_seeds(0)\n",
        "b/pkg/__init__.py": "",
        "b/pkg/util.py": "def init_seeds(seed=0):\n    return seed\n",
        "b/pkg/train.py": "import common\nfrom pkg.util import init_seeds\n\ninit_seeds(0)\n",
        "b/pkg/sub/__init__.py": "",
        "b/pkg/sub/deep.py": "import common\nimport pkg.util\n\npkg.util.init_seeds(1)\n",
        "pkg/other.py": "",
        "common.py": "import torch\nimport pkg.util\n\n\ndef helper():\n    pkg.util.init_seeds(2)\n\n\nhelper()\n",
        "run.py": "import common\n",
    })  # fmt: skip
    files = sorted(tmp_path.rglob("*.py"))
    shared = _new_project(tmp_path, files)
    texts = {}
    for path in files:
        texts[path] = _trace_text(shared, path)
        assert texts[path] == _trace_text(_new_project(tmp_path, files), path), path
    seeds = {path.relative_to(tmp_path).as_posix(): "Seed(" in text for path, text in texts.items()}
    assert seeds["a/pkg/train.py"] and not seeds["b/pkg/train.py"] and not seeds["b/pkg/sub/deep.py"]
    assert not seeds["run.py"]  # `pkg` of the root is the namespace folder, which holds no util


def test_the_folders_that_decide_a_package_root_are_what_a_run_depended_on(tmp_path):
    # The run cache (opscan.lint.runcache) replays a run only while every folder in looked_at is
    # unchanged: an `__init__.py` added or removed anywhere up the chain moves the package root.
    _write(tmp_path, {"a/b/__init__.py": "", "a/b/c/__init__.py": "", "a/b/c/mod.py": "x = 1\n"})
    entry = tmp_path / "a" / "b" / "c" / "mod.py"
    project = _new_project(tmp_path / "a", [entry])  # the root is the package root: no lookup but the walk up lists a/b
    project.trace(project.entry_module(entry))
    assert {str(tmp_path / "a" / "b" / "c"), str(tmp_path / "a" / "b"), str(tmp_path / "a")} <= project.looked_at


# ---------------------------------------------------------------- a project's root, without a config

SEED_ALL = "import random\n\nimport torch\n\n\ndef seed_all(seed):\n    random.seed(seed)\n    torch.manual_seed(seed)\n"
SCRIPT = 'import torch\n\nfrom mylib.utils import seed_all\n\nif __name__ == "__main__":\n    seed_all(0)\n    model = torch.nn.Linear(2, 2).cuda()\n'
SEEDS_VIA = "DET001 [*] Seeds via `mylib.utils.seed_all` (`random.seed`) but never enables determinism"
PROJECT_FILES = {
    "pyproject.toml": '[project]\nname = "mylib"\nversion = "0.1"\ndependencies = ["torch>=2.10"]\n',
    "setup.py": 'from setuptools import setup\n\nsetup(name="mylib", install_requires=["torch>=2.10"])\n',
    "setup.cfg": "[metadata]\nname = mylib\n\n[options]\ninstall_requires =\n    torch>=2.10\n",
}


def _project_tree(tmp_path: Path, project_file: str = "pyproject.toml", package: str = "mylib") -> Path:
    """tmp_path/proj: a project (no [tool.opscan]) whose script imports its package `mylib` from the
    project's root (or, with `package` "src/mylib", from its src); a sibling folder `elsewhere`. The
    .git at tmp_path is the repository's root, where the walk up for the project's root ends."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "elsewhere").mkdir()
    return _write(tmp_path / "proj", {
        project_file: PROJECT_FILES[project_file],
        f"{package}/__init__.py": "",
        f"{package}/utils.py": SEED_ALL,
        "scripts/train.py": SCRIPT,
    })  # fmt: skip


@pytest.mark.parametrize("project_file", sorted(PROJECT_FILES))
@pytest.mark.parametrize("package", ["mylib", "src/mylib"])
def test_a_project_without_a_config_lints_the_same_from_any_folder(tmp_path, capsys, project_file, package):
    # Its imports resolve against the root of the file's project (and its src), as well as the working
    # directory: from outside the project, `mylib` was unresolved and the finding lost.
    proj = _project_tree(tmp_path, project_file, package)
    runs = [
        (proj, "scripts/train.py"),
        (tmp_path, "proj/scripts/train.py"),
        (tmp_path / "elsewhere", "../proj/scripts/train.py"),
        (proj / "scripts", "train.py"),
        (proj / package.partition("/")[0], "../scripts/train.py"),  # inside the package (mylib), or src
    ]
    for folder, shown in runs:
        target = os.path.relpath(proj, folder)
        rc, out, err = _lint(folder, capsys, "-v", target)
        assert _findings(out) == [f"{shown}:6:5: {SEEDS_VIA}; call `torch.use_deterministic_algorithms(True)` before calling it"], (folder, err)
        assert rc == 1 and "resolve to no file" not in err, (folder, err)
    # A configured torch (no walk for its requirement) finds the project's root the same.
    rc, out, _ = _lint(tmp_path / "elsewhere", capsys, "--torch-version", "2.12", "../proj")
    assert _findings(out) == [f"../proj/scripts/train.py:6:5: {SEEDS_VIA}; call `torch.use_deterministic_algorithms(True)` before calling it"]


def test_show_settings_and_verbose_name_the_project_roots_used(tmp_path, capsys):
    proj = _project_tree(tmp_path)
    rc, out, _ = _lint(tmp_path / "elsewhere", capsys, "--show-settings", "../proj")
    assert rc == 0 and re.search(r"^roots +\., src, \.\./proj, \.\./proj/src$", out, re.MULTILINE), out
    shutil.rmtree(proj / "mylib")  # now nothing holds mylib: -v says where it was looked for
    rc, out, err = _lint(tmp_path / "elsewhere", capsys, "-v", "../proj")
    assert "imports that look like project modules but resolve to no file under the roots (., src, ../proj, ../proj/src)" in err, err
    # Inside the project, its root is the working directory: listed once.
    rc, out, _ = _lint(proj, capsys, "--show-settings", ".")
    assert re.search(r"^roots +\., src$", out, re.MULTILINE), out


def test_a_config_keeps_its_own_roots(tmp_path, capsys):
    # [tool.opscan] above the project says where imports resolve (roots = ["lib"], from its folder);
    # the project's own root is not added to that, from any folder.
    proj = _project_tree(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.opscan]\nroots = ["lib"]\n')
    (tmp_path / "lib").mkdir()
    for folder, target in ((tmp_path, "proj"), (proj / "scripts", "train.py")):
        rc, out, err = _lint(folder, capsys, "-v", target)
        assert rc == 0 and _findings(out) == [], (folder, out)
        roots = f"{os.path.relpath(tmp_path, folder)}, {os.path.relpath(tmp_path / 'lib', folder)}".replace(os.sep, "/")
        assert f"resolve to no file under the roots ({roots})" in err and "mylib (imported at" in err, (folder, err)
    rc, out, _ = _lint(tmp_path, capsys, "--show-settings", "proj")
    assert re.search(r"^roots +\., lib$", out, re.MULTILINE), out


def test_a_file_outside_any_project_keeps_the_working_directory_roots(tmp_path, capsys):
    # No pyproject.toml, setup.py or setup.cfg up to the repository's root: the roots are the working
    # directory's alone, as before, so `mylib` resolves from the folder that holds it and not from another.
    (tmp_path / ".git").mkdir()
    _write(tmp_path, {"work/mylib/__init__.py": "", "work/mylib/utils.py": SEED_ALL, "scripts/train.py": SCRIPT})
    rc, out, _ = _lint(tmp_path / "work", capsys, "../scripts/train.py")
    assert _findings(out) == [f"../scripts/train.py:6:5: {SEEDS_VIA}; call `torch.use_deterministic_algorithms(True)` before calling it"]
    rc, out, err = _lint(tmp_path, capsys, "-v", "scripts/train.py")
    assert rc == 0 and "mylib (imported at scripts/train.py:3)" in err
    rc, out, _ = _lint(tmp_path / "scripts", capsys, "--show-settings", "train.py")
    assert re.search(r"^roots +\., src$", out, re.MULTILINE), out


def test_the_working_directory_stays_a_root_before_the_projects(tmp_path, capsys):
    # What resolved from the working directory before still does, to the same file: linted from
    # tmp_path, the project's script finds mylib there (the project holds none), and where the project
    # holds one too (that does not seed), the working directory's still comes first.
    proj = _project_tree(tmp_path)
    shutil.rmtree(proj / "mylib")
    _write(tmp_path, {"mylib/__init__.py": "", "mylib/utils.py": SEED_ALL})
    expected = [f"proj/scripts/train.py:6:5: {SEEDS_VIA}; call `torch.use_deterministic_algorithms(True)` before calling it"]
    assert _findings(_lint(tmp_path, capsys, "proj")[1]) == expected
    _write(proj, {"mylib/__init__.py": "", "mylib/utils.py": "def seed_all(seed):\n    return seed\n"})
    assert _findings(_lint(tmp_path, capsys, "proj")[1]) == expected
    assert _findings(_lint(proj, capsys, ".")[1]) == []  # from the project's own folder, its own mylib


def test_verbose_gives_no_hint_to_a_module_named_after_the_library_it_imports(tmp_path, capsys):
    # lightning-bolts' callbacks/torch_ort.py imports the torch_ort package: adding its folder to the
    # roots would make the import find the file itself.
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/callbacks/__init__.py": "",
        "pkg/callbacks/torch_ort.py": "import torch_ort\n",
        "train.py": "import torch\n\nimport pkg.callbacks.torch_ort\n\ntorch.manual_seed(0)\n",
    })  # fmt: skip
    _, _, err = _lint(tmp_path, capsys, "-v", "train.py")
    listed = [line for line in err.splitlines() if line.startswith("opscan:   ")]
    assert listed == ["opscan:   torch_ort (imported at pkg/callbacks/torch_ort.py:1)"]
    # Another file of that name elsewhere is still offered.
    _write(tmp_path, {"vendor/torch_ort.py": ""})
    _, _, err = _lint(tmp_path, capsys, "-v", "train.py")
    listed = [line for line in err.splitlines() if line.startswith("opscan:   ")]
    assert listed == [
        "opscan:   torch_ort (imported at pkg/callbacks/torch_ort.py:1): vendor holds it;"
        " add that folder to `roots` under [tool.opscan] in pyproject.toml"
    ]


def test_verbose_does_not_list_build_tools(tmp_path, capsys):
    # A setup.py's imports are packaging tools, not project modules, installed or not (a Python 3.12+
    # venv has no setuptools; Cython is rarely installed where lint runs).
    _write(tmp_path, {"setup.py": "import Cython\nimport pybind11\nfrom setuptools import setup\n\nsetup(name='p')\n"})
    _, _, err = _lint(tmp_path, capsys, "-v", "setup.py")
    assert "resolve to no file" not in err, err
