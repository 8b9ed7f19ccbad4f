"""The release of a framework a project may use, read as the torch range is: for fixes in an idiom that
only later releases have (frameworks.Idiom.since: accelerate's `set_seed(deterministic=True)`, from 0.29.0).

The fixtures `tests/fixtures/lint/project_accelerate_*` and
`project_transformers_full_determinism` hold the findings that follow; here,
what each kind of requirement file gives, when a specifier admits only
releases from a version on (against `packaging`, written apart from opscan),
the installed package, and the run cache's dependencies on what was read.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from opscan.config import Config
from opscan.lint import engine
from opscan.lint.frameworks import HELPERS
from opscan.lint.runcache import LISTING, listing
from opscan.lint.target import (
    PackageVersions,
    TorchTargets,
    Versions,
    installed,
    installed_env,
)
from opscan.rules import NEWEST_TORCH, load
from opscan.versions import parse_specifier
from tests.conftest import IDIOM_PACKAGES
from tests.util import chdir, subprocess_env

ROOT = Path(__file__).resolve().parents[2]
LINT_FIXTURES = ROOT / "tests" / "fixtures" / "lint"
KNOWN = load().releases
SCRIPT = "import torch\nfrom accelerate.utils import set_seed\n\nset_seed(0)\nmodel = torch.nn.Linear(4, 4).cuda()\n"
IDIOM = "pass `deterministic=True` to `accelerate.utils.set_seed` (line 4)"
RAW = "call `torch.use_deterministic_algorithms(True)` after seeding (or, on accelerate >= 0.29.0, pass `deterministic=True` to `accelerate.utils.set_seed` on line 4)"


def _write(folder: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return folder


def _versions(folder: Path, name: str = "accelerate") -> Versions:
    with chdir(folder):
        return PackageVersions(name, installed=False, stop_at=folder).for_file(folder / "train.py")


# ---------------------------------------------------------------- the catalogue


def test_lightning_1_5_to_1_9_turn_determinism_off_and_say_where_that_was_read():
    resets = {h.names[0]: h.resets for h in HELPERS if h.resets is not None}
    assert set(resets) == {"lightning.Trainer"}
    trainer = next(h for h in HELPERS if h.resets is not None)
    assert resets["lightning.Trainer"].releases == ("1.5", "1.6", "1.7", "1.8", "1.9")
    assert {dist for _, dist in trainer.resets.packages} <= set(IDIOM_PACKAGES)  # tests/conftest.py keeps the installed one out
    assert [trainer.resets.distribution(name) for name in ("pytorch_lightning.Trainer", "lightning.pytorch.Trainer", "x.Trainer")] == [
        "pytorch-lightning", "lightning", None,
    ]  # fmt: skip
    for commit in ("4a5b315e", "00cce6a5", "33941cfe", "021a2c94", "002f8993"):  # 1.6, 1.7, 1.8, 2.0 in development, 2.0
        assert commit in trainer.source


def test_every_idiom_with_a_bound_cites_the_wheels_it_was_read_in():
    bounded = {h.names[0]: h for h in HELPERS if h.idiom is not None and h.idiom.since is not None}
    assert set(bounded) == {"accelerate.utils.set_seed", "transformers.Trainer", "sentence_transformers.SentenceTransformerTrainer"}
    for entry in bounded.values():
        package, version = entry.idiom.since
        assert package in IDIOM_PACKAGES  # tests/conftest.py keeps the installed one out of the suite
        assert f"{version} wheel" in entry.source, entry.source
    assert bounded["accelerate.utils.set_seed"].idiom.since == ("accelerate", "0.29.0")
    assert "accelerate 0.28.0 wheel, accelerate/utils/random.py" in bounded["accelerate.utils.set_seed"].source
    assert bounded["transformers.Trainer"].idiom.since == ("transformers", "4.19.0")
    assert bounded["sentence_transformers.SentenceTransformerTrainer"].idiom.since == ("transformers", "4.19.0")


def test_the_suite_reads_no_installed_framework():
    for name in IDIOM_PACKAGES:
        assert os.environ.get(installed_env(name)) == "1", name
    assert installed_env("torch") == "OPSCAN_IGNORE_INSTALLED_TORCH"
    assert installed_env("pytorch-lightning") == "OPSCAN_IGNORE_INSTALLED_PYTORCH_LIGHTNING"


# ---------------------------------------------------------------- what a specifier admits


@pytest.mark.parametrize(
    ("specs", "expected"),
    [
        ([">=0.29"], True),
        ([">=0.29.0rc1"], True),  # a label counts as its release, as for torch
        (["~=0.29.1"], True),
        (["==0.29.*"], True),
        (["==1.*"], True),
        (["==0.29.3"], True),
        ([">0.29"], True),
        ([">=0.29,!=0.30.0"], True),
        ([">=0.20,>=0.30"], True),  # the highest lower bound
        ([">=0.29,<2", ">=1.0"], True),
        (["==0.28.0"], False),
        (["<0.29"], False),
        ([">=0.20"], False),
        ([">0.28"], False),  # admits 0.28.1
        (["!=0.28.0"], False),
        (["~=0.28"], False),
        (["==0.*"], False),
        ([">=0.29", "==0.28.0"], False),  # alternatives: any may be what is installed
        (None, False),  # any version
    ],
)
def test_at_least(specs, expected):
    versions = Versions(tuple(parse_specifier(s) for s in specs) if specs is not None else None)
    assert versions.at_least("0.29.0") is expected


@pytest.mark.parametrize(
    ("specs", "expected"),
    [
        (["==1.9.5"], True),
        (["~=1.9.0"], True),
        ([">=1.6,<2"], True),
        (["<2.0"], True),
        ([">=1.4,<1.5"], False),
        (["==1.4.9"], False),
        ([">=2.0"], False),
        (["2.5.6"], False),  # a lock's version
        (["==2.*"], False),
        ([">=2.0", "==1.8.6"], True),  # alternatives: any may be what is installed
        ([">=1.9.6,<2"], True),  # no such release, but the specifier admits 1.9 patches: as for torch
        (None, True),  # any version
    ],
)
def test_may_be(specs, expected):
    versions = Versions(tuple(parse_specifier(s) for s in specs) if specs is not None else None)
    assert versions.may_be(("1.5", "1.6", "1.7", "1.8", "1.9")) is expected


_BOUND = st.tuples(st.integers(0, 2), st.integers(0, 4), st.integers(0, 3)).map(lambda t: ".".join(map(str, t)))
_CLAUSE = st.one_of(
    st.tuples(st.sampled_from([">=", ">", "<", "<=", "==", "!=", "~="]), _BOUND).map("".join),
    st.tuples(st.sampled_from(["==", "!="]), _BOUND).map(lambda t: f"{t[0]}{t[1].rsplit('.', 1)[0]}.*"),
)
_PROBES = [Version(f"{a}.{b}.{c}") for a in range(4) for b in range(6) for c in range(5)]


@settings(max_examples=300, deadline=None)
@given(st.lists(_CLAUSE, min_size=1, max_size=3), _BOUND)
def test_at_least_never_admits_an_older_version(clauses, version):
    """Checked against `packaging`: where at_least says yes, no older release satisfies the specifier."""
    spec = ",".join(clauses)
    if Versions((parse_specifier(spec),)).at_least(version):
        oracle = SpecifierSet(spec)
        older = [str(v) for v in _PROBES if v < Version(version) and v in oracle]
        assert not older, (spec, version, older)
    assert Versions((parse_specifier(f">={version}"),)).at_least(version)  # a plain lower bound is enough


# ---------------------------------------------------------------- requirement files


@pytest.mark.parametrize(
    ("fixture", "expected", "where"),
    [
        ("project_accelerate_with_deterministic/pyproject", True, "pyproject.toml [project.optional-dependencies] train: accelerate[deepspeed] >= 0.29"),
        ("project_accelerate_with_deterministic/poetry", True, "pyproject.toml [tool.poetry.dependencies]: accelerate = '^1.2'"),
        ("project_accelerate_with_deterministic/locked", True, "poetry.lock: accelerate 1.15.0"),  # the lock wins over accelerate>=0.20
        ("project_accelerate_with_deterministic/conda", True, "environment.yml dependencies: conda-forge::accelerate=0.30"),
        ("project_accelerate_before_deterministic/pinned", False, "pyproject.toml [project] dependencies: accelerate==0.28.0"),
        ("project_accelerate_before_deterministic/below", False, "deps/base.txt: Accelerate<0.29"),
        ("project_accelerate_before_deterministic/open_range", False, "setup.cfg [options] install_requires: accelerate>=0.20"),
        ("project_accelerate_before_deterministic/locked", False, "uv.lock: accelerate 0.28.0"),
        ("project_accelerate_unpinned/no_version", False, "requirements.txt: accelerate"),
        ("project_accelerate_unpinned/undeclared", False, "no accelerate declared or installed"),
    ],
)
def test_each_kind_of_requirement_file(fixture, expected, where):
    found = _versions(LINT_FIXTURES / fixture)
    assert (found.at_least("0.29.0"), found.where) == (expected, where)


def test_transformers_is_read_the_same_way():
    assert _versions(LINT_FIXTURES / "project_transformers_full_determinism" / "transformers_4_19", "transformers").at_least("4.19.0")
    assert not _versions(LINT_FIXTURES / "project_transformers_full_determinism" / "transformers_4_18", "transformers").at_least("4.19.0")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"requirements.txt": "pytorch_lightning>=1.5\n"}, True),  # any spelling of a name with a separator
        ({"requirements.txt": "PyTorch.Lightning==1.4.9\n"}, False),
        ({"uv.lock": '[[package]]\nname = "pytorch-lightning"\nversion = "2.0.0"\n'}, True),
        ({"requirements.txt": "torch>=2.4\n"}, False),  # declares torch only: the walk goes on, then any version
    ],
)
def test_a_name_with_a_separator(tmp_path, files, expected):
    assert _versions(_write(tmp_path, files), "pytorch-lightning").at_least("1.5.0") is expected


BANANA = "warning: requirements.txt: cannot read the accelerate version in 'accelerate>=banana' (bad version clause '>=banana' in '>=banana'); taking it to admit any version"


def test_a_requirement_that_cannot_be_read_admits_any_version_with_a_warning(tmp_path, capsys):
    _write(tmp_path, {"requirements.txt": "accelerate>=banana\n", "train.py": SCRIPT})
    targets = PackageVersions("accelerate", installed=False, stop_at=tmp_path)
    with chdir(tmp_path):
        assert not targets.for_file(tmp_path / "train.py").at_least("0.29.0")
    assert targets.warnings == [BANANA]
    with chdir(tmp_path):
        report = engine.run(["train.py"], Config(root=tmp_path), targets=TorchTargets(KNOWN, installed=False, stop_at=tmp_path), use_cache=False)
    assert report.notices == [BANANA]  # as torch's: 'cannot read the torch version in ...; targeting every release the rules know'
    assert RAW in {f.message.partition("; ")[2] for f in report.findings}
    rc, out, err = _lint(tmp_path, capsys, "train.py")
    assert err.splitlines() == [BANANA] and RAW in out
    rc, out, err = _lint(tmp_path, capsys, "--show-settings", "train.py")
    assert err.splitlines() == [BANANA] and "accelerate        any version, from requirements.txt: accelerate>=banana (1 file)\n" in out


@pytest.mark.parametrize(
    ("name", "warning"),
    [
        ("torch", "cannot read the torch version in 'torch>=banana' (bad version clause '>=banana' in '>=banana'); targeting every release the rules know"),
        ("accelerate", "cannot read the accelerate version in 'accelerate>=banana' (bad version clause '>=banana' in '>=banana'); taking it to admit any version"),
    ],
)
@pytest.mark.parametrize("file", ["requirements.txt", "pyproject.toml", "environment.yml"])
def test_torch_and_another_package_warn_alike_for_what_they_cannot_read(tmp_path, name, warning, file):
    text = {
        "requirements.txt": f"{name}>=banana\n",
        "pyproject.toml": f'[project]\nname = "x"\ndependencies = ["{name}>=banana"]\n',
        "environment.yml": f"dependencies:\n  - pip:\n    - {name}>=banana\n",
    }[file]
    _write(tmp_path, {file: text, "train.py": SCRIPT})
    targets = TorchTargets(KNOWN, installed=False, stop_at=tmp_path)
    with chdir(tmp_path):
        found = targets.package(name).for_file(tmp_path / "train.py") if name != "torch" else targets.for_file(tmp_path / "train.py")
    assert str(found) == ("1.8 to 2.14" if name == "torch" else "any version")
    where = {"requirements.txt": "", "pyproject.toml": " [project] dependencies", "environment.yml": " pip"}[file]
    assert found.where == f"{file}{where}: {name}>=banana"
    assert targets.warnings == [f"warning: {file}: {warning}"]


@pytest.mark.parametrize(("name", "every"), [("torch", "targeting every release the rules know"), ("accelerate", "taking it to admit any version")])
def test_an_installed_version_that_cannot_be_read_is_a_warning(tmp_path, monkeypatch, name, every):
    site = _fake(tmp_path / "site", name, "banana")
    _write(tmp_path / "work", {"train.py": SCRIPT})
    monkeypatch.setattr(sys, "path", [str(site)])
    monkeypatch.delenv(installed_env(name))
    targets = TorchTargets(KNOWN, stop_at=tmp_path / "work")
    found = (targets.package(name) if name != "torch" else targets).for_file(tmp_path / "work" / "train.py")
    meta = (site / f"{name}-banana.dist-info").as_posix()
    assert found.where == f"installed {name} banana ({meta})"
    assert targets.warnings == [f"warning: the installed {name}'s version 'banana' ({meta}) is not one lint can read; {every}"]


# ---------------------------------------------------------------- what -v and --show-settings say


def _lint(folder: Path, capsys, *args: str) -> tuple[int, str, str]:
    from opscan.cli import main

    with chdir(folder):
        rc = main(["lint", "--no-cache", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_verbose_names_each_package_range_read_and_where_it_came_from(tmp_path, capsys):
    _write(tmp_path, {
        ".git/HEAD": "ref: x\n",
        "a/requirements.txt": "torch==2.4.1\naccelerate>=0.29\n", "a/train.py": SCRIPT, "a/eval.py": SCRIPT,
        "b/train.py": SCRIPT, "c/train.py": "import torch\n\ntorch.manual_seed(0)\n",
    })  # fmt: skip
    rc, out, err = _lint(tmp_path, capsys, "-v", ".")
    lines = [line for line in err.splitlines() if line.startswith("opscan: targets ")]
    assert lines == [
        "opscan: targets torch where none is declared: 1.8 to 2.14, from every release the rules know (2 files)",
        "opscan: targets torch under a/: 2.4, from a/requirements.txt: torch==2.4.1 (2 files)",
        # c/train.py calls no accelerate helper: nothing was read for it
        "opscan: targets accelerate where none is declared: any version, from no accelerate declared or installed (1 file)",
        "opscan: targets accelerate under a/: >=0.29, from a/requirements.txt: accelerate>=0.29 (2 files)",
    ]
    rc, out, err = _lint(tmp_path / "a", capsys, "-v", "train.py")
    assert "opscan: targets accelerate >=0.29, from requirements.txt: accelerate>=0.29 (1 file)" in err.splitlines()
    rc, out, err = _lint(tmp_path / "c", capsys, "-v", "train.py")
    assert "targets accelerate" not in err and "targets transformers" not in err  # nothing read, nothing said


def test_verbose_names_the_root_folder_as_a_folder(tmp_path, capsys):
    """-v said "targets torch .: 2.2 to 2.14" for the project's root beside a sub-folder of its own: a bare "."."""
    _write(tmp_path, {
        ".git/HEAD": "ref: x\n", "pyproject.toml": '[project]\nname = "p"\ndependencies = ["torch>=2.2"]\n',
        "train.py": SCRIPT, "examples/requirements.txt": "torch==2.4.1\n", "examples/train.py": SCRIPT,
    })  # fmt: skip
    rc, out, err = _lint(tmp_path, capsys, "-v", ".")
    lines = [line for line in err.splitlines() if line.startswith("opscan: targets torch ")]
    assert lines == [
        "opscan: targets torch under ./: 2.2 to 2.14, from pyproject.toml [project] dependencies: torch>=2.2 (1 file)",
        "opscan: targets torch under examples/: 2.4, from examples/requirements.txt: torch==2.4.1 (1 file)",
    ]


