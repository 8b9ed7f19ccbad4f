"""Every `opscan lint` output format, exit codes and the CLI surface, through the real command in a subprocess.

The fixture `tests/fixtures/output/train.py` has its findings in the golden file
`train.expected` (whole messages, checked by tests/lint/test_fixtures.py; here
only their `LINE:COL CODE`); `clean.py` has none. Each format must report exactly
those findings; SARIF is validated against the OASIS SARIF 2.1.0 schema (vendored in
tests/data, see its README) and against what GitHub code scanning requires.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lint.helpers import read_expected
from tests.util import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "output"
SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"
EXPECTED = read_expected(FIXTURES / "train.expected")  # ["8:1 DET001", ...], out of the golden text

LINT_FLAGS = (
    "--select", "--extend-select", "--ignore", "--output-format", "--output-file", "-o", "--statistics",
    "--exit-zero", "--torch-version", "--config", "--no-cache", "--force-exclude", "--fix", "--unsafe-fixes",
    "--diff", "--show-fixes", "--quiet", "-q",
)  # fmt: skip


def opscan(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run `python -m opscan ...` from a source checkout or an install alike."""
    env = subprocess_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "opscan", *args], cwd=cwd, env=env, capture_output=True, text=True, input=stdin, timeout=120
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with no [tool.opscan] above it, holding the fixtures under sub/."""
    (tmp_path / "pyproject.toml").write_text("[tool.opscan]\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    for name in ("train.py", "clean.py"):
        shutil.copy(FIXTURES / name, sub / name)
    return tmp_path


def lint(project: Path, *args: str, target: str = "sub/train.py") -> subprocess.CompletedProcess:
    proc = opscan("lint", "--no-cache", *args, target, cwd=project)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


# ---------------------------------------------------------------- text


def test_text_lists_findings_then_a_summary(project):
    proc = lint(project)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    pattern = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>DET\d{3}) (\[\*\] )?(?P<message>\S.*)$")
    findings = [m for m in map(pattern.match, lines) if m]
    assert [f"{m['line']}:{m['col']} {m['code']}" for m in findings] == EXPECTED
    assert {m["path"] for m in findings} == {"sub/train.py"}
    assert lines[len(findings)] == f"Found {len(EXPECTED)} errors."
    assert all(m["message"] for m in findings)


def test_text_clean_file(project):
    proc = lint(project, target="sub/clean.py")
    assert proc.returncode == 0
    assert proc.stdout == "All checks passed!\n"


def test_exit_zero_still_prints_findings(project):
    proc = lint(project, "--exit-zero")
    assert proc.returncode == 0
    assert sum(": DET" in line for line in proc.stdout.splitlines()) == len(EXPECTED)


def test_statistics(project):
    proc = lint(project, "--statistics")
    assert proc.returncode == 1
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    counts = {}
    for count, code, rest in rows:
        assert re.fullmatch(r"\s*\d+", count) and re.fullmatch(r"DET\d{3}", code), rows
        assert re.fullmatch(r"(\[\*\]| {3}) [a-z0-9-]+", rest), rest
        counts[code] = int(count)
    expected = {}
    for item in EXPECTED:
        expected[item.split()[1]] = expected.get(item.split()[1], 0) + 1
    assert counts == expected
    clean = lint(project, "--statistics", target="sub/clean.py")
    assert clean.returncode == 0 and clean.stdout == "All checks passed!\n"


def test_statistics_as_json(project):
    """ruff's keys, in the order of the text; it printed the findings' list instead, as if --statistics were not given."""
    text = [line.split("\t") for line in lint(project, "--statistics").stdout.splitlines()]
    proc = lint(project, "--statistics", "--output-format", "json")
    assert proc.returncode == 1
    rows = json.loads(proc.stdout)
    assert [list(row) for row in rows] == [["code", "name", "count", "fixable"]] * len(text)
    assert [(row["count"], row["code"], row["fixable"], row["name"]) for row in rows] == [
        (int(count), code, rest.startswith("[*]"), rest[4:]) for count, code, rest in text
    ]
    clean = lint(project, "--statistics", "--output-format", "json", target="sub/clean.py")
    assert (clean.returncode, json.loads(clean.stdout)) == (0, [])  # json still, where ruff prints nothing


@pytest.mark.parametrize("fmt", ["sarif", "github"])
def test_statistics_in_a_format_without_them_is_refused(project, fmt):
    """As ruff refuses it ("Unsupported serialization format for statistics"); the flag was dropped without a word."""
    proc = lint(project, "--statistics", "--output-format", fmt, "-o", "report.out")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"opscan: error: --statistics cannot be printed as {fmt}: use --output-format text or json\n"
    assert not (project / "report.out").exists()


# ---------------------------------------------------------------- json


REQUIRED_JSON = {
    "code": str, "path": str, "line": int, "col": int, "end_line": int, "end_col": int,
    "message": str, "severity": str, "fixable": bool,
}  # fmt: skip


@pytest.mark.parametrize("target", ["sub/train.py", "sub", "ABS"])
def test_json_paths_are_relative_to_the_working_directory(project, target):
    if target == "ABS":
        target = str(project / "sub" / "train.py")
    proc = lint(project, "--output-format", "json", target=target)
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert isinstance(data, list)
    assert [f"{d['line']}:{d['col']} {d['code']}" for d in data] == EXPECTED
    for item in data:
        for key, kind in REQUIRED_JSON.items():
            assert isinstance(item[key], kind), (key, item)
        assert item["path"] == "sub/train.py"
        assert item["severity"] in ("error", "warning", "note")
        assert (item["end_line"], item["end_col"]) >= (item["line"], item["col"])
        assert item["message"] and "\n" not in item["message"]


def test_json_clean_is_an_empty_list(project):
    proc = lint(project, "--output-format", "json", target="sub/clean.py")
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == []


def test_json_agrees_with_text(project):
    data = json.loads(lint(project, "--output-format", "json").stdout)
    text = lint(project).stdout
    for item in data:
        mark = "[*] " if item["fixable"] and item["fix"]["applicability"] == "safe" else ""
        assert f"{item['path']}:{item['line']}:{item['col']}: {item['code']} {mark}{item['message']}\n" in text


# ---------------------------------------------------------------- github


def test_github_annotations(project):
    proc = lint(project, "--output-format", "github")
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    data = json.loads(lint(project, "--output-format", "json").stdout)
    assert len(lines) == len(data)
    pattern = re.compile(
        r"^::(?P<level>error|warning|notice) file=(?P<file>[^,]+),line=(?P<line>\d+),col=(?P<col>\d+),"
        r"endLine=(?P<end_line>\d+),endColumn=(?P<end_col>\d+),title=(?P<title>[^,:]+)::(?P<message>.+)$"
    )
    for line, item in zip(lines, data):
        m = pattern.match(line)
        assert m, line
        assert m["file"] == "sub/train.py"
        assert (int(m["line"]), int(m["col"]), int(m["end_line"]), int(m["end_col"])) == (
            item["line"], item["col"], item["end_line"], item["end_col"],
        )  # fmt: skip
        assert m["message"] == f"{item['code']} {item['message']}"
        assert m["level"] == {"error": "error", "warning": "warning"}.get(item["severity"], "notice")


def test_github_escapes_property_and_message_characters(tmp_path):
    # ',' and ':' would end a property; '%' and newlines must be %-encoded everywhere.
    (tmp_path / "pyproject.toml").write_text("[tool.opscan]\n")
    odd = tmp_path / "odd,name:100%.py"
    shutil.copy(FIXTURES / "train.py", odd)
    proc = opscan("lint", "--no-cache", "--output-format", "github", odd.name, cwd=tmp_path)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 1
    for line in proc.stdout.splitlines():
        assert line.split("::")[1].startswith("error file=odd%2Cname%3A100%25.py,line="), line


def test_github_clean_prints_nothing(project):
    proc = lint(project, "--output-format", "github", target="sub/clean.py")
    assert proc.returncode == 0 and proc.stdout == ""


# ---------------------------------------------------------------- sarif


# RFC 3986's characters of a URI reference: unreserved, reserved (but "[]", an IPv6 host's) and %XX.
_URI_PART = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*"
_URI_REFERENCE = re.compile(rf"{_URI_PART}(?:#{_URI_PART})?")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")


def _uri_parts(value: str) -> tuple[str, str] | None:
    """(scheme, rest) of a URI reference, scheme "" for a relative one; None where it is none.

    A ':' before the first '/', '?' or '#' ends a scheme, so a relative path's first segment
    must not hold one (RFC 3986, 4.2).
    """
    if not _URI_REFERENCE.fullmatch(value):
        return None
    head = re.split(r"[/?#]", value, maxsplit=1)[0]
    if ":" not in head:
        return "", value
    scheme, rest = value.split(":", 1)
    return (scheme, rest) if _SCHEME.fullmatch(scheme) else None


def _sarif_validator():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    # jsonschema checks "uri" and "uri-reference" only where rfc3987 or rfc3986-validator is installed
    # (neither is a test dependency); without this, a path that is no URI (a space, a bare %) passes.
    checker = jsonschema.FormatChecker()
    checker.checks("uri-reference")(lambda v: not isinstance(v, str) or _uri_parts(v) is not None)
    checker.checks("uri")(lambda v: not isinstance(v, str) or bool((_uri_parts(v) or ("",))[0]))
    return cls(schema, format_checker=checker)


def _schema_errors(doc) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _sarif_validator().iter_errors(doc)]


def test_sarif_validates_against_the_2_1_0_schema(project):
    proc = lint(project, "--output-format", "sarif")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert _schema_errors(doc) == []
    results = doc["runs"][0]["results"]
    got = [
        f"{r['locations'][0]['physicalLocation']['region']['startLine']}:"
        f"{r['locations'][0]['physicalLocation']['region']['startColumn']} {r['ruleId']}"
        for r in results
    ]
    assert got == EXPECTED


def test_the_schema_check_can_fail():
    # The vendored schema really constrains the output: a broken log is rejected.
    doc = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [
        {"message": {"text": "m"}, "locations": [{"physicalLocation": {"region": {"startLine": 0}}}]},
    ]}]}  # fmt: skip
    assert _schema_errors(doc)
    assert _schema_errors({"runs": []})
    assert _schema_errors({"version": "2.0.0", "runs": []})
    location = {"physicalLocation": {"artifactLocation": {"uri": "a b.py"}, "region": {"startLine": 1}}}
    bad_uri = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [
        {"message": {"text": "m"}, "locations": [location]},
    ]}]}  # fmt: skip
    assert _schema_errors(bad_uri) == ["runs/0/results/0/locations/0/physicalLocation/artifactLocation/uri: 'a b.py' is not a 'uri-reference'"]
    for uri in ("a%2Gb.py", "1:b/c.py", "a#b#c.py"):
        assert _uri_parts(uri) is None, uri
    assert _uri_parts("a:b/c.py") == ("a", "b/c.py")  # a path's ':' unencoded reads as a scheme
    for uri in ("a%20b.py", "sub/a%3Ab.py", "/abs/a.py", "file:///abs/a.py", "a.py#L1"):
        assert _uri_parts(uri) is not None, uri


def test_sarif_meets_github_code_scanning_requirements(project):
    doc = json.loads(lint(project, "--output-format", "sarif").stdout)
    assert doc["version"] == "2.1.0" and doc["$schema"]
    run = doc["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "opscan" and driver["rules"]
    rules = driver["rules"]
    for rule in rules:
        assert re.fullmatch(r"DET\d{3}", rule["id"])
        for key in ("shortDescription", "fullDescription"):
            assert 0 < len(rule[key]["text"]) <= 1024, (rule["id"], key)
        assert rule["help"]["text"] and rule["help"]["markdown"]
        assert len(rule.get("name", "")) <= 255
        assert rule.get("defaultConfiguration", {}).get("level", "warning") in ("note", "warning", "error")
    fingerprints = set()
    for result in run["results"]:
        assert result["message"]["text"]
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert uri == "sub/train.py"  # relative, forward slashes, no scheme
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        fp = result["partialFingerprints"]["primaryLocationLineHash"]
        assert fp and fp not in fingerprints
        fingerprints.add(fp)


def test_sarif_uri_is_a_percent_encoded_uri_reference(tmp_path):
    """SARIF's artifactLocation.uri is a URI reference: the path was put in as it is (a space, ',', ':' and a bare '%')."""
    from urllib.parse import unquote

    (tmp_path / "pyproject.toml").write_text("[tool.opscan]\n")
    (tmp_path / "odd dir").mkdir()
    shutil.copy(FIXTURES / "train.py", tmp_path / "odd dir" / "a,b:c d%#1.py")
    proc = opscan("lint", "--no-cache", "--output-format", "sarif", "odd dir", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert _schema_errors(doc) == []
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in doc["runs"][0]["results"]}
    assert uris == {"odd%20dir/a%2Cb%3Ac%20d%25%231.py"}  # '/' stays the separator
    (uri,) = uris
    assert _uri_parts(uri) == ("", uri)  # relative: no scheme, and '#' is no fragment
    assert unquote(uri) == "odd dir/a,b:c d%#1.py"
    github = opscan("lint", "--no-cache", "--output-format", "github", "odd dir", cwd=tmp_path).stdout
    assert "file=odd dir/a%2Cb%3Ac d%25#1.py," in github  # GitHub's own escaping, not a URI's


