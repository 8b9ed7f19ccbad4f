"""Run the lint engine on fixtures the way the CLI does, and read expected-output files."""

from __future__ import annotations

from pathlib import Path

from opscan.config import Config
from opscan.lint import engine
from opscan.rules import NEWEST_TORCH
from tests.util import chdir


def lint_lines(target: Path, *, torch_version: str = NEWEST_TORCH, cfg: Config | None = None, with_path: bool) -> list[str]:
    """Findings as 'LINE:COL CODE' (single file) or 'path:LINE:COL CODE' (folder), sorted."""
    folder = target if target.is_dir() else target.parent
    with chdir(folder):
        cfg = cfg or Config(root=folder)
        report = engine.run(["." if target.is_dir() else target.name], cfg, torch_version=torch_version, use_cache=False)
    out = []
    for f in report.sorted_findings():
        loc = f"{f.line}:{f.col} {f.code}"
        out.append(f"{f.path}:{loc}" if with_path else loc)
    return out


def read_expected(path: Path) -> list[str]:
    lines = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            lines.append(line)
    return lines
