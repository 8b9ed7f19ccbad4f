"""`-o FILE` in every command: what cannot be written is refused before any work, in one wording; an input is
never overwritten, nor a read-only file; a run that is all error leaves FILE as it was; an existing FILE keeps its mode."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lint.test_bad_input import _without_read_permission
from tests.util import needs_torch, subprocess_env

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "import pathlib\nimport torch\n\npathlib.Path('RAN').write_text('')\n"


@pytest.fixture
def read_only(tmp_path: Path):
    """(preexec_fn, folder): a folder that a child process run with preexec_fn cannot write into."""
    preexec, reason = _without_read_permission()
    if reason:
        pytest.skip(reason)
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    probe = subprocess.run([sys.executable, "-c", f"open({str(folder / 'x')!r}, 'w')"], preexec_fn=preexec, capture_output=True)
    if probe.returncode == 0:
        folder.chmod(0o755)
        pytest.skip("file modes do not restrict this user here")
    yield preexec, folder
    folder.chmod(0o755)


@needs_torch
@pytest.mark.parametrize(
    "command",
    [
        ("scan", "--device", "cpu"),
        ("bench", "--device", "cpu"),
        ("diff", "--device", "cpu"),
    ],
    ids=lambda c: c[0],
)
def test_a_folder_that_cannot_be_written_is_refused_before_the_run(tmp_path, read_only, command):
    preexec, folder = read_only
    (tmp_path / "train.py").write_text(SCRIPT)
    env = subprocess_env()
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "opscan", *command, "-o", "ro/report.json", "--run", "train.py"], cwd=tmp_path, env=env, preexec_fn=preexec, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2
    assert proc.stderr == f"opscan: error: cannot write ro/report.json: the folder {folder} is not writable\n"
    assert not (tmp_path / "RAN").exists()  # the script never ran
    assert list(folder.iterdir()) == []


@needs_torch
def test_a_sweep_state_that_cannot_be_written_is_one_error(tmp_path, read_only):
    preexec, folder = read_only
    env = subprocess_env()
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "opscan", "report", "--sweep", "--device", "cpu", "--ops", "put*", "--state", "ro/state.jsonl"],
        cwd=tmp_path, env=env, preexec_fn=preexec, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr == "opscan: error: cannot write the state file ro/state.jsonl: Permission denied\n"


@pytest.mark.parametrize("command", [("scan", "--device", "cpu"), ("record", "--device", "cpu"), ("report", "--device", "none")], ids=lambda c: c[0])
def test_an_empty_output_name_is_refused_first(tmp_path, command):
    """`-o "$OUT"` with OUT unset: refused before any work, not a write into the working folder."""
    (tmp_path / "train.py").write_text(SCRIPT)
    env = subprocess_env()
    env["PYTHONPATH"] = str(ROOT)
    run = ("--run", "train.py") if command[0] != "report" else ()
    proc = subprocess.run([sys.executable, "-m", "opscan", *command, "-o", "", *run], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == "opscan: error: -o needs a file name"
    assert not (tmp_path / "RAN").exists()


@pytest.mark.parametrize("under", ["keep.txt/sub", "keep.txt/sub/deeper/r.json"])
def test_a_file_where_a_folder_should_be_is_named_as_such(tmp_path, under):
    """`-o keep.txt/sub` with keep.txt a file said "no folder .../keep.txt": it is there, and it is a file."""
    from opscan.commands.common import check_output_path

    (tmp_path / "keep.txt").write_text("kept\n")
    path = str(tmp_path / under)
    assert check_output_path(path) == f"cannot write {path}: {tmp_path / 'keep.txt'} is not a folder"
    missing = str(tmp_path / "absent" / "r.json")
    assert check_output_path(missing) == f"cannot write {missing}: no folder {tmp_path / 'absent'}"


# ---------------------------------------------------------------- -o naming an input

MODEL = "import torch\nfrom torch import nn\n\n\ndef build():\n    return nn.Linear(8, 4), torch.randn(4, 8)\n"
LINTED = "import torch\n\ntorch.manual_seed(0)\n"


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """A folder with one input of each kind: a model file, a script, two records, a saved report."""
    (tmp_path / "m.py").write_text(MODEL)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "t.py").write_text(LINTED)
    for name in ("a.jsonl", "b.jsonl", "saved.json"):
        (tmp_path / name).write_text(f"the user's {name}\n")
    (tmp_path / "alias.jsonl").symlink_to("a.jsonl")
    return tmp_path


def _opscan(args, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    env = subprocess_env()
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "opscan", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False, **kwargs)


@pytest.mark.parametrize(
    ("command", "output", "named"),
    [
        (("record", "m.py:build", "--device", "cpu"), "m.py", None),
        (("record", "--device", "cpu", "--run", "sub/t.py"), "sub/t.py", None),
        (("scan", "m.py:build", "--device", "cpu"), "m.py", None),
        (("bench", "m.py:build", "--device", "cpu"), "m.py", None),
        (("diff", "m.py:build", "--device", "cpu"), "m.py", None),
        (("compare", "a.jsonl", "b.jsonl"), "a.jsonl", None),
        (("compare", "a.jsonl", "b.jsonl"), "./b.jsonl", None),
        (("compare", "b.jsonl", "a.jsonl"), "alias.jsonl", "a.jsonl"),
        (("compare", "--ranks", "a.jsonl", "b.jsonl"), "b.jsonl", None),
        (("report", "--load", "saved.json", "--output-format", "markdown"), "saved.json", None),
        (("report", "--diff", "saved.json", "a.jsonl"), "a.jsonl", None),
        (("lint", "--no-cache", "sub/t.py"), "sub/t.py", None),
        (("lint", "--no-cache", "."), "sub/t.py", None),
        (("lint", "--no-cache", "--fix", "sub"), "sub/t.py", None),
        (("lint", "--no-cache", "--show-settings", "sub/t.py"), "sub/t.py", None),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else v,
)
def test_an_output_that_is_an_input_is_refused_before_any_work(inputs, command, output, named):
    """`-o` naming the script, a record, a linted file: the report replaced the input it was made from."""
    before = {p: p.read_bytes() for p in inputs.rglob("*") if p.is_file()}
    # -o first: --run takes the rest of the line, and lint's paths are one run of arguments.
    proc = _opscan([command[0], "-o", output, *command[1:]], inputs)
    assert proc.returncode == 2, proc.stderr
    is_what = "an input" if named is None else f"{named}, an input"
    assert proc.stderr == f"opscan: error: -o {output} is {is_what} of this run: the report would overwrite it; give -o another file\n"
    assert proc.stdout == ""
    assert {p: p.read_bytes() for p in inputs.rglob("*") if p.is_file()} == before  # nothing written, nothing fixed


def test_lint_writes_over_a_py_file_it_does_not_lint(inputs):
    """Only a file lint reads is refused: -o t.py outside the linted folder, or excluded from it, is written."""
    (inputs / "pyproject.toml").write_text('[tool.opscan]\nextend-exclude = ["sub/skip.py"]\n')
    (inputs / "sub" / "skip.py").write_text("# the user's\n")
    for output in ("m.py", "sub/skip.py"):
        proc = _opscan(["lint", "--no-cache", "-o", output, "sub"], inputs)
        assert proc.returncode == 1, proc.stderr
        assert (inputs / output).read_text().startswith("sub/t.py:3:1: DET001 ")


# A script that trains through a helper module of its own: the run (and lint) load helper.py, never named on the line.
HELPER = "import torch\n\n\ndef make():\n    torch.manual_seed(0)\n    model = torch.nn.Linear(4, 2)\n    return model, torch.optim.SGD(model.parameters(), lr=0.1)\n"
TRAINS = "import torch\nfrom helper import make\n\nmodel, opt = make()\nfor _ in range(2):\n    opt.zero_grad()\n    model(torch.ones(2, 4)).sum().backward()\n    opt.step()\n"
LOADED = "a project module the run loaded: the report would overwrite it, so it was not written"


@needs_torch
@pytest.mark.parametrize(
    ("command", "output", "message"),
    [
        (("scan", "--device", "cpu", "--run", "t.py"), "helper.py", f"-o helper.py is {LOADED}"),
        (("scan", "--device", "cpu", "--output-format", "sarif", "--run", "t.py"), "alias.py", f"-o alias.py is helper.py, {LOADED}"),
        (("diff", "--device", "cpu", "--steps", "1", "--run", "t.py"), "helper.py", f"-o helper.py is {LOADED}"),
        (("diff", "--device", "cpu", "--steps", "1", "--same-process", "--output-format", "json", "--run", "t.py"), "helper.py", f"-o helper.py is {LOADED}"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else v if v.endswith(".py") else "",
)
def test_a_report_over_a_module_the_run_imported_is_kept_in_its_partial_file(tmp_path, command, output, message):
    """-o naming a module the script imports (not named on the command line): the report replaced the user's code, then was
    refused and lost with the whole run; it is kept whole in FILE.partial, as `record` keeps its record, and the error says so."""
    (tmp_path / "helper.py").write_text(HELPER)
    (tmp_path / "t.py").write_text(TRAINS)
    (tmp_path / "alias.py").symlink_to("helper.py")
    proc = _opscan([command[0], "-o", output, *command[1:]], tmp_path)
    kept = f"{output}.partial"
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.splitlines()[-1] == f"opscan: error: {message}; the whole report is in {kept}: move it where you want it"
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "helper.py").read_text() == HELPER and (tmp_path / "t.py").read_text() == TRAINS
    assert (tmp_path / "alias.py").is_symlink()
    names = sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__")
    assert names == sorted(["alias.py", "helper.py", "t.py", kept])  # no temporary file left
    report = (tmp_path / kept).read_text()
    fmt = command[command.index("--output-format") + 1] if "--output-format" in command else "text"
    if fmt == "json":  # whole, in the format asked
        assert json.loads(report)["command"] == command[0]
    elif fmt == "sarif":
        assert json.loads(report)["runs"][0]["tool"]["driver"]["name"] == "opscan"
    else:
        assert report.startswith({"scan": "torch=", "diff": "processes=two fresh steps=1\n"}[command[0]]), report


@needs_torch
def test_a_report_whose_partial_file_is_there_goes_to_stdout(tmp_path):
    """FILE.partial is the user's (an earlier record cut short, say): never replaced; the report goes where it goes without -o."""
    (tmp_path / "helper.py").write_text(HELPER)
    (tmp_path / "t.py").write_text(TRAINS)
    (tmp_path / "helper.py.partial").write_text("the user's\n")
    proc = _opscan(["scan", "-o", "helper.py", "--device", "cpu", "--output-format", "json", "--run", "t.py"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        f"opscan: error: -o helper.py is {LOADED}; the report is on stdout (helper.py.partial is there already)"
    )
    assert json.loads(proc.stdout)["command"] == "scan"
    assert (tmp_path / "helper.py").read_text() == HELPER and (tmp_path / "helper.py.partial").read_text() == "the user's\n"


@pytest.mark.parametrize(
    ("command", "output", "message"),
    [
        (("lint", "--no-cache", "t.py"), "helper.py", "-o helper.py is a file this lint read: the report would overwrite it; give -o another file"),
        (("lint", "t.py"), "alias.py", "-o alias.py is helper.py, a file this lint read: the report would overwrite it; give -o another file"),
        (("lint", "--no-cache", "--fix", "t.py"), "helper.py", "-o helper.py is a file this lint read: the report would overwrite it; give -o another file"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else v if v.endswith(".py") else "",
)
def test_an_output_that_is_a_module_the_run_imported_is_not_written(tmp_path, command, output, message):
    """-o naming a module the script imports (not named on the command line): the report replaced the user's code."""
    (tmp_path / "helper.py").write_text(HELPER)
    (tmp_path / "t.py").write_text(TRAINS)
    (tmp_path / "alias.py").symlink_to("helper.py")
    proc = _opscan([command[0], "-o", output, *command[1:]], tmp_path)
    assert (proc.returncode, proc.stderr.splitlines()[-1:], proc.stdout) == (2, [f"opscan: error: {message}"], "")
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "helper.py").read_text() == HELPER and (tmp_path / "t.py").read_text() == TRAINS
    assert (tmp_path / "alias.py").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["alias.py", "helper.py", "t.py"]


@needs_torch
def test_a_record_over_a_module_the_run_imported_stays_in_its_partial_file(tmp_path):
    """The record is renamed into place at the end: over helper.py, which t.py imports, it replaced the user's module."""
    (tmp_path / "helper.py").write_text(HELPER)
    (tmp_path / "t.py").write_text(TRAINS)
    proc = _opscan(["record", "-o", "helper.py", "--device", "cpu", "--steps", "1", "--run", "t.py"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "opscan: error: -o helper.py is a project module the run loaded: the record was not renamed over it; "
        "the whole record is in helper.py.partial: move it where you want it"
    )
    assert (tmp_path / "helper.py").read_text() == HELPER
    lines = (tmp_path / "helper.py.partial").read_text().splitlines()
    assert '"type": "header"' in lines[0] and '"type": "end"' in lines[-1]  # whole: the end line too


# ---------------------------------------------------------------- a run that is all error leaves -o alone

BOOM = MODEL + '\n\ndef boom():\n    raise RuntimeError("boom")\n'


@pytest.mark.parametrize(
    "command",
    [
        ("lint", "--no-cache", "missing.py"),
        ("compare", "missing.jsonl", "b.jsonl"),
        ("compare", "--ranks", "a.jsonl"),
        ("scan", "m.py:boom", "--device", "cpu"),
        ("diff", "m.py:boom", "--device", "cpu", "--same-process"),
    ],
    ids=" ".join,
)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_run_with_nothing_but_an_error_keeps_the_old_output_file(inputs, command, fmt):
    """The error goes to stderr, exit 2; 'error: ...' used to replace last run's report in -o."""
    (inputs / "m.py").write_text(BOOM)
    (inputs / "report.txt").write_text("last run's report\n")
    proc = _opscan([command[0], "-o", "report.txt", "--output-format", fmt, *command[1:]], inputs)
    assert proc.returncode == 2, proc.stderr
    assert (inputs / "report.txt").read_text() == "last run's report\n"
    assert proc.stdout == ""
    assert "opscan: error: " in proc.stderr and "Traceback" not in proc.stderr.split("opscan: error: ")[0]
    assert proc.stderr.endswith("opscan: report.txt not written: the run stopped before any result\n")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (("lint", "--no-cache", "missing.py", "sub/t.py"), "sub/t.py:3:1: DET001 "),
        (("lint", "--no-cache", "missing.py", "clean.py"), "error: no such file or directory: missing.py"),
        (("scan", "m.py:boom", "m.py:build", "--device", "cpu"), "torch="),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else "",
)
def test_a_run_with_results_beside_its_errors_still_writes_them(inputs, command, expected):
    """Part of the run stopped, the rest has results (lint's other files, the other target): written, exit 2."""
    (inputs / "m.py").write_text(BOOM)
    (inputs / "clean.py").write_text("import torch\n")
    (inputs / "report.txt").write_text("last run's report\n")
    proc = _opscan([command[0], "-o", "report.txt", *command[1:]], inputs)
    assert proc.returncode == 2, proc.stderr
    text = (inputs / "report.txt").read_text()
    assert text.startswith(expected) and "error: " in text
    assert "not written" not in proc.stderr


# ---------------------------------------------------------------- a read-only file is not replaced


@pytest.fixture
def no_override(inputs: Path):
    """A preexec_fn under which a file's own mode stops this user writing it (root drops CAP_DAC_OVERRIDE)."""
    preexec, reason = _without_read_permission()
    if reason:
        pytest.skip(reason)
    probe = inputs / "probe"
    probe.write_text("")
    probe.chmod(0o444)
    check = subprocess.run([sys.executable, "-c", f"open({str(probe)!r}, 'w')"], preexec_fn=preexec, capture_output=True, check=False)
    probe.unlink()
    if check.returncode == 0:
        pytest.skip("file modes do not restrict this user here")
    return preexec


@pytest.mark.parametrize(
    "command",
    [
        ("rule", "DET001"),
        ("lint", "--no-cache", "sub/t.py"),
        ("compare", "a.jsonl", "b.jsonl"),
        ("record", "m.py:build", "--device", "cpu"),
        ("scan", "m.py:build", "--device", "cpu"),
        ("report", "--load", "saved.json"),
    ],
    ids=" ".join,
)
def test_a_read_only_output_file_is_refused_not_replaced(inputs, no_override, command):
    """The report was renamed over a file the user had made read-only (chmod 444): exit 0, file replaced."""
    kept = inputs / "kept.txt"
    kept.write_text("keep\n")
    kept.chmod(0o444)
    proc = _opscan([command[0], "-o", "kept.txt", *command[1:]], inputs, preexec_fn=no_override)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "opscan: error: cannot write kept.txt: Permission denied\n"
    assert kept.read_text() == "keep\n" and stat.S_IMODE(kept.stat().st_mode) == 0o444


def test_fix_and_add_noqa_leave_a_read_only_file_alone(inputs, no_override):
    script = inputs / "sub" / "t.py"
    script.chmod(0o444)
    fix = _opscan(["lint", "--no-cache", "--fix", "sub/t.py"], inputs, preexec_fn=no_override)
    assert "error: cannot write sub/t.py: Permission denied; its fixes were not applied" in fix.stdout
    assert fix.returncode == 2 and "sub/t.py:3:1: DET001" in fix.stdout  # an I/O error, as add-noqa's; its findings remain
    noqa = _opscan(["lint", "--no-cache", "--add-noqa", "sub/t.py"], inputs, preexec_fn=no_override)
    assert noqa.returncode == 2 and "opscan: error: no noqa added to sub/t.py: Permission denied" in noqa.stderr
    assert script.read_text() == LINTED and stat.S_IMODE(script.stat().st_mode) == 0o444


# ---------------------------------------------------------------- an existing -o file keeps its mode


@pytest.mark.parametrize(
    "command",
    [("rule", "DET001"), ("lint", "--no-cache", "sub/t.py"), ("scan", "m.py:build", "--device", "cpu"), ("record", "m.py:build", "--device", "cpu")],
    ids=lambda c: c[0],
)
def test_an_existing_output_file_keeps_its_permission_bits(inputs, command):
    """record made a 0600 file 0644; the other commands already kept it (fsutil.atomic_write_bytes)."""
    out = inputs / "private.out"
    out.write_text("old\n")
    out.chmod(0o600)
    proc = _opscan([command[0], "-o", "private.out", *command[1:]], inputs)
    assert proc.returncode in (0, 1), proc.stderr
    assert out.read_text() != "old\n" and stat.S_IMODE(out.stat().st_mode) == 0o600


# ---------------------------------------------------------------- one check, one wording, in every command

EVERY_COMMAND = [
    ("rule", "DET001"),
    ("lint", "--no-cache", "sub/t.py"),
    ("compare", "a.jsonl", "b.jsonl"),
    ("report", "--load", "saved.json"),
    ("record", "m.py:build", "--device", "cpu"),
    ("scan", "m.py:build", "--device", "cpu"),
    ("bench", "m.py:build", "--device", "cpu"),
    ("diff", "m.py:build", "--device", "cpu"),
]


@pytest.mark.parametrize("command", EVERY_COMMAND, ids=lambda c: c[0])
@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("", "-o needs a file name"),
        ("absent/r.txt", "cannot write absent/r.txt: no folder {folder}/absent"),
        ("sub", "sub is a directory; give -o a file name"),
    ],
    ids=["empty", "no folder", "a folder"],
)
def test_an_output_path_that_cannot_be_written_is_said_alike_by_every_command(inputs, command, output, message):
    """lint, rule and compare said the OS's words ('cannot write : Is a directory'), the others their own."""
    proc = _opscan([command[0], "-o", output, *command[1:]], inputs)
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, f"opscan: error: {message.format(folder=inputs)}\n", "")
    assert not (inputs / "absent").exists()


@pytest.mark.parametrize("command", EVERY_COMMAND, ids=lambda c: c[0])
def test_a_read_only_folder_is_said_alike_by_every_command(inputs, read_only, command):
    preexec, folder = read_only
    proc = _opscan([command[0], "-o", "ro/r.txt", *command[1:]], inputs, preexec_fn=preexec)
    assert (proc.returncode, proc.stderr) == (2, f"opscan: error: cannot write ro/r.txt: the folder {folder} is not writable\n")
    assert list(folder.iterdir()) == []
