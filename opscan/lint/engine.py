"""Run lint: discover files, read facts (cached), trace each entry, run the rules, filter.

files -> facts -> project links -> findings -> (noqa, select/ignore) -> Report

Each entry file is linted on its own through one Project; many files are
shared among forked worker processes, which send back their findings.
"""

from __future__ import annotations

import os
import stat
import sys

from opscan._path import Path, resolved_in
from opscan.config import Config, resolve
from opscan.findings import Finding, Report
from opscan.lint.context import Context
from opscan.lint.facts import ModuleFacts, extract
from opscan.lint.model import Loc
from opscan.lint.project import Project
from opscan.lint.rules import CHECKS, det000

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.lint import cache as facts_cache
    from opscan.lint.project import EntryTrace, Module
    from opscan.lint.relevance import CallFilter
    from opscan.lint.scripts import ConsoleScript
    from opscan.lint.target import TorchTargets
    from opscan.versions import TorchRange

MAX_FILE_BYTES = 50 * 1024 * 1024  # larger files are skipped with a message


def discover(paths: list[str], cfg: Config, force_exclude: bool = False, deps: set[str] | None = None) -> tuple[list[Path], list[str]]:
    """Python files under the given paths, each once, in a stable order; plus notices for what was skipped.

    `deps`, if given, gets every path and folder walked (see opscan.lint.runcache).
    """
    files: list[Path] = []
    notices: list[str] = []
    seen: set[str] = set()

    def add(path: Path, key: str | None = None) -> None:
        try:
            key = key or str(path.resolve(strict=True))
        except (OSError, RuntimeError) as exc:  # symlink loop, dangling link
            import errno  # here: most runs meet no broken link, and the import costs start-up ~50 µs

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
        if deps is not None:
            deps.add(os.path.abspath(raw))
        if not os.path.lexists(path):
            notices.append(f"warning: skipped {raw}: no such file or directory")
            continue
        if path.is_dir():
            for dirpath, dirnames, filenames in os.walk(path, onerror=unreadable_folder, followlinks=False):
                if deps is not None:
                    deps.add(os.path.abspath(dirpath))
                base = Path(dirpath)
                # The folder resolved once, then each entry in it by one lstat: resolving each path
                # whole (twice, to dedupe and to match the exclusions) was 2% of a run on torch's tree.
                real_base = str(resolve(base))
                dirnames[:] = sorted(d for d in dirnames if not cfg.is_excluded(base / d, resolved_in(real_base, d)))
                for name in sorted(filenames):
                    if not name.endswith(".py"):
                        continue
                    child, real = base / name, resolved_in(real_base, name)
                    if not cfg.is_excluded(child, real):
                        add(child, real)
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

    def __call__(self, path: str, package: str, keep_all: bool = False, provided: frozenset[str] = frozenset()) -> ModuleFacts:
        """`provided`: libraries the project provides itself, whose calls are kept."""
        calls = None if keep_all else self.calls
        if calls is not None and provided:
            calls = calls.without(provided)
        if path in self.overlay:
            return extract(path, self.overlay[path], package, calls)
        data = self._read(path)
        if isinstance(data, ModuleFacts):
            return data
        if self.cache is None:
            return extract(path, data, package, calls)
        variant = calls.fingerprint if calls is not None else ""
        hit = self.cache.get(data, package, variant)
        if hit is not None:
            hit.path = path
            return hit
        facts = extract(path, data, package, calls)
        self.cache.put(data, package, facts, variant)
        return facts


