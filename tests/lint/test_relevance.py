"""The call filter (opscan.lint.relevance) changes how much lint records, never what it finds.

Every comparison here lints the same tree twice: as lint does (calls filtered)
and with every call recorded, and requires the same findings, messages included.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from opscan.config import Config
from opscan.lint import engine, relevance
from opscan.lint.project import Project
from opscan.rules import NEWEST_TORCH
from tests.util import chdir

ROOT = Path(__file__).resolve().parents[2]
LINT_FIXTURES = ROOT / "tests" / "fixtures" / "lint"


def _findings(tree: Path, monkeypatch, *, record_all: bool, torch_version: str = NEWEST_TORCH) -> list[dict]:
    with monkeypatch.context() as m:
        if record_all:
            m.setattr(relevance.CallFilter, "for_lint", classmethod(lambda cls: None))
        m.setattr(engine, "PARALLEL_MIN_FILES", 10**9)
        with chdir(tree):
            report = engine.run(["."], Config(root=tree), torch_version=torch_version, use_cache=False)
    return [f.to_dict() for f in report.sorted_findings()]


def _both(tree: Path, monkeypatch, **kwargs) -> tuple[list[dict], list[dict]]:
    return _findings(tree, monkeypatch, record_all=False, **kwargs), _findings(tree, monkeypatch, record_all=True, **kwargs)


@pytest.mark.parametrize("torch_version", ["1.13", "2.5", NEWEST_TORCH])
def test_fixtures_and_examples_find_the_same(tmp_path, monkeypatch, torch_version):
    for folder in sorted(LINT_FIXTURES.iterdir()):  # each fixture folder as its own tree, as the fixture tests run them
        if folder.is_dir():
            filtered, everything = _both(folder, monkeypatch, torch_version=torch_version)
            assert filtered == everything, folder.name
    filtered, everything = _both(ROOT / "examples", monkeypatch, torch_version=torch_version)
    assert filtered and filtered == everything


def test_filter_records_fewer_calls():
    """The point of it: on a training script most calls are library calls no rule looks at."""
    from opscan.lint.facts import extract
    from opscan.lint.model import Call

    source = (ROOT / "examples" / "train_bad.py").read_bytes()
    calls = relevance.CallFilter.for_lint()

    def count(facts):
        events = facts.body + [e for f in facts.functions.values() for e in f.events]
        return sum(isinstance(e.what, Call) for e in events)

    everything, filtered = extract("t.py", source), extract("t.py", source, calls=calls)
    assert count(filtered) < count(everything) / 2
    assert "torch" in filtered.dropped_libraries


def test_a_local_package_named_like_a_library_is_read_with_every_call(monkeypatch):
    project = LINT_FIXTURES / "project_local_package_like_a_library"
    filtered, everything = _both(project, monkeypatch, torch_version="2.9")  # a torch that checks CUBLAS_WORKSPACE_CONFIG
    assert filtered == everything
    assert {f["code"] for f in filtered} == {"DET001", "DET002"}
    # Without the re-read, the call into the project's own `datasets` package would be lost.
    monkeypatch.setattr(Project, "_provides", lambda self, package: False)
    assert _findings(project, monkeypatch, record_all=False) == []


def test_an_entry_folder_announced_late_rechecks_what_was_read(tmp_path, monkeypatch):
    """Project learns an entry's folder when it lints it; modules read before are checked again."""
    from opscan.lint.engine import _FactsLoader

    (tmp_path / "a").mkdir()
    (tmp_path / "b" / "json").mkdir(parents=True)
    (tmp_path / "b" / "json" / "__init__.py").write_text("import torch\n\n\ndef seed_all():\n    torch.manual_seed(0)\n")
    helper = tmp_path / "a" / "helper.py"
    helper.write_text("import json\n\n\ndef run():\n    json.seed_all()\n")
    (tmp_path / "b" / "train.py").write_text("import sys\nsys.path.insert(0, '../a')\nfrom helper import run\n\nrun()\n")
    project = Project(_FactsLoader(None, None, relevance.CallFilter.for_lint()), [tmp_path / "a"])
    first = project.entry_module(helper)
    assert first.facts.dropped_libraries == ("json",)  # `json.seed_all()` left out as a library call
    project.entry_module(tmp_path / "b" / "train.py")
    again = project.module_at(helper, "helper")
    assert again.facts.functions["run"].events  # read again with every call: b/json is the project's


# ---------------------------------------------------------------- generated projects

