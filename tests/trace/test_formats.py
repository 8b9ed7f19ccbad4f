"""Every output format of `opscan scan`, on a fixture with a forward and a backward finding."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from tests.trace.helpers import ROOT, expected, scan

TARGET = "put_model.py:build"
WANT = expected("put_model")  # one forward and one backward put_, both at put_model.py:8


def run(capsys, fmt):
    rc, out, err = scan(capsys, TARGET, "--device", "cpu", "--output-format", fmt)
    assert rc == 1, err
    return out


def test_text_table(capsys):
    out = run(capsys, "text")
    lines = out.splitlines()
    assert lines[0].startswith("torch=") and "device=cpu" in lines[0]
    header = lines[1].split()
    assert header[:6] == ["target", "op", "phase", "module", "where", "count"]
    rows = [line for line in lines if line.startswith(TARGET)]
    assert len(rows) == 2
    assert {row.split()[2] for row in rows} == {"forward", "backward"}
    assert all("put_model.py:8" in row for row in rows)
    assert lines[-1] == "Found 2 findings."


def test_json(capsys):
    doc = json.loads(run(capsys, "json"))
    assert set(doc) == {"findings", "env", "errors"}
    for finding in doc["findings"]:
        for key in ("target", "op", "caller", "phase", "module", "file", "line", "remedy"):
            assert key in finding
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
    assert len({r["partialFingerprints"]["primaryLocationLineHash"] for r in results}) == len(results)


def test_markdown(capsys):
    out = run(capsys, "markdown")
    assert out.startswith("# opscan scan\n")
    rows = [line for line in out.splitlines() if line.startswith(f"| {TARGET} |")]
    assert len(rows) == 2 and all("put_model.py:8" in row for row in rows)


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
    rows = [row for row in parser.rows if row and row[0] == TARGET]
    assert len(rows) == 2
    assert {row[2] for row in rows} == {"forward", "backward"}


def test_github(capsys):
    out = run(capsys, "github")
    lines = out.splitlines()
    assert len(lines) == 2
    assert all(line.startswith("::error file=put_model.py,line=8,") for line in lines)


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
    assert out.splitlines()[-1] == "No findings."