class _EntryLinter:
    """Lints entry files one by one through one Project, and filters their findings."""

    def __init__(
        self, cfg: Config, torch: dict[Path, TorchRange], files: list[Path], cache, overlay, calls: CallFilter, targets: TorchTargets | None = None, roots: list[Path] | None = None
    ):
        from opscan.lint.rules import OPT_IN, lint_codes

        self.cfg = cfg
        self.cache = cache
        self.torch = torch  # each file's targeted torch releases
        self.targets = targets  # and where they came from: the versions of other packages are read through it, as asked
        self.universe = lint_codes()
        self.enabled = cfg.enabled_codes(self.universe, OPT_IN)
        roots = cfg.import_roots() if roots is None else roots
        self.project = Project(_FactsLoader(cache, overlay, calls), roots, entry_dirs=[f.parent for f in files])
        self._ignored: dict[str, set[str]] = {}
        self._shown: dict[str, str] = {}  # path -> display_path(path): asked for every finding, of a few files each
        self.unresolved: dict[str, tuple[str, Loc]] | None = None  # set to a dict to collect, per entry, imports found nowhere
        self.progress: Progress | None = None
        self.noqa_used: set[tuple[str, int, str]] = set()  # (path, line, code) a line's `# noqa` suppressed
        self.child_deps: set[str] = set()  # what worker processes read (see deps)
        # The entries whose run hit a safety net of the linker (see limit_warnings), as given.
        self.too_deep: set[str] = set()
        self.too_long: set[str] = set()
        # By entry (resolved): the console scripts of its project that run it (opscan.lint.scripts).
        self.scripts: dict[str, tuple[ConsoleScript, ...]] = {}

    def deps(self) -> set[str]:
        """The files read and the folders looked in, here and in worker processes."""
        out = self.project.looked_at | set(self.project._any_facts) | self.child_deps
        if self.targets is not None:  # with what a rule read for another package's versions
            from opscan.lint.runcache import listing

            out |= self.targets.read | {listing(folder, prefixes) for folder, prefixes in self.targets.listed}
        return out

    def lint(self, path: Path) -> list[Finding]:
        """The findings of running `path` as a script that survive selection and noqa, in report form."""
        module = self.project.entry_module(path)
        facts = module.facts
        if facts.error:
            loc = facts.error_loc or Loc(1, 1, 1, 1)
            raw = [Finding(det000.RULE.code, f"Could not analyse file: {facts.error}", module.path, loc.line, loc.col, loc.end_line, loc.end_col)]
        else:
            raw = []
            # The script's own run, then each fresh process it starts (mp.spawn's workers), in its own state.
            runs = [run for trace in self._traces(module) for run in (trace, *trace.processes())]
            for run in runs:
                if run.deep:
                    self.too_deep.add(str(path))
                if run.truncated:
                    self.too_long.add(str(path))
                if self.unresolved is not None:
                    for package, where in run.libraries.items():
                        self.unresolved.setdefault(package, where)
                    for module, where in run.missing.items():  # dotted: found a namespace folder, not the module
                        self.unresolved.setdefault(module, where)
                ctx = Context(run, self.torch[path], self._versions(path))
                for rule in CHECKS:
                    if rule.RULE.code in self.enabled:
                        rule.check(ctx)
                raw += ctx.findings
        return [self._final(f) for f in raw if self._kept(f)]

    def _traces(self, module: Module) -> list[EntryTrace]:
        """The runs of an entry: as `python FILE`; without a `__main__` block, as each console script of
        its project that names a function of it (once per function), where it has any."""
        scripts = self.scripts.get(module.path)
        if scripts and not module.has_main_block:
            by_function = {}
            for script in scripts:  # two names for one function (`train`, `mytrain`) are one run
                by_function.setdefault(script.attr, script)
            traces = [self.project.trace(module, script) for script in by_function.values()]
            traces = [t for t in traces if t is not None]
            if traces:
                return traces
        return [self.project.trace(module)]

    def _versions(self, path: Path):
        """What Context.versions gives for the entry `path`: its project's versions of a package."""
        targets = self.targets
        if targets is None:
            return None
        return lambda name: targets.package(name).for_file(path)

    def limit_warnings(self, files: list[Path]) -> list[str]:
        """A warning for each safety net of the linker that some entry's run hit, naming the entries.

        Recursion is walked once per cycle (see project._Walker.enter), so neither is met but
        where calls and imports really nest that deep, or a run really makes that many calls.
        """
        from opscan.lint.project import MAX_DEPTH, MAX_EVENTS

        out = []
        for hit, what in (
            (self.too_deep, f"nest{{s}} calls and imports more than {MAX_DEPTH} deep: lint did not follow them further"),
            (self.too_long, f"go{{es}} on past {MAX_EVENTS:,} calls and effects: lint did not check the rest"),
        ):
            if not hit:
                continue
            # In the order of the files (as given, whichever process linted them).
            paths = [p for p in dict.fromkeys(map(str, files)) if p in hit]
            shown = ", ".join(display_path(os.path.abspath(p)) for p in paths[:3])
            if len(paths) > 3:
                shown += f" and {len(paths) - 3:,} more"
            one = len(paths) == 1
            text = what.format(s="s" if one else "", es="es" if one else "")
            out.append(f"warning: the run{'' if one else 's'} of {shown} {text}, so findings there may be missing")
        return out

    def _kept(self, f: Finding) -> bool:
        if f.code not in self.enabled or f.code in self._ignored_in(f.path):
            return False
        facts = self.project.facts_of(f.path)
        if not _suppressed(f, facts):
            return True
        if facts.file_noqa is False or (facts.file_noqa and f.code not in facts.file_noqa):
            self.noqa_used.add((f.path, f.line, f.code))  # the line's comment did it (DET010 asks)
        return False

    def _ignored_in(self, path: str) -> set[str]:
        ignored = self._ignored.get(path)
        if ignored is None:
            from opscan.codes import expand_selectors

            ignored = self._ignored[path] = expand_selectors(self.cfg.ignored_for(Path(path)), self.universe)
        return ignored

    def unused_noqa(self, files: list[Path]) -> list[Finding]:
        """DET010: the `# noqa: DET...` codes of the files linted that no finding of this run needed."""
        from opscan.lint.rules import det010

        known = set(self.universe)
        out = []
        for path in files:
            facts = self.project.facts_of(str(Path(path).resolve()))
            if facts is None or facts.error or not any(facts.noqa.values()):
                continue
            key = facts.path if facts.path and os.path.isabs(facts.path) else str(Path(path).resolve())
            enabled = self.enabled - self._ignored_in(key)
            lines = None
            for line, codes in sorted(facts.noqa.items()):
                if not codes:
                    continue  # a bare `# noqa` may serve another linter
                used = {c for c in codes if (key, line, c) in self.noqa_used}
                if lines is None:
                    lines = facts.lines if facts.lines is not None else _source_lines(key)
                text = lines[line - 1] if 0 < line <= len(lines) else ""
                found = det010.unused_in(text, used, enabled, known)
                if found is None:
                    continue
                start, end, drop, why = found
                start, end = len(text[:start].encode()), len(text[:end].encode())  # columns count UTF-8 bytes, as ast's
                out.append(det010.finding(key, line, text, start, end, drop, why))
        return [self._final(f) for f in out if self._kept(f)]

    def _final(self, f: Finding) -> Finding:
        facts = self.project.facts_of(f.path)
        if facts is not None and facts.lines is None:  # facts from the cache or another process: not kept
            facts.lines = _source_lines(f.path)
        line_text = facts.lines[f.line - 1].strip() if facts and 0 < f.line <= len(facts.lines) else ""
        shown = self._shown.get(f.path)
        if shown is None:
            shown = self._shown[f.path] = display_path(f.path)
        return f.replace(path=shown, line_text=line_text, source_path=f.path)


