"""The versions of a package other than torch a project may use, read as the torch range is.

Here, what each kind of requirement file gives, when a specifier admits only
releases from a version on (against `packaging`, written apart from opscan),
and the installed package.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from opscan.lint.target import PackageVersions, Versions, installed, installed_env
from opscan.versions import parse_specifier
from tests.conftest import IDIOM_PACKAGES
from tests.util import chdir, subprocess_env

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "import torch\nfrom accelerate.utils import set_seed\n\nset_seed(0)\nmodel = torch.nn.Linear(4, 4).cuda()\n"



def _write(folder: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return folder


def _versions(folder: Path, name: str = "accelerate") -> Versions:
    with chdir(folder):
        return PackageVersions(name, installed=False, stop_at=folder).for_file(folder / "train.py")


# ---------------------------------------------------------------- the suite


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


def test_a_requirement_that_cannot_be_read_admits_any_version(tmp_path):
    _write(tmp_path, {"requirements.txt": "accelerate>=banana\n", "train.py": SCRIPT})
    targets = PackageVersions("accelerate", installed=False, stop_at=tmp_path)
    with chdir(tmp_path):
        assert not targets.for_file(tmp_path / "train.py").at_least("0.29.0")
    assert targets.warnings == ["warning: requirements.txt: cannot read the accelerate version in 'accelerate>=banana' (bad version clause '>=banana' in '>=banana'); taking it to admit any version"]


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
