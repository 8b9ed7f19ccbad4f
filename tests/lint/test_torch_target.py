"""The torch releases lint targets: specifiers, requirement files, the installed torch, and the flags that show them.

The fixtures `tests/fixtures/lint/project_pin_*` pin torch 2.4 and 2.14 through
each kind of requirement file and hold the findings that follow; here, where
each range came from, what a specifier admits (against an oracle written
apart from opscan's code), and the command line around it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opscan.cli import main
from opscan.config import Config
from opscan.lint import engine
from opscan.lint.target import TorchTargets, conda_dependencies, installed_torch, parse_requirement
from opscan.rules import NEWEST_TORCH, load
from opscan.versions import TorchRange, VersionError, parse_specifier, release_key
from tests.util import chdir, subprocess_env

ROOT = Path(__file__).resolve().parents[2]
LINT_FIXTURES = ROOT / "tests" / "fixtures" / "lint"
KNOWN = load().releases


# ---------------------------------------------------------------- the releases the rules know


def test_known_releases_are_every_minor_from_1_8_to_the_newest():
    assert KNOWN[0] == "1.8" and KNOWN[-1] == NEWEST_TORCH
    assert KNOWN == tuple([f"1.{m}" for m in range(8, 14)] + [f"2.{m}" for m in range(int(NEWEST_TORCH.split(".")[1]) + 1)])


def test_the_cublas_check_ends_at_2_10():
    check = load().env_check("CUBLAS_WORKSPACE_CONFIG")
    assert check.checked_on("2.9.1") and not check.checked_on("2.10.0")
    assert check.values == (":4096:8", ":16:8")
    from opscan.lint.model import VALID_CUBLAS

    assert check.values == VALID_CUBLAS  # the values DET003 accepts are the data's
    assert "PR #161749" in check.provenance and "2.9.1" in check.provenance and "2.10.0" in check.provenance


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[releases]\nknown = ["2.1", "2.0"]\n', "oldest first"),
        ('[releases]\nknown = ["2.0", "2.0"]\n', "each release once"),
        ('[releases]\nknown = ["2.0.1"]\n', "releases like"),
        ('[[environment]]\nid = "x"\nvar = "V"\nvalues = ["a"]\n', "missing key 'torch'"),
        ('[[environment]]\nid = "x"\nvar = "V"\nvalues = []\ntorch = "<2"\n', "values must be"),
        ('[[environment]]\nid = "x"\nvar = "V"\nvalues = ["a"]\ntorch = "~=2"\n', "bad version clause"),
    ],
)
def test_the_loader_checks_releases_and_environment_checks(tmp_path, text, message):
    from opscan.rules import RulesError

    (tmp_path / "torch.toml").write_text(text)
    with pytest.raises(RulesError, match=re.escape(message)):
        load.__wrapped__(str(tmp_path))


def test_the_bundled_data_must_define_the_releases(tmp_path, monkeypatch):
    import shutil

    from opscan import rules
    from opscan.rules import RulesError

    copy = tmp_path / "rules"
    shutil.copytree(rules.rules_dir(), copy)
    (copy / "torch.toml").unlink()
    monkeypatch.setattr(rules, "rules_dir", lambda: copy)
    with pytest.raises(RulesError, match="no file defines"):
        load.__wrapped__()


@pytest.mark.parametrize("command", [["lint", "--no-cache", "train.py"], ["report", "--device", "none", "--torch-version", "2.9"]])
def test_a_copy_of_the_package_without_its_rules_is_a_clear_error(tmp_path, command):
    """opscan/ copied without the rules/ folder beside it: an IndexError traceback in TorchRange.from_spec."""
    import shutil

    package = Path(engine.__file__).parents[1]
    shutil.copytree(package, tmp_path / "copy" / "opscan", ignore=shutil.ignore_patterns("__pycache__", "_rules"))
    (tmp_path / "train.py").write_text("import torch\n\ntorch.manual_seed(0)\n")
    env = {**subprocess_env(), "PYTHONPATH": str(tmp_path / "copy")}
    proc = subprocess.run([sys.executable, "-m", "opscan", *command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    folder = tmp_path / "copy" / "rules"
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr == (
        f"opscan: error: opscan's rules data is missing: {folder} holds no rules file (*.toml); "
        "reinstall opscan, or run it from a checkout that has its rules/ folder\n"
    )
    assert not folder.exists()


# ---------------------------------------------------------------- specifiers, against an oracle


def _oracle_admits(clauses: list[tuple[str, tuple[int, ...], bool]], version: tuple[int, ...]) -> bool:
    """PEP 440 on release tuples, written apart from opscan.versions: pad both sides with zeros and compare."""

    def pad(v, n=8):
        return tuple(v) + (0,) * (n - len(v))

    for op, bound, star in clauses:
        if star:
            same = pad(version)[: len(bound)] == tuple(bound)
            ok = same if op == "==" else not same
        elif op == "~=":
            ok = pad(version) >= pad(bound) and pad(version)[: len(bound) - 1] == tuple(bound[:-1])
        else:
            v, b = pad(version), pad(bound)
            ok = {"==": v == b, "===": v == b, "!=": v != b, "<": v < b, "<=": v <= b, ">": v > b, ">=": v >= b}[op]
        if not ok:
            return False
    return True


def _oracle_releases(clauses) -> tuple[str, ...]:
    """The known releases X.Y for which some X.Y.p, p from 0 to 40, is admitted."""
    out = []
    for release in KNOWN:
        major, minor = map(int, release.split("."))
        if any(_oracle_admits(clauses, (major, minor, p)) for p in range(41)):
            out.append(release)
    return tuple(out)


_versions = st.lists(st.integers(0, 16), min_size=1, max_size=4).map(lambda parts: [min(parts[0], 3), *parts[1:]])


@st.composite
def _clause(draw):
    op = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "~=", "==="]))
    parts = draw(_versions)
    if op == "~=" and len(parts) < 2:
        parts = parts + [draw(st.integers(0, 16))]
    star = op in ("==", "!=") and draw(st.booleans())
    label = "" if star else draw(st.sampled_from(["", "", "+cu130", "rc1", ".post1", ".dev0"]))
    text = ".".join(map(str, parts)) + (".*" if star else label)
    space = draw(st.sampled_from(["", " "]))
    return (op, tuple(parts), star), f"{space}{op}{space}{text}{space}"


@settings(max_examples=500, deadline=None)
@given(st.lists(_clause(), min_size=1, max_size=3))
def test_a_specifier_targets_exactly_the_releases_that_satisfy_it(clauses):
    text = ",".join(t for _, t in clauses)
    expected = _oracle_releases([c for c, _ in clauses])
    got = TorchRange.from_spec(text, KNOWN, "test")
    if expected:
        assert got.releases == expected and not got.warning, text
    else:
        assert got.warning and len(got.releases) in (1, len(KNOWN)), text  # mapped to the nearest, and said so


@given(st.sampled_from(KNOWN), st.integers(0, 9), st.sampled_from(["", "+cu130", "+cpu", "a0", ".post2"]))
def test_a_bare_version_is_its_release(release, patch, label):
    assert TorchRange.from_spec(release, KNOWN, "x").releases == (release,)
    assert TorchRange.from_spec(f"{release}.{patch}{label}", KNOWN, "x").releases == (release,)


@pytest.mark.parametrize(
    ("spec", "releases"),
    [
        (">=2.4,<2.7", ("2.4", "2.5", "2.6")),
        ("==2.11.*", ("2.11",)),
        ("~=2.12", ("2.12", "2.13", "2.14")),
        ("~=2.4.1", ("2.4",)),
        ("2.11", ("2.11",)),
        ("==2.11.0+cu130", ("2.11",)),
        (">2.13", ("2.13", "2.14")),  # 2.13.1 is above 2.13
        ("!=2.13.*,>=2.12", ("2.12", "2.14")),
    ],
)
def test_specifier_examples(spec, releases):
    assert TorchRange.from_spec(spec, KNOWN, "x").releases == releases


@pytest.mark.parametrize("bad", ["banana", "", ">=", "2.4,", ">=2.*", "~=2", "1!2.0", ">= 2.4 <2.7", "==2.4.*+cu1", "latest"])
def test_bad_specifiers_are_refused(bad):
    with pytest.raises(VersionError):
        parse_specifier(bad)


def test_describe_names_the_releases_relative_to_the_range():
    every = TorchRange.every(KNOWN)
    assert every.describe(every.subset("<2.10")) == "< 2.10"
    assert every.describe(every.subset(">=1.13,<2.6")) == "1.13 to 2.5"
    assert every.describe(every.subset(">=1.9")) == ">= 1.9"
    assert every.describe(every.subset(">=1.8")) == ""  # all of them: no qualifier
    assert every.describe(("2.1", "2.3", "2.4")) == "2.1 and 2.3 to 2.4"
    some = TorchRange.from_spec(">=2.8,<2.12", KNOWN, "x")
    assert some.describe(some.subset("<2.9")) == "2.8"
    assert str(some) == "2.8 to 2.11" and str(TorchRange.from_spec("!=2.5.*", KNOWN, "x")) == "1.8 to 2.4 and 2.6 to 2.14"


def test_describe_never_takes_in_releases_between_the_targeted_ones():
    # Pins of 1.12, 1.13 and 2.12 (three requirement files): "< 2.12" said that 2.10 and 2.11 need the variable.
    pins = TorchRange(("1.12", "1.13", "2.12"), KNOWN, "x")
    assert pins.describe(pins.subset("<2.10")) == "1.12 to 1.13"
    assert pins.describe(("1.12", "2.12")) == "1.12 and 2.12"


def _reading(description: str, targeted: tuple[str, ...]) -> set[str]:
    """The known releases, from the oldest to the newest targeted, that a reader takes `description` to name."""
    span = KNOWN[KNOWN.index(targeted[0]) : KNOWN.index(targeted[-1]) + 1]
    key = release_key
    if description == "":
        return set(targeted)
    if description.startswith("< "):
        return {r for r in span if key(r) < key(description[2:])}
    if description.startswith(">= "):
        return {r for r in span if key(r) >= key(description[3:])}
    named = set()
    for part in description.replace(" and ", ", ").split(", "):
        first, _, last = part.partition(" to ")
        named |= {r for r in span if key(first) <= key(r) <= key(last or first)}
    return named


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_describe_names_exactly_the_subset(data):
    chosen = set(data.draw(st.lists(st.sampled_from(KNOWN), min_size=1, unique=True)))
    targeted = tuple(r for r in KNOWN if r in chosen)
    chosen = set(data.draw(st.lists(st.sampled_from(targeted), min_size=1, unique=True)))
    subset = tuple(r for r in targeted if r in chosen)
    text = TorchRange(targeted, KNOWN, "x").describe(subset)
    assert _reading(text, targeted) == set(subset), (targeted, subset, text)


# ---------------------------------------------------------------- requirement strings


_names = st.sampled_from(["torch", "Torch", "TORCH", "torchvision", "pytorch_lightning", "Py.Torch-Lightning", "numpy"])


@given(
    name=_names,
    extras=st.sampled_from(["", "[cuda]", "[a,b]", " [opt] "]),
    spec=st.sampled_from(["", ">=2.4,<2.7", "==2.11.0+cu130", "~=2.4", " >= 2.4 , < 2.7 ", "==2.4.*"]),
    parens=st.booleans(),
    marker=st.sampled_from(["", "; python_version >= '3.9'", ' ; sys_platform == "linux" and extra == "gpu"']),
)
def test_requirement_strings(name, extras, spec, parens, marker):
    body = f"({spec.strip()})" if parens and spec.strip() else spec
    req = parse_requirement(f"{name}{extras}{body}{marker}")
    assert req is not None
    assert req.name == name.lower().replace("_", "-").replace(".", "-")
    assert req.spec == spec.strip()
    assert req.marker == marker.strip().lstrip(";").strip()


def test_requirement_urls_and_non_requirements():
    wheel = parse_requirement("torch @ https://download.pytorch.org/whl/cu121/torch-2.1.0%2Bcu121-cp310-cp310-linux_x86_64.whl ; python_version<'3.12'")
    assert (wheel.name, wheel.spec, wheel.marker) == ("torch", "", "python_version<'3.12'") and wheel.url.endswith(".whl")
    assert parse_requirement("torch@git+https://github.com/pytorch/pytorch").url == "git+https://github.com/pytorch/pytorch"
    assert parse_requirement("torch 2.4") is None and parse_requirement("-e .") is None and parse_requirement("") is None


def _targets_for(folder: Path, **kwargs) -> tuple[TorchRange, TorchTargets]:
    targets = TorchTargets(KNOWN, installed=False, stop_at=folder, **kwargs)
    with chdir(folder):
        return targets.for_file(folder / "train.py"), targets


@pytest.mark.parametrize(
    ("fixture", "releases", "where"),
    [
        ("project_pin_pyproject/torch_2_4", ("2.4",), "pyproject.toml [project] dependencies: torch==2.4.*; python_version >= '3.9'"),
        ("project_pin_pyproject/torch_2_14", ("2.14",), "pyproject.toml [project.optional-dependencies] train: Torch[opt] >= 2.14, < 2.15"),
        ("project_pin_requirements/torch_2_4", ("2.4",), "deps/base.txt: torch==2.4.1"),
        ("project_pin_requirements/torch_2_14", ("2.14",), "deps/gpu.txt: torch @ https://download.pytorch.org/whl/cu128/torch-2.14.1%2Bcu128-cp311-cp311-manylinux_2_28_x86_64.whl ; sys_platform == \"linux\""),
        ("project_pin_setup_cfg/torch_2_4", ("2.4",), "setup.cfg [options] install_requires: torch>=2.4,<2.5"),
        ("project_pin_setup_cfg/torch_2_14", ("2.14",), "setup.cfg [options.extras_require] train: torch~=2.14.0"),
        ("project_pin_setup_py/torch_2_4", ("2.4",), "setup.py setup(install_requires=...): torch==2.4.0"),
        ("project_pin_setup_py/torch_2_14", ("2.14",), "setup.py setup(install_requires=...): torch>=2.14"),
        ("project_pin_environment_yml/torch_2_4", ("2.4",), "environment.yml dependencies: pytorch::pytorch=2.4"),
        ("project_pin_environment_yml/torch_2_14", ("2.14",), "environment.yaml pip: torch==2.14.1"),
        ("project_pin_uv_lock/torch_2_4", ("2.4",), "uv.lock: torch 2.4.1"),
        ("project_pin_uv_lock/torch_2_14", ("2.14",), "uv.lock: torch 2.14.1+cu128"),  # the lock wins over pyproject's torch>=2.0
        ("project_pin_poetry_lock/torch_2_4", ("2.4",), "poetry.lock: torch 2.4.1"),
        ("project_pin_poetry_lock/torch_2_14", ("2.14",), "poetry.lock: torch 2.14.1"),
        ("project_pin_pylock/torch_2_4", ("2.4",), "pylock.toml: torch 2.4.1"),
        ("project_pin_pylock/torch_2_14", ("2.14",), "pylock.train.toml: torch 2.14.1"),  # inline tables: read as TOML
    ],
)
def test_each_kind_of_requirement_file(fixture, releases, where):
    folder = LINT_FIXTURES / fixture
    found, targets = _targets_for(folder)
    assert (found.releases, found.where) == (releases, where)
    assert targets.warnings == []


def _write(folder: Path, files: dict[str, str | bytes]) -> Path:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else textwrap.dedent(text).encode())
    return folder


@pytest.mark.parametrize(
    ("files", "releases"),
    [
        # Poetry's own constraints, in [tool.poetry] tables and groups.
        ({"pyproject.toml": '[tool.poetry.dependencies]\npython = "^3.10"\ntorch = "^2.4"\n'}, KNOWN[KNOWN.index("2.4") :]),
        ({"pyproject.toml": '[tool.poetry.group.gpu.dependencies]\ntorch = { version = "~2.5", source = "pytorch" }\n'}, ("2.5",)),
        ({"pyproject.toml": '[tool.poetry.dependencies]\ntorch = [{ version = "2.4.1", markers = "sys_platform == \'darwin\'" }, { version = "2.6.0" }]\n'}, ("2.4", "2.6")),
        # PEP 735 groups; several declarations in one folder together.
        ({"pyproject.toml": '[dependency-groups]\ntrain = ["torch>=2.12", {include-group = "x"}]\n', "requirements-old.txt": "torch==1.13.1\n"}, ("1.13", "2.12", "2.13", "2.14")),
        # requirements/*.txt, -c constraints, a -r cycle.
        ({"requirements/base.txt": "-c ../constraints.txt\n-r base.txt\ntorch\n", "constraints.txt": "torch<2.1\n"}, KNOWN),
        # conda: fuzzy versions, the bracket form, alternatives.
        ({"environment.yml": "dependencies:\n  - pytorch[version='>=2.5,<2.7']\n"}, ("2.5", "2.6")),
        ({"environment.yml": "dependencies: [python=3.11, 'pytorch 2.7.*']\n"}, ("2.7",)),
        ({"environment.yml": "name: x\ndependencies:\n  - conda-forge::pytorch=2.4|2.5\n"}, ("2.4", "2.5")),
        # a URL whose version cannot be read: every release (and a warning, below).
        ({"requirements.txt": "torch @ git+https://github.com/pytorch/pytorch@v2.4.0\n"}, KNOWN),
        # setup.py: espnet's dict of lists and a subscript of it, bound to a name; a `+` of lists.
        (
            {"setup.py": 'from setuptools import setup\nreq = {"install": ["numpy", "torch>=2.12"], "test": ["torch==1.13"]}\ninstall = req["install"]\nsetup(install_requires=install)\n'},
            ("2.12", "2.13", "2.14"),
        ),
        ({"setup.py": 'from setuptools import setup\nBASE = ["numpy"]\nsetup(install_requires=BASE + ["torch~=2.5.0"])\n'}, ("2.5",)),
        # an unpacked sdist whose setup.py computes what it requires: PKG-INFO's Requires-Dist, headers only.
        (
            {
                "setup.py": "from setuptools import setup\nsetup(install_requires=open('req.txt').read().split())\n",
                "PKG-INFO": "Metadata-Version: 2.1\nName: demo\nRequires-Dist: numpy\nRequires-Dist: torch>=2.13; extra == 'gpu'\n\nRequires-Dist: torch==1.8.0\n",
            },
            ("2.13", "2.14"),
        ),
        # a PKG-INFO beside a declaration is not read: the declaration is the project's own.
        ({"requirements.txt": "torch==2.6.0\n", "PKG-INFO": "Metadata-Version: 2.1\nRequires-Dist: torch==2.4.0\n"}, ("2.6",)),
    ],
)
def test_more_requirement_forms(tmp_path, files, releases):
    found, _ = _targets_for(_write(tmp_path, files))
    assert found.releases == tuple(releases), found.where


def test_conda_dependencies_reader():
    text = """
    name: env  # the name
    channels: [pytorch, conda-forge]
    dependencies:
      - python=3.11
      - "pytorch>=2.4"   # quoted
      - pip
      - pip:
        - torch==2.4.1
        - -r requirements.txt
      - numpy
    variables:
      - not: a dependency
    """
    assert conda_dependencies(textwrap.dedent(text)) == [
        ("conda", "python=3.11"), ("conda", "pytorch>=2.4"), ("conda", "pip"),
        ("pip", "torch==2.4.1"), ("pip", "-r requirements.txt"), ("conda", "numpy"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("files", "warning"),
    [
        ({"pyproject.toml": "[project\ndependencies = ['torch']\n"}, "pyproject.toml: not read for the torch requirement"),
        ({"requirements.txt": b"torch==2.4\n\xff\xfe\n"}, "requirements.txt: not read for the torch requirement"),
        ({"requirements.txt": "-r missing.txt\n"}, "requirements.txt: included file missing.txt not found"),
        ({"requirements.txt": "torch>=banana\n"}, "requirements.txt: cannot read the torch version in 'torch>=banana'"),
        ({"requirements.txt": "torch==0.4.1\n"}, "warning: requirements.txt: torch==0.4.1 is older than any release the rules know (1.8 to 2.14); checking against 1.8"),
        ({"setup.py": "from setuptools import setup\nsetup(install_requires=['torch'\n"}, "setup.py: not read for the torch requirement"),
        ({"setup.cfg": "[options\ninstall_requires = torch\n"}, "setup.cfg: not read for the torch requirement"),
        ({"requirements.txt": "torch @ git+https://github.com/pytorch/pytorch\n"}, "whose version lint cannot read; targeting every release"),
        ({"uv.lock": "[[package]\nname = 'torch'\n"}, "uv.lock: not read for the torch requirement"),
    ],
)
def test_odd_files_give_a_warning_never_a_traceback(tmp_path, files, warning):
    found, targets = _targets_for(_write(tmp_path, files))
    assert any(warning in w for w in targets.warnings), targets.warnings
    assert all(w.startswith("warning: ") for w in targets.warnings)
    assert found.releases  # something is targeted regardless


def test_the_walk_stops_at_the_project_root(tmp_path):
    _write(tmp_path, {"requirements.txt": "torch==2.4\n", "repo/.git/HEAD": "ref: x\n", "repo/src/train.py": ""})
    targets = TorchTargets(KNOWN, installed=False)
    assert targets.for_file(tmp_path / "repo" / "src" / "train.py").releases == KNOWN  # another project's pin is not read
    _write(tmp_path, {"repo/requirements.txt": "torch==2.5\n"})
    again = TorchTargets(KNOWN, installed=False)
    assert again.for_file(tmp_path / "repo" / "src" / "train.py").releases == ("2.5",)
    assert again.summary()[0][1] == str(tmp_path / "repo")


def test_a_pyproject_that_never_names_torch_is_not_parsed(tmp_path, monkeypatch):
    _write(tmp_path, {"pyproject.toml": "[project]\nname = 'x'\ndependencies = ['numpy']\n", "train.py": ""})
    sys.modules.pop("tomllib", None)
    found, _ = _targets_for(tmp_path)
    assert found.is_every and "tomllib" not in sys.modules


# ---------------------------------------------------------------- the installed torch


_PROBE = """
import importlib.metadata, json, sys
from opscan.lint.target import installed_torch
found = installed_torch()
print(json.dumps([found[0] if found else None, importlib.metadata.version("torch") if found else None]))
"""


def _fake_torch(folder: Path, version: str, layout: str = "dist-info") -> Path:
    if layout == "dist-info":
        meta = folder / f"torch-{version}.dist-info"
        meta.mkdir(parents=True)
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\nSummary: fake\n\nbody\n")
    else:
        meta = folder / "torch.egg-info"
        meta.mkdir(parents=True)
        (meta / "PKG-INFO").write_text(f"Metadata-Version: 1.0\nName: torch\nVersion: {version}\n")
    return folder


@pytest.mark.parametrize(("version", "layout"), [("2.4.1", "dist-info"), ("2.14.1+cu130", "dist-info"), ("2.9.0a0+git1234", "egg-info")])
def test_installed_torch_is_what_importlib_metadata_reports(tmp_path, version, layout):
    site = _fake_torch(tmp_path / "site", version, layout)
    env = subprocess_env()
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    proc = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f'["{version}", "{version}"]'


def test_no_installed_torch():
    assert installed_torch([]) is None
    assert installed_torch(["/nonexistent", "relative/nothing"]) is None


def test_lint_targets_the_installed_torch_without_importing_it(tmp_path):
    site = _fake_torch(tmp_path / "site", "2.4.1")
    _write(tmp_path / "work", {"train.py": "import torch\ntorch.use_deterministic_algorithms(True)\n"})
    env = {k: v for k, v in subprocess_env().items() if k != "OPSCAN_IGNORE_INSTALLED_TORCH"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    probe = "import sys\nfrom opscan.cli import main\nrc = main(sys.argv[1:])\nprint('IMPORTED=' + ','.join(sorted(m for m in sys.modules if m in ('torch', 'importlib.metadata'))), file=sys.stderr)\nsys.exit(rc)\n"
    proc = subprocess.run([sys.executable, "-c", probe, "lint", "--no-cache", "-v", "train.py"], env=env, capture_output=True, text=True, cwd=tmp_path / "work")
    assert "IMPORTED=\n" in proc.stderr, proc.stderr
    assert 'train.py:2:1: DET002 [*] Enables determinism with `torch.use_deterministic_algorithms` but never sets CUBLAS_WORKSPACE_CONFIG; set it to ":4096:8" before torch starts cuBLAS' in proc.stdout
    assert f"opscan: targets torch 2.4, from installed torch 2.4.1 ({(site / 'torch-2.4.1.dist-info').as_posix()}) (1 file)" in proc.stderr
    env["OPSCAN_IGNORE_INSTALLED_TORCH"] = "1"
    proc = subprocess.run([sys.executable, "-m", "opscan", "lint", "--no-cache", "-v", "train.py"], env=env, capture_output=True, text=True, cwd=tmp_path / "work")
    assert "torch < 2.10 raises without it" in proc.stdout and "from every release the rules know" in proc.stderr


# ---------------------------------------------------------------- the command line


def _lint(folder: Path, capsys, *args: str) -> tuple[int, str, str]:
    with chdir(folder):
        rc = main(["lint", "--no-cache", *args])
    out, err = capsys.readouterr()
    return rc, out, err


ENABLES = "import torch\ntorch.use_deterministic_algorithms(True)\n"


@pytest.mark.parametrize(
    ("value", "warning"),
    [
        ("9.9", "warning: torch 9.9 (from --torch-version) is newer than any release the rules know (1.8 to 2.14); checking against 2.14"),
        ("1.0", "warning: torch 1.0 (from --torch-version) is older than any release the rules know (1.8 to 2.14); checking against 1.8"),
        (">=2.5,<2.5", "warning: torch >=2.5,<2.5 (from --torch-version) matches no torch release; checking against every release the rules know (1.8 to 2.14)"),
    ],
)
def test_a_version_outside_what_the_rules_know_is_a_warning(tmp_path, capsys, value, warning):
    _write(tmp_path, {"train.py": ENABLES})
    rc, out, err = _lint(tmp_path, capsys, "--torch-version", value, "train.py")
    assert warning in err.splitlines()
    assert ("DET002" in out) == (value != "9.9")


def test_a_known_version_or_range_is_no_warning(tmp_path, capsys):
    _write(tmp_path, {"train.py": ENABLES})
    for value in ("2.9", ">=2.4", "~=2.4", "==2.11.*"):
        rc, out, err = _lint(tmp_path, capsys, "--torch-version", value, "train.py")
        assert err == "", (value, err)


def test_a_bad_torch_version_is_an_error_that_names_where_it_came_from(tmp_path, capsys):
    _write(tmp_path, {"pyproject.toml": '[tool.opscan.lint]\ntorch-version = "banana"\n', "train.py": ENABLES})
    rc, out, err = _lint(tmp_path, capsys, "train.py")
    assert rc == 2 and out == ""
    assert err.startswith(f"opscan: error: {tmp_path / 'pyproject.toml'}: [tool.opscan.lint] torch-version 'banana' is not a torch version")
    rc, out, err = _lint(tmp_path, capsys, "--torch-version", ">=2.4,,<2.7", "train.py")
    assert rc == 2 and err.startswith("opscan: error: --torch-version '>=2.4,,<2.7' is not a torch version") and "Traceback" not in err
    for value in ("", " "):  # an unset shell variable: it was the default, silently
        for spelled in (["--torch-version", value], [f"--torch-version={value}"]):
            rc, out, err = _lint(tmp_path, capsys, *spelled, "train.py")
            assert (rc, out) == (2, "")
            assert err == f"opscan: error: --torch-version {value!r} is not a torch version or specifier like \"2.14\" or \">=2.4,<2.7\" (an empty version)\n"
    _write(tmp_path, {"pyproject.toml": "[tool.opscan]\ntorch-version = 2.4\n"})
    rc, out, err = _lint(tmp_path, capsys, "train.py")
    assert rc == 2 and f"{tmp_path / 'pyproject.toml'}: [tool.opscan] torch-version must be a string" in err


def test_the_sources_in_order(tmp_path, capsys):
    """Flag, then config, then the project's requirements."""
    _write(tmp_path, {"requirements.txt": "torch==2.4.1\n", "train.py": ENABLES})
    rc, out, err = _lint(tmp_path, capsys, "-v", "train.py")
    assert "opscan: targets torch 2.4, from requirements.txt: torch==2.4.1 (1 file)" in err
    _write(tmp_path, {"pyproject.toml": '[tool.opscan]\ntorch-version = ">=2.10"\n'})
    rc, out, err = _lint(tmp_path, capsys, "-v", "train.py")
    assert f"opscan: targets torch 2.10 to 2.14, from {tmp_path / 'pyproject.toml'}: [tool.opscan] torch-version (1 file)" in err
    assert rc == 0 and "DET002" not in out
    rc, out, err = _lint(tmp_path, capsys, "-v", "--torch-version", "2.9", "train.py")
    assert "opscan: targets torch 2.9, from --torch-version (1 file)" in err and "DET002" in out