def _lint_in_processes(linter: _EntryLinter, files: list[Path], workers: int) -> list[list[Finding]] | None:
    """linter.lint() over the files, shared between this process and forked children; None without fork.

    In a tree of packages, first every core reads its share of the files into
    facts, and this process receives them all (each child pickles what it
    reads into a temporary file as it goes): an entry's trace follows its
    imports into the other files, and without this each process would read
    nearly the whole tree itself (on torch's source, every file imports most of
    it). Scripts that share a helper or two do not need it, and handing facts
    over costs a fifth of reading them. Then each core lints its share with a
    copy of the project, and sends back only the findings (the cache, if any,
    each fills itself). A child that fails is not an error: its share is done
    here instead.
    """
    project, progress = linter.project, linter.progress
    if not _mostly_packages(files):
        return _lint_shares(linter, files, workers)
    spools = _spools(workers)

    def read(share: list[int], tick, worker: int):
        # With a spool, the facts go into it 16 files at a time, as they are read. Pickled all
        # at the end (half a second on torch's tree), they kept this process waiting; spread
        # over the reading, the pickling is dealt out with the files.
        spool = spools[worker] if spools else None
        sent: set = set()

        def send() -> None:
            fresh = [(key, f) for key, f in project._facts.items() if key not in sent]
            for key, f in fresh:
                sent.add(key)
                f.lines = None  # read again from the file for the few lines a finding quotes
            _pickle().dump(fresh, spool, protocol=-1)  # -1: the highest protocol

        for count, i in enumerate(share, 1):
            project.entry_module(files[i])
            tick()
            if spool is not None and count % 16 == 0:
                send()
        if spool is None:
            facts = list(project._facts.items())  # a child's own: it was forked before any were read
            for _, f in facts:
                f.lines = None
            return facts
        send()
        spool.flush()
        return worker

    def read_here(share: list[int], tick, worker: int) -> None:
        for i in share:
            project.entry_module(files[i])
            tick()

    if progress is not None:
        progress.phase("Reading", len(files))
    try:
        read_shares = _in_processes(len(files), workers, read, read_here, progress, linter)
        if read_shares is None:
            return None
        for _, facts in read_shares:
            if isinstance(facts, int):  # a child that finished: its spool holds all it read
                project.adopt(_unspool(spools[facts]))
            elif facts is not None:
                project.adopt(facts)
    finally:
        for spool in spools or ():
            if spool is not None:
                spool.close()

    return _lint_shares(linter, files, workers)


