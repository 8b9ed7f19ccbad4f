"""Run lint: discover files, read facts (cached), trace each entry, run the rules, filter.

files -> facts -> project links -> findings -> (noqa, select/ignore) -> Report
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from opscan.config import Config
from opscan.findings import Finding, Report
from opscan.lint import cache as facts_cache
from opscan.lint.context import Context
from opscan.lint.facts import ModuleFacts, extract
from opscan.lint.model import Loc
from opscan.lint.project import Project
from opscan.lint.rules import CHECKS, det000

MAX_FILE_BYTES = 50 * 1024 * 1024  # larger files are skipped with a message


def discover(paths: list[str], cfg: Config, force_exclude: bool = False) -> tuple[list[Path], list[str]]:
    """Python files under the given paths, each once, in a stable order; plus notices for what was skipped."""
    files: list[Path] = []
    notices: list[str] = []
    seen: set[str] = set()

    def add(path: Path) -> None:
        try:
            key = str(path.resolve(strict=True))
        except (OSError, RuntimeError) as exc:  # symlink loop, dangling link
            reason = "symlink loop" if isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP else exc.strerror or str(exc)
            notices.append(f"warning: skipped {path}: {reason}")
            return
        if key not in seen:
            seen.add(key)
            files.append(path)

    for raw in paths:
        path = Path(raw)
        if not os.path.lexists(path):
            notices.append(f"warning: skipped {raw}: no such file or directory")
            continue
        if path.is_dir():
            for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
                base = Path(dirpath)
                dirnames[:] = sorted(d for d in dirnames if not cfg.is_excluded(base / d))
                for name in sorted(filenames):
                    child = base / name
                    if name.endswith(".py") and not cfg.is_excluded(child):
                        add(child)
        elif force_exclude and cfg.is_excluded(path):
            continue
        else:
            add(path)
    return files, notices


class _FactsLoader:
    """Reads a file once and builds its facts, through the content-keyed cache."""

    def __init__(self, cache: facts_cache.FactsCache | None):
        self.cache = cache
        self.read_errors: dict[str, str] = {}

    def __call__(self, path: str, package: str) -> ModuleFacts:
        try:
            size = os.path.getsize(path)
            if size > MAX_FILE_BYTES:
                self.read_errors[path] = f"file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB"
                return ModuleFacts(path=path, error=self.read_errors[path])
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            self.read_errors[path] = f"cannot read file: {exc.strerror or exc}"
            return ModuleFacts(path=path, error=self.read_errors[path])
        if self.cache is not None:
            hit = self.cache.get(data, package)
            if hit is not None:
                hit.path = path
                return hit
        facts = extract(path, data, package)
        if self.cache is not None:
            self.cache.put(data, package, facts)
        return facts


def display_path(path: str) -> str:
    """Relative to the working directory when below it, as ruff prints paths."""
    rel = os.path.relpath(path)
    return Path(path).as_posix() if rel.startswith("..") else Path(rel).as_posix()


def _suppressed(finding: Finding, facts: ModuleFacts | None) -> bool:
    if facts is None:
        return False
    if facts.file_noqa is None or (facts.file_noqa and finding.code in facts.file_noqa):
        return True
    if finding.line in facts.noqa:
        codes = facts.noqa[finding.line]
        return codes is None or finding.code in codes
    return False


def run(paths: list[str], cfg: Config, *, torch_version: str, use_cache: bool = True, force_exclude: bool = False) -> Report:
    """Lint the given paths and return a Report of the findings that survive noqa and selection."""
    from opscan.codes import expand_selectors, lint_codes

    universe = lint_codes()
    enabled = cfg.enabled_codes(universe)
    report = Report("lint")
    files, report.notices = discover(paths, cfg, force_exclude)
    cache = facts_cache.FactsCache.open(cfg.root) if use_cache else None
    loader = _FactsLoader(cache)
    project = Project(loader, [cfg.root, *cfg.roots])

    raw: dict[tuple, Finding] = {}
    for path in files:
        module = project.entry_module(path)
        facts = module.facts
        if facts.error:
            loc = facts.error_loc or Loc(1, 1, 1, 1)
            f = Finding(det000.RULE.code, f"Could not analyse file: {facts.error}", module.path, loc.line, loc.col, loc.end_line, loc.end_col)
            raw[(f.code, f.path, f.line, f.col)] = f
            continue
        ctx = Context(project.trace(module), torch_version)
        for rule in CHECKS:
            if rule.RULE.code in enabled:
                rule.check(ctx)
        for f in ctx.findings:
            raw.setdefault((f.code, f.path, f.line, f.col), f)

    facts_by_path = {m.path: m.facts for m in project._modules.values() if m is not None}
    for f in raw.values():
        if f.code not in enabled:
            continue
        path = Path(f.path)
        if f.code in expand_selectors(cfg.ignored_for(path), universe):
            continue
        if _suppressed(f, facts_by_path.get(f.path)):
            continue
        facts = facts_by_path.get(f.path)
        line_text = facts.lines[f.line - 1].strip() if facts and 0 < f.line <= len(facts.lines) else ""
        report.findings.append(
            Finding(f.code, f.message, display_path(f.path), f.line, f.col, f.end_line, f.end_col, f.severity, f.fix,
                    {**f.extra, "line_text": line_text, "_abspath": f.path})
        )  # fmt: skip
    if cache is not None:
        cache.save()
    return report