def test_roots_that_do_not_exist_are_a_warning(tmp_path, capsys):
    _write(tmp_path, {"pyproject.toml": '[tool.opscan]\nroots = ["nonexistent", "train.py"]\n', "train.py": ENABLES})
    rc, out, err = _lint(tmp_path, capsys, "train.py")
    lines = err.splitlines()
    assert f"warning: {tmp_path / 'pyproject.toml'}: [tool.opscan] roots entry 'nonexistent' does not exist ({tmp_path / 'nonexistent'}); no import resolves there" in lines
    assert f"warning: {tmp_path / 'pyproject.toml'}: [tool.opscan] roots entry 'train.py' is not a folder; no import resolves there" in lines
    assert rc == 1  # still linted
    _write(tmp_path, {"pyproject.toml": '[tool.opscan.lint]\nroots = ["train.py"]\n'})  # named as the section it is in
    rc, out, err = _lint(tmp_path, capsys, "train.py")
    assert f"warning: {tmp_path / 'pyproject.toml'}: [tool.opscan.lint] roots entry 'train.py' is not a folder; no import resolves there" in err.splitlines()


def test_a_src_layout_resolves_with_the_default_roots_and_says_what_does_not(tmp_path, capsys):
    import shutil

    for name in ("project_src_layout", "project_unresolved_layout"):  # out of opscan's own tree and config
        shutil.copytree(LINT_FIXTURES / name, tmp_path / name, ignore=shutil.ignore_patterns("expected"))
    rc, out, err = _lint(tmp_path / "project_src_layout", capsys, "-v", ".")
    assert "scripts/train.py:4:1: DET001 [*] Seeds via `mypkg.seeding.seed_all`" in out
    assert "resolve to no file" not in err
    rc, out, err = _lint(tmp_path / "project_unresolved_layout", capsys, "-v", ".")
    assert rc == 0 and "DET001" not in out
    assert "opscan: imports that look like project modules but resolve to no file under the roots (., src) or the script's folder:" in err
    assert "opscan:   mypkg (imported at train.py:2): lib holds it; add that folder to `roots` under [tool.opscan] in pyproject.toml" in err
    _write(tmp_path / "project_unresolved_layout", {"pyproject.toml": '[tool.opscan]\nroots = ["lib"]\n'})
    rc, out, err = _lint(tmp_path / "project_unresolved_layout", capsys, "-v", ".")
    assert "train.py:4:1: DET001 [*] Seeds via `mypkg.seeding.seed_all`" in out and "resolve to no file" not in err


