"""Run the lint engine on fixtures the way the CLI does, and read and write their golden files.

A golden file holds the findings of one fixture exactly as `opscan lint` prints
them in text format, each followed by a `  fix (APPLICABILITY): DESCRIPTION`
line when it offers a fix (the format is described in
tests/fixtures/lint/README.md). `golden_text` makes that text from the current
code; `tests/lint/test_fixtures.py` compares it with the files and
`scripts/gen_golden.py` writes them, so both run exactly the same lint.
"""

from __future__ import annotations

import re
from pathlib import Path

from opscan.config import Config
from opscan.lint import engine
from tests.util import chdir

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
LINT_FIXTURES = FIXTURES / "lint"
# Beside the lint fixtures, the one the output-format tests read (`tests/lint/test_output_formats.py`).
OUTPUT_FIXTURE = FIXTURES / "output" / "train.py"

GOLDEN_HINT = "run `python scripts/gen_golden.py` and review the diff (a golden file is a claim about what is true)"

# A finding's first line in text format: `PATH:LINE:COL: CODE [*] MESSAGE`.
_HEADER = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>[A-Z]+\d+) ")


def lint_report(target: Path, *, torch_version: str | None = None, cfg: Config | None = None):
    """Lint a file (from its own folder, by name) or a folder (from inside it, as `.`), cache off.

    The torch target is `torch_version` if given, else what the fixture's own
    files declare: the walk for requirements stops at the fixture's folder
    (opscan's own pyproject.toml above it is no fixture's), and the installed
    torch is not read (the tests run with and without one), nor an installed
    framework (accelerate's release decides its fix). A fixture that declares
    nothing targets every release the rules know, and any framework release.
    """
    folder = target if target.is_dir() else target.parent
    with chdir(folder):
        cfg = cfg or Config(root=folder)
        targets = engine.torch_targets(cfg, torch_version, installed=False, stop_at=folder)
        return engine.run(["." if target.is_dir() else target.name], cfg, targets=targets, use_cache=False)


def lint_lines(target: Path, *, torch_version: str | None = None, cfg: Config | None = None, with_path: bool) -> list[str]:
    """Findings as 'LINE:COL CODE' (single file) or 'path:LINE:COL CODE' (folder), sorted."""
    report = lint_report(target, torch_version=torch_version, cfg=cfg)
    out = []
    for f in report.sorted_findings():
        loc = f"{f.line}:{f.col} {f.code}"
        out.append(f"{f.path}:{loc}" if with_path else loc)
    return out


# ---------------------------------------------------------------- the golden set


def torch_version_for(fixture: Path) -> str | None:
    """The `torch-version` a `NAME.toml` beside a file fixture sets, if any."""
    cfg = fixture.with_suffix(".toml")
    if fixture.is_file() and cfg.exists():
        m = re.search(r'torch-version\s*=\s*"([^"]+)"', cfg.read_text())
        if m:
            return m.group(1)
    return None


def golden_path(fixture: Path) -> Path:
    """`NAME.expected` beside a file fixture; `expected` inside a project folder."""
    return fixture / "expected" if fixture.is_dir() else fixture.with_suffix(".expected")


def is_project(path: Path) -> bool:
    return path.is_dir() and path.name.startswith("project_")


def file_fixtures() -> list[Path]:
    """Every `tests/fixtures/lint/**/NAME.py` outside a project folder, each linted alone."""
    return [
        path
        for path in sorted(LINT_FIXTURES.rglob("*.py"))
        if not any(part.startswith("project_") for part in path.relative_to(LINT_FIXTURES).parts)
    ]


def project_fixtures() -> list[Path]:
    """Every `tests/fixtures/lint/**/project_*/` folder, linted as a whole."""
    return [path for path in sorted(LINT_FIXTURES.rglob("project_*")) if path.is_dir()]


def golden_fixtures() -> list[Path]:
    """Every input that has a golden file: the lint fixtures, then the output-format fixture."""
    return [*file_fixtures(), *project_fixtures(), OUTPUT_FIXTURE]


def fixture_id(fixture: Path) -> str:
    return fixture.relative_to(FIXTURES).as_posix()


# ---------------------------------------------------------------- making and reading golden text


def golden_text(fixture: Path) -> str:
    """The golden file's text for one fixture, from the current code.

    Each finding as the text formatter prints it (its first line and any
    `help:` lines under it), then `  fix (safe|unsafe): DESCRIPTION` if it has a
    fix. Paths are as the lint run prints them: relative to the fixture's
    folder (a file fixture's own folder, or the project folder).
    """
    from opscan.findings import Report
    from opscan.output import render

    version = torch_version_for(fixture)
    report = lint_report(fixture, **({"torch_version": version} if version else {}))
    findings = report.sorted_findings()
    # Findings alone: no notices, errors or summary, which are no finding's text.
    lines = render(Report("lint", findings), "text").splitlines()
    out: list[str] = []
    at = 0
    for f in findings:
        head = f"{f.path}:{f.line}:{f.col}: {f.code} "
        if at >= len(lines) or not lines[at].startswith(head):
            raise AssertionError(f"the text format did not print {head!r} where expected: {lines[at:at + 1]}")
        block = [lines[at]]
        at += 1
        while at < len(lines) and (lines[at].startswith(" ") or lines[at] == ""):  # help and help code
            block.append(lines[at])
            at += 1
        while block[-1] == "":
            block.pop()
            at -= 1
        out.extend(block)
        if f.fix is not None:
            out.append(f"  fix ({f.fix.applicability}): {f.fix.description}")
    return "".join(line + "\n" for line in out)


def read_golden(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def golden_findings(text: str, *, with_path: bool) -> list[str]:
    """The 'LINE:COL CODE' (or 'path:LINE:COL CODE') of each finding in golden text, in order."""
    out = []
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m and not line[0].isspace():
            loc = f"{m['line']}:{m['col']} {m['code']}"
            out.append(f"{m['path']}:{loc}" if with_path else loc)
    return out


def read_expected(path: Path, *, with_path: bool | None = None) -> list[str]:
    """A golden file's findings as 'LINE:COL CODE' pairs, or 'path:LINE:COL CODE' for a project's `expected`."""
    if with_path is None:
        with_path = path.name == "expected"
    return golden_findings(read_golden(path), with_path=with_path)


def orphaned_goldens() -> list[Path]:
    """Golden files that belong to no fixture in `golden_fixtures()` (an input renamed or removed)."""
    wanted = {golden_path(f) for f in golden_fixtures()}
    present = {
        *LINT_FIXTURES.rglob("*.expected"),
        *(p for p in LINT_FIXTURES.rglob("expected") if p.is_file()),
        *OUTPUT_FIXTURE.parent.glob("*.expected"),
    }
    return sorted(present - wanted)
