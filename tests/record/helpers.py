"""Run `opscan record` in this process or in a fresh one, and read a record back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.util import chdir

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "record"
CPU = ("--device", "cpu")

# A script whose second run takes another branch: it checks for a file the first run leaves (in life a set's
# order, or an unseeded random.random()). The same code, recorded twice, runs other ops.
BRANCHING_SCRIPT = """\
import pathlib
import torch, torch.nn as nn
torch.manual_seed(0)
a, b = nn.Linear(4, 4), nn.Linear(4, 4)
opt = torch.optim.SGD([*a.parameters(), *b.parameters()], lr=0.1)
second = pathlib.Path("ran").exists()
pathlib.Path("ran").touch()
for i in range(2):
    x = torch.ones(2, 4)
    if second:
        x = a(x)
    x = b(x).relu()
    opt.zero_grad(); x.sum().backward(); opt.step()
"""


def record(capsys, *args: str, cwd: Path = FIXTURES) -> tuple[int, str, str]:
    """`opscan record ARGS` in this process; returns (exit code, stdout, stderr)."""
    from opscan.cli import main

    capsys.readouterr()
    with chdir(cwd):
        rc = main(["record", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("OPSCAN_")}
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), out.get("PYTHONPATH")]))
    out["CUDA_VISIBLE_DEVICES"] = out.get("CUDA_VISIBLE_DEVICES", "")
    out.update(extra)
    return out


def opscan(*args: str, cwd: Path = FIXTURES, timeout: int = 300, **extra_env: str) -> subprocess.CompletedProcess:
    """`python -m opscan ARGS` in a fresh process, from the source checkout."""
    return subprocess.run(
        [sys.executable, "-m", "opscan", *args], cwd=cwd, env=env(**extra_env), check=False, capture_output=True, text=True, timeout=timeout
    )


def read(path) -> dict:
    """A record as {"header", "ops" (every op line), "steps" (every step line), "end", "lines"}."""
    lines = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return {
        "header": lines[0],
        "ops": [d for d in lines if d["type"] == "op"],
        "steps": [d for d in lines if d["type"] == "step"],
        "end": next((d for d in lines if d["type"] == "end"), None),
        "lines": lines,
    }


def line_of(marker: str, name: str = "models.py") -> int:
    """The line of FIXTURES/name that carries `# marker`."""
    for number, text in enumerate((FIXTURES / name).read_text(encoding="utf-8").splitlines(), 1):
        if text.rstrip().endswith(f"# {marker}"):
            return number
    raise AssertionError(f"no line marked {marker} in {name}")
