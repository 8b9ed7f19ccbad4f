"""Run lint: discover files, read facts (cached), trace each entry, run the rules, filter.

files -> facts -> project links -> findings -> (noqa, select/ignore) -> Report
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from opscan.config import Config
from opscan.findings import Finding, Report
from opscan.lint.context import Context
from opscan.lint.facts import ModuleFacts, extract
from opscan.lint.model import Loc
from opscan.lint.project import Project
from opscan.lint.rules import CHECKS, det000

if TYPE_CHECKING:
    from opscan.lint import cache as facts_cache

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

    def unreadable_folder(exc: OSError) -> None:  # os.walk would skip it without a word
        notices.append(f"warning: skipped {exc.filename}: {exc.strerror or exc}")

    for raw in paths:
        path = Path(raw)
        if not os.path.lexists(path):
            notices.append(f"warning: skipped {raw}: no such file or directory")
            continue
        if path.is_dir():
            for dirpath, dirnames, filenames in os.walk(path, onerror=unreadable_folder, followlinks=False):
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


# Facts of many files are built on every core; below these sizes a pool costs more than it saves.
PARALLEL_MIN_FILES = 8
PARALLEL_MIN_BYTES = 256 * 1024


def _extract_job(job: tuple[str, bytes, str]) -> ModuleFacts:
    return extract(*job)


def _workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class _FactsLoader:
    """Reads a file once and builds its facts, through the content-keyed cache."""

    def __init__(self, cache: facts_cache.FactsCache | None, overlay: dict[str, bytes] | None = None):
        self.cache = cache
        self.overlay = overlay or {}  # path -> contents to use instead of the file's (the fixer's edits)
        self.read_errors: dict[str, str] = {}
        self.ready: dict[tuple[str, str], ModuleFacts] = {}  # built ahead by prefetch()

    def _read(self, path: str) -> bytes | ModuleFacts:
        """The file's bytes, or facts that carry why it cannot be read."""
        try:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode):  # a FIFO would block open(), /dev/zero would never end
                self.read_errors[path] = "not a regular file"
                return ModuleFacts(path=path, error=self.read_errors[path])
            if st.st_size > MAX_FILE_BYTES:
                self.read_errors[path] = f"file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB"
                return ModuleFacts(path=path, error=self.read_errors[path])
            with open(path, "rb") as fh:
                return fh.read()
        except OSError as exc:
            self.read_errors[path] = f"cannot read file: {exc.strerror or exc}"
            return ModuleFacts(path=path, error=self.read_errors[path])

    def _cached(self, path: str, data: bytes, package: str) -> ModuleFacts | None:
        if self.cache is None:
            return None
        hit = self.cache.get(data, package)
        if hit is not None:
            hit.path = path
        return hit

    def __call__(self, path: str, package: str) -> ModuleFacts:
        if path in self.overlay:
            return extract(path, self.overlay[path], package)
        ready = self.ready.pop((path, package), None)
        if ready is not None:
            return ready
        data = self._read(path)
        if isinstance(data, ModuleFacts):
            return data
        hit = self._cached(path, data, package)
        if hit is not None:
            return hit
        facts = extract(path, data, package)
        if self.cache is not None:
            self.cache.put(data, package, facts)
        return facts

    def prefetch(self, items: list[tuple[str, str]]) -> None:
        """Build the facts of these (path, package) pairs now, on every core when there are many.

        The project pass then takes them from memory; what it finds the same way as
        before, so the findings do not depend on whether this ran in parallel.
        """
        jobs: list[tuple[str, bytes, str]] = []
        for path, package in items:
            if path in self.overlay or (path, package) in self.ready:
                continue
            data = self._read(path)
            if isinstance(data, ModuleFacts):
                continue  # __call__ reads it again and reports the same error
            hit = self._cached(path, data, package)
            if hit is not None:
                self.ready[(path, package)] = hit
            else:
                jobs.append((path, data, package))
        workers = min(_workers(), len(jobs) // 2 or 1)
        if workers < 2 or len(jobs) < PARALLEL_MIN_FILES or sum(len(job[1]) for job in jobs) < PARALLEL_MIN_BYTES:
            return  # built one by one on demand, as without prefetch
        results = _extract_in_processes(jobs, workers)
        if results is None:
            return
        for job, facts in zip(jobs, results):
            self.ready[(job[0], job[2])] = facts
            if self.cache is not None:
                self.cache.put(job[1], job[2], facts)


def _extract_in_processes(jobs: list[tuple[str, bytes, str]], workers: int) -> list[ModuleFacts] | None:
    """extract() over the jobs in forked worker processes; None where that is not possible here."""
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():  # Windows; spawn would re-import everything
        return None
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return pool.map(_extract_job, jobs, chunksize=max(1, len(jobs) // (workers * 4)))
    except (OSError, ImportError):  # no /dev/shm, no semaphores, fork refused: build them in this process
        return None


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


def run(
    paths: list[str],
    cfg: Config,
    *,
    torch_version: str,
    use_cache: bool = True,
    force_exclude: bool = False,
    overlay: dict[str, bytes] | None = None,
) -> Report:
    """Lint the given paths and return a Report of the findings that survive noqa and selection.

    `overlay` maps resolved paths to contents to lint instead of what is on disk
    (the fixer re-lints its edits before writing them).
    """
    from opscan.codes import expand_selectors, lint_codes

    universe = lint_codes()
    enabled = cfg.enabled_codes(universe)
    report = Report("lint")
    files, report.notices = discover(paths, cfg, force_exclude)
    if use_cache:
        from opscan.lint.cache import FactsCache  # pickle and hashlib, only when the cache is used

        cache = FactsCache.open(cfg.root)
    else:
        cache = None
    loader = _FactsLoader(cache, overlay)
    project = Project(loader, [cfg.root, *cfg.roots])
    loader.prefetch([project.entry_load_key(path) for path in files])

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

    facts_by_path = {m.path: m.facts for m in project.loaded_modules()}
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
