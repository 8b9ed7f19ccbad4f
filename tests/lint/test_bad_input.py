"""Bad input never gets a traceback: each file gets DET000 or is skipped with a clear message.

Every case runs the real `opscan lint` in a subprocess and checks the exit
code, the findings and that stderr holds no traceback. The property tests at
the end feed generated programs (hypothesmith's, and generated training
scripts with calls between functions and modules) to the engine in-process.
"""

from __future__ import annotations

import ast
import ctypes
import errno
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opscan.lint.rules import lint_codes
from opscan.config import Config
from opscan.lint import engine
from opscan.lint.facts import extract
from opscan.output import render
from opscan.rules import NEWEST_TORCH
from tests.util import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
SEEDS = b"import torch\ntorch.manual_seed(0)\n"  # DET001 + DET002 at 2:1 when analysed


def opscan(*args: str, cwd: Path, preexec_fn=None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = subprocess_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "opscan", *args], cwd=cwd, env=env, capture_output=True, timeout=timeout, preexec_fn=preexec_fn
    )
    out = subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))
    assert "Traceback" not in out.stderr, out.stderr
    return out


def lint(folder: Path, *paths: str, fmt: str = "json", extra=(), **kwargs) -> tuple[int, list[dict], str]:
    """(exit code, findings as json objects, stderr)."""
    proc = opscan("lint", "--no-cache", "--output-format", fmt, *extra, *paths, cwd=folder, **kwargs)
    return proc.returncode, json.loads(proc.stdout) if fmt == "json" else proc.stdout, proc.stderr


def codes(findings: list[dict]) -> list[str]:
    return [f"{f['path']}:{f['line']}:{f['col']} {f['code']}" for f in findings]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.opscan]\n")
    return tmp_path


# ---------------------------------------------------------------- files that cannot be analysed


