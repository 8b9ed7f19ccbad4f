"""Run `opscan scan` in-process or as a subprocess, and compare findings with expected files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from tests.util import chdir

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "scan"

# The finding fields an expected file pins down (json keys of each finding).
COMPARED = ("op", "caller", "phase", "module", "module_class", "file", "line", "line_text", "shapes", "dtypes", "count", "autograd_node")


def scan(capsys, *args: str, cwd: Path = FIXTURES) -> tuple[int, str, str]:
    """`opscan scan ARGS` in this process; returns (exit code, stdout, stderr)."""
    from opscan.cli import main

    capsys.readouterr()
    with chdir(cwd):
        rc = main(["scan", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def opscan(*args: str, cwd: Path = FIXTURES, timeout: int = 300) -> subprocess.CompletedProcess:
    """`python -m opscan ARGS` in a fresh process, from the source checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSCAN_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "")
    return subprocess.run(
        [sys.executable, "-m", "opscan", *args], cwd=cwd, env=env, check=False, capture_output=True, text=True, timeout=timeout
    )


def project(findings: list[dict]) -> list[dict]:
    """The compared fields of json findings, in a stable order."""
    rows = [{k: f[k] for k in COMPARED if k in f} for f in findings]
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


def expected(name: str) -> list[dict]:
    return project(json.loads((FIXTURES / f"{name}.expected.json").read_text()))