def test_show_settings_names_the_range_of_each_package_a_rule_may_read(tmp_path, capsys):
    _write(tmp_path, {
        ".git/HEAD": "ref: x\n", "a/uv.lock": '[[package]]\nname = "accelerate"\nversion = "0.28.0"\n', "a/train.py": SCRIPT,
        "b/pyproject.toml": '[project]\nname = "b"\ndependencies = ["transformers>=4.19"]\n', "b/train.py": SCRIPT,
    })  # fmt: skip
    rc, out, err = _lint(tmp_path, capsys, "--show-settings", ".")
    assert rc == 0 and err == ""
    assert (
        "accelerate        per project folder:\n"
        "  where none is declared: any version, from no accelerate declared or installed (1 file)\n"
        "  under a/: 0.28.0, from a/uv.lock: accelerate 0.28.0 (1 file)\n"
        "lightning         any version, from no lightning declared or installed (2 files)\n"
        "mosaicml          any version, from no mosaicml declared or installed (2 files)\n"
        "pytorch-lightning any version, from no pytorch-lightning declared or installed (2 files)\n"
        "transformers      per project folder:\n"
        "  where none is declared: any version, from no transformers declared or installed (1 file)\n"
        '  under b/: >=4.19, from b/pyproject.toml [project] dependencies: transformers>=4.19 (1 file)\n'
    ) in out
    rc, out, err = _lint(tmp_path / "a", capsys, "--show-settings", "train.py")
    assert "accelerate        0.28.0, from uv.lock: accelerate 0.28.0 (1 file)\n" in out