def test_sarif_fingerprints_survive_a_line_shift(project):
    before = json.loads(lint(project, "--output-format", "sarif").stdout)["runs"][0]["results"]
    path = project / "sub" / "train.py"
    path.write_text("\n\n" + path.read_text())
    after = json.loads(lint(project, "--output-format", "sarif").stdout)["runs"][0]["results"]

    def key(results):
        return [(r["ruleId"], r["partialFingerprints"]["primaryLocationLineHash"]) for r in results]

    assert key(before) == key(after)
    lines = [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in after]
    assert lines == [r["locations"][0]["physicalLocation"]["region"]["startLine"] + 2 for r in before]


def test_sarif_identical_findings_get_distinct_fingerprints(tmp_path):
    # Two scripts with the same text in one folder: same code, same line text, different paths;
    # and within one file, the same line twice.
    (tmp_path / "pyproject.toml").write_text("[tool.opscan]\n")
    twice = 'import os\nos.environ["PYTHONHASHSEED"] = "0"\nos.environ["PYTHONHASHSEED"] = "0"\n'
    (tmp_path / "a.py").write_text(twice)
    (tmp_path / "b.py").write_text(twice)
    proc = opscan("lint", "--no-cache", "--output-format", "sarif", ".", cwd=tmp_path)
    doc = json.loads(proc.stdout)
    assert _schema_errors(doc) == []
    results = doc["runs"][0]["results"]
    assert len(results) == 4, proc.stdout
    fps = [r["partialFingerprints"]["primaryLocationLineHash"] for r in results]
    assert len(set(fps)) == 4