def _spools(workers: int) -> list | None:
    """An anonymous temporary file for each forked worker (index 1 on), or None where none can be made."""
    import tempfile

    try:
        return [None] + [tempfile.TemporaryFile() for _ in range(1, workers)]
    except OSError:
        return None


def _unspool(spool) -> list:
    """The facts a worker pickled into its spool, batch after batch."""
    load = _pickle().load
    spool.seek(0)
    out: list = []
    while True:
        try:
            out += load(spool)
        except EOFError:
            return out


def _mostly_packages(files: list[Path]) -> bool:
    """Whether most files sit in packages (a folder with `__init__.py`), where modules import one another."""
    in_package: dict[str, bool] = {}
    count = 0
    for path in files:
        folder = os.path.dirname(os.path.abspath(path))
        found = in_package.get(folder)
        if found is None:
            found = in_package[folder] = os.path.isfile(os.path.join(folder, "__init__.py"))
        count += found
    return count * 2 > len(files)


def _lint_shares(linter: _EntryLinter, files: list[Path], workers: int) -> list[list[Finding]] | None:
    progress = linter.progress

    def lint(share: list[int], tick, worker: int) -> list[list[Finding]]:
        found = []
        for i in share:
            found.append(linter.lint(files[i]))
            tick()
        return found

    if progress is not None:
        progress.phase("Linting", len(files))
    results: list[list[Finding] | None] = [None] * len(files)
    done = _in_processes(len(files), workers, lint, lint, progress, linter)
    if done is None:
        return None
    for share, found in done:
        for i, one in zip(share, found):
            results[i] = one
    return results  # type: ignore[return-value]


