"""Run `opscan lint` in-process on a folder, as the CLI does, and capture what it prints."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from opscan import cli
from tests.util import chdir  # noqa: F401  (re-exported: the fix tests import it from here)

FIX_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "fix"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@dataclass
class Run:
    rc: int
    out: str
    err: str


def opscan(folder: Path, *args: str) -> Run:
    """`opscan ARGS` with `folder` as the working directory."""
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(list(args))
    finally:
        os.chdir(old)
    return Run(rc, out.getvalue(), err.getvalue())


def fix(folder: Path, *paths: str, unsafe: bool = True, extra: tuple[str, ...] = ()) -> Run:
    flags = ["lint", "--fix", "--no-cache", *(["--unsafe-fixes"] if unsafe else []), *extra]
    return opscan(folder, *flags, *(paths or (".",)))


def lint_codes(folder: Path, *paths: str) -> set[tuple[str, str]]:
    """(path, code) of every finding, via the JSON output."""
    import json

    run = opscan(folder, "lint", "--no-cache", "--output-format", "json", *(paths or (".",)))
    return {(f["path"], f["code"]) for f in json.loads(run.out)}


def copy_case(case: Path, dest: Path) -> list[tuple[Path, Path | None]]:
    """Copy a fixture case into `dest`: NAME.in.py becomes NAME.py.

    Returns (copied file, expected output or None for files that must not change).
    A case is a file `NAME.in.py`, or a folder whose `*.in.py` files are the ones fixed.
    """
    pairs = []
    sources = sorted(p for p in case.rglob("*") if p.is_file()) if case.is_dir() else [case]
    root = case if case.is_dir() else case.parent
    for src in sources:
        rel = src.relative_to(root)
        if src.name.endswith(".out.py"):
            continue
        if src.name.endswith(".in.py"):
            target = dest / rel.parent / (src.name[: -len(".in.py")] + ".py")
            expected = src.with_name(src.name[: -len(".in.py")] + ".out.py")
        else:
            target, expected = dest / rel, None
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
        pairs.append((target, expected))
    return pairs


def fixture_cases() -> list[tuple[Path, bool]]:
    """(case, unsafe) for every golden case: files and folders under safe/ and unsafe/."""
    cases = []
    for kind in ("safe", "unsafe"):
        folder = FIX_FIXTURES / kind
        for entry in sorted(folder.iterdir()):
            if entry.is_dir() or entry.name.endswith(".in.py"):
                cases.append((entry, kind == "unsafe"))
    return cases


