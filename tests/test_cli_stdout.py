"""Every command's report on a stdout whose reader has gone (`opscan ... | head -0`): exit 2, and no word.

cli.main means a broken pipe to end quietly with exit 2, as it does when one
reaches it; the commands' own `except OSError` caught it first and said
"opscan: error: cannot write None: Broken pipe".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.util import subprocess_env

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "tests" / "fixtures" / "compare" / "identical" / "a.jsonl"


@pytest.mark.parametrize(
    "args",
    [
        ("lint", "--no-cache", str(ROOT / "examples")),
        ("lint", "--no-cache", "--show-settings", str(ROOT / "examples")),
        ("rule", "--all"),
        ("compare", str(RECORD), str(RECORD)),
        ("compare", str(RECORD), str(RECORD), "--output-format", "json"),
        ("report", "--device", "none"),
    ],
    ids=lambda args: " ".join(a for a in args if not a.startswith("/")),
)
def test_a_closed_stdout_ends_quietly_with_exit_2(tmp_path, args):
    env = subprocess_env()
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "opscan", *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before the report is written: its write fails with EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 2
    assert "cannot write" not in err and "Traceback" not in err and "Exception ignored" not in err, err