def test_verbose_does_not_list_libraries(tmp_path, capsys):
    _write(tmp_path, {"train.py": "import os, json\nimport numpy, torch, timm\nimport some_installed_or_not_pkg\n" + ENABLES})
    rc, out, err = _lint(tmp_path, capsys, "-v", "train.py")
    listed = [line for line in err.splitlines() if line.startswith("opscan:   ")]
    assert listed == ["opscan:   some_installed_or_not_pkg (imported at train.py:3)"]


def test_verbose_does_not_list_what_the_project_declares(tmp_path, capsys):
    # Not installed here, but a requirement of the project (any spelling of the name): a library, no project module.
    _write(tmp_path, {
        "requirements.txt": "torch>=2.4\nSome.Declared_Pkg==1.0\n",
        "pyproject.toml": '[project]\nname = "p"\ndependencies = ["another-declared>=2"]\n',
        "train.py": "import some_declared_pkg\nimport another_declared\nimport not_declared_anywhere\n" + ENABLES,
    })  # fmt: skip
    rc, out, err = _lint(tmp_path, capsys, "-v", "train.py")
    listed = [line for line in err.splitlines() if line.startswith("opscan:   ")]
    assert listed == ["opscan:   not_declared_anywhere (imported at train.py:3)"]


def test_verbose_knows_import_names_that_differ_from_the_distribution(tmp_path, capsys):
    # lerobot declares pyserial, python-can, grpcio, protobuf, rerun-sdk, dm-tree and hebi-py, and imports
    # serial, can, grpc, google, rerun, tree and hebi: libraries, not project modules that failed to resolve.
    _write(tmp_path, {
        "pyproject.toml": '[project]\nname = "p"\ndependencies = ["torch", "pyserial>=3.5", "rerun-sdk", "hebi-py"]\n'
        '[project.optional-dependencies]\ngrpc = ["grpcio==1.73.1", "protobuf"]\ncan = ["python-can"]\ngroot = ["dm-tree"]\n',
        "train.py": "import serial\nimport can\nimport grpc\nfrom google.protobuf import message\nimport rerun as rr\n"
        "import tree\nimport hebi\nimport bs4\n" + ENABLES,
    })  # fmt: skip
    rc, out, err = _lint(tmp_path, capsys, "-v", "train.py")
    listed = [line for line in err.splitlines() if line.startswith("opscan:   ")]
    assert listed == ["opscan:   bs4 (imported at train.py:8)"]  # beautifulsoup4 is not declared


