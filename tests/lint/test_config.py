"""[tool.opscan] discovery and merging with flags, through the real CLI."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opscan.cli import main
from opscan.config import Config
from tests.lint.helpers import chdir

BAD = "import torch\n\ntorch.manual_seed(0)\ntorch.backends.cudnn.benchmark = True\n"


def _project(tmp_path, config: str | None, files: dict[str, str]):
    if config is not None:
        (tmp_path / "pyproject.toml").write_text(textwrap.dedent(config))
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def _lint(tmp_path, capsys, *args) -> tuple[int, list[str], str]:
    with chdir(tmp_path):
        rc = main(["lint", "--no-cache", *args])
    out, err = capsys.readouterr()
    codes = [line.split()[1] for line in out.splitlines() if ": DET" in line]
    return rc, codes, err


def test_no_config_selects_everything(tmp_path, capsys):
    _project(tmp_path, None, {"train.py": BAD})
    rc, codes, _ = _lint(tmp_path, capsys, "train.py")
    assert rc == 1
    assert codes == ["DET001", "DET002", "DET005"]


def test_select_and_ignore_from_config(tmp_path, capsys):
    _project(tmp_path, '[tool.opscan]\nselect = ["DET00"]\nignore = ["DET002"]\n', {"train.py": BAD})
    rc, codes, _ = _lint(tmp_path, capsys, "train.py")
    assert codes == ["DET001", "DET005"]


def test_flags_override_config(tmp_path, capsys):
    _project(tmp_path, '[tool.opscan]\nselect = ["DET001"]\n', {"train.py": BAD})
    rc, codes, _ = _lint(tmp_path, capsys, "--select", "DET005", "train.py")
    assert codes == ["DET005"]
    rc, codes, _ = _lint(tmp_path, capsys, "--select", "ALL", "--ignore", "DET001,DET005", "train.py")
    assert codes == ["DET002"]


def test_per_file_ignores(tmp_path, capsys):
    _project(
        tmp_path,
        '[tool.opscan]\n[tool.opscan.per-file-ignores]\n"scripts/*.py" = ["DET001", "DET002"]\n',
        {"scripts/a.py": BAD, "train.py": BAD},
    )
    with chdir(tmp_path):
        rc = main(["lint", "--no-cache", "."])
    out = capsys.readouterr().out
    assert rc == 1
    assert "scripts/a.py:4:1: DET005" in out
    assert "scripts/a.py:3:1: DET001" not in out
    assert "train.py:3:1: DET001" in out


def test_exclude_and_extend_exclude(tmp_path, capsys):
    _project(
        tmp_path,
        '[tool.opscan]\nextend-exclude = ["generated"]\n',
        {"generated/a.py": BAD, "train.py": BAD, ".venv/lib/x.py": BAD},
    )
    with chdir(tmp_path):
        main(["lint", "--no-cache", "."])
    out = capsys.readouterr().out
    assert "generated/" not in out and ".venv" not in out
    assert "train.py:3:1: DET001" in out


def test_force_exclude_applies_to_named_files(tmp_path, capsys):
    _project(tmp_path, '[tool.opscan]\nextend-exclude = ["generated"]\n', {"generated/a.py": BAD})
    rc, codes, _ = _lint(tmp_path, capsys, "generated/a.py")
    assert codes  # named explicitly: linted, as ruff does
    rc, codes, _ = _lint(tmp_path, capsys, "--force-exclude", "generated/a.py")
    assert rc == 0 and codes == []


@pytest.mark.parametrize(
    "config,args",
    [
        ('[tool.opscan]\nselect = ["DET999"]\n', []),
        ('[tool.opscan]\nignore = ["XYZ"]\n', []),
        ('[tool.opscan]\n[tool.opscan.per-file-ignores]\n"a.py" = ["DET0x"]\n', []),
        (None, ["--select", "DET42"]),
        (None, ["--ignore", "E501"]),
        ('[tool.opscan]\nselct = ["DET001"]\n', []),
        ('[tool.opscan]\ntorch-version = "latest"\n', []),
        ("[tool.opscan\n", []),
    ],
)
def test_bad_config_exits_2_with_message(tmp_path, capsys, config, args):
    _project(tmp_path, config, {"train.py": BAD})
    rc, codes, err = _lint(tmp_path, capsys, *args, "train.py")
    assert rc == 2
    assert err.startswith("opscan: error:")
    assert "Traceback" not in err


@pytest.mark.parametrize("section", ["[tool.opscan]", "[tool.opscan.lint]"])
@pytest.mark.parametrize(
    "body, message",
    [
        ('select = "DET001"', "select must be a list of strings"),  # a list without its brackets was taken as one
        ('ignore = "DET001"', "ignore must be a list of strings"),
        ('extend-select = "DET010"', "extend-select must be a list of strings"),
        ('exclude = "generated"', "exclude must be a list of strings"),
        ('extend-exclude = "generated"', "extend-exclude must be a list of strings"),
        ('roots = "src"', "roots must be a list of strings"),
        ("select = [1, 2]", "select must be a list of strings"),
        ('per-file-ignores = {"*.py" = "DET001"}', "per-file-ignores.*.py must be a list of strings"),
        ('per-file-ignores = ["DET001"]', "per-file-ignores must be a table of glob = [codes]"),
    ],
)
def test_a_value_of_the_wrong_type_is_an_error_that_names_its_section(tmp_path, capsys, section, body, message):
    _project(tmp_path, f"{section}\n{body}\n", {"train.py": BAD})
    rc, codes, err = _lint(tmp_path, capsys, "train.py")
    assert (rc, codes) == (2, [])
    assert err == f"opscan: error: {tmp_path / 'pyproject.toml'}: {section} {message}\n"


def test_config_found_by_walking_up(tmp_path, capsys):
    _project(tmp_path, '[tool.opscan]\nignore = ["DET002"]\n', {"src/deep/train.py": BAD})
    rc, codes, _ = _lint(tmp_path / "src", capsys, "deep/train.py")
    assert codes == ["DET001", "DET005"]


def test_roots_resolve_project_imports(tmp_path, capsys):
    helper = "import torch\n\ndef set_seed(s):\n    torch.manual_seed(s)\n"
    script = "from mylib.seed import set_seed\n\nset_seed(0)\n"
    _project(tmp_path, '[tool.opscan]\nroots = ["src"]\n', {"src/mylib/__init__.py": "", "src/mylib/seed.py": helper, "scripts/train.py": script})
    with chdir(tmp_path):
        main(["lint", "--no-cache", "scripts/train.py"])
    out = capsys.readouterr().out
    assert "scripts/train.py:3:1: DET001 [*] Seeds via `mylib.seed.set_seed`" in out


def test_a_package_comes_before_a_module_of_the_same_name(tmp_path, capsys):
    # As Python's FileFinder: `helpers/__init__.py` is imported, not `helpers.py` beside it.
    files = {
        "helpers.py": "def seed():\n    pass\n",
        "helpers/__init__.py": "import torch\n\n\ndef seed():\n    torch.manual_seed(0)\n",
        "train.py": "import torch\nfrom helpers import seed\n\nseed()\n",
    }
    _project(tmp_path, "[tool.opscan]\n", files)
    with chdir(tmp_path):
        main(["lint", "--no-cache", "train.py"])
    out = capsys.readouterr().out
    assert "train.py:4:1: DET001 [*] Seeds via `helpers.seed` (`torch.manual_seed`) but never enables determinism" in out


def test_a_module_built_into_python_is_never_a_project_file(tmp_path, capsys):
    # BuiltinImporter comes before the path: `import itertools` never runs an `itertools.py` beside the script.
    files = {"itertools.py": "import torch\n\ntorch.manual_seed(0)\n", "train.py": "import torch\nimport itertools\n"}
    _project(tmp_path, "[tool.opscan]\n", files)
    with chdir(tmp_path):
        rc = main(["lint", "--no-cache", "train.py"])
    assert (rc, capsys.readouterr().out) == (0, "All checks passed!\n")


@pytest.mark.parametrize("name", ["io", "os", "abc", "stat"])
def test_a_module_loaded_at_start_up_is_never_a_project_file(tmp_path, capsys, name):
    # Start-up has imported these (frozen from 3.11 on): `import io` returns that module, never an `io.py` beside the script.
    files = {f"{name}.py": "import torch\n\ntorch.manual_seed(0)\n", "train.py": f"import torch\nimport {name}\n"}
    _project(tmp_path, "[tool.opscan]\n", files)
    with chdir(tmp_path):
        rc = main(["lint", "--no-cache", "train.py"])
    assert (rc, capsys.readouterr().out) == (0, "All checks passed!\n")


def test_torch_version_from_config_and_flag(tmp_path, capsys):
    # put_ raises from torch 1.9 on: the config's 1.8 has no such op; the flag's 2.14 does.
    src = (
        "import os\nos.environ['CUBLAS_WORKSPACE_CONFIG'] = ':4096:8'\nimport torch\n"
        "torch.use_deterministic_algorithms(True)\nx.put_(index, source)\n"
    )
    _project(tmp_path, '[tool.opscan]\ntorch-version = "1.8"\n', {"train.py": src})
    rc, codes, err = _lint(tmp_path, capsys, "train.py")
    assert (rc, codes, err) == (0, [], "")
    rc, codes, _ = _lint(tmp_path, capsys, "--torch-version", "2.14", "train.py")
    assert codes == ["DET007"]


def _excluded_by_fnmatch(rel: str, patterns: list[str]) -> bool:
    """The exclusion rule spelled out with fnmatch, glob by glob: the oracle for the compiled matcher."""
    import fnmatch

    parts = rel.split("/")
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(rel, pattern + "/*"):
            return True
        if "/" not in pattern and any(fnmatch.fnmatch(part, pattern) for part in parts):
            return True
    return False


_SEGMENT = st.text(alphabet="ab.*?_[]!/", min_size=1, max_size=6)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    patterns=st.lists(_SEGMENT, max_size=4),
    rel=st.lists(st.text(alphabet="ab._", min_size=1, max_size=4).filter(lambda t: t not in (".", "..")), min_size=1, max_size=4).map("/".join),
)
def test_exclusion_matches_the_glob_by_glob_rule(tmp_path_factory, patterns, rel):
    root = tmp_path_factory.getbasetemp()
    cfg = Config(root=root)
    cfg.exclude, cfg.extend_exclude = [], patterns
    assert cfg.is_excluded(root / rel) == _excluded_by_fnmatch(rel, patterns)


@pytest.mark.parametrize(
    "text, configures",
    [
        ("[tool.black]\nline-length = 100\n", False),
        ("[tool.opscan]\n", True),
        ("[tool]\nopscan = { select = ['DET001'] }\n", True),
        ('[tool."\\u006fpscan"]\nselect = ["DET001"]\n', True),  # the name spelled with an escape
    ],
)
def test_pyproject_without_the_name_is_not_parsed_but_escapes_are(tmp_path, monkeypatch, text, configures):
    from opscan import config

    (tmp_path / "pyproject.toml").write_text(text)
    parsed = []
    real = config._read_toml
    monkeypatch.setattr(config, "_read_toml", lambda path: parsed.append(path) or real(path))
    found = config.find_pyproject([str(tmp_path)])
    assert (found is not None) == configures
    assert bool(parsed) == configures