def test_sarif_clean_run_is_valid(project):
    proc = lint(project, "--output-format", "sarif", target="sub/clean.py")
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert _schema_errors(doc) == []
    assert doc["runs"][0]["results"] == []


# ---------------------------------------------------------------- output file, exit codes, CLI surface


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_output_file_matches_stdout(project, fmt):
    printed = lint(project, "--output-format", fmt)
    written = lint(project, "--output-format", fmt, "-o", "report.out")
    assert written.returncode == printed.returncode == 1
    assert written.stdout == ""
    assert (project / "report.out").read_text() == printed.stdout


def test_output_file_in_a_missing_folder_exits_2(project):
    proc = lint(project, "-o", "no/such/dir/report.txt")
    assert proc.returncode == 2
    assert proc.stderr.startswith("opscan: error: cannot write")


@pytest.mark.parametrize(
    "args,config,needle",
    [
        (["--select", "DET999"], None, "DET999"),
        (["--ignore", "E501"], None, "E501"),
        (["--extend-select", "NOPE"], None, "NOPE"),
        ([], '[tool.opscan]\nselect = ["DET05"]\n', "DET05"),
        ([], '[tool.opscan]\n[tool.opscan.per-file-ignores]\n"*.py" = ["FOO1"]\n', "FOO1"),
        (["--output-format", "xml"], None, "xml"),
    ],
)
def test_unknown_codes_and_bad_flags_exit_2(project, args, config, needle):
    if config:
        (project / "pyproject.toml").write_text(config)
    proc = lint(project, *args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "opscan: error:" in proc.stderr and needle in proc.stderr


def test_version():
    from opscan import __version__

    proc = opscan("--version", cwd=ROOT)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"opscan {__version__}"


def test_lint_help_lists_every_flag():
    proc = opscan("lint", "--help", cwd=ROOT)
    assert proc.returncode == 0
    from opscan.cli import build_parser

    sub = next(a for a in build_parser("lint")._actions if a.dest == "command").choices["lint"]
    declared = {s for a in sub._actions for s in a.option_strings}
    assert set(LINT_FLAGS) <= declared  # the flags the issue and README promise exist ...
    for flag in declared:  # ... and every flag the parser takes is in the help, with its text
        assert re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", proc.stdout), flag
    helps = [a.help for a in sub._actions if a.option_strings]
    assert all(h and len(h) > 10 for h in helps)
    for fmt in ("text", "json", "sarif", "github"):
        assert fmt in proc.stdout


def test_no_subcommand_shows_help_and_exits_2():
    proc = opscan(cwd=ROOT)
    assert proc.returncode == 2
    assert "lint" in proc.stderr


# ---------------------------------------------------------------- start-up stays small

_PROBE = """
import sys
from opscan.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as exc:
    rc = exc.code
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "libcst", "tabulate", "numpy", "torchvision"))
sys.stderr.write("HEAVY=" + ",".join(heavy) + "\\n")
"""


@pytest.mark.parametrize("args", [[], ["--output-format", "json"], ["--output-format", "sarif"], ["--output-format", "github"], ["--statistics"]])
def test_lint_imports_neither_torch_nor_libcst_nor_tabulate(project, args):
    env = subprocess_env()
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, "lint", "--no-cache", *args, "sub"], cwd=project, env=env, capture_output=True, text=True
    )
    heavy = [line for line in proc.stderr.splitlines() if line.startswith("HEAVY=")]
    assert heavy == ["HEAVY="], proc.stderr


_STDLIB_PROBE = _PROBE.replace(
    '("torch", "libcst", "tabulate", "numpy", "torchvision")',
    '("dataclasses", "inspect", "typing", "shutil", "multiprocessing", "hashlib", "tomllib", "tokenize", "pickle", "ast", "enum")',
)


def test_lint_start_up_skips_the_costly_standard_modules(tmp_path):
    """Each of these cost lint milliseconds of start-up that ruff's whole run fits in (BENCHMARKS.md)."""
    # No pyproject.toml: nothing to parse. Seeds in a row: DET001 needs no second parse to place its fix.
    (tmp_path / "train.py").write_text("import random\n\nimport torch\n\n\ndef seed(s):\n    random.seed(s)\n    torch.manual_seed(s)\n\n\nseed(0)\n")
    env = subprocess_env()
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", _STDLIB_PROBE, "lint", "--no-cache", "train.py"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert "DET001" in proc.stdout
    heavy = [line for line in proc.stderr.splitlines() if line.startswith("HEAVY=")]
    assert heavy == ["HEAVY="], proc.stderr
