"""Every output format of `opscan scan`, on a fixture with a forward and a backward finding."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from tests.trace.helpers import ROOT, expected, scan
from tests.util import needs_torch

pytestmark = needs_torch  # every test here runs a scan

TARGET = "put_model.py:build"
WANT = expected("put_model")  # one forward and one backward put_, both at put_model.py:8


def run(capsys, fmt):
    rc, out, err = scan(capsys, TARGET, "--device", "cpu", "--output-format", fmt)
    assert rc == 1, err
    return out


REMEDY_CODE = "x.view(-1).index_put_((index.view(-1),), source.view(-1), accumulate=accumulate)"


def test_text(capsys):
    out = run(capsys, "text")
    lines = out.splitlines()
    assert lines[0].startswith("torch=") and "device=cpu" in lines[0]
    rows = [line for line in lines if line.startswith("put_model.py:8:1: DET100 aten.put.default (put_)")]
    assert len(rows) == 2
    assert sum("(forward)" in row for row in rows) == 1 and sum("runs in backward" in row for row in rows) == 1
    assert all("in head (Head)" in row for row in rows)
    assert sum(line.startswith("  help: Write through the flattened tensor") for line in lines) == 2
    assert sum(line.strip().startswith(REMEDY_CODE) for line in lines) == 2  # the remedy's code, in text too
    assert "partial scan" in out  # the CPU warning is part of the report
    assert lines[-1] == "Found 2 errors."


def test_json(capsys):
    doc = json.loads(run(capsys, "json"))
    assert set(doc) == {"tool", "version", "command", "env", "findings", "tables", "errors", "notices", "summary"}
    assert doc["summary"] is None  # a check: it closes with the finding count
    assert doc["command"] == "scan" and doc["errors"] == [] and any("partial scan" in n for n in doc["notices"])
    for finding in doc["findings"]:
        for key in ("code", "message", "target", "op", "caller", "phase", "module", "file", "line", "help", "help_code"):
            assert key in finding
        assert REMEDY_CODE in finding["help_code"]
    assert doc["env"]["device"] == "cpu"
    for key in ("torch", "cuda", "cudnn", "gpu", "cublas_workspace_config", "fill_uninitialized_memory", "cudnn_benchmark"):
        assert key in doc["env"]


def test_sarif_locates_user_lines(capsys):
    doc = json.loads(run(capsys, "sarif"))
    schema_path = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"
    if schema_path.exists():
        jsonschema = pytest.importorskip("jsonschema")
        jsonschema.validate(doc, json.loads(schema_path.read_text()))
    run0 = doc["runs"][0]
    assert [r["id"] for r in run0["tool"]["driver"]["rules"]] == ["DET100"]
    results = run0["results"]
    assert len(results) == len(WANT)
    for result in results:
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"] == "put_model.py"
        assert location["region"]["startLine"] == 8
        assert result["properties"]["op"] == "aten.put.default"
        assert REMEDY_CODE in result["properties"]["help_code"]
    assert len({r["partialFingerprints"]["primaryLocationLineHash"] for r in results}) == len(results)


def test_markdown(capsys):
    out = run(capsys, "markdown")
    assert out.startswith("# opscan scan\n")
    rows = [line for line in out.splitlines() if line.startswith("| DET100 | put_model.py:8 |")]
    assert len(rows) == 2 and all("aten.put.default" in row for row in rows)
    assert out.count(REMEDY_CODE) == 2 and "partial scan" in out


class _Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self._row, self._in_cell = [], None, False

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._in_cell = True
            self._row.append("")

    def handle_endtag(self, tag):
        if tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        elif tag in ("td", "th"):
            self._in_cell = False

    def handle_data(self, data):
        if self._in_cell and self._row:
            self._row[-1] += data


def test_html(capsys):
    out = run(capsys, "html")
    parser = _Cells()
    parser.feed(out)
    rows = [row for row in parser.rows if row and row[0] == "DET100"]
    assert len(rows) == 2
    assert {row[1] for row in rows} == {"put_model.py:8"}
    assert sum("(forward)" in row[2] for row in rows) == 1 and sum("runs in backward" in row[2] for row in rows) == 1
    assert out.count(REMEDY_CODE) == 2 and "partial scan" in out
    assert "<script src" not in out and "http" not in out.split("<body>")[1].split("<script>")[0]


def test_github(capsys):
    out = run(capsys, "github")
    lines = out.splitlines()
    assert len(lines) == 2
    assert all(line.startswith("::error file=put_model.py,line=8,") for line in lines)


def test_a_target_above_the_working_directory_is_shown_relative_to_it(capsys, tmp_path):
    """From a subfolder, `../put_model.py:build` printed `/abs/sub/../put_model.py` (in SARIF's uri and GitHub's file= too); lint prints `../`."""
    # Another name: the folder stays on sys.path, and a put_model there would shadow the fixture's module target.
    (tmp_path / "above.py").write_bytes((ROOT / "tests" / "fixtures" / "scan" / "put_model.py").read_bytes())
    (tmp_path / "sub").mkdir()
    shown = {}
    for fmt in ("text", "sarif", "github", "json"):
        rc, out, err = scan(capsys, "../above.py:build", "--device", "cpu", "--output-format", fmt, cwd=tmp_path / "sub")
        assert rc == 1, err
        shown[fmt] = out
    rows = [line for line in shown["text"].splitlines() if ": DET100 " in line]
    assert len(rows) == 2 and all(row.startswith("../above.py:8:1: DET100 ") for row in rows)
    assert "of the forward op at ../above.py:8 in head" in shown["text"]
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in json.loads(shown["sarif"])["runs"][0]["results"]]
    assert uris == ["../above.py"] * 2
    assert all(line.startswith("::error file=../above.py,line=8,") for line in shown["github"].splitlines())
    assert {f["file"] for f in json.loads(shown["json"])["findings"]} == {"../above.py"}
    assert str(tmp_path) not in "".join(shown.values())


def test_a_file_of_an_installed_package_stays_absolute():
    """Above the working directory, but torch's or the standard library's: `../../..` up to it would hide where it is."""
    import os

    import torch

    from opscan.trace.sourcemap import display_path

    for path in (torch.__file__, json.__file__):
        assert display_path(path) == os.path.abspath(path) or not os.path.relpath(path).startswith("..")
    assert display_path("<string>") == "<string>"


def test_output_file_is_written_whole_and_stdout_stays_empty(capsys, tmp_path):
    target = tmp_path / "report.json"
    rc, out, _err = scan(capsys, TARGET, "--device", "cpu", "--output-format", "json", "-o", str(target))
    assert rc == 1 and out == ""
    assert len(json.loads(target.read_text())["findings"]) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary file left


def test_unwritable_output_file_is_an_error_without_traceback(capsys, tmp_path):
    rc, out, err = scan(capsys, TARGET, "--device", "cpu", "-o", str(tmp_path / "missing" / "r.txt"))
    assert rc == 2 and out == ""
    assert "opscan: error: cannot write" in err and "Traceback" not in err
    assert not (tmp_path / "missing").exists()


def test_clean_target_exits_zero(capsys):
    rc, out, _err = scan(capsys, "clean_model.py:build", "--device", "cpu")
    assert rc == 0
    assert out.splitlines()[-1] == "All checks passed!"
