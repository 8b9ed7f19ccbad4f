"""Run lint: discover files, read facts (cached), trace each entry, run the rules, filter.

files -> facts -> project links -> findings -> (noqa, select/ignore) -> Report

Each entry file is linted on its own through one Project; many files are
shared among forked worker processes, which send back their findings.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

from opscan.config import Config
from opscan.findings import Finding, Report
from opscan.lint.context import Context
from opscan.lint.facts import ModuleFacts, extract
from opscan.lint.model import Loc
from opscan.lint.project import Project
from opscan.lint.rules import CHECKS, det000

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.lint import cache as facts_cache
    from opscan.lint.relevance import CallFilter
    from opscan.lint.target import TorchTargets
    from opscan.versions import TorchRange

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


# Many files are linted on every core; below these sizes forking costs more than it saves.
PARALLEL_MIN_FILES = 8
PARALLEL_MIN_BYTES = 256 * 1024


def _workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class _FactsLoader:
    """Reads a file once and builds its facts, through the content-keyed cache.

    Facts are built under `calls` (which calls to record); the project asks again
    with keep_all=True for a module whose dropped calls may lead into the project.
    """

    def __init__(self, cache: facts_cache.FactsCache | None, overlay: dict[str, bytes] | None = None, calls: CallFilter | None = None):
        self.cache = cache
        self.overlay = overlay or {}  # path -> contents to use instead of the file's (the fixer's edits)
        self.calls = calls

    @staticmethod
    def _read(path: str) -> bytes | ModuleFacts:
        """The file's bytes, or facts that carry why it cannot be read."""
        try:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode):  # a FIFO would block open(), /dev/zero would never end
                return ModuleFacts(path=path, error="not a regular file")
            if st.st_size > MAX_FILE_BYTES:
                return ModuleFacts(path=path, error=f"file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB")
            with open(path, "rb") as fh:
                return fh.read()
        except OSError as exc:
            return ModuleFacts(path=path, error=f"cannot read file: {exc.strerror or exc}")

    def __call__(self, path: str, package: str, keep_all: bool = False) -> ModuleFacts:
        calls = None if keep_all else self.calls
        if path in self.overlay:
            return extract(path, self.overlay[path], package, calls)
        data = self._read(path)
        if isinstance(data, ModuleFacts):
            return data
        variant = calls.fingerprint if calls is not None else ""
        if self.cache is not None:
            hit = self.cache.get(data, package, variant)
            if hit is not None:
                hit.path = path
                return hit
        facts = extract(path, data, package, calls)
        if self.cache is not None:
            self.cache.put(data, package, facts, variant)
        return facts


class _EntryLinter:
    """Lints entry files one by one through one Project, and filters their findings."""

    def __init__(self, cfg: Config, torch: dict[Path, TorchRange], files: list[Path], cache, overlay, calls: CallFilter):
        from opscan.lint.rules import lint_codes

        self.cfg = cfg
        self.cache = cache
        self.torch = torch  # each file's targeted torch releases
        self.universe = lint_codes()
        self.enabled = cfg.enabled_codes(self.universe)
        self.project = Project(_FactsLoader(cache, overlay, calls), cfg.import_roots(), entry_dirs=[f.parent for f in files])
        self._ignored: dict[str, set[str]] = {}
        self.unresolved: dict[str, tuple[str, Loc]] | None = None  # set to a dict to collect, per entry, imports found nowhere

    def lint(self, path: Path) -> list[Finding]:
        """The findings of running `path` as a script that survive selection and noqa, in report form."""
        module = self.project.entry_module(path)
        facts = module.facts
        if facts.error:
            loc = facts.error_loc or Loc(1, 1, 1, 1)
            raw = [Finding(det000.RULE.code, f"Could not analyse file: {facts.error}", module.path, loc.line, loc.col, loc.end_line, loc.end_col)]
        else:
            trace = self.project.trace(module)
            if self.unresolved is not None:
                for package, where in trace.libraries.items():
                    self.unresolved.setdefault(package, where)
            ctx = Context(trace, self.torch[path])
            for rule in CHECKS:
                if rule.RULE.code in self.enabled:
                    rule.check(ctx)
            raw = ctx.findings
        return [self._final(f) for f in raw if self._kept(f)]

    def _kept(self, f: Finding) -> bool:
        if f.code not in self.enabled:
            return False
        ignored = self._ignored.get(f.path)
        if ignored is None:
            from opscan.codes import expand_selectors

            ignored = self._ignored[f.path] = expand_selectors(self.cfg.ignored_for(Path(f.path)), self.universe)
        return f.code not in ignored and not _suppressed(f, self.project.facts_of(f.path))

    def _final(self, f: Finding) -> Finding:
        facts = self.project.facts_of(f.path)
        line_text = facts.lines[f.line - 1].strip() if facts and 0 < f.line <= len(facts.lines) else ""
        return f.replace(path=display_path(f.path), line_text=line_text, source_path=f.path)