# Statements that matter to some rule, and plenty that matter to none, including calls
# into local functions and classes that the filter must keep.
STATEMENTS = [
    "T.manual_seed(0)",
    "ms(1)",
    "random.seed(0)",
    "np.random.seed(0)",
    "random.shuffle(items)",
    "np.random.rand(3)",
    "T.use_deterministic_algorithms(True)",
    "T.use_deterministic_algorithms(True, warn_only=True)",
    'os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"',
    'os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:2")',
    'os.environ["PYTHONHASHSEED"] = "0"',
    "T.backends.cudnn.benchmark = True",
    "x = T.zeros(3).cuda()",
    'x = x.to("cuda")',
    'y = F.interpolate(x, scale_factor=2, mode="bicubic")',
    'y = F.interpolate(x, scale_factor=2, mode="nearest")',
    "pool = nn.AdaptiveAvgPool2d(3)",
    "x.put_(idx, values)",
    "h = T.histc(x)",
    "y = F.relu(x)",
    "y = T.cat([x, x])",
    "print(json.dumps({}))",
    "n = len(items)",
    "t = time.time()",
    "loss.backward()",
    "helper()",
    "other()",
    "net = Net()",
    "net(x)",
    "self_check = Net().step()",
    "common.setup()",
    "fire.Fire(helper)",
]


@st.composite
def projects(draw):
    main = draw(st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=8))
    helper = draw(st.lists(st.sampled_from(STATEMENTS[:-3]), max_size=5))
    method = draw(st.lists(st.sampled_from(STATEMENTS[:-3]), max_size=4))
    common = draw(st.lists(st.sampled_from(STATEMENTS[:18]), max_size=4))
    local_json = draw(st.booleans())  # a project module named like the standard library's json
    return main, helper, method, common, local_json


def _indent(lines: list[str], depth: int) -> str:
    return "".join("    " * depth + line + "\n" for line in lines) or "    " * depth + "pass\n"


HEADER = (
    "import json\nimport os\nimport random\nimport time\n\nimport fire\nimport numpy as np\nimport torch as T\n"
    "import torch.nn as nn\nimport torch.nn.functional as F\nfrom torch import manual_seed as ms\n\nimport common\n\n"
    "items, idx, values, loss, x = [], None, None, None, None\n\n\n"
)


@given(projects())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_generated_projects_find_the_same(tmp_path_factory, monkeypatch, project):
    main, helper, method, common, local_json = project
    tree = tmp_path_factory.mktemp("gen")
    (tree / "common.py").write_text(HEADER.replace("import common\n", "") + "def setup():\n" + _indent(common, 1))
    if local_json:
        (tree / "json.py").write_text("import torch\n\n\ndef dumps(obj):\n    torch.manual_seed(0)\n    return ''\n")
    (tree / "train.py").write_text(
        HEADER
        + "def helper():\n" + _indent(helper, 1) + "\n\ndef other():\n    json.dumps(1)\n\n\n"
        + "class Net(nn.Module):\n    def forward(self, x):\n" + _indent(["self.step()", *method], 2)
        + "\n    def step(self):\n" + _indent(method, 2) + "\n\n"
        + "def main():\n" + _indent(main, 1) + "\n\nif __name__ == '__main__':\n    main()\n"
    )
    filtered, everything = _both(tree, monkeypatch)
    assert filtered == everything
    event(f"codes found: {len({f['code'] for f in filtered})}")
    shutil.rmtree(tree)


@pytest.mark.skipif(sys.version_info < (3, 10), reason="sys.stdlib_module_names")
def test_standard_library_and_common_libraries_are_libraries():
    calls = relevance.CallFilter.for_lint()
    assert calls.dropped_library("json.dumps", "dumps") == "json"
    assert calls.dropped_library("torch.nn.functional.relu", "relu") == "torch"
    assert calls.dropped_library(None, "backward") == ""
    # Kept: models, op rule APIs and methods, global RNG draws, local and project callees.
    for qualname, method in [
        ("torch.manual_seed", "manual_seed"),
        ("torch.nn.functional.interpolate", "interpolate"),
        (None, "put_"),
        ("random.random", "random"),
        ("numpy.random.rand", "rand"),
        ("$.main", None),
        ("utils.seed.set_seed", "set_seed"),
    ]:
        assert calls.dropped_library(qualname, method) is None, qualname


def test_each_filter_keeps_its_own_answers():
    """dropped_library remembers its answers, per filter: a narrowed one (a project that provides
    torch itself) keeps the calls the other drops, whichever is asked first."""
    lint = relevance.CallFilter.for_lint()
    assert lint.dropped_library("torch.nn.functional.relu", None) == "torch"
    provided = lint.without(frozenset({"torch"}))
    assert provided.dropped_library("torch.nn.functional.relu", None) is None
    assert lint.dropped_library("torch.nn.functional.relu", None) == "torch"
    assert lint.dropped_library("torch.nn.functional.relu", "put_") is None  # an op rule's method, on any receiver
