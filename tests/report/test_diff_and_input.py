"""`opscan report --diff` on two committed fixture reports, `--load`, and every kind of bad input (exit 2, no traceback)."""

from __future__ import annotations

import json

import pytest

from tests.report.helpers import FIXTURES, opscan_report, ops_rows, table
from tests.util import needs_torch

OLD = FIXTURES / "h200-torch-2.9.json"
NEW = FIXTURES / "h200-torch-2.11.json"


def test_diff_lists_every_changed_field():
    rc, out, err = opscan_report("--diff", str(OLD), str(NEW), "--output-format", "json")
    assert rc == 1, err  # changes, as diff(1) says
    doc = json.loads(out)
    changes = {(r["op"], r["device"], r["dtype"], r["change"], r["field"], r["before"], r["after"]) for r in table(doc, "changes")["rows"]}
    assert changes == {
        ("cumsum", "cuda", "float32", "removed", "verdict", "nondeterministic by default, deterministic in strict mode", ""),
        ("kthvalue", "cuda", "float32", "changed", "expected", "raises", "no alert"),
        ("kthvalue", "cuda", "float32", "changed", "strict", "raises", "no alert"),
        ("kthvalue", "cuda", "float32", "changed", "caller", "kthvalue CUDA", ""),
        ("kthvalue", "cuda", "float32", "changed", "strict_bits", "", "identical"),
        ("kthvalue", "cuda", "float32", "changed", "verdict", "raises", "deterministic in both modes"),
        ("kthvalue", "cuda", "float32", "changed", "remedy", "runs; identical in 5 runs", ""),
        ("upsample_bicubic2d_backward", "cuda", "float16", "added", "verdict", "", "raises"),
    }
    environment = {r["key"]: (r["before"], r["after"]) for r in table(doc, "environment")["rows"]}
    assert environment["torch"] == ("2.9.1+cu128", "2.11.0+cu130") and environment["driver"] == ("570.124.06", "580.159.03")
    assert "gpu" not in environment and "date" not in environment
    assert doc["env"]["rows_changed"] == 3


def test_a_diff_with_changes_never_closes_with_all_checks_passed():
    """It listed the changed rows, exited 1 and closed with "All checks passed!": the closing line and the exit agree."""
    rc, out, err = opscan_report("--diff", str(OLD), str(NEW))
    assert rc == 1, err
    assert "All checks passed!" not in out and out.splitlines()[-1] == "3 rows changed."
    rc, out, err = opscan_report("--diff", str(NEW), str(NEW))
    assert rc == 0, err
    assert out.splitlines()[-1] == "No row changed."


def test_every_format_closes_as_the_exit_code_says():
    """The formatter reads the report's outcome, never which command made it."""
    from opscan.findings import Report
    from opscan.output import render

    for outcome in (0, 1):
        report = Report("anything", outcome=outcome)
        assert report.exit_code() == outcome
        for fmt in ("text", "markdown", "html"):
            assert ("All checks passed!" in render(report, fmt)) == (outcome == 0), (fmt, outcome)


def test_a_report_diffed_with_itself_has_no_changes():
    rc, out, err = opscan_report("--diff", str(NEW), str(NEW), "--output-format", "markdown")
    assert rc == 0, err
    assert "## Changed rows" in out and "(none)" in out


def test_diff_against_this_machine():
    rc, out, err = opscan_report("--diff", str(NEW), "--device", "none", "--output-format", "json")
    assert rc == 1, err
    doc = json.loads(out)
    rows = table(doc, "changes")["rows"]
    assert any(r["change"] == "added" for r in rows)  # every rule is in a fresh report, five are in the fixture
    assert doc["env"]["after"].startswith("torch ") and "from the rules" in doc["env"]["after"]


def test_load_renders_a_saved_report_again(tmp_path):
    out = tmp_path / "again.md"
    rc, _, err = opscan_report("--load", str(NEW), "--output-format", "markdown", "-o", str(out))
    assert rc == 0, err
    text = out.read_text()
    assert text.startswith("# opscan report") and "| gpu | NVIDIA H200 |" in text
    assert text.count("| rule | upsample_bicubic2d_backward |") == 2
    assert json.loads(NEW.read_text())["tables"][0]["rows"] == ops_rows(json.loads(NEW.read_text()))