def _lint_in_processes(linter: _EntryLinter, files: list[Path], workers: int) -> list[list[Finding]] | None:
    """linter.lint() over the files, shared between this process and forked children; None without fork.

    Each child lints every `workers`-th file with its own copy of the project and
    sends back only the findings (the cache, if any, it fills itself). A child
    that fails is not an error: its share is linted here instead.
    """
    if not hasattr(os, "fork"):  # Windows: spawning would re-import everything
        return None
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:  # a host with threads (an IDE, a server): forking it may deadlock
        return None
    import pickle

    shares: list[list[int]] = [list(range(i, len(files), workers)) for i in range(workers)]
    children: list[tuple[int, int, list[int]]] = []
    for share in shares[1:]:
        try:
            read_end, write_end = os.pipe()
        except OSError:  # out of descriptors: what is not shared out is linted here
            shares[0] += share
            continue
        try:
            pid = os.fork()
        except OSError:  # out of processes: likewise
            os.close(read_end)
            os.close(write_end)
            shares[0] += share
            continue
        if pid == 0:  # the child: never returns into the caller
            status = 1
            try:
                os.close(read_end)
                found = [linter.lint(files[i]) for i in share]
                used = linter.cache.used if linter.cache is not None else set()
                with os.fdopen(write_end, "wb") as out:
                    out.write(pickle.dumps((found, used), protocol=pickle.HIGHEST_PROTOCOL))
                status = 0
            finally:
                os._exit(status)
        os.close(write_end)
        children.append((pid, read_end, share))
    results: list[list[Finding] | None] = [None] * len(files)
    for i in sorted(shares[0]):
        results[i] = linter.lint(files[i])
    for pid, read_end, share in children:
        with os.fdopen(read_end, "rb") as fh:
            payload = fh.read()
        _, status = os.waitpid(pid, 0)
        found = None
        if status == 0:
            try:
                found, used = pickle.loads(payload)
                if linter.cache is not None:
                    linter.cache.used |= used
            except Exception:  # a truncated payload: lint the share here
                found = None
        for j, i in enumerate(share):
            results[i] = found[j] if found is not None and j < len(found) else linter.lint(files[i])
    return results  # type: ignore[return-value]


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


def torch_targets(cfg: Config, torch_version: str | None = None, **options) -> TorchTargets:
    """Where each file's targeted torch releases come from: `torch_version` (a flag), else the config's
    `torch-version`, else the project's requirements, the installed torch, or every known release."""
    from opscan.lint.target import TorchTargets
    from opscan.rules import load

    if torch_version is not None:
        return TorchTargets(load().releases, torch_version, "--torch-version", **options)
    return TorchTargets(load().releases, cfg.torch_version, cfg.torch_version_from or "--torch-version", **options)


def run(
    paths: list[str],
    cfg: Config,
    *,
    torch_version: str | None = None,
    targets: TorchTargets | None = None,
    use_cache: bool = True,
    force_exclude: bool = False,
    overlay: dict[str, bytes] | None = None,
    unresolved: dict[str, tuple[str, Loc]] | None = None,
) -> Report:
    """Lint the given paths and return a Report of the findings that survive noqa and selection.

    Each file targets the torch releases `targets` gives it (by default
    `torch_targets(cfg, torch_version)`); what could not be read for them is a
    warning among the notices. `overlay` maps resolved paths to contents to
    lint instead of what is on disk (the fixer re-lints its edits before
    writing them). `unresolved`, a dict, collects the top-level packages of
    the imports that ran and found no project file, with where each was first
    imported (the run then stays in this process).
    """
    from opscan.lint.relevance import CallFilter

    report = Report("lint")
    files, report.notices = discover(paths, cfg, force_exclude)
    if targets is None:
        targets = torch_targets(cfg, torch_version)
    torch = {path: targets.for_file(path) for path in files}
    report.notices += [w for w in targets.warnings if w not in report.notices]
    cache = None
    if use_cache:
        from opscan.lint.cache import FactsCache  # pickle, only when the cache is used

        cache = FactsCache.open(cfg.root)
    linter = _EntryLinter(cfg, torch, files, cache, overlay, CallFilter.for_lint())
    linter.unresolved = unresolved
    per_file = None
    workers = min(_workers(), len(files) // 2 or 1)
    if unresolved is None and workers >= 2 and len(files) >= PARALLEL_MIN_FILES and _total_size(files) >= PARALLEL_MIN_BYTES:
        per_file = _lint_in_processes(linter, files, workers)
    if per_file is None:
        per_file = [linter.lint(path) for path in files]
    # A finding in a helper module may be reached from several scripts: report it once.
    seen: set[tuple] = set()
    for found in per_file:
        for f in found:
            key = (f.code, f.source_path, f.line, f.col)
            if key not in seen:
                seen.add(key)
                report.findings.append(f)
    if cache is not None:
        cache.prune()
    return report


def _total_size(files: list[Path]) -> int:
    total = 0
    for path in files:
        try:
            total += os.path.getsize(path)
        except OSError:
            pass
    return total