def _in_processes(n: int, workers: int, work, work_here, progress: Progress | None, linter: _EntryLinter) -> list | None:
    """[(indices, payload)]: work(indices, tick, worker) over range(n), shared between this process and forked children.

    The items are dealt in small batches from a pipe that every process draws
    from, so a process that meets the costly files (the first to walk a package's
    imports) does not hold the others up. This process runs work_here on what it
    draws (its payload is None when work_here returns None); each child sends back
    its payload, pickled, with the items it drew, and one byte per item done on a
    shared pipe for the progress line. What a failed child drew is done here.
    None without fork.
    """
    if not hasattr(os, "fork"):  # Windows: spawning would re-import everything
        return None
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:  # a host with threads (an IDE, a server): forking it may deadlock
        return None
    draw = _dealer(n, workers)
    ticks_read = ticks_write = None
    if progress is not None:
        try:
            ticks_read, ticks_write = os.pipe()
            os.set_blocking(ticks_read, False)
        except OSError:
            ticks_read = ticks_write = None
    children: list[tuple[int, int]] = []
    for w in range(1, workers):
        try:
            read_end, write_end = os.pipe()
        except OSError:  # out of descriptors: what is not drawn by a child is done here
            break
        try:
            pid = os.fork()
        except OSError:  # out of processes: likewise
            os.close(read_end)
            os.close(write_end)
            break
        if pid == 0:  # the child: never returns into the caller
            status = 1
            try:
                os.close(read_end)
                if ticks_read is not None:
                    os.close(ticks_read)
                tick = (lambda: os.write(ticks_write, b".")) if ticks_write is not None else _no_tick
                taken: list[int] = []
                payload = work(draw(w, taken), tick, w)
                used = linter.cache.used if linter.cache is not None else set()
                packages = linter.targets.packages_used() if linter.targets is not None else None
                state = (taken, payload, used, linter.noqa_used, linter.deps(), linter.too_deep, linter.too_long, packages)
                with os.fdopen(write_end, "wb") as out:
                    out.write(_pickle().dumps(state, protocol=-1))  # -1: the highest protocol
                status = 0
            finally:
                os._exit(status)
        os.close(write_end)
        children.append((pid, read_end))
    if ticks_write is not None:
        os.close(ticks_write)

    def tick() -> None:
        progress.advance(1)
        _drain_ticks(ticks_read, progress)

    # Imported once the children run, beside their work, not before they fork (see _pickle).
    loads = _pickle().loads if children else None
    mine: list[int] = []
    done = [(mine, work_here(draw(0, mine), tick if progress is not None else _no_tick, 0))]
    for pid, read_end in children:
        payload = _read_all(read_end, ticks_read, progress)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            continue
        try:
            taken, result, used, noqa_used, deps, too_deep, too_long, packages = loads(payload)
        except Exception:  # a truncated payload: its items are done here
            continue
        if linter.cache is not None:
            linter.cache.used |= used
        linter.noqa_used |= noqa_used
        linter.child_deps |= deps
        linter.too_deep |= too_deep
        linter.too_long |= too_long
        if packages:  # the versions of other packages its rules asked for (for -v), and what was not read
            linter.targets.adopt_packages(packages)
        done.append((taken, result))
    draw.close()
    covered = {i for taken, _ in done for i in taken}
    missing = [i for i in range(n) if i not in covered]
    if missing:
        done.append((missing, work_here(iter(missing), _no_tick, 0)))
    if ticks_read is not None:
        os.close(ticks_read)
    return done


def _pickle():
    """pickle's own functions (`dumps`, `loads`, ...), from its C module where there is one.

    `pickle.py` imports re, enum and functools: ~8 ms, which, imported before the workers fork, every
    run of many files waited for. `_pickle` is what `pickle` calls, and imports only functools.
    """
    try:
        import _pickle as module
    except ImportError:  # an interpreter built without the accelerator
        import pickle as module
    return module


