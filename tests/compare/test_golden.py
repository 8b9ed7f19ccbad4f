"""Golden tests: every case's records and the whole text output of `opscan compare` are pinned in tests/fixtures/compare/.

Regenerate with `python scripts/gen_golden_compare.py` (or OPSCAN_UPDATE_FIXTURES=1
while running this file), then review the diff.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.compare.cases import CASES, FIXTURES, compare_text, write_records

ROOT = FIXTURES.parents[2]
UPDATE = os.environ.get("OPSCAN_UPDATE_FIXTURES") == "1"


def _generator():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_golden_compare", ROOT / "scripts" / "gen_golden_compare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_case_has_a_fixture_and_no_fixture_lacks_a_case():
    on_disk = {p.name for p in FIXTURES.iterdir() if p.is_dir()}
    assert on_disk == set(CASES), "run: python scripts/gen_golden_compare.py"


@pytest.mark.parametrize("name", sorted(CASES))
def test_records_are_what_the_case_writes(tmp_path, name):
    """The fixture records come from cases.py: a change to the writer must regenerate them."""
    write_records(name, tmp_path)
    if UPDATE:
        write_records(name, FIXTURES / name)
    for file in ("a.jsonl", "b.jsonl"):
        assert (FIXTURES / name / file).read_bytes() == (tmp_path / file).read_bytes(), f"{name}/{file} is stale"


@pytest.mark.parametrize("name", sorted(CASES))
def test_text_output(name):
    folder = FIXTURES / name
    code, text = compare_text(folder)
    want = _generator().expected_text(code, text)
    if UPDATE:
        (folder / "expected.txt").write_text(want, encoding="utf-8")
    assert (folder / "expected.txt").read_text(encoding="utf-8") == want


EXPECTED_CAUSES = {
    "identical": None,
    "kernel_nondeterminism": ("DET200", "aten.mm.default", "fc1", "backward"),
    "reordered_on_cpu": ("DET202", "aten.mm.default", "fc1", "backward"),
    "random_stream": ("DET201", "aten.native_dropout.default", "drop", "forward"),
    "unseeded": ("DET201", "aten.native_dropout.default", "drop", "forward"),
    "data_differs": ("DET202", "aten._to_copy.default", None, "forward"),
    "initialisation_differs": ("DET201", "aten.t.default", "fc1", "forward"),
    "structure_same_numbers": ("DET203", "aten.t.default", "fc2", "forward"),
    "structure_changes_numbers": ("DET203", "aten.mul.Tensor", "act", "forward"),
    "structure_same_sources": ("DET203", "aten.mul.Tensor", "act", "forward"),
    "structure_changed_sources": ("DET203", "aten.mul.Tensor", "act", "forward"),
    "structure_after_kernel": ("DET200", "aten.mm.default", "fc1", "forward"),
    "environment": ("DET204", "aten.mm.default", "fc1", "forward"),
    "seeds_differ": ("DET204", "aten._to_copy.default", None, "forward"),
    "truncated": None,
    "different_targets": None,
    "different_models": ("DET203", "aten.expand.default", None, "backward"),
    "spread": ("DET200", "aten.mm.default", "fc1", "backward"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_json_first_divergence_contract(name):
    """The json shape the diff command reads: a first_divergence table with the leading columns, one row or none."""
    from opscan.compare import compare_records
    from opscan.output import render
    from tests.util import chdir

    with chdir(FIXTURES / name):
        doc = json.loads(render(compare_records("a.jsonl", "b.jsonl"), "json"))
    tables = {t["name"]: t for t in doc["tables"]}
    first = tables["first_divergence"]
    keys = [c["key"] for c in first["columns"]]
    assert keys[:7] == ["op", "module", "file", "line", "step", "phase", "cause"]
    want = EXPECTED_CAUSES[name]
    if want is None:
        assert first["rows"] == []
    else:
        (row,) = first["rows"]
        assert (row["code"], row["op"], row["module"], row["phase"]) == want
    spread = tables["spread"]
    assert [r["step"] for r in spread["rows"]] == sorted(r["step"] for r in spread["rows"])
    assert ("env_diff" in tables) == (name in ("environment", "different_targets", "seeds_differ", "different_models"))


def test_kernel_case_names_only_the_root_cause():
    """Ops after the nudged one read its output and differ too: propagation, never a second cause."""
    from opscan.compare import compare_records
    from tests.util import chdir

    with chdir(FIXTURES / "kernel_nondeterminism"):
        report = compare_records("a.jsonl", "b.jsonl")
    assert [f.code for f in report.findings] == ["DET200"]
    spread = report.table("spread")
    assert sum(spread.column("ops_differ")) > 10  # later ops differ, and are not causes
    assert spread.column("max_param_diff")[0] > 0


def test_spread_grows_after_the_divergence():
    from opscan.compare import compare_records
    from tests.util import chdir

    with chdir(FIXTURES / "spread"):
        report = compare_records("a.jsonl", "b.jsonl")
    diffs = report.table("spread").column("max_param_diff")
    assert diffs[0] == 0 and diffs[1] > 0 and max(diffs) > 100 * diffs[1]
    assert report.table("spread").chart.kind == "line"


def test_command_line_exit_codes():
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSCAN_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for name, code in (("identical", 0), ("kernel_nondeterminism", 1), ("truncated", 2)):
        proc = subprocess.run(
            [sys.executable, "-m", "opscan", "compare", "a.jsonl", "b.jsonl", "--output-format", "json"],
            cwd=FIXTURES / name, env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert proc.returncode == code, proc.stderr
        json.loads(proc.stdout)
        assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_format_renders_and_sarif_is_valid(name):
    import jsonschema

    from opscan.compare import compare_records
    from opscan.output import FORMATS, render
    from tests.util import chdir

    with chdir(FIXTURES / name):
        report = compare_records("a.jsonl", "b.jsonl")
    out = {fmt: render(report, fmt) for fmt in FORMATS}
    schema = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
    jsonschema.validate(json.loads(out["sarif"]), schema)
    measured = any(d is not None for d in report.table("spread").column("max_param_diff"))
    assert out["html"].count("<polyline") == measured  # the spread's line chart, drawn inline
    assert "http" not in out["html"].replace("http://www.w3.org/2000/svg", "")  # self-contained