def test_verbose_does_not_list_optional_imports(tmp_path, capsys):
    _write(tmp_path, {
        "train.py": "try:\n    import apex_like\nexcept ImportError:\n    apex_like = None\n"
        "try:\n    from flash_like import attn\nexcept Exception as e:\n    print(e)\n"
        "try:\n    import caught_by_key\nexcept KeyError:\n    pass\n"
        "try:\n    import guarded_once\nexcept (ValueError, ModuleNotFoundError):\n    pass\n"
        "import guarded_once\n"
        "try:\n    def later():\n        import in_a_function\nexcept ImportError:\n    pass\n"
        "later()\n" + ENABLES,
    })  # fmt: skip
    rc, out, err = _lint(tmp_path, capsys, "-v", "train.py")
    listed = [line.split(" (")[0] for line in err.splitlines() if line.startswith("opscan:   ")]
    # A handler of another error, an unguarded import beside the guarded one, and an import in a
    # function (it runs when called, outside the try) are listed.
    assert listed == ["opscan:   caught_by_key", "opscan:   guarded_once", "opscan:   in_a_function"]


def test_show_settings(tmp_path, capsys):
    _write(tmp_path, {
        "pyproject.toml": '[tool.opscan.lint]\nignore = ["DET009"]\nextend-exclude = ["generated"]\n',
        "a/requirements.txt": "torch>=2.4,<2.7\n", "a/train.py": ENABLES, "a/eval.py": ENABLES,
        "b/uv.lock": '[[package]]\nname = "torch"\nversion = "2.14.1"\n', "b/train.py": ENABLES,
        "c/train.py": ENABLES, "generated/x.py": ENABLES,
    })  # fmt: skip
    rc, out, err = _lint(tmp_path, capsys, "--show-settings", ".")
    assert rc == 0 and err == ""
    assert not re.search(r": DET\d{3} ", out)  # nothing linted
    rows = dict(line.split(None, 1) if not line.startswith(" ") else (line.strip(), "") for line in out.splitlines() if line.strip())
    assert rows["config"].strip() == "file       pyproject.toml"
    assert rows["ignore"].strip() == "DET009" and rows["extend-exclude"].strip() == "generated"
    assert rows["roots"].strip() == "., src" and rows["files"].strip() == "4"
    from opscan.lint.rules import OPT_IN, lint_codes

    # Every code but the ignored one and those the default selection leaves out (DET010).
    enabled = ", ".join(sorted(code for code in lint_codes() if code != "DET009" and code not in OPT_IN))
    assert f"rules             {enabled}\n" in out
    assert "torch             per project folder:\n" in out
    assert "  where none is declared: 1.8 to 2.14, from every release the rules know (1 file)\n" in out
    assert "  under a/: 2.4 to 2.6, from a/requirements.txt: torch>=2.4,<2.7 (2 files)\n" in out
    assert "  under b/: 2.14, from b/uv.lock: torch 2.14.1 (1 file)\n" in out
    rc, out, err = _lint(tmp_path / "a", capsys, "--show-settings", "--torch-version", "2.9")
    assert "torch             2.9, from --torch-version (2 files)\n" in out
    rc, out, err = _lint(tmp_path, capsys, "--show-settings", "nope")
    assert rc == 2 and "no such file or directory: nope" in err


def test_engine_default_targets_come_from_the_config(tmp_path):
    _write(tmp_path, {"requirements.txt": "torch==2.14.0\n", "train.py": ENABLES})
    with chdir(tmp_path):
        report = engine.run(["train.py"], Config(root=tmp_path), use_cache=False)
        assert [f.code for f in report.findings] == []
        cfg = Config(root=tmp_path)
        cfg.torch_version, cfg.torch_version_from = "2.4", "test"
        report = engine.run(["train.py"], cfg, use_cache=False)
        assert [f.code for f in report.findings] == ["DET002"]
        report = engine.run(["train.py"], cfg, torch_version="2.10", use_cache=False)
        assert [f.code for f in report.findings] == []