def test_output_file_is_replaced_whole(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old contents that are longer than nothing\n" * 100)
    rc, _, err = opscan_report("--load", str(NEW), "--output-format", "json", "-o", str(out))
    assert rc == 0, err
    assert json.loads(out.read_text())["env"]["torch"] == "2.11.0+cu130"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"], "no temporary file is left behind"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--diff", "a.json", "b.json", "c.json"], "--diff takes one report"),
        (["--time-limit", "5"], "--time-limit goes with --sweep"),
        (["--ops", "index_*"], "--ops goes with --sweep"),
        (["--sweep", "--diff", "a.json"], "do not go together"),
        (["--sweep", "--time-limit", "-3"], "not a positive number of seconds"),
        (["--sweep", "--ops", ","], "--ops needs a pattern"),
        (["--torch-version", "latest"], "not a torch version"),
        (["--runs", "0"], "not a positive integer"),
        (["--runs", "1"], "'1' is too few: nondeterminism shows only between at least 2 runs"),
        pytest.param(["--device", "cuda:7"], "no CUDA GPU is available", marks=needs_torch),
        pytest.param(["--device", "tpu"], "'tpu' is not a device; use cuda, cuda:N, cpu or auto (or none: the rules only)", marks=needs_torch),
        (["--output-format", "pdf"], "invalid choice"),
        # A saved report is rendered or compared as it is: the flags that make one here were ignored without a word.
        (["--load", str(NEW), "--torch-version", "2.9"], "--torch-version and --load do not go together"),
        (["--load", str(NEW), "--device", "cpu", "--runs", "3"], "--device, --runs and --load do not go together"),
        (["--diff", str(OLD), str(NEW), "--torch-version", "2.9"], "--torch-version and --diff with two reports do not go together"),
        (["--sweep", "--torch-version", "2.9"], "--torch-version and --sweep do not go together"),
    ],
)
def test_bad_input_is_a_clear_error(args, message):
    rc, out, err = opscan_report(*args)
    assert rc == 2 and message in err and "Traceback" not in err, err


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_a_saved_report_that_cannot_be_read_is_an_error_in_the_report(fmt):
    """As compare's missing record: json is still json (it printed nothing but a line on stderr), and the error is in every format."""
    rc, out, err = opscan_report("--load", "missing.json", "--output-format", fmt)
    assert rc == 2 and "Traceback" not in err
    message = "cannot read missing.json: No such file or directory"
    if fmt == "json":
        doc = json.loads(out)
        assert (doc["command"], doc["errors"], doc["tables"]) == ("report", [{"message": message, "target": "missing.json"}], [])
    else:
        assert message in out
    assert err == ("" if fmt == "text" else f"opscan: error: {message}\n")  # text on stdout says it once, as every command


def test_an_unreadable_saved_report_leaves_the_output_file_as_it_was(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("last good report\n")
    rc, _, err = opscan_report("--diff", "missing.json", str(NEW), "--output-format", "json", "-o", str(out))
    assert rc == 2 and out.read_text() == "last good report\n"
    assert err == f"opscan: error: cannot read missing.json: No such file or directory\nopscan: {out} not written: the run stopped before any result\n"


def test_files_that_are_not_reports(tmp_path):
    cases = {
        "not-json.json": "{not json",
        "list.json": "[]",
        "scan.json": json.dumps({"tool": "opscan", "command": "scan", "env": {}, "tables": []}),
        "no-ops.json": json.dumps({"tool": "opscan", "command": "report", "env": {}, "tables": [{"name": "summary", "columns": [], "rows": []}]}),
        "bad-rows.json": json.dumps({"tool": "opscan", "command": "report", "env": {}, "tables": [{"name": "ops", "columns": [{"key": "op"}], "rows": [3]}]}),
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        rc, out, err = opscan_report("--load", str(tmp_path / name), "--output-format", "json")
        assert rc == 2 and "Traceback" not in err and "opscan: error:" in err, (name, err)
        assert json.loads(out)["errors"][0]["target"] == str(tmp_path / name)


def test_a_report_path_that_is_not_a_report_file_says_what_it_is(tmp_path, monkeypatch):
    """A directory was "cannot read: Is a directory"; /dev/zero was read until memory ran out (opscan._read refuses devices)."""
    from opscan.report import matrix

    rc, out, err = opscan_report("--load", str(tmp_path), "--output-format", "json")
    assert (rc, json.loads(out)["errors"][0]["message"]) == (2, f"{tmp_path} is a directory, not a saved report")
    assert err == f"opscan: error: {tmp_path} is a directory, not a saved report\n"
    rc, _, err = opscan_report("--diff", str(tmp_path), str(NEW), "--output-format", "json")
    assert rc == 2 and err == f"opscan: error: {tmp_path} is a directory, not a saved report\n"
    monkeypatch.setattr(matrix, "MAX_REPORT_BYTES", 1024 * 1024)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (1024 * 1024 + 1))
    rc, _, err = opscan_report("--load", str(big), "--output-format", "json")
    assert rc == 2 and err == f"opscan: error: {big} is larger than 1 MB, too large for a saved report\n"


def test_a_report_nested_too_deeply_for_json_is_not_json(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    rc, _, err = opscan_report("--load", str(deep), "--output-format", "json")
    assert rc == 2 and err.startswith(f"opscan: error: {deep} is not json: ") and "Traceback" not in err, err


def test_unwritable_output_is_a_clear_error(tmp_path):
    rc, _, err = opscan_report("--load", str(NEW), "-o", str(tmp_path / "no" / "such" / "dir" / "r.json"))
    assert rc == 2 and "cannot write" in err
