"""What the torchrun tests share: a launch of `opscan` on 2 ranks of this host (gloo on the CPU), and the DDP script."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "train_ddp.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(*args: str, cwd: Path, extra_env: dict | None = None, nproc: int = 2) -> subprocess.CompletedProcess:
    """`torchrun --nproc-per-node NPROC -m opscan -- ARGS` from the source checkout, on a port of its own."""
    env = child_env(extra_env)
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1",
        "--master-port", str(free_port()), "-m", "opscan", "--", *args,
    ]  # fmt: skip
    return subprocess.run(command, cwd=cwd, env=env, check=False, capture_output=True, text=True, timeout=120)


def child_env(extra_env: dict | None = None) -> dict:
    """This environment without OPSCAN_* and NCCL_* settings, with the checkout first on the path and no GPU."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPSCAN_", "NCCL_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["OPSCAN_RANK_TIMEOUT"] = "30"
    env.update(extra_env or {})
    return env


def copy_script(tmp_path: Path) -> str:
    (tmp_path / SCRIPT.name).write_text(SCRIPT.read_text())
    return SCRIPT.name


def line_of(marker: str) -> int:
    """The line of train_ddp.py that carries `marker`."""
    (line,) = [n for n, text in enumerate(SCRIPT.read_text().splitlines(), 1) if marker in text]
    return line