def _batches(n: int, workers: int) -> list[range]:
    """range(n) in batches of a sixteenth of each worker's share, smaller towards the end, down to one item.

    Each process draws a batch when it is done with its last, so they all finish within one batch of each
    other: in batches of one size, one core sat idle at the end (4.7 ms on average on the 200 scripts, 1.3 ms
    so). The last ones, a quarter of a worker's share of what is left, end nearer together.
    """
    size = max(1, n // (workers * 16))
    out = []
    start = 0
    while start < n:
        step = min(size, -(-(n - start) // (workers * 4)))  # the ceiling of a quarter share of the rest
        out.append(range(start, start + step))
        start += step
    return out


class _dealer:
    """Deals range(n) in batches from a pipe that forked processes share; draw(worker, taken) iterates one's items.

    Where a pipe cannot be had (or would not hold every batch), each worker takes
    every `workers`-th item instead.
    """

    def __init__(self, n: int, workers: int):
        self.n, self.workers, self.fd = n, workers, None
        self.batches = _batches(n, workers)
        if len(self.batches) * 4 > 60_000:  # a pipe holds 64 KiB: writing more before anyone reads would block
            return
        try:
            read_end, write_end = os.pipe()
        except OSError:
            return
        try:
            os.write(write_end, b"".join(i.to_bytes(4, sys.byteorder) for i in range(len(self.batches))))
        finally:
            os.close(write_end)
        self.fd = read_end

    def __call__(self, worker: int, taken: list[int]):
        if self.fd is None:
            for i in range(worker, self.n, self.workers):
                taken.append(i)
                yield i
            return
        while True:
            ticket = os.read(self.fd, 4)  # 4 of the pipe's bytes, whole: every process reads just 4
            if len(ticket) < 4:
                return
            for i in self.batches[int.from_bytes(ticket, sys.byteorder)]:
                taken.append(i)
                yield i

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _no_tick() -> None:
    pass


def _drain_ticks(fd: int | None, progress: Progress | None) -> None:
    if fd is None or progress is None:
        return
    try:
        got = os.read(fd, 65536)
    except (BlockingIOError, OSError):
        return
    if got:
        progress.advance(len(got))


def _read_all(fd: int, ticks: int | None, progress: Progress | None) -> bytes:
    """A child's whole payload; meanwhile, the progress its children report."""
    chunks = []
    if ticks is None or progress is None:
        with os.fdopen(fd, "rb") as fh:
            return fh.read()
    import select

    try:
        while True:
            ready, _, _ = select.select([fd, ticks], [], [], 0.5)
            if ticks in ready:
                _drain_ticks(ticks, progress)
            if fd in ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
    finally:
        os.close(fd)


class Progress:
    """A line on stderr, `Linting 1,234/2,352 files`, drawn once a run has taken about a second."""

    DELAY = 1.0
    INTERVAL = 0.1

    def __init__(self, stream):
        import time

        self.stream = stream
        self.clock = time.monotonic
        self.started = self.clock()
        self.drawn_at = 0.0
        self.shown = False
        self.label, self.total, self.count = "", 0, 0

    def phase(self, label: str, total: int) -> None:
        self.label, self.total, self.count = label, total, 0

    def advance(self, n: int) -> None:
        self.count += n
        now = self.clock()
        if now - self.started >= self.DELAY and now - self.drawn_at >= self.INTERVAL:
            self.drawn_at = now
            self.shown = True
            self.stream.write(f"\r\x1b[K{self.label} {min(self.count, self.total):,}/{self.total:,} files")
            self.stream.flush()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


def _source_lines(path: str) -> list[str]:
    """A file's lines, for quoting in findings; none where it cannot be read now."""
    from opscan.lint.facts import decode_source, source_lines

    try:
        with open(path, "rb") as fh:
            return source_lines(decode_source(fh.read()))
    except (OSError, UnicodeDecodeError, SyntaxError, LookupError):
        return []


def display_path(path: str) -> str:
    """Relative to the working directory (`../train.py` from a subfolder); absolute only on another drive."""
    try:
        return Path(os.path.relpath(path)).as_posix()
    except ValueError:  # Windows: no relative path between drives
        return Path(path).as_posix()


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
    from opscan.rules import index

    if torch_version is not None:
        return TorchTargets(index().releases, torch_version, "--torch-version", **options)
    return TorchTargets(index().releases, cfg.torch_version, cfg.torch_version_from or "--torch-version", **options)


def import_roots(cfg: Config, targets: TorchTargets, files: list[Path]) -> list[Path]:
    """Where the project imports of `files` resolve: the config's roots; without a config file, also
    the roots of the files' projects (Config.import_roots), which `targets` finds from its walk up."""
    if cfg.source is not None:  # a config's roots are its own: no project root is looked for
        return cfg.import_roots()
    project_root = targets.project_root
    return cfg.import_roots(dict.fromkeys(r for r in map(project_root, files) if r is not None))


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
    progress: Progress | None = None,
    stdin: str | None = None,
    deps: set[str] | None = None,
) -> Report:
    """Lint the given paths and return a Report of the findings that survive noqa and selection.

    Each file targets the torch releases `targets` gives it (by default
    `torch_targets(cfg, torch_version)`); what could not be read for them is a
    warning among the notices. `overlay` maps resolved paths to contents to
    lint instead of what is on disk (the fixer re-lints its edits before
    writing them). `unresolved`, a dict, collects the top-level packages of
    the imports that ran and found no project file, with where each was first
    imported (the run then stays in this process). `progress`, if given, is
    told how many files are done. `stdin`: lint just this path, whose contents
    `overlay` holds (they came on stdin; the file need not exist). `deps`, if
    given, gets every file and folder the result depends on (opscan.lint.runcache).
    """
    import gc

    # Lint's objects (facts, events, records) hold no reference cycles that matter while it runs,
    # and they number millions on a big tree: every collection of the older generations walks
    # them all again (a tenth of the CPU on torch's source), and in forked workers it dirties the
    # pages they share with the parent. What cycles there are go when collection resumes.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _run(paths, cfg, torch_version, targets, use_cache, force_exclude, overlay, unresolved, progress, stdin, deps)
    finally:
        if collecting:
            gc.enable()


def _run(paths, cfg, torch_version, targets, use_cache, force_exclude, overlay, unresolved, progress, stdin, deps) -> Report:
    from opscan.lint.relevance import CallFilter

    report = Report("lint")
    if stdin is not None:  # as ruff: exclusions apply to it only with --force-exclude
        files = [] if force_exclude and cfg.is_excluded(Path(stdin)) else [Path(stdin)]
    else:
        files, report.notices = discover(paths, cfg, force_exclude, deps)
        if paths and not files:  # an empty folder, or every file excluded: "All checks passed!" alone would hide it
            report.notices.append("warning: No Python files found under the given path(s)")
    if targets is None:
        targets = torch_targets(cfg, torch_version)
    torch = {path: targets.for_file(path) for path in files}
    cache = None
    if use_cache:
        from opscan.lint.cache import FactsCache  # pickle, only when the cache is used

        cache = FactsCache.open(cfg.root)
    linter = _EntryLinter(cfg, torch, files, cache, overlay, CallFilter.for_lint(), targets, import_roots(cfg, targets, files))
    linter.unresolved = unresolved
    linter.progress = progress
    if files:
        from opscan.lint.scripts import linked_scripts

        linter.scripts = linked_scripts(targets, files)
    per_file = None
    workers = min(_workers(), len(files) // 2 or 1)
    try:
        if unresolved is None and workers >= 2 and len(files) >= PARALLEL_MIN_FILES and _total_size(files) >= PARALLEL_MIN_BYTES:
            per_file = _lint_in_processes(linter, files, workers)
        if per_file is None:
            if progress is not None:
                progress.phase("Linting", len(files))
            per_file = []
            for path in files:
                per_file.append(linter.lint(path))
                if progress is not None:
                    progress.advance(1)
    finally:
        if progress is not None:
            progress.close()
    from opscan.lint.rules import det010

    if det010.RULE.code in linter.enabled:  # once every script has said which `# noqa` it needed
        per_file.append(linter.unused_noqa(files))
    # What could not be read: for torch, before linting; for another package, as a rule asked for it.
    report.notices += [w for w in targets.warnings if w not in report.notices]
    report.notices += linter.limit_warnings(files)
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
    if deps is not None:
        deps |= linter.deps()  # what `targets` read among them
    return report


def _total_size(files: list[Path]) -> int:
    total = 0
    for path in files:
        try:
            total += os.path.getsize(path)
        except OSError:
            pass
    return total