UNANALYSABLE = {
    "syntax_error": (b"def train(:\n    torch.manual_seed(0)\n", "syntax error"),
    "not_utf8": (b"x = '\xff\xfe'\n" + SEEDS, "cannot decode"),
    "bad_cookie": (b"# -*- coding: no-such-codec -*-\n" + SEEDS, "cannot decode"),
    "wrong_cookie": (b"# -*- coding: ascii -*-\nx = '\xc3\xa9'\n" + SEEDS, "cannot decode"),
    "nul_byte": (b"import torch\x00\ntorch.manual_seed(0)\n", "null bytes"),
    "nul_only": (b"\x00" * 64, "null bytes"),
    "binary": (bytes(range(256)) * 4, "cannot"),
    "deep_parens": (b"x = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\n", "nested"),
    "deep_lists": (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested"),
    "deep_indent": (b"".join(b"    " * i + b"if x:\n" for i in range(120)) + b"    " * 120 + b"pass\n", "indent"),
    "unterminated": (b'x = """never closed\n' + SEEDS, "syntax error"),
    "lone_tab_mix": (b"if x:\n\tif y:\n        pass\n", "syntax error"),
}


@pytest.mark.parametrize("name", sorted(UNANALYSABLE))
def test_unanalysable_file_gets_det000(folder, name):
    data, reason = UNANALYSABLE[name]
    (folder / f"{name}.py").write_bytes(data)
    rc, findings, err = lint(folder, f"{name}.py")
    assert rc == 1
    assert [f["code"] for f in findings] == ["DET000"], findings
    message = findings[0]["message"]
    assert message.startswith("Could not analyse file:") and "\n" not in message
    assert re.search(reason, message, re.I), message
    assert findings[0]["line"] >= 1 and findings[0]["col"] >= 1


def test_the_run_goes_on_after_a_bad_file(folder):
    (folder / "a_bad.py").write_bytes(b"def f(:\n")
    (folder / "b_good.py").write_bytes(SEEDS)
    (folder / "c_bad.py").write_bytes(b"\xff\xfe\x00")
    rc, findings, _ = lint(folder, ".")
    assert rc == 1
    assert codes(findings) == ["a_bad.py:1:7 DET000", "b_good.py:2:1 DET001", "b_good.py:2:1 DET002", "c_bad.py:1:1 DET000"]


# ---------------------------------------------------------------- odd but valid files are analysed


VALID = {
    "empty": (b"", []),
    "blank_lines": (b"\n\n\n   \n", []),
    "comments_only": (b"# just a comment\n# another\n", []),
    "no_trailing_newline": (b"import torch\ntorch.manual_seed(0)", ["2:1 DET001", "2:1 DET002"]),
    "crlf": (b"import torch\r\ntorch.manual_seed(0)\r\n", ["2:1 DET001", "2:1 DET002"]),
    "cr_only": (b"import torch\rtorch.manual_seed(0)\r", ["2:1 DET001", "2:1 DET002"]),
    "bom": (b"\xef\xbb\xbf" + SEEDS, ["2:1 DET001", "2:1 DET002"]),
    "latin1_cookie": (b"# -*- coding: latin-1 -*-\nname = '\xe9t\xe9'\n" + SEEDS, ["4:1 DET001", "4:1 DET002"]),
    "form_feed": (b"\x0cimport torch\n\x0ctorch.manual_seed(0)\n", ["2:2 DET001", "2:2 DET002"]),
    "nested_brackets_at_the_limit": (b"x = f(" + b"[" * 190 + b"]" * 190 + b")\n" + SEEDS, ["3:1 DET001", "3:1 DET002"]),
    "nested_defs": (
        b"".join(b"    " * i + f"def f{i}():\n".encode() for i in range(90)) + b"    " * 90 + b"torch.manual_seed(0)\n",
        [],  # defined, never called: nothing runs
    ),
    "long_line": (b"x = '" + b"a" * 2_000_000 + b"'\n" + SEEDS, ["3:1 DET001", "3:1 DET002"]),
    "many_statements": (b"x = 1\n" * 100_000 + SEEDS, ["100002:1 DET001", "100002:1 DET002"]),
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_odd_but_valid_file_is_analysed(folder, name):
    data, expected = VALID[name]
    (folder / f"{name}.py").write_bytes(data)
    rc, findings, _ = lint(folder, f"{name}.py")
    assert [f"{f['line']}:{f['col']} {f['code']}" for f in findings] == expected
    assert rc == (1 if expected else 0)


# Expressions nested thousands deep without brackets: each term of a chain is one level deeper
# in the tree. What CPython's parser reads must be analysed; deeper gets DET000, never a crash.
DEEP = {
    "sum": lambda n: b"x = " + b"+".join([b"1"] * n),
    "string_concat": lambda n: b"s = " + b" + ".join([b'"a"'] * n),
    "power": lambda n: b"x = " + b"**".join([b"2"] * n),
    "unary": lambda n: b"x = " + b"-" * n + b"1",
    "not": lambda n: b"x = " + b"not " * n + b"y",
    "attribute_chain": lambda n: b"x = a" + b".b" * n,
    "call_chain": lambda n: b"x = f" + b"()" * n,
    "method_chain": lambda n: b"x = torch" + b".cuda()" * n,
    "subscript_chain": lambda n: b"x = a" + b"[0]" * n,
    "lambda_chain": lambda n: b"f = " + b"lambda: " * n + b"0",
    "conditional_chain": lambda n: b"x = " + b"a if c else " * n + b"b",
    "compare_in_call": lambda n: b"print(" + b"+".join([b"f(x)"] * n) + b")",
}


def _cpython_parses(data: bytes) -> bool:
    """Whether a fresh interpreter's `ast.parse` takes this source (the limits depend on the Python version).

    Not `compile()`: on 3.10 the bytecode compiler gives up on a 30,000-deep attribute
    chain that the parser, and so lint, reads without trouble.
    """
    proc = subprocess.run([sys.executable, "-c", "import ast, sys; ast.parse(sys.stdin.buffer.read())"], input=data, capture_output=True)
    return proc.returncode == 0


@pytest.mark.parametrize("depth", [1500, 30000])
@pytest.mark.parametrize("shape", sorted(DEEP))
def test_deeply_nested_expressions(folder, shape, depth):
    data = DEEP[shape](depth) + b"\n" + SEEDS
    (folder / "deep.py").write_bytes(data)
    rc, findings, _ = lint(folder, "deep.py", timeout=300)
    assert rc == 1
    if _cpython_parses(data):
        assert [f"{f['line']}:{f['col']} {f['code']}" for f in findings] == ["3:1 DET001", "3:1 DET002"]
    else:
        assert [f["code"] for f in findings] == ["DET000"]
        assert re.search(r"nested|too complex|too large", findings[0]["message"], re.I), findings[0]["message"]


def test_ten_megabyte_file(folder):
    # A real script with a 10 MB data table in the middle: analysed, findings after the table found.
    rows = b"".join(b'    "%08d,%s",\n' % (i, b"x" * 40) for i in range(190_000))
    data = SEEDS + b"TABLE = [\n" + rows + b"]\n" + b"torch.backends.cudnn.benchmark = True\n"
    assert len(data) > 10 * 1024 * 1024
    (folder / "big.py").write_bytes(data)
    rc, findings, _ = lint(folder, "big.py", timeout=300)
    last = data.count(b"\n")
    assert codes(findings) == ["big.py:2:1 DET001", "big.py:2:1 DET002", f"big.py:{last}:1 DET005"]
    assert rc == 1


def test_file_over_the_size_limit(folder):
    from opscan.lint.engine import MAX_FILE_BYTES

    with open(folder / "huge.py", "wb") as fh:  # sparse: no disk used
        fh.truncate(MAX_FILE_BYTES + 1)
    rc, findings, _ = lint(folder, "huge.py")
    assert rc == 1
    assert [f["code"] for f in findings] == ["DET000"]
    assert "larger than" in findings[0]["message"]


# ---------------------------------------------------------------- paths: links, loops, duplicates, permissions


def test_symlink_loop_named_on_the_command_line(folder):
    os.symlink("loop_b.py", folder / "loop_a.py")
    os.symlink("loop_a.py", folder / "loop_b.py")
    (folder / "good.py").write_bytes(SEEDS)
    rc, findings, err = lint(folder, "loop_a.py", "good.py", "loop_b.py")
    assert rc == 1
    assert codes(findings) == ["good.py:2:1 DET001", "good.py:2:1 DET002"]
    assert "warning: skipped loop_a.py: symlink loop" in err
    assert "warning: skipped loop_b.py: symlink loop" in err


def test_a_named_link_to_nothing_is_a_missing_path(folder):
    os.symlink("gone.py", folder / "broken.py")
    (folder / "good.py").write_bytes(SEEDS)
    rc, findings, err = lint(folder, "broken.py", "good.py")
    assert rc == 2 and "opscan: error: no such file or directory: broken.py" in err
    assert codes(findings) == ["good.py:2:1 DET001", "good.py:2:1 DET002"]
    rc, findings, err = lint(folder, ".")  # in a folder it is only skipped
    assert rc == 1 and re.search(r"warning: skipped \S*broken.py: No such file or directory", err), err


def test_symlink_loop_alone_exits_clean_with_a_warning(folder):
    os.symlink("self.py", folder / "self.py")
    rc, findings, err = lint(folder, "self.py")
    assert findings == [] and rc == 0
    assert "warning: skipped self.py: symlink loop" in err


def test_folder_with_symlink_loops(folder):
    pkg = folder / "pkg"
    (pkg / "sub").mkdir(parents=True)
    os.symlink("..", pkg / "sub" / "up")  # a folder loop: not followed
    os.symlink(".", pkg / "here")
    os.symlink("x.py", pkg / "y.py")  # a file loop
    os.symlink("y.py", pkg / "x.py")
    os.symlink("missing.py", pkg / "dangling.py")
    (pkg / "sub" / "train.py").write_bytes(SEEDS)
    rc, findings, err = lint(folder, "pkg")
    assert rc == 1
    assert codes(findings) == ["pkg/sub/train.py:2:1 DET001", "pkg/sub/train.py:2:1 DET002"]
    assert "symlink loop" in err
    assert "dangling.py" in err


def test_the_same_file_given_twice(folder):
    (folder / "sub").mkdir()
    (folder / "sub" / "train.py").write_bytes(SEEDS)
    os.symlink("sub/train.py", folder / "alias.py")
    once = ["sub/train.py:2:1 DET001", "sub/train.py:2:1 DET002"]
    for args in (
        ["sub/train.py", "sub/train.py"],
        ["sub/train.py", "./sub/train.py", str(folder / "sub" / "train.py")],
        ["sub", "sub/train.py", "sub/../sub"],
    ):
        rc, findings, _ = lint(folder, *args)
        assert codes(findings) == once, args
        assert rc == 1
    rc, findings, _ = lint(folder, "sub/train.py", "alias.py")
    assert codes(findings) == once


def test_missing_path_is_an_error_and_the_rest_is_linted(folder):
    # A mistyped path in CI must not pass silently, nor stop the check of the others (ruff's E902).
    (folder / "train.py").write_bytes(SEEDS)
    rc, out, err = lint(folder, "nope.py", "train.py", fmt="text")
    assert "error: no such file or directory: nope.py" in out
    assert "train.py:" in out and " DET001 " in out  # the other path was linted
    assert "Traceback" not in out + err
    assert rc == 2
    rc, findings, err = lint(folder, "nope.py", "train.py", fmt="json")
    assert rc == 2 and "opscan: error: no such file or directory: nope.py" in err
    assert any(f["code"] == "DET001" for f in findings)
    rc, out, err = lint(folder, "nope.py", "train.py", "--exit-zero", fmt="text")
    assert rc == 2


@pytest.mark.parametrize(
    ("named", "message"),
    [
        ("train.py/x.py", "not a directory: train.py/x.py"),  # a path under a file (ENOTDIR) was skipped with a warning, exit 0
        ("train.py/", "not a directory: train.py/"),  # linted as train.py
        ("a" * 300 + ".py", f"file name too long: {'a' * 300}.py"),  # a traceback from the search for pyproject.toml
        ("a" * 300 + "/x.py", f"file name too long: {'a' * 300}/x.py"),
    ],
)
def test_a_path_that_cannot_name_a_file_is_an_error_as_a_missing_path_is(folder, named, message):
    (folder / "train.py").write_bytes(SEEDS)
    rc, findings, err = lint(folder, named, fmt="text")
    assert (rc, findings) == (2, f"error: {message}\n1 problem stopped part of the run; nothing found in the rest.\n")
    rc, findings, err = lint(folder, named, "train.py")
    assert rc == 2 and f"opscan: error: {message}\n" in err and "skipped" not in err
    assert codes(findings) == ["train.py:2:1 DET001", "train.py:2:1 DET002"]  # the other path was linted
    proc = opscan("lint", "--no-cache", "--show-settings", named, "train.py", cwd=folder)
    assert proc.returncode == 2 and f"opscan: error: {message}\n" in proc.stderr and re.search(r"^files +1$", proc.stdout, re.M)


NOTEBOOK = json.dumps({"cells": [{"cell_type": "code", "source": ["import torch\n", "torch.manual_seed(0)\n"]}], "nbformat": 4}).encode()


def test_a_named_notebook_is_an_error_and_the_rest_is_linted(folder):
    # Its JSON parses as Python: it passed ("All checks passed!", exit 0) without a word of its cells read.
    (folder / "nb.ipynb").write_bytes(NOTEBOOK)
    (folder / "train.py").write_bytes(SEEDS)
    rc, out, err = lint(folder, "nb.ipynb", fmt="text")
    assert (rc, out) == (2, "error: Jupyter notebooks are not linted: nb.ipynb\n1 problem stopped part of the run; nothing found in the rest.\n")
    rc, findings, err = lint(folder, "nb.ipynb", "train.py")
    assert rc == 2 and "opscan: error: Jupyter notebooks are not linted: nb.ipynb\n" in err
    assert codes(findings) == ["train.py:2:1 DET001", "train.py:2:1 DET002"]
    (folder / "pyproject.toml").write_text('[tool.opscan]\nextend-exclude = ["nb.ipynb"]\n')
    rc, findings, err = lint(folder, "nb.ipynb", "train.py", extra=["--force-exclude"])  # excluded: skipped, as any excluded file
    assert rc == 1 and err == "" and codes(findings) == ["train.py:2:1 DET001", "train.py:2:1 DET002"]


def test_a_folder_walk_leaves_notebooks_out_and_walks_a_folder_named_like_one(folder):
    (folder / "nb.ipynb").write_bytes(NOTEBOOK)
    (folder / "runs.ipynb").mkdir()
    (folder / "runs.ipynb" / "train.py").write_bytes(SEEDS)
    for named in (".", "runs.ipynb"):
        rc, findings, err = lint(folder, named)
        assert rc == 1 and err == "" and codes(findings) == ["runs.ipynb/train.py:2:1 DET001", "runs.ipynb/train.py:2:1 DET002"]


def _without_read_permission():
    """A preexec_fn under which chmod 000 really blocks reading, or a reason why there is none."""
    if os.geteuid() != 0:
        return None, None
    # root reads anything while it holds CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH; drop them from the
    # child's bounding set so it runs as a root that file modes do restrict.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None, "running as root and cannot load libc to drop CAP_DAC_OVERRIDE"

    def drop_capabilities():
        for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")

    return drop_capabilities, None


@pytest.fixture
def unreadable(folder):
    """(preexec_fn, folder) where chmod 000 blocks reads; skips with the reason where it cannot."""
    preexec, reason = _without_read_permission()
    if reason:
        pytest.skip(reason)
    probe = folder / "probe"
    probe.write_bytes(b"x")
    probe.chmod(0)
    try:
        check = subprocess.run([sys.executable, "-c", f"open({str(probe)!r}).read()"], preexec_fn=preexec, capture_output=True)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"running as root and cannot drop CAP_DAC_OVERRIDE here: {exc}")
    finally:
        probe.chmod(0o644)
        probe.unlink()
    if check.returncode == 0:
        pytest.skip("chmod 000 does not block reads here (root with CAP_DAC_OVERRIDE that cannot be dropped)")
    return preexec


def test_unreadable_file(folder, unreadable):
    (folder / "locked.py").write_bytes(SEEDS)
    (folder / "locked.py").chmod(0)
    (folder / "open.py").write_bytes(SEEDS)
    try:
        rc, findings, _ = lint(folder, "locked.py", "open.py", preexec_fn=unreadable)
    finally:
        (folder / "locked.py").chmod(0o644)
    assert rc == 1
    assert codes(findings) == ["locked.py:1:1 DET000", "open.py:2:1 DET001", "open.py:2:1 DET002"]
    assert "Permission denied" in findings[0]["message"]


def test_unreadable_folder_is_reported(folder, unreadable):
    (folder / "locked").mkdir()
    (folder / "locked" / "train.py").write_bytes(SEEDS)
    (folder / "locked").chmod(0)
    try:
        rc, findings, err = lint(folder, ".", preexec_fn=unreadable)
    finally:
        (folder / "locked").chmod(0o755)
    assert findings == [] and rc == 0
    assert re.search(r"warning: skipped \S*locked: Permission denied", err), err


def test_a_folder_whose_config_cannot_be_looked_at_is_an_error(folder, unreadable):
    """`opscan lint locked/` on a folder without search permission: its pyproject.toml is unknowable."""
    (folder / "locked").mkdir()
    (folder / "locked" / "train.py").write_bytes(SEEDS)
    (folder / "locked").chmod(0)
    try:
        proc = opscan("lint", "--no-cache", "locked", cwd=folder, preexec_fn=unreadable)
    finally:
        (folder / "locked").chmod(0o755)
    assert proc.returncode == 2 and proc.stdout == ""
    assert re.fullmatch(r"opscan: error: cannot read \S*locked/pyproject.toml: Permission denied\n", proc.stderr), proc.stderr


def test_fifo_does_not_hang(folder):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(folder / "pipe.py")
    (folder / "train.py").write_bytes(SEEDS)
    rc, findings, _ = lint(folder, ".", timeout=60)
    assert codes(findings) == ["pipe.py:1:1 DET000", "train.py:2:1 DET001", "train.py:2:1 DET002"]
    assert "not a regular file" in findings[0]["message"]
    rc, findings, _ = lint(folder, "pipe.py", timeout=60)
    assert rc == 1 and [f["code"] for f in findings] == ["DET000"]


def test_file_name_that_is_not_utf8(folder):
    if sys.platform == "darwin":
        pytest.skip("macOS file systems refuse names that are not UTF-8")
    name = b"\xff\xfe-train.py"
    try:
        with open(os.path.join(os.fsencode(folder), name), "wb") as fh:
            fh.write(SEEDS)
    except OSError as exc:
        if exc.errno in (errno.EILSEQ, errno.EINVAL):
            pytest.skip("this file system refuses names that are not UTF-8")
        raise
    for fmt in ("text", "json", "sarif", "github"):
        proc = opscan("lint", "--no-cache", "--output-format", fmt, ".", cwd=folder)
        assert proc.returncode == 1, (fmt, proc.stderr)
        assert "-train.py" in proc.stdout
    proc = opscan("lint", "--no-cache", "-o", "report.txt", ".", cwd=folder)
    assert proc.returncode == 1
    assert name in (folder / "report.txt").read_bytes()  # the name's own bytes, as the OS gave them
    env_ascii = subprocess.run(
        [sys.executable, "-m", "opscan", "lint", "--no-cache", "."], cwd=folder, capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert b"Traceback" not in env_ascii.stderr and env_ascii.returncode == 1
    for args in (["--diff"], ["--statistics"], ["--output-format", "github"]):
        env_ascii = subprocess.run(
            [sys.executable, "-m", "opscan", "lint", "--no-cache", *args, "."], cwd=folder, capture_output=True,
            env={**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert b"Traceback" not in env_ascii.stderr and env_ascii.returncode == 1, (args, env_ascii.stderr)


def test_config_roots_that_loop(folder):
    os.symlink("loop", folder / "loop")
    (folder / "pyproject.toml").write_text('[tool.opscan]\nroots = ["loop"]\n')
    (folder / "train.py").write_bytes(SEEDS)
    proc = opscan("lint", "--no-cache", "train.py", cwd=folder)
    assert proc.returncode == 2
    assert proc.stderr.startswith("opscan: error:") and "roots" in proc.stderr


def test_fix_and_diff_leave_bad_files_alone(folder):
    for name in ("syntax_error", "not_utf8", "nul_byte"):
        (folder / f"{name}.py").write_bytes(UNANALYSABLE[name][0])
    (folder / "train.py").write_bytes(SEEDS)
    before = {p.name: p.read_bytes() for p in folder.glob("*.py")}
    proc = opscan("lint", "--no-cache", "--diff", ".", cwd=folder)
    assert proc.returncode == 1
    assert {p.name: p.read_bytes() for p in folder.glob("*.py")} == before
    proc = opscan("lint", "--no-cache", "--fix", ".", cwd=folder)
    after = {p.name: p.read_bytes() for p in folder.glob("*.py")}
    assert {k: v for k, v in after.items() if k != "train.py"} == {k: v for k, v in before.items() if k != "train.py"}
    assert after["train.py"] != before["train.py"]
    assert proc.returncode == 1  # the DET000 findings remain


@pytest.mark.parametrize("terms", [600, 2500])
def test_fix_on_a_long_expression_chain(folder, terms):
    # Lint analyses what CPython compiles; the fixer (libcst) must then fix it or leave it alone.
    source = SEEDS + b"x = " + b"+".join([b"1"] * terms) + b"\n"
    (folder / "train.py").write_bytes(source)
    proc = opscan("lint", "--no-cache", "--diff", "train.py", cwd=folder)
    assert proc.returncode in (0, 1)
    assert (folder / "train.py").read_bytes() == source
    proc = opscan("lint", "--no-cache", "--fix", "train.py", cwd=folder)
    fixed = (folder / "train.py").read_bytes()
    assert fixed == source or b"use_deterministic_algorithms(True)" in fixed
    assert proc.returncode in (0, 1)


# ---------------------------------------------------------------- property tests: generated programs
#
# About 2,100 programs a run: 200 from hypothesmith's grammar and 30 from its libcst nodes, each
# linted in the four shapes of _variants() and as a helper module that a script calls, plus 400
# generated two-module training projects. Sized to stay near a minute on two cores.


CODES = set(lint_codes())
_SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("generated")


def _variants(source: str) -> list[str]:
    """The program as a script, inside main() called from the __main__ block, and after a seeding header."""
    body = "\n".join("    " + line for line in source.splitlines()) or "    pass"
    return [
        source,
        "import torch\ntorch.manual_seed(0)\n" + source,
        f"import os, torch\n\ndef main():\n{body}\n\nif __name__ == '__main__':\n    torch.manual_seed(0)\n    main()\n",
        "import torch\ntorch.use_deterministic_algorithms(True)\n" + source + "\nmodel = torch.nn.Linear(2, 2).cuda()\n",
    ]


def _lint_files(folder: Path, files: dict[str, bytes]) -> None:
    """Lint these files as one project; check the run's invariants. Any exception fails the test."""
    for old in folder.glob("*.py"):
        old.unlink()
    for name, data in files.items():
        (folder / name).write_bytes(data)
        facts = extract(str(folder / name), data)  # the facts pass never raises ...
        assert pickle.loads(pickle.dumps(facts)) == facts  # ... and its result can be cached, or sent from a worker, whole
    report = engine.run([str(folder)], Config(root=folder), torch_version=NEWEST_TORCH, use_cache=False)
    for fmt in ("text", "json", "sarif", "github"):
        render(report, fmt)
    render(report, "text", statistics=True)
    for f in report.findings:
        assert f.code in CODES
        assert f.line >= 1 and f.col >= 1 and (f.end_line, f.end_col) >= (f.line, f.col)
        assert f.message and "\n" not in f.message
    by_file: dict[str, list[str]] = {}
    for f in report.findings:
        by_file.setdefault(f.path, []).append(f.code)
    for found in by_file.values():  # a file that cannot be analysed reports nothing else
        assert "DET000" not in found or found == ["DET000"]


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # lone surrogates make undecodable files: DET000


@settings(max_examples=200, **_SETTINGS)
@given(hypothesmith.from_grammar())
def test_programs_from_the_grammar_never_crash(workdir, source):
    for i, variant in enumerate(_variants(source)):
        _lint_files(workdir, {f"prog{i}.py": _encode(variant)})
    # And as a helper module whose functions a script calls.
    try:
        names = [n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        names = []
    caller = "import torch\nimport helper\nfrom helper import *\ntorch.manual_seed(0)\n" + "".join(f"helper.{n}()\n" for n in names)
    _lint_files(workdir, {"helper.py": _encode(source), "main.py": caller.encode()})


@settings(max_examples=30, **_SETTINGS)
@given(hypothesmith.from_node())
def test_programs_from_libcst_nodes_never_crash(workdir, source):
    for i, variant in enumerate(_variants(source)):
        _lint_files(workdir, {f"prog{i}.py": _encode(variant)})


# Generated training scripts: the statements opscan models, nested in functions, classes and
# control flow, with calls between functions (recursion included) and between modules.
_ALIAS = st.sampled_from(["torch", "T"])
_ATOMS = [
    "{T}.manual_seed({v})", "{T}.cuda.manual_seed_all({v})", "random.seed({v})", "np.random.seed({v})",
    "g = {T}.Generator().manual_seed({v})", "rng = np.random.default_rng({v})",
    "{T}.use_deterministic_algorithms({b})", "{T}.use_deterministic_algorithms({b}, warn_only={b})",
    "{T}.use_deterministic_algorithms(mode={v})", "{T}.set_deterministic_debug_mode({v})",
    'os.environ["CUBLAS_WORKSPACE_CONFIG"] = {s}', 'os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", {s})',
    'os.environ.update({{"CUBLAS_WORKSPACE_CONFIG": {s}}})', 'os.putenv("CUBLAS_WORKSPACE_CONFIG", {s})',
    'os.environ["PYTHONHASHSEED"] = {s}', "value = os.environ.get({s})",
    "{T}.backends.cudnn.benchmark = {b}", "{T}.backends.cudnn.deterministic = {b}",
    "model = model.cuda()", 'x = x.to("cuda")', "x = {T}.zeros(2, device={s})", "device = {T}.device({s})",
    "x = x.to(device)", 'y = F.interpolate(x, scale_factor=2, mode={s})', "pool = nn.AdaptiveAvgPool2d({v})",
    'bag = nn.EmbeddingBag(10, 3, mode={s})', "h = {T}.histc(x, bins={v})", "x.put_(i, v, accumulate={b})",
    "trainer = Trainer(deterministic={b}, benchmark={b})", "seed_everything({v}, workers={b})",
    "set_seed({v}, deterministic={b})", "enable_full_determinism({v})", "random.shuffle(items)",
    "z = np.random.rand({v})", "{f}()", "{f}({f})", "self.{f}()", "obj = {C}()", "obj.{f}()", "obj()",
    "return {f}()", "yield {v}", "await {f}()", "lambda: {f}()", "global {f}", "del x", "pass",
    "items = [{f}() for _ in range({v})]", "x = ({f}() if {b} else {f}())", "print(*args, **kwargs)",
]  # fmt: skip
_TOP_LEVEL_ATOMS = [a for a in _ATOMS if not a.startswith(("return", "yield", "await"))]  # mostly valid modules
_VALUES = st.sampled_from(["0", "1", "2", "seed", "-1", "None", "args.seed", "'x'", "1.5", "[0]", "*a", "**k"])
_BOOLS = st.sampled_from(["True", "False", "flag", "None", '"warn"', "1"])
_STRINGS = st.sampled_from(['":4096:8"', '":16:8"', '":4096:2"', "value", '"cuda"', '"cuda:0"', '"cpu"', '"bicubic"', '"max"', '""'])
_FUNCS = st.sampled_from(["main", "train", "setup", "helper", "mod.setup", "mod.helper", "Net", "Net.forward", "f"])


@st.composite
def _statement(draw, depth: int):
    kind = draw(st.integers(0, 9)) if depth < 4 else 0
    if kind <= 5:
        atom = draw(st.sampled_from(_ATOMS if depth else _TOP_LEVEL_ATOMS))
        return [atom.format(T=draw(_ALIAS), v=draw(_VALUES), b=draw(_BOOLS), s=draw(_STRINGS), f=draw(_FUNCS), C=draw(st.sampled_from(["Net", "mod.Net", "Trainer"])))]
    header = draw(st.sampled_from([
        "def {f}(self=None, *args, **kwargs):", "async def {f}():", "class {C}(nn.Module):", "if flag:", "else:",
        "for item in items:", "while flag:", "with {T}.no_grad():", "try:", "with open(p) as fh:",
        "if __name__ == '__main__':", "@{T}.no_grad()\ndef {f}():", "def {f}(x={f}()):",
    ]))  # fmt: skip
    name = draw(st.sampled_from(["main", "train", "setup", "helper", "forward", "__init__", "__call__", "f"]))
    header = header.format(f=name, C=draw(st.sampled_from(["Net", "Model"])), T=draw(_ALIAS))
    body = draw(st.lists(_statement(depth + 1), min_size=1, max_size=4))
    lines = header.split("\n") + ["    " + line for block in body for line in block]
    if header == "try:":
        lines += ["except Exception:", "    pass", "finally:", "    pass"]
    if header == "else:":
        lines = ["if not flag:", "    pass"] + lines
    return lines


_PRELUDE = (
    "import os, random\nimport numpy as np\nimport torch\nimport torch as T\nimport torch.nn as nn\n"
    "import torch.nn.functional as F\nfrom lightning import Trainer, seed_everything\n"
    "from transformers import set_seed, enable_full_determinism\nimport mod\nfrom mod import setup, helper, Net\n"
)


@st.composite
def _module(draw, prelude: str) -> str:
    blocks = draw(st.lists(_statement(0), min_size=1, max_size=12))
    return prelude + "\n".join(line for block in blocks for line in block) + "\n"


@settings(max_examples=400, **_SETTINGS)
@given(main=_module(_PRELUDE), mod=_module("import torch\nimport os\nimport main\nfrom main import *\n"))
def test_generated_training_projects_never_crash(workdir, main, mod):
    # Either may not compile (a `return` at top level, `await` outside async): then it is DET000.
    _lint_files(workdir, {"main.py": main.encode(), "mod.py": mod.encode()})


def test_very_long_call_chains_are_unknown_callees():
    """Naming every call of a chain thousands long would be quadratic: past 64 parts the callee is unknown."""
    from opscan.lint.facts import extract
    from opscan.lint.model import Call, CudaWork

    facts = extract("x.py", b"import torch\nx = torch" + b".cuda()" * 200 + b"\n")
    calls = [e.what.qualname for e in facts.body if isinstance(e.what, Call)]
    assert len(calls) == 200
    assert calls[0] == "torch.cuda" and calls[62] == "torch" + ".cuda" * 63
    assert calls[64:] == [None] * 136
    assert sum(isinstance(e.what, CudaWork) for e in facts.body) == 199  # every `.cuda()` after the first still counts


def test_circular_and_self_imports_run_each_module_once(folder):
    (folder / "a.py").write_text("import b\nimport a\nimport torch\n\ntorch.manual_seed(0)\n")
    (folder / "b.py").write_text("import a\nimport random\n\nrandom.seed(0)\n")
    chain = [f"import m{i + 1}\n" for i in range(60)]  # deeper than the linker follows: cut, not a crash
    for i in range(60):
        (folder / f"m{i}.py").write_text(chain[i])
    (folder / "m60.py").write_text("")
    rc, findings, err = lint(folder, "a.py", "m0.py")
    assert rc == 1 and "Traceback" not in err
    # a.py runs b's top level once, at its `import b`, and b's `import a` runs a.py's body a
    # second time, as module `a`, as Python does; its own `import a` finds it loaded. So the
    # first seed is a.py's own `torch.manual_seed(0)`, run by that import, and the findings
    # point at it (the deepest line of a.py on the way), not at `import b`.
    assert codes(findings) == ["a.py:5:1 DET001", "a.py:5:1 DET002"]