# ---------------------------------------------------------------- the installed package


def _fake(site: Path, name: str, version: str) -> Path:
    meta = site / f"{name.replace('-', '_')}-{version}.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nbody\n")
    return site


_PROBE = """
import importlib.metadata, json, sys
from opscan.lint.target import installed
found = installed(sys.argv[1])
print(json.dumps([found[0] if found else None, importlib.metadata.version(sys.argv[1]) if found else None]))
"""


@pytest.mark.parametrize(("name", "version"), [("accelerate", "0.29.3"), ("pytorch-lightning", "1.4.9"), ("transformers", "4.19.0.dev0")])
def test_installed_is_what_importlib_metadata_reports(tmp_path, name, version):
    site = _fake(tmp_path / "site", name, version)
    env = subprocess_env()
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    proc = subprocess.run([sys.executable, "-c", _PROBE, name], env=env, capture_output=True, text=True, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f'["{version}", "{version}"]'


def test_the_installed_package_where_nothing_declares_it(tmp_path, monkeypatch):
    site = _fake(tmp_path / "site", "accelerate", "0.29.0")
    _write(tmp_path / "work", {"train.py": SCRIPT})
    monkeypatch.setattr(sys, "path", [str(site)])
    monkeypatch.delenv(installed_env("accelerate"))
    found = PackageVersions("accelerate", stop_at=tmp_path / "work").for_file(tmp_path / "work" / "train.py")
    assert found.at_least("0.29.0") and found.where.startswith("installed accelerate 0.29.0 (")
    assert not PackageVersions("accelerate", installed=False, stop_at=tmp_path / "work").for_file(tmp_path / "work" / "train.py").at_least("0.29.0")
    monkeypatch.setenv(installed_env("accelerate"), "1")
    assert not PackageVersions("accelerate", stop_at=tmp_path / "work").for_file(tmp_path / "work" / "train.py").at_least("0.29.0")
    assert installed("accelerate", [str(tmp_path / "nothing"), ""]) is None


@pytest.mark.parametrize(("version", "advice"), [("0.29.0", IDIOM), ("0.28.0", RAW)])
def test_lint_reads_the_installed_accelerate_without_importing_it(tmp_path, version, advice):
    site = _fake(tmp_path / "site", "accelerate", version)
    _write(tmp_path / "work", {"train.py": SCRIPT})
    env = {k: v for k, v in subprocess_env().items() if k != installed_env("accelerate")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    probe = "import sys\nfrom opscan.cli import main\nrc = main(sys.argv[1:])\nprint('IMPORTED=' + ','.join(sorted(m for m in sys.modules if m in ('torch', 'accelerate', 'importlib.metadata'))), file=sys.stderr)\nsys.exit(rc)\n"
    proc = subprocess.run([sys.executable, "-c", probe, "lint", "--no-cache", "train.py"], env=env, capture_output=True, text=True, cwd=tmp_path / "work", check=False)
    assert "IMPORTED=\n" in proc.stderr, proc.stderr
    assert f"train.py:4:1: DET001 [*] Seeds with `accelerate.utils.set_seed` but never enables determinism; {advice}\n" in proc.stdout


# ---------------------------------------------------------------- what the result depends on


def _age(*paths: Path, seconds: float = 10) -> None:
    past = time.time() - seconds
    for p in paths:
        os.utime(p, (past, past))


def _run(project: Path, site: Path) -> tuple[bool, subprocess.CompletedProcess]:
    """`opscan lint train.py` (the run cache on), reading the installed accelerate from `site`; whether it was a replay."""
    probe = (
        "import sys; from opscan.cli import main\n"
        "code = main(['lint', *sys.argv[1:]])\n"
        "sys.stderr.write('ENGINE=%s\\n' % ('opscan.lint.engine' in sys.modules))\n"
        "sys.exit(code)\n"
    )
    env = {k: v for k, v in subprocess_env().items() if k != installed_env("accelerate")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    proc = subprocess.run([sys.executable, "-c", probe, "train.py"], cwd=project, env=env, capture_output=True, text=True, check=False)
    return "ENGINE=False" in proc.stderr, proc


@pytest.mark.parametrize("change", ["declare accelerate", "declare accelerate in a folder above", "install accelerate"])
def test_a_change_to_what_declares_accelerate_is_linted_afresh(tmp_path, change):
    (tmp_path / ".git").mkdir()  # the walks up end here
    project = _write(tmp_path / "outer" / "project", {"train.py": SCRIPT, "requirements.txt": "torch>=2.4\n"})
    site = tmp_path / "site"
    site.mkdir()
    _age(project / "train.py", project / "requirements.txt", project, site, tmp_path / "outer")
    _run(project, site)  # creates .opscan_cache, a change to the folder: records nothing
    _age(project)
    first = _run(project, site)[1]
    replayed, again = _run(project, site)
    assert replayed and again.stdout == first.stdout and RAW in first.stdout
    if change == "declare accelerate":
        (project / "requirements.txt").write_text("torch>=2.4\naccelerate>=0.29\n")
    elif change == "declare accelerate in a folder above":  # the torch walk ends at `project`; accelerate's goes on
        (tmp_path / "outer" / "requirements.txt").write_text("accelerate>=0.29\n")
    else:
        _fake(site, "accelerate", "0.29.0")
    replayed, proc = _run(project, site)
    assert not replayed, change
    assert IDIOM in proc.stdout, proc.stdout


def _in_workers(monkeypatch) -> list[int]:
    """Lint a few small files in forked worker processes; the list gets an item when it does."""
    monkeypatch.setattr(engine, "PARALLEL_MIN_FILES", 2)
    monkeypatch.setattr(engine, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(engine, "_workers", lambda: 3)
    forked: list[int] = []
    real = engine._lint_in_processes
    monkeypatch.setattr(engine, "_lint_in_processes", lambda *a: forked.append(1) or real(*a))
    return forked


def test_a_worker_process_reports_what_it_read_for_accelerate(tmp_path, monkeypatch):
    """With --torch-version nothing walks for torch: what the accelerate lookup reads in a forked worker
    reaches the run cache's dependencies all the same."""
    tree = tmp_path / "tree"
    (tree / ".git").mkdir(parents=True)  # the walk up for `undeclared` ends here
    for i in range(6):
        _write(tree / f"job{i}", {"train.py": SCRIPT, "requirements.txt": "accelerate>=0.29\n"})
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    monkeypatch.delenv(installed_env("accelerate"))
    (tree / "undeclared").mkdir()
    (tree / "undeclared" / "train.py").write_text(SCRIPT)
    forked = _in_workers(monkeypatch)
    deps: set[str] = set()
    targets = engine.torch_targets(Config(root=tree), NEWEST_TORCH)
    with chdir(tree):
        report = engine.run(["."], Config(root=tree), targets=targets, use_cache=False, deps=deps)
    assert forked
    messages = {f.path: f.message for f in report.findings if f.code == "DET001"}
    assert all(IDIOM in messages[f"job{i}/train.py"] for i in range(6))
    assert RAW in messages["undeclared/train.py"]
    assert {str(tree / f"job{i}" / "requirements.txt") for i in range(6)} <= deps
    assert listing(os.path.abspath(site), ("accelerate",)) in deps  # the installed one was looked for, for `undeclared`
    # And what it gave which file, for -v: every file, whichever process linted it.
    given = {(str(v), folder): n for v, folder, n in targets.package("accelerate").summary()}
    assert given == {**{(">=0.29", str(tree / f"job{i}")): 1 for i in range(6)}, ("any version", ""): 1}


def test_a_worker_process_reports_what_it_could_not_read(tmp_path, monkeypatch):
    tree = tmp_path / "tree"
    (tree / ".git").mkdir(parents=True)
    for i in range(6):
        _write(tree / f"job{i}", {"train.py": SCRIPT, "requirements.txt": f"accelerate>=0.{i}x\n"})
    forked = _in_workers(monkeypatch)
    with chdir(tree):
        report = engine.run(["."], Config(root=tree), torch_version=NEWEST_TORCH, use_cache=False)
    assert forked
    assert sorted(report.notices) == [
        f"warning: job{i}/requirements.txt: cannot read the accelerate version in 'accelerate>=0.{i}x' "
        f"(bad version clause '>=0.{i}x' in '>=0.{i}x'); taking it to admit any version"
        for i in range(6)
    ]


def test_a_run_with_no_such_helper_reads_nothing_for_it(tmp_path):
    _write(tmp_path, {"train.py": "import torch\n\ntorch.manual_seed(0)\n"})
    targets = TorchTargets(KNOWN, stop_at=tmp_path)
    deps: set[str] = set()
    with chdir(tmp_path):
        engine.run(["train.py"], Config(root=tmp_path), targets=targets, use_cache=False, deps=deps)
    assert targets._packages == {}
    assert not [d for d in deps if d.endswith(LISTING + "accelerate")]  # no sys.path folder was listed for it
