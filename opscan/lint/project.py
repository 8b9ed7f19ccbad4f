"""The project pass: link module facts into what executes from each entry point.

An entry point is a linted file run as a script: its top level, its
`if __name__ == "__main__":` block and, transitively, the project functions and
methods those call, including ones imported from the project's other modules,
and the top level of each project module it imports (once, when the import
runs, without that module's `__main__` block). A file without such a block
that the project's packaging declares a console script of (`mytrain =
"mypkg.train:main"`, opscan.lint.scripts) runs as that script runs it: its
top level as an import, then the function. Calls of modelled APIs (torch,
numpy, random, os, and the framework helpers) become effects at the call site.
The result is an ordered trace of events, each remembering the chain of call
sites that led to it from the entry.
"""

from __future__ import annotations

import os
import sys
from _imp import extension_suffixes

from opscan._path import Path, resolved_in
from opscan._plain import Frozen, Plain
from opscan.lint.apis import DATALOADERS, FRESH_METHODS, START_METHOD_SETTERS, method_set, start_method
from opscan.lint.facts import (
    CLS_CALL, GRAD_OFF_DECORATOR, GRAD_OFF_FACTORY, SUPER_CALL, THIS, ClassFacts, Event, FunctionFacts, ModuleFacts,
    decidable,
)  # fmt: skip
from opscan.lint.frameworks import STARRED
from opscan.lint.model import UNKNOWN, Built, Call, CallArgs, EnvWrite, Guard, Import, Imported, Loader, Loc
from opscan.lint.modelled import BACKENDS, MODELS
from opscan.lint.stars import UNREADABLE

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up ~3 ms; annotations are strings here
    from typing import Any, Callable

    from opscan.lint.facts import Forward, ParamIf
    from opscan.lint.model import Effect
    from opscan.lint.scripts import ConsoleScript

MAX_DEPTH = 40
MAX_EVENTS = 50_000
MAX_PROCESSES = 16  # the functions one run hands to fresh processes that are followed, in the order they start
_NOT_LOOKED_UP = object()
_NOT_STARRED = object()  # no star import binds the name last (Project._through_stars)
# Module files Python imports without source (read as no project file): a compiled extension, or a
# bare .pyc. Beside a folder of the same name they win, as any module does over a namespace portion.
# (_imp's list is importlib.machinery.EXTENSION_SUFFIXES, without importing importlib: ~0.7 ms.)
_NO_SOURCE = (*extension_suffixes(), ".pyc")
# Stdlib modules in sys.modules before a script's first line on CPython 3.10 to 3.13 (`python -I -c
# "import sys; print(sorted(sys.modules))"` on each, less the built-in ones), the path never searched for them.
_LOADED_AT_START_UP = frozenset({
    "_collections_abc", "_sitebuiltins", "abc", "codecs", "encodings", "genericpath", "io", "os", "posixpath",
    "site", "stat", "zipimport",
})  # fmt: skip


def _starred_by_module() -> dict[str, frozenset[str]]:
    """By library module: the catalogue names its `*` binds (frameworks.STARRED), last parts."""
    out: dict[str, set[str]] = {}
    for name in STARRED:
        module, _, last = name.rpartition(".")
        out.setdefault(module, set()).add(last)
    return {module: frozenset(names) for module, names in out.items()}


_STARRED_BY_MODULE = _starred_by_module()


class Frame(Frozen):
    """A call site on the way from the entry to an event."""

    _fields = ("path", "loc", "callee")
    __slots__ = _fields

    def __init__(self, path: str, loc: Loc, callee: str):
        self.path = path
        self.loc = loc
        self.callee = callee  # what was called, for messages: "utils.seed.set_seed"


class TraceEvent(Plain):
    """`what` (a Call or an Effect) happened at `loc` in `path`, reached through the call sites `via`."""

    _fields = ("what", "path", "loc", "via", "api", "worker")
    __slots__ = _fields

    def __init__(
        self, what: Call | Effect, path: str, loc: Loc, via: tuple[Frame, ...] = (), api: str | None = None, worker: bool = False
    ):
        self.what = what
        self.path = path  # the file that holds `loc`
        self.loc = loc
        self.via = via
        # The API that produced it: "torch.manual_seed", "lightning.Trainer"; a call's callee;
        # None for a statement (an assignment).
        self.api = api
        # Run by a DataLoader in its worker processes (num_workers > 0), which torch reseeds.
        self.worker = worker

    def _anchor_frame(self) -> tuple[str, Loc, str | None]:
        # The deepest point in the entry file: the event itself, or the call of the
        # helper (in another module) that led to it. (A chain may leave the entry file
        # and come back: an import cycle runs its body again as a module.)
        entry_path = self.via[0].path if self.via else self.path
        if self.path == entry_path:
            return self.path, self.loc, None
        for frame in reversed(self.via):
            if frame.path == entry_path:
                return frame.path, frame.loc, frame.callee
        return self.path, self.loc, None  # pragma: no cover - via[0] is always in the entry

    @property
    def anchor(self) -> tuple[str, Loc]:
        """Where an absence or ordering finding points: in the entry file."""
        path, loc, _ = self._anchor_frame()
        return path, loc

    @property
    def helper(self) -> str | None:
        """The project helper in another module that the entry called to get here, if any."""
        return self._anchor_frame()[2]


class Module(Plain):
    _fields = ("path", "name", "facts")
    __slots__ = _fields

    def __init__(self, path: str, name: str, facts: ModuleFacts):
        self.path = path
        self.name = name  # dotted, as imported
        self.facts = facts

    @property
    def has_main_block(self) -> bool:
        """Whether the module has an `if __name__ == "__main__":` block (run as a script, it does more than
        imported)."""
        return any(ev.what.__class__ is Guard for ev in self.facts.body)


class EntryTrace(Plain):
    """What running an entry does: its events in execution order, and calls that may run in no known order.

    `effects` (the events that are not calls) are ready at once; `events` and
    `reachable_calls`, which every rule but DET007 and DET009 can do without, are
    built the first time they are asked for.
    """

    _fields = ("entry", "events", "reachable_calls", "truncated", "libraries")
    __slots__ = (
        "entry", "effects", "truncated", "deep", "started", "script", "_root", "_walker", "_events", "_reachable",
        "_uncalled", "_libraries", "_processes", "_others",
    )  # fmt: skip

    def __init__(
        self, entry: Module, root: _Record | None = None, walker: _Walker | None = None, started: Frame | None = None,
        script: ConsoleScript | None = None,
    ):  # fmt: skip
        # The module whose code the run starts in: the script, or for a fresh process the module that
        # defines the function it runs (what an anchor is found in, and a fix of the process goes into).
        self.entry = entry
        self.started = started  # for a fresh process (see processes): the call that started it, `callee` the starter
        self.script = script  # the console script whose run this is (Project.trace); None for a run as `python FILE`
        self._processes: list[EntryTrace] | None = None
        # The functions the other processes of the run walk (see processes): None for the script's own run,
        # whose are its processes'.
        self._others: frozenset[tuple[str, str]] | None = None
        self._root = root
        self._walker = walker
        self._events: list[TraceEvent] | None = None if root is not None else []
        self._reachable: list[TraceEvent] | None = None if walker is not None else []
        # Safety nets, which the linter warns about: more than MAX_EVENTS events (those past it are
        # left out), and calls or imports nested deeper than MAX_DEPTH (not followed).
        self.truncated = root is not None and root.count > MAX_EVENTS
        self.deep = root is not None and root.min_cut <= MAX_DEPTH
        # The effects among the first MAX_EVENTS events, in order.
        self.effects: list[TraceEvent] = [e for pos, e in root.effects if pos < MAX_EVENTS] if root is not None else []
        self._uncalled: list[TraceEvent] | None = None if walker is not None else []
        self._libraries: dict[str, tuple[str, Loc]] | None = None if walker is not None else {}

    @property
    def events(self) -> list[TraceEvent]:
        """In execution order; at most MAX_EVENTS of them."""
        if self._events is None:
            self._events = []
            _materialize(self._root, (), self._events)
        return self._events

    def first_calls(self, skip_workers: bool = False, also: type | None = None):
        """The calls among `events`, in order, each place (path, loc) only where it first runs.

        What DET007, DET009, DET011 and the idiom fixes ask of a trace, without building
        `events`: a record met again adds no place, so it is passed over (its events still
        count towards MAX_EVENTS, as in `events`). `skip_workers`: leave out the calls run
        in DataLoader worker processes. `also`: an effect class (CudaWork) whose events
        come too, in place, each place where it first runs.
        """
        seen: set = set()
        if self._events is not None or self._root is None:  # built already (or nothing to walk)
            for e in self.events:
                cls = e.what.__class__
                if (cls is Call or cls is also) and not (skip_workers and e.worker):
                    key = (cls is Call, e.path, e.loc)
                    if key not in seen:
                        seen.add(key)
                        yield e
            return
        yield from _first_calls(self._root, skip_workers, also, seen)

    @property
    def reachable_calls(self) -> list[TraceEvent]:
        """Calls that may run but whose order is unknown: all of the entry module's
        functions, methods of classes it instantiates, class bodies."""
        if self._reachable is None:
            self._reachable = self._walker.reachable(self._root, self.others)
        return self._reachable

    def processes(self) -> list[EntryTrace]:
        """The runs of the functions this run hands to fresh processes (`mp.spawn(worker)`, `Process(target=...)`
        of a spawn context), each its own trace, in the order they start (the first start of each function;
        the processes those start in turn are not followed).

        Such a process is a new interpreter: it inherits the environment variables set before it starts
        (their events come first, as they were), then runs the script's top level again (as `__mp_main__`,
        without its `__main__` block), the module of the function, and the function. Determinism and cuDNN
        flags and RNG seeds set in this run do not carry over, so its events are not in this run's trace.
        """
        if self._processes is None:
            root = self._root
            self._processes = self._walker.processes(root) if root is not None and root.spawns else []
            if self._processes:
                walked = [self._walker.walked(root), *(self._walker.walked(p._root) for p in self._processes)]
                for i, process in enumerate(self._processes):
                    process._others = frozenset().union(*(w for j, w in enumerate(walked) if j != i + 1))
        return self._processes

    @property
    def others(self) -> frozenset[tuple[str, str]]:
        """The functions that the run's other processes walk, by (path, qualname): neither uncalled nor
        reachable here, since they run there, in that process's state."""
        if self._others is None:
            processes = self.processes()
            self._others = frozenset().union(*(self._walker.walked(p._root) for p in processes)) if processes else frozenset()
        return self._others

    @property
    def libraries(self) -> dict[str, tuple[str, Loc]]:
        """The top-level package of each import that runs and finds no project file ("torch",
        "numpy", a project package the roots miss), with where it was first imported."""
        if self._libraries is None:
            provides, search = self._walker.project._provides_to, self._walker.search
            self._libraries = {p: where for p, where in _libs_of(self._root).items() if p and "." not in p and not provides(p, search)}
        return self._libraries

    @property
    def missing(self) -> dict[str, tuple[str, Loc]]:
        """The modules that imports that run look for in a namespace package of the project (a
        folder without `__init__.py`: `utils` of `from utils.seeding import x`) and find no file
        for ("utils.seeding"), with where each was first imported. Python raises there, unless
        an installed package of that name wins over the folder."""
        if self._root is None:
            return {}
        return {p: where for p, where in _libs_of(self._root).items() if "." in p}

    def calls_into(self) -> set[str]:
        """What the run's own code calls into (FunctionFacts.calls_into: packages and their first modules),
        less the packages the project provides: the entry module's top level and every function of it (uncalled ones may be entry
        points), and each function they call, through the project. What an import runs is left out: the
        top level of an imported module (its class bodies' layers, its decorators) and what that calls is
        its set-up, not the run's work (ultralytics' `nn/modules/conv.py` builds `nn.SiLU()` in a class
        body when imported). Computed when asked (DET001 and DET002 ask, about to report)."""
        entry = self.entry
        out = set(entry.facts.calls_into)
        for func in entry.facts.functions.values():
            out.update(func.calls_into)
        if self._root is None:
            return out
        project = self._walker.project
        by_path = {mod.path: mod for mod in project._modules.values()}
        for path, qualname in _entered_below(self._root, imports=False):
            mod = by_path.get(path)
            func = mod.facts.functions.get(qualname) if mod is not None else None
            if func is not None:
                out.update(func.calls_into)
        # A project that provides `torch` is torch's own source (or a copy): a call into it runs torch.
        search = self._walker.search
        return {p for p in out if p and (p.partition(".")[0] == "torch" or not project._provides_to(p.partition(".")[0], search))}

    def uncalled(self) -> list[TraceEvent]:
        """The events of the entry module's functions and methods that its run never calls (other
        code may: they are entry points too), each walked once; computed when asked."""
        if self._uncalled is None:
            self._uncalled = self._walker.uncalled(self._root, self.others)
            if self.started is None:
                # What the script's fresh processes do is done by other code, as an uncalled function's
                # is: where one of them turns determinism on, the script's own run is not asked to.
                for process in self.processes():
                    self._uncalled += process.events
        return self._uncalled


class Project:
    """Finds and caches modules, resolves qualified names, builds entry traces."""

    def __init__(self, load_facts: Callable[..., ModuleFacts], roots: list[Path], entry_dirs: list[Path] = ()):
        # load_facts(path, package, keep_all=False) -> ModuleFacts; keep_all: record every call.
        self._load_facts = load_facts
        self.roots = [r.resolve() for r in roots]
        self._root_texts = tuple(map(str, self.roots))
        entry_dirs = list(dict.fromkeys(d.resolve() for d in dict.fromkeys(entry_dirs)))
        # Every folder an import may be searched in: the roots, each entry's own folder and its
        # package root (see _search_for; added below, once the listings are set up).
        # Dicts used as ordered sets: an entry's folder is looked up in them for each of the
        # 2,352 entries of torch's tree (list scans were 1.7M Path comparisons, 0.24 s).
        self._import_bases = dict.fromkeys([*entry_dirs, *self.roots])
        self._provided: dict[str, bool] = {}
        # The same less the package roots, and what they provide (see EntryTrace.libraries).
        self._script_bases = dict(self._import_bases)
        self._provided_to_scripts: dict[str, bool] = {}
        # By (resolved path, package): relative imports, and so the facts, depend on the package.
        self._facts: dict[tuple[str, str], ModuleFacts] = {}
        self._any_facts: dict[str, ModuleFacts] = {}  # by path alone, for facts_of
        # By (path, dotted name): a file reached under two names (as an entry, and as imported
        # by a script) is named in messages as that script imports it, whatever ran first.
        self._modules: dict[tuple[str, str], Module] = {}
        self._found: dict[tuple[str, tuple[str, ...]], Module | None] = {}
        # Of the names found nowhere, those whose parent is a namespace package: the part missing from it.
        self._missing: dict[tuple[str, tuple[str, ...]], str] = {}
        # Each with the first parts of the dotted names it looked up (see _Record.heads).
        self._resolved: dict[tuple[str, str, str], tuple[object, set[str]]] = {}
        self._resolved_in: dict[tuple[tuple[str, str, str], tuple[str, ...]], tuple[object, set[str]]] = {}  # one search path's
        # The filter the loader builds facts under (None: every call), for the libraries the
        # project may provide itself and for the calls a trace keeps (see _Walker.call).
        self.calls = getattr(load_facts, "calls", None)
        self._provided_libraries: frozenset[str] | None = None
        # Walks of function bodies and module top levels, shared by every entry (see _Record).
        self._records: dict[tuple, list[_Record]] = {}
        self._programs: dict[tuple, list[_Program]] = {}
        self._heads: set[str] | None = None  # where find_module reports what it looks up
        self._folder_names: dict[str, frozenset[str]] = {}
        self._listings: dict[str, frozenset[str]] = {}
        self._real_paths: dict[str, str] = {}
        self.looked_at: set[str] = set()  # folders whose listing decided an import (opscan.lint.runcache)
        self._package_roots: dict[str, str | None] = {}
        # By entry folder: its search path, and the names in the folders of it that vary by entry.
        self._searches: dict[str, tuple[str, ...]] = {}
        self._search_names: dict[str, frozenset[str]] = {}
        # Each module (by path) and function (by path and qualname): its bit in the records' bit sets.
        self._module_bits: dict[str, int] = {}
        self._function_bits: dict[tuple[str, str], int] = {}
        self._uses_cls: dict[tuple[str, str], bool] = {}  # by (path, qualname): see uses_cls
        self._reads_passed: dict[tuple, bool] = {}  # by (search, path, qualname): see _Walker._reads_passed
        # The names each module's `*` binds (see _star_names), shared as _resolved is, and those being worked out.
        self._star_sets: dict[tuple[str, str], tuple[frozenset[str] | None, set[str]]] = {}
        self._star_sets_in: dict[tuple[tuple[str, str], tuple[str, ...]], tuple[frozenset[str] | None, set[str]]] = {}
        self._star_busy: set[tuple[str, str]] = set()
        for folder in entry_dirs:
            package_root = self._package_root(str(folder))
            if package_root is not None and Path(package_root) not in self._import_bases:
                self._import_bases[Path(package_root)] = None

    # -- modules --------------------------------------------------------------

    def module_at(self, path: Path, name: str) -> Module:
        key, package = _load_key(path, name, self._real(path))
        mod = self._modules.get((key, name))
        if mod is None:
            if not package:
                # A relative import in a module reached under a top-level name (`import util` from a
                # script beside it) has no package to start from: Python raises ImportError there.
                # Lint reads it, leniently, from the package the roots give the file, as the file's
                # own entry reads it, so one reading serves both names. Reading such files again
                # from the script's folder was about 5% of a run on torch's tree (72 files).
                package = self._rooted_package(path, key)
            facts = self._facts.get((key, package))
            if facts is None:
                facts = self._any_facts.get(key)
                # A file reached under another name (a script's folder shadows a package's module)
                # is read again only if a relative import makes its facts differ.
                if facts is None or facts.relative_imports:
                    provided = self.provided_libraries()
                    facts = self._load_facts(key, package, provided=provided) if provided else self._load_facts(key, package)
                if any(self._provides(lib) for lib in facts.dropped_libraries):
                    # Calls into a package the project itself provides were left out as library
                    # calls (see opscan.lint.relevance): read this module again with every call.
                    facts = self._load_facts(key, package, keep_all=True)
                self._facts[(key, package)] = facts
                self._any_facts.setdefault(key, facts)
            mod = self._modules[(key, name)] = Module(key, name, facts)
        return mod

    def _rooted_package(self, path: Path, key: str) -> str:
        """The package the roots give the module file `key`, as its own entry is named ("" outside them)."""
        return self._dotted_name(path, Path(key)).rpartition(".")[0]

    def _provides(self, package: str) -> bool:
        """Whether an import of `package` (or of a module under it) could find a project file."""
        found = self._provided.get(package)
        if found is None:
            found = self._provided[package] = self._held_in(package, self._import_bases)
        return found

    def _provides_to(self, package: str, search: tuple[str, ...]) -> bool:
        """_provides for the imports of an entry with this search path: the package roots of other
        entries do not count, so that an import of a package only one of them holds is said (under
        -v) to find nothing, as it does."""
        found = self._provided_to_scripts.get(package)
        if found is None:
            found = self._provided_to_scripts[package] = self._held_in(package, self._script_bases)
        package_root = search[1 + len(self._root_texts) :]  # see _search_for
        return found or (bool(package_root) and self._held_in(package, [Path(package_root[0])]))

    def _held_in(self, package: str, bases) -> bool:
        # The folder's listing first (kept, and read by find_module anyway): a stat of each
        # name in each of the 348 entry folders of torch's tree cost 0.3 s of CPU (profiled).
        return any(
            package in self._names_in(str(base)) and ((base / package).is_dir() or (base / f"{package}.py").is_file())
            for base in bases
        )

    def provided_libraries(self) -> frozenset[str]:
        """The packages the call filter treats as libraries that an import may find in the project.

        Facts are built with calls into them kept, so a module is read once, not read
        with the filter and then again with every call.
        """
        if self._provided_libraries is None:
            libraries = self.calls.libraries if self.calls is not None else ()
            names: set[str] = set()
            for base in self._import_bases:  # one listing per folder, not a stat per library and folder
                names |= self._names_in(str(base))
            self._provided_libraries = frozenset(lib for lib in libraries if lib in names and self._provides(lib))
        return self._provided_libraries

    def _names_in(self, folder: str) -> frozenset[str]:
        """The module and package names a folder may provide (a superset: every entry, .py stripped)."""
        names = self._folder_names.get(folder)
        if names is None:
            names = self._folder_names[folder] = frozenset(n[:-3] if n.endswith(".py") else n for n in self._listing(folder))
        return names

    def _listing(self, folder: str) -> frozenset[str]:
        """The names in a folder (none if it cannot be listed), listed once per run."""
        listing = self._listings.get(folder)
        if listing is None:
            self.looked_at.add(folder)
            try:
                listing = frozenset(os.listdir(folder))
            except OSError:
                listing = frozenset()
            self._listings[folder] = listing
        return listing

    def _module_bit(self, path: str) -> int:
        bit = self._module_bits.get(path)
        if bit is None:
            bit = self._module_bits[path] = 1 << len(self._module_bits)
        return bit

    def _function_bit(self, key: tuple[str, str]) -> int:
        bit = self._function_bits.get(key)
        if bit is None:
            bit = self._function_bits[key] = 1 << len(self._function_bits)
        return bit

    def entry_module(self, path: Path) -> Module:
        real = Path(self._real(path))
        self._add_import_base(real.parent)
        package_root = self._package_root(str(real.parent))
        if package_root is not None:
            self._add_import_base(Path(package_root), package_root=True)
        return self.module_at(path, self._dotted_name(path, real))

    def _package_root(self, folder: str) -> str | None:
        """The folder above the topmost `__init__.py` of the chain that holds `folder`; None where
        `folder` holds no `__init__.py` (is no package's).

        Where its package is imported from: the folder Python is run in (`python -m pkg.train`)
        or that an install puts on sys.path; mypy's base directory for the file (crawl_up),
        ruff's package root. Read from listings, which the run cache then depends on.
        """
        found = self._package_roots.get(folder, _NOT_LOOKED_UP)
        if found is _NOT_LOOKED_UP:
            found = None
            if "__init__.py" in self._listing(folder):
                parent = os.path.dirname(folder)
                found = parent if parent == folder else (self._package_root(parent) or parent)
            self._package_roots[folder] = found
        return found

    def _search_for(self, folder: str) -> tuple[str, ...]:
        """Where an entry in `folder` (resolved) looks for project modules, in order.

        Its own folder (sys.path[0] for a script), the roots, then, for a file inside a package,
        the package root (see _package_root) where the roots do not hold it: the folder a
        package's own absolute imports (`from pkg.util import x` in pkg/train.py) find it from
        when a checkout named like its package (fairseq/fairseq) is linted from above. After
        the roots, so that it resolves only what they do not. Its entry folder keys it: the
        rest follows from that.
        """
        search = self._searches.get(folder)
        if search is None:
            package_root = self._package_root(folder)
            extra = (package_root,) if package_root is not None and package_root not in self._root_texts else ()
            search = self._searches[folder] = (folder, *self._root_texts, *extra)
            # The folders of it that vary by entry: a lookup whose first part none of them holds
            # finds what the roots alone give, and is shared by every entry (see find_module).
            names = self._names_in(folder)
            if extra:
                names = names | self._names_in(extra[0])
            self._search_names[folder] = names
        return search

    def _real(self, path: Path) -> str:
        """The path resolved (as Path.resolve), once per run: an entry is resolved when it is read and when it is linted."""
        text = str(path)
        real = self._real_paths.get(text)
        if real is None:
            # Its folder resolved once for all its files, then one lstat: resolving each path whole
            # (an lstat per part of it) was about 2% of a run on torch's tree.
            folder, name = os.path.split(text)
            real_folder = self._real_paths.get(folder)
            if real_folder is None:
                real_folder = self._real_paths[folder] = str(Path(folder or ".").resolve())
            real = self._real_paths[text] = resolved_in(real_folder, name) or str(Path(os.path.join(real_folder, name)).resolve())
        return real

    def _add_import_base(self, folder: Path, package_root: bool = False) -> None:
        if not package_root and folder not in self._script_bases:
            self._script_bases[folder] = None
            self._provided_to_scripts.clear()
        if folder in self._import_bases:
            return
        # Not announced up front: modules read so far were checked without this folder.
        self._import_bases[folder] = None
        self._provided.clear()
        if any(self._provides(lib) for facts in self._facts.values() for lib in facts.dropped_libraries):
            self._facts.clear()
            self._any_facts.clear()
            self._modules.clear()
            self._found.clear()
            self._missing.clear()
            self._resolved.clear()
            self._resolved_in.clear()
            self._records.clear()
            self._programs.clear()
            self._reads_passed.clear()
            self._provided_libraries = None

    def adopt(self, facts: list[tuple[tuple[str, str], ModuleFacts]]) -> None:
        """Take facts read elsewhere (by another process), by (resolved path, package), as if read here."""
        for key, one in facts:
            if key not in self._facts:
                self._facts[key] = one
                self._any_facts.setdefault(key[0], one)

    def facts_of(self, path: str) -> ModuleFacts | None:
        """The facts of a module read so far, by its resolved path."""
        # Line texts and noqa comments, all that is asked for, do not depend on the package.
        return self._any_facts.get(path)

    def _dotted_name(self, path: Path, resolved: Path) -> str:
        """The name of a file linted as an entry: as the first root that holds it gives it; the stem outside them.

        Unless that name would not import the file: the root gives `pkg.pkg.train` to a checkout
        `pkg/` (no `__init__.py`) of a package `pkg/pkg/`, but `pkg` imports the regular package
        found from the package root, not that namespace folder. Then it is named by its package
        chain (`pkg.train`), as Python names it when run from the package root or installed.
        """
        for root in self.roots:
            try:
                rel = resolved.relative_to(root)
            except ValueError:
                continue
            name = _module_name(rel.parts)
            if name:
                break
        else:
            return path.stem
        folder = str(resolved.parent)
        package_root = self._package_root(folder)
        if package_root is not None:
            chain = _module_name(Path(os.path.relpath(str(resolved), package_root)).parts)
            if chain != name:
                found = self._locate(name, self._search_for(folder))[0]
                if found is None or self._real(Path(found)) != str(resolved):
                    return chain
        return name

    def find_module(self, dotted: str, search: tuple[str, ...]) -> Module | None:
        """The project file for a dotted module name, searching the entry's folder, the roots, then its package root."""
        head = dotted.partition(".")[0]
        if self._heads is not None:
            self._heads.add(head)
        # A folder can hold the module only if it holds something named like its first part. When
        # neither the entry's folder nor its package root does, the roots decide, and entries in
        # other folders share the answer.
        names = self._search_names.get(search[0])  # inline: this runs for every name every entry resolves
        if names is None:
            self._search_for(search[0])
            names = self._search_names[search[0]]
        key = (dotted, search if head in names else self._root_texts)
        found = self._found.get(key, _NOT_LOOKED_UP)
        if found is _NOT_LOOKED_UP:
            found = self._found[key] = self._find_module(dotted, key)
        return found

    def missing_module(self, dotted: str, search: tuple[str, ...]) -> str | None:
        """For a name find_module found nowhere: the module missing from a namespace package on the
        way (`ns.sub` of `ns.sub.x`, where `ns` is a folder without `__init__.py` and holds no `sub`)."""
        if not self._missing:
            return None
        key = (dotted, search if dotted.partition(".")[0] in self._search_names[search[0]] else self._root_texts)
        return self._missing.get(key)

    def _find_module(self, dotted: str, key: tuple[str, tuple[str, ...]]) -> Module | None:
        if not all(part.isidentifier() for part in dotted.split(".")):
            return None
        head = dotted.partition(".")[0]
        # Modules built into the interpreter (sys, itertools, time...) are found before any folder
        # is searched: a script beside its own `sys.py` still imports the real one. (Those of the
        # Python running lint: the same set on every CPython build of the versions supported.)
        # So are those start-up has already imported (frozen from 3.11 on): `import os` beside an
        # `os.py` returns the loaded module.
        if head in sys.builtin_module_names or head in _LOADED_AT_START_UP:
            return None
        found, missing = self._locate(dotted, key[1])
        if found is None:
            found = self._find_anywhere(dotted, key[1])
            if found is None and missing is not None:
                self._missing[key] = missing
        return self.module_at(Path(found), dotted) if found is not None else None

    def _locate(self, dotted: str, search: tuple[str, ...]) -> tuple[str | None, str | None]:
        """Where importing `dotted` finds its source file, as Python's path finder would: (the file or
        None, the module missing from a namespace package on the way, or None).

        One part at a time, each in the folders of the package before it (the search path for
        the first): in each folder a package (a folder with `__init__.py`) comes first, then a
        module, then a folder without `__init__.py`, which is only a namespace portion: a package
        or module in any later folder wins over it (PEP 420), and the portions of all folders
        make up the namespace package. Listings, each read once, tell which files may exist, as
        in Python's own FileFinder: a stat of each possible file for each name resolved was
        about 3% of linking torch's tree. Each listing read is in looked_at, so a package made
        later changes one the run cache checks.
        """
        parts = dotted.split(".")
        last = len(parts) - 1
        folders = search
        namespace = False  # the package before this part is a namespace package
        for i, part in enumerate(parts):
            portions = []
            package = module = None
            for folder in folders:
                if i == 0 and part not in self._names_in(folder):
                    continue
                listing = self._listing(folder)
                inside = None
                if part in listing:
                    sub = os.path.join(folder, part)
                    inside = self._listing(sub)
                    if "__init__.py" in inside:
                        if i < last:
                            package = sub
                            break
                        candidate = os.path.join(sub, "__init__.py")
                        if os.path.isfile(candidate):
                            return candidate, None
                if part + ".py" in listing:
                    candidate = os.path.join(folder, part + ".py")
                    if i < last or os.path.isfile(candidate):
                        module = candidate
                        break
                if any(part + suffix in listing for suffix in _NO_SOURCE):
                    return None, None  # a module without source: nothing to read, and it has no submodules
                if inside:
                    portions.append(sub)
            if i == last:
                # Found as a module (a package returned above), as a namespace package (no file), or not at all.
                if module is not None:
                    return module, None
                return None, (dotted if namespace and not portions else None)
            if package is not None:
                folders, namespace = (package,), False
            elif module is None and portions:
                folders, namespace = tuple(portions), True
            else:
                # A module has no submodules; a name found nowhere is missing, and said so below a namespace package.
                return None, (".".join(parts[: i + 1]) if namespace and module is None else None)
        return None, None  # pragma: no cover - the loop returns at the last part

    def _find_anywhere(self, dotted: str, search: tuple[str, ...]) -> str | None:
        """Where importing `dotted` raises in Python (see _locate), the file at its path under the first
        search folder that holds one, whatever comes before it on the way.

        Lenient, as lint always was: every file is linted as a script, from its own folder, and
        a package's module beside a module named like a top-level package (torch/_dynamo/variables/
        holds a `torch.py`) would import nothing of `torch.nn` run that way; it is run as a
        module of its package, where `torch.nn` is torch's.
        """
        head = dotted.partition(".")[0]
        inner, _, last = dotted.rpartition(".")
        inner = inner.replace(".", os.sep)
        for folder in search:
            if head not in self._names_in(folder):
                continue
            parent = os.path.join(folder, inner) if inner else folder
            listing = self._listing(parent)
            # A package comes before a module of the same name, as in FileFinder.find_spec. Were
            # the package made later, the parent's listing (in looked_at) would change.
            if last in listing and "__init__.py" in self._listing(os.path.join(parent, last)):
                candidate = os.path.join(parent, last, "__init__.py")
                if os.path.isfile(candidate):
                    return candidate
            if last + ".py" in listing:
                candidate = os.path.join(parent, last + ".py")
                if os.path.isfile(candidate):
                    return candidate
        return None

    # -- names ----------------------------------------------------------------

    def resolve(self, qualname: str, mod: Module, search: tuple[str, ...], depth: int = 0):
        """What a qualified name names: ("model", name, fn), ("function", Module, FunctionFacts),
        ("class", Module, ClassFacts) or None."""
        if depth > 8 or not qualname:
            return None
        key = (qualname, mod.path, mod.name)  # the name: results carry modules named as reached
        names = self._search_names.get(search[0])
        if names is None:
            self._search_for(search[0])
            names = self._search_names[search[0]]
        # Shared by every entry folder that holds none of the names looked up (see find_module).
        found = self._resolved.get(key)
        if found is None or not found[1].isdisjoint(names):
            found = self._resolved_in.get((key, search))
        outer = self._heads
        if found is None:
            self._heads = heads = set()
            try:
                found = (self._resolve(qualname, mod, search, depth), heads)
            finally:
                self._heads = outer
            if heads.isdisjoint(names) and key not in self._resolved:
                self._resolved[key] = found
            else:
                self._resolved_in[(key, search)] = found
        if outer is not None:
            outer |= found[1]
        return found[0]

    def _resolve(self, qualname: str, mod: Module, search: tuple[str, ...], depth: int):
        if qualname in MODELS:
            return ("model", qualname, MODELS[qualname])
        if qualname.startswith(THIS + "."):
            local = qualname[len(THIS) + 1 :]
            if "<" in local:  # `cls.name` or `super().name` in a method (facts.CLS_CALL, SUPER_CALL)
                return self.through_class(mod, local, None, search, depth)
            return self._in_module(mod, local, search, depth)
        parts = qualname.split(".")
        for i in range(len(parts) - 1, 0, -1):
            target = self.find_module(".".join(parts[:i]), search)
            if target is not None:
                return self._in_module(target, ".".join(parts[i:]), search, depth)
        return None

    def _in_module(self, mod: Module, local: str, search: tuple[str, ...], depth: int):
        facts = mod.facts
        if facts.stars:  # few modules have a star import
            found = self._through_stars(mod, local, search, depth)
            if found is not _NOT_STARRED:
                return found
        if local in facts.functions:
            return ("function", mod, facts.functions[local])
        if local in facts.classes:
            return ("class", mod, facts.classes[local])
        head, _, rest = local.partition(".")
        if head in facts.classes and rest:
            method = self.find_method(mod, facts.classes[head], rest, search, depth)
            if method:
                return method
        alias = facts.aliases.get(head)
        if alias and alias != f"{THIS}.{head}":  # re-exported from elsewhere, or another name (`Aug = RandomFlip`)
            return self.resolve(alias + ("." + rest if rest else ""), mod, search, depth + 1)
        return None

    def _through_stars(self, mod: Module, local: str, search: tuple[str, ...], depth: int):
        """What `local` names in `mod` where a star import of `mod` may bind its first part last, as Python
        binds names, in order: the last star import after the module's own last binding of it whose `*`
        has it. None where that is unknown (an `__all__` lint cannot read); _NOT_STARRED where none may.

        A module lint cannot read (a library's, a compiled one) is taken to bind none of the names it
        looks up, but the catalogue's (frameworks.STARRED)."""
        facts = mod.facts
        head = local.partition(".")[0]
        stars = facts.stars
        since = facts.star_bound.get(head, 0)  # the star imports before its own last binding are overridden
        for i in range(len(stars) - 1, since - 1, -1):
            dotted = stars[i]
            star = self.find_module(dotted, search)
            if star is None:
                if head in _STARRED_BY_MODULE.get(dotted, ()):
                    return self.resolve(f"{dotted}.{local}", mod, search, depth + 1)
                continue
            names = self._star_names(star, search)
            if names is None:
                return None
            if head in names:
                return self._in_module(star, local, search, depth + 1) if depth < 8 else None
        return _NOT_STARRED

    def _star_names(self, mod: Module, search: tuple[str, ...]) -> frozenset[str] | None:
        """The names `from mod import *` binds: its `__all__`, else its top-level names not starting with
        `_` (those its own star imports bind too); None where lint cannot read its `__all__`, or one of its
        star imports'. Worked out once per module, and per search path only where that decides it (as
        resolve's results); a module met again in a cycle of star imports gives what is known of it so far."""
        key = (mod.path, mod.name)
        names_here = self._search_names[search[0]]  # set up by resolve, which asks this
        found = self._star_sets.get(key)
        if found is None or not found[1].isdisjoint(names_here):
            found = self._star_sets_in.get((key, search))
        outer = self._heads
        if found is None:
            if key in self._star_busy:
                return frozenset()
            self._heads = heads = set()
            self._star_busy.add(key)
            try:
                found = (self._own_star_names(mod, search), heads)
            finally:
                self._heads = outer
                self._star_busy.discard(key)
            if heads.isdisjoint(names_here) and key not in self._star_sets:
                self._star_sets[key] = found
            else:
                self._star_sets_in[(key, search)] = found
        if outer is not None:
            outer |= found[1]
        return found[0]

    def _own_star_names(self, mod: Module, search: tuple[str, ...]) -> frozenset[str] | None:
        facts = mod.facts
        if facts.exports is not None:
            return None if facts.exports is UNREADABLE else frozenset(facts.exports)
        names = {n for n in facts.aliases if n[0] != "_"}
        names.update(n for n in facts.classes if n[0] != "_" and "." not in n)
        names.update(n for n in facts.functions if n[0] not in "_<" and "." not in n)
        if facts.stars:
            names.update(n for n in facts.star_bound if n[0] != "_")  # assignments too
            for dotted in facts.stars:
                star = self.find_module(dotted, search)
                if star is None:
                    names.update(_STARRED_BY_MODULE.get(dotted, ()))
                    continue
                more = self._star_names(star, search)
                if more is None:
                    return None
                names.update(n for n in more if n[0] != "_")
        return frozenset(names)

    def through_class(
        self, mod: Module, local: str, receiver: tuple[Module, ClassFacts] | None, search: tuple[str, ...], depth: int = 0
    ):
        """What `cls.name` or `super().name` in a method of a class of `mod` names (`local`: "C<cls>.name",
        as resolve gets it): for `cls`, the method as the class the method was called on has it
        (`receiver`: Task of `Task.main()`, which may override what C defines), else as C has it;
        for `super()`, as C's bases have it (a modelled class's constructor or method too)."""
        super_call = SUPER_CALL in local
        owner, _, name = local.partition(SUPER_CALL if super_call else CLS_CALL)
        cls = mod.facts.classes.get(owner)
        if cls is None or not name:
            return None
        if super_call:
            return self._in_bases(mod, cls, name, search, depth)
        if receiver is not None:
            mod, cls = receiver
        return self.find_method(mod, cls, name, search, depth)

    def find_method(self, mod: Module, cls: ClassFacts, name: str, search: tuple[str, ...], depth: int = 0):
        """A method looked up through the class and its bases; model keys for framework bases."""
        names = ("__call__", "forward") if name == "__call__" else (name,)
        for n in names:
            key = f"{cls.name}.{n}"
            if key in mod.facts.functions:
                return ("function", mod, mod.facts.functions[key])
        if cls.attrs and depth <= 8:  # an attribute its methods set to an object: `self.transform(img)` calls its class's
            attr, _, rest = name.partition(".")
            held = next((callee for a, callee in cls.attrs if a == attr), None)
            if held is not None:
                target = self.resolve(held, mod, search, depth + 1)
                if target and target[0] == "class":
                    return self.find_method(target[1], target[2], rest or "__call__", search, depth + 1)
                return None  # what a function built, or a library's object
        return self._in_bases(mod, cls, name, search, depth)

    def written_init_hook(self, mod: Module, cls: ClassFacts, search: tuple[str, ...], depth: int = 0) -> str | None:
        """Where building `cls` runs an __init__ that a class decorator wrote (`@dataclass`, `@attrs.define`;
        ClassFacts.post_init), the hook method it calls last, looked up on `cls` as Python does (the written
        __init__ calls no base's __init__). None where the __init__ that runs is one the project or a
        modelled class defines, or none is found."""
        found = self._written_hook(mod, cls, search, depth)
        return found or None

    def _written_hook(self, mod: Module, cls: ClassFacts, search: tuple[str, ...], depth: int) -> str | None:
        """written_init_hook's search: the hook, "" where a defined __init__ comes first, None where neither is found."""
        if cls.post_init:
            return cls.post_init
        if "__init__" in cls.methods or depth > 8:
            return ""
        for base in cls.bases:
            if not base:
                continue
            if f"{base}.__init__" in MODELS or base in MODELS:
                return ""
            target = self.resolve(base, mod, search, depth + 1)
            if target and target[0] == "class":
                found = self._written_hook(target[1], target[2], search, depth + 1)
                if found is not None:
                    return found
        return None

    def _in_bases(self, mod: Module, cls: ClassFacts, name: str, search: tuple[str, ...], depth: int):
        """find_method through the bases of `cls` alone, in order."""
        if depth > 8:
            return None
        names = ("__call__", "forward") if name == "__call__" else (name,)
        for base in cls.bases:
            if not base:
                continue
            for n in names:
                if f"{base}.{n}" in MODELS:
                    return ("model", f"{base}.{n}", MODELS[f"{base}.{n}"])
            if name == "__init__" and base in MODELS:  # a subclass of a modelled class, using its constructor
                return ("model", base, MODELS[base])
            target = self.resolve(base, mod, search, depth + 1)
            if target and target[0] == "class":
                found = self.find_method(target[1], target[2], name, search, depth + 1)
                if found:
                    return found
        return None

    def uses_cls(self, mod: Module, func: FunctionFacts) -> bool:
        """Whether what a function's body calls depends on the class it is called on: a method taking
        `cls` first (a classmethod) that calls `cls.name()` or `super().name()`."""
        key = (mod.path, func.qualname)
        found = self._uses_cls.get(key)
        if found is None:
            found = self._uses_cls[key] = func.params[:1] == ("cls",) and any(
                ev.what.__class__ is Call and ev.what.qualname and "<" in ev.what.qualname for ev in func.events
            )
        return found

    def is_loader(self, qualname: str, mod: Module, search: tuple[str, ...]) -> bool:
        """Whether calling `qualname` (as `mod` names it) builds a torch DataLoader from the arguments
        DataLoader takes: DataLoader itself, or a project class whose chain of single bases leads to it,
        each defining no `__init__` or one that passes `*args, **kwargs` on (ClassFacts.forwards_init).

        A subclass whose `__init__` takes other parameters is not one: which of them reach
        DataLoader's, and as what, lint does not follow (nor does it a chain through a class of
        several bases, where another base's `__init__` may come between).
        """
        for _ in range(8):  # as deep as find_method looks
            if qualname in DATALOADERS:
                return True
            target = self.resolve(qualname, mod, search)
            if target is None or target[0] != "class":
                return False
            mod, cls = target[1], target[2]
            if not cls.forwards_init or len(cls.bases) != 1 or not cls.bases[0]:
                return False
            qualname = cls.bases[0]
        return False

    def disables_grad(self, mod: Module, func: FunctionFacts, search: tuple[str, ...]) -> bool:
        """Whether a project decorator of `func` runs it with gradients off: `@smart_inference_mode()`, where
        that is a factory of decorators that do (FunctionFacts.grad_off), or `@decorator` where that is one."""
        for qualname, called in func.decorators:
            target = self.resolve(qualname, mod, search)
            if target is not None and target[0] == "function" and target[2].grad_off == (GRAD_OFF_FACTORY if called else GRAD_OFF_DECORATOR):
                return True
        return False

    # -- traces ---------------------------------------------------------------

    def trace(self, entry: Module, script: ConsoleScript | None = None) -> EntryTrace | None:
        """The ordered events of running `entry` as a script, through project calls; with `script`, of
        running that console script of the module: its top level, imported, then a call of the function
        it names. None where `script` names no function `entry` defines (a re-export, a class)."""
        # Folders as strings: a search path is hashed and compared for every name it resolves.
        search = self._search_for(os.path.dirname(entry.path))  # entry.path is resolved
        walker = _Walker(self, search, entry)
        if script is None:
            return EntryTrace(entry, walker.run(entry), walker)
        root = walker.run_script(entry, script)
        return EntryTrace(entry, root, walker, script=script) if root is not None else None




def _module_name(parts: tuple[str, ...]) -> str:
    """The dotted name of a module file from its path's parts below a search folder ('' for none)."""
    parts = list(parts)
    if parts:
        parts[-1] = os.path.splitext(parts[-1])[0]
        if parts[-1] == "__init__":
            parts.pop()
    return ".".join(parts)


def _load_key(path: Path, name: str, real: str) -> tuple[str, str]:
    """A module file's resolved path (`real`), and the package its relative imports start from."""
    # The name the file is reached under decides, as in Python: not the name a link leads to.
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return real, package


def _skipped(guards: tuple[ParamIf, ...], args: CallArgs, bound: bool) -> tuple[tuple[int, int], ...]:
    """The spans of a function's events that a call with `args` does not run: the branch of each guard
    (facts.ParamIf) that the literal its parameter is bound to does not take (see _bound_value)."""
    out = []
    for guard in guards:
        runs = guard.runs(_bound_value(guard, args, bound))
        if runs is UNKNOWN:
            continue
        start, end = (guard.mid, guard.end) if runs else (guard.start, guard.mid)
        if start < end:
            out.append((start, end))
    return tuple(out)


def _bound_value(guard: ParamIf | Forward, args: CallArgs, bound: bool) -> Any:
    """What a call with `args` binds a guard's parameter to, as Python binds a call's arguments (the
    reference's "Calls", https://docs.python.org/3/reference/expressions.html#calls): the keyword of its
    name (none for a positional-only one), else the positional argument at its place, else its default.
    UNKNOWN where a `*args` or `**kwargs` of the call may hold it, or the default is no literal.

    A method's positions are sure only for a call of its class (`bound`): a call of the method itself
    may be through an instance or through the class, one place later. Where neither place is reached,
    neither call passes it by position.
    """
    if guard.keyword:
        for key, value in args.kwargs:
            if key == guard.param:
                return value
    pos = guard.pos
    if pos is not None and pos < len(args.args):
        return UNKNOWN if guard.method and not bound else args.args[pos]
    return UNKNOWN if args.star else guard.default


def _forwarded_value(forward: Forward, args: CallArgs, bound: bool) -> Any:
    """What a call with `args` binds the parameter a Forward passes on to, where a guard may decide on it
    (facts.decidable, see _bound_value), or for a `**` parameter its items, (keyword, such a literal or
    UNKNOWN) pairs: the keywords no other parameter takes. UNKNOWN where not known (a `**` one: under a star)."""
    if forward.slot is None:
        if args.star:
            return UNKNOWN
        if forward.spill is not None and (len(args.args) > forward.spill or (forward.method and not bound and args.args)):
            return UNKNOWN  # `*args` holds what the call passes beyond the named positions (or may: see _bound_value)
        taken = forward.taken
        return tuple((key, _passable(value)) for key, value in args.kwargs if key not in taken)
    return _passable(_bound_value(forward, args, bound))


def _passable(value: Any) -> Any:
    """What a Forward passes on: a literal a guard may decide on (facts.decidable), or a settings object
    built in the script (Built: `TrainingArguments(...)`, which a framework's model reads); else UNKNOWN."""
    return value if value.__class__ is Built else decidable(value)


def _pass(args: CallArgs, slot: int | str | None, value: Any) -> CallArgs | None:
    """`args` of a call that passes a parameter on at `slot` (see Forward) with the parameter's `value` there;
    None where the facts read something there already (a settings object) or, for a `**` parameter's
    items, where one is a keyword the call passes itself (Python would refuse the call)."""
    if slot is None:
        given = {key for key, _ in args.kwargs}
        if any(key in given for key, _ in value):
            return None
        return CallArgs(args.args, args.kwargs + value, False)
    if slot.__class__ is int:
        if slot >= len(args.args) or args.args[slot] is not UNKNOWN:
            return None
        return CallArgs((*args.args[:slot], value, *args.args[slot + 1 :]), args.kwargs, args.star)
    kwargs = args.kwargs
    at = next((i for i, (key, _) in enumerate(kwargs) if key == slot), None)
    if at is None or kwargs[at][1] is not UNKNOWN:
        return None
    return CallArgs(args.args, (*kwargs[:at], (slot, value), *kwargs[at + 1 :]), args.star)


class _Passed(Frozen):
    """What a call of a function gave the calls of its body that pass a parameter on (FunctionFacts.forwards):
    (event index, slot, value) for each that got a value. Part of the memo of the function's walk, whose
    inner calls differ with it."""

    _fields = ("given",)
    __slots__ = _fields

    def __init__(self, given: tuple[tuple[int, int | str | None, Any], ...]):
        self.given = given



_HOOK_ARGS = CallArgs(star=True)  # a __post_init__ call: its InitVars, unknown

# The ops a _Record holds, in order.
_EMIT, _ENTER, _LOAD, _CLASS, _LIB, _SPAWN, _START, _DEFAULT = 0, 1, 2, 3, 4, 5, 6, 7
_UNSET = object()  # a record's need_start or sets_start where it neither reads nor sets the start method


class _Record:
    """One walk of a function body entered, or of a module's top level run on import, kept for reuse.

    Without it each entry walked, again, everything its imports run: on a tree
    where every file imports a package whose import runs most of the tree (torch's
    own source), the cost grew with the square of the tree. A walk depends on the
    walker's state only through the checks it makes, so a record keeps, beside
    what the walk did, what those checks found (as bit sets: one bit per module,
    one per function, numbered by the project):

    - `need_loaded` / `need_unloaded`: modules found loaded (or not) that it did not load itself;
    - `need_stacked` / `need_free`: functions found on the call stack (or not) that it did not enter itself;
      a function in a cycle stays on it after it returns, until the cycle's first one does (`blocks`
      are those it leaves there, see _Walker.enter);
    - `max_pass` / `min_cut`: the deepest depth check that passed and the shallowest that
      failed, relative to where it started;
    - `heads`: the first parts of the dotted names it looked up. An entry's own
      folder is searched before the roots (and its package root after them, see
      Project._search_for), so a record stands for any entry whose folder and package
      root provide none of them, or else only for entries with the same search path.

    Replayed where every check would come out the same, a record is exactly the
    walk it saves. Its events are kept relative to where it started (their `via`
    is completed, and `worker` set below a DataLoader's worker, when an entry's
    events are built).
    """

    __slots__ = (
        "ops", "count", "effects", "added", "heads", "search", "need_loaded", "need_unloaded",
        "need_stacked", "need_free", "max_pass", "min_cut", "start_loaded", "start_stack", "blocks", "classes", "libs",
        "names_ok", "walked", "spawns", "need_start", "sets_start",
    )  # fmt: skip

    def __init__(self, start_loaded: int, start_stack: int):
        self.ops: list[tuple] = []
        self.count = 0  # events, with those of the records inside
        self.effects: list[tuple[int, TraceEvent]] = []  # (position among the events, event): the non-calls, flattened
        self.added = 0  # modules loaded, inside records too
        self.heads: set[str] = set()
        self.search: tuple[str, ...] | None = None  # set when the record holds for one search path only
        self.need_loaded = self.need_unloaded = self.need_stacked = self.need_free = 0
        self.max_pass = -1
        self.min_cut = MAX_DEPTH + 1
        self.start_loaded = start_loaded  # the modules loaded when it began: those loaded since are its own
        self.start_stack = start_stack  # the functions on the stack when it began: those above are its own
        self.blocks = 0  # the functions it left on the stack: in a cycle with one below it (see _Walker.enter)
        self.classes: dict | None = None  # built when asked for
        # The top-level package of each import that ran and found no project file, with where it
        # first did, inside records too: built when asked for (see _libs_of).
        self.libs: dict[str, tuple[str, Loc]] | None = None
        self.names_ok: frozenset[str] | None = None  # the last entry folder's names found disjoint from `heads`
        self.walked: frozenset[tuple[str, str]] | None = None  # the functions entered inside: built when asked for
        self.spawns = False  # it holds a _SPAWN op, inside records too: a function handed to a fresh process
        # The start method a bare Process found set (before it set one itself), and the last one it set.
        self.need_start: object = _UNSET
        self.sets_start: object = _UNSET

    def ok_for(self, names: frozenset[str]) -> bool:
        self.names_ok = names
        return True


def _materialize(rec: _Record, prefix: tuple[Frame, ...], out: list[TraceEvent], worker: bool = False) -> bool:
    """Append a record's events to `out` with `prefix` before each one's frames (`worker`: run in
    DataLoader workers); False once out is full."""
    for op in rec.ops:
        kind = op[0]
        if kind == _EMIT:
            if len(out) >= MAX_EVENTS:
                return False
            ev = op[1]
            out.append(TraceEvent(ev.what, ev.path, ev.loc, prefix + ev.via, ev.api, worker) if prefix else ev)
        elif (kind == _ENTER or kind == _LOAD) and op[2].count:
            if not _materialize(op[2], prefix + op[3], out, worker or op[4]):
                return False
    return True


def _first_calls(root: _Record, skip_workers: bool, also, seen: set):
    """EntryTrace.first_calls below `root`, as _materialize would reach them; `seen` the places given
    (a call's apart from an `also` event's).

    One loop over a stack of the records being gone through, not a generator per record: each
    place given passed up through every level of nested generators (on torch's tree, 1.2M
    resumptions for 48,000 places). The first event past MAX_EVENTS ends it: nothing after it
    could be given.
    """
    left = MAX_EVENTS  # events left before MAX_EVENTS
    done: set[int] = set()  # the records gone through whole: a record met again adds no place
    stack: list[tuple] = []  # (ops left, prefix, worker, id) of the records whose walk is under way
    ops, prefix, worker, rid = iter(root.ops), (), False, None
    while True:
        for op in ops:
            kind = op[0]
            if kind == _EMIT:
                if left <= 0:
                    return
                left -= 1
                ev = op[1]
                cls = ev.what.__class__
                if (cls is Call or cls is also) and not (skip_workers and worker):
                    key = (cls is Call, ev.path, ev.loc)
                    if key not in seen:
                        seen.add(key)
                        yield TraceEvent(ev.what, ev.path, ev.loc, prefix + ev.via, ev.api, worker) if prefix else ev
            elif (kind == _ENTER or kind == _LOAD) and op[2].count:
                child, inner = op[2], worker or op[4]
                if id(child) in done or (skip_workers and inner):  # no place in it to give: only count its events
                    left -= child.count
                    if left <= 0:
                        return
                    continue
                stack.append((ops, prefix, worker, rid))
                ops, prefix, worker, rid = iter(child.ops), prefix + op[3], inner, id(child)
                break
        else:  # the record's ops are all gone through: whole, as the budget left then held its events
            if not stack:
                return
            done.add(rid)
            ops, prefix, worker, rid = stack.pop()


def _spawns(rec: _Record, pos: int, found: list, seen: set) -> int:
    """Append to `found` the _SPAWN ops below `rec` (each function's first), as (its _ENTER op, the starter's
    name, the number of events before it); return the number of events up to the end of `rec`."""
    for op in rec.ops:
        kind = op[0]
        if kind == _EMIT:
            pos += 1
        elif kind == _ENTER or kind == _LOAD:
            child = op[2]
            pos = _spawns(child, pos, found, seen) if child.spawns else pos + child.count
        elif kind == _SPAWN:
            enter = op[1]
            if enter[1] not in seen:
                seen.add(enter[1])
                found.append((enter, op[2], pos))
    return pos


def _entered_below(top: _Record, imports: bool = True) -> set[tuple[str, str]]:
    """Every function entered inside a record, by (path, qualname). Without `imports`, only those its own
    code calls, and those they call: not what an import runs (a module's top level, and what it calls)."""
    walked: set[tuple[str, str]] = set()
    seen: set[int] = set()
    pending_records = [top]
    while pending_records:
        rec = pending_records.pop()
        for op in rec.ops:
            if op[0] == _ENTER or (imports and op[0] == _LOAD):
                if op[0] == _ENTER:
                    walked.add(op[1])
                child = op[2]
                if id(child) not in seen:
                    seen.add(id(child))
                    pending_records.append(child)
    return walked


def _libs_of(rec: _Record) -> dict[str, tuple[str, Loc]]:
    """The packages a record's imports found no project file for, and the modules missing from a
    namespace package of the project (dotted), each with where it first ran (in execution order,
    inside records too), kept on the record: records are shared."""
    if rec.libs is None:
        out: dict[str, tuple[str, Loc]] = {}
        for op in rec.ops:
            kind = op[0]
            if kind == _LIB:
                if op[1] not in out:
                    out[op[1]] = op[2]
            elif kind == _ENTER or kind == _LOAD:
                for package, where in _libs_of(op[2]).items():
                    if package not in out:
                        out[package] = where
        rec.libs = out
    return rec.libs


def _classes_of(rec: _Record) -> dict:
    """The classes a record instantiated, inside records too: (path, name) -> (Module, ClassFacts), as a dict
    assigned them in that order would hold them."""
    if rec.classes is None:
        out: dict = {}
        for op in rec.ops:
            if op[0] == _CLASS:
                out[op[1]] = op[2]
            elif op[0] == _ENTER or op[0] == _LOAD:
                out.update(_classes_of(op[2]))
        rec.classes = out
    return rec.classes


class _Program:
    """What walking a body does whatever the walker's state: its events, and the imports and calls it may follow.

    Names are resolved once, here; a body walked again (by another entry, or in
    another state) replays these ops. `heads` and `search` as in _Record.
    """

    __slots__ = ("ops", "heads", "search")

    def __init__(self, ops: list[tuple], heads: set[str], search: tuple[str, ...] | None):
        # (_EMIT, event) (_LOAD, ((Module, Frame, bit, memo), ...))
        # (_ENTER, key, Module, FunctionFacts, Frame, worker, bit, memo, receiver, events): the walker's bit and memo,
        # worked out once; receiver as in _Walker.program; events: the function's, less the branches its guards skip
        # (_CLASS, key, value) (_LIB, package, (path, Loc)): an import that finds no project file
        # (_SPAWN, the _ENTER op, the starter's name): a function handed to a fresh process, not walked here
        # (_START, method): set_start_method(method) (_DEFAULT, the _ENTER op, the starter's name): a bare
        # Process's function, walked here or handed to a fresh process, as the start method set then says
        self.ops = ops
        self.heads = heads
        self.search = search


class _Walker:
    def __init__(self, project: Project, search: tuple[str, ...], entry: Module):
        self.project = project
        self.search = search
        self.entry = entry
        self.main = entry  # the script: a fresh process runs its top level again
        self.start: str | None = None  # the start method set_start_method chose; None: the default, read as fork
        self.calls = project.calls
        self.folder_names = project._search_names[search[0]]  # what sharing a walk depends on (see _Record.heads)
        self.module_bit, self.function_bit = project._module_bit, project._function_bit
        self.stack = 0  # the functions being walked
        # The modules whose top level has run. Not the entry's: it runs as __main__, and an
        # import of it under its own name runs the file again, as Python does (so every
        # entry of a package that imports itself replays the same records of that import).
        self.loaded = 0
        self.base = 0  # the depth at which the innermost record began
        self.rec: _Record = _Record(self.loaded, 0)

    def run(self, entry: Module) -> _Record:
        body = entry.facts.body
        # Without an `if __name__ == "__main__":` block, the script's top level is its import's: the one
        # program serves both (on a package's tree most entries are imported too, and compiled twice).
        memo = ("main", entry.path, entry.name) if entry.has_main_block else (_LOAD, entry.path, entry.name)
        self.walk(self.program(memo, entry, body, False))
        return self.rec

    def run_script(self, entry: Module, script: ConsoleScript) -> _Record | None:
        """As pip's script for `script` runs `entry`: `from module import attr`, then `attr()`; None where
        `attr` is no function of `entry` (the findings of one defined elsewhere would point outside it)."""
        target = self.project.resolve(f"{THIS}.{script.attr}", entry, self.search)
        if target is None or target[0] != "function" or target[1].path != entry.path:
            return None
        func = target[2]
        # Its events are the entry's own, at the function's definition: findings point where they would
        # under `if __name__ == "__main__": main()`, into the function's body and the calls it makes.
        start = Frame(entry.path, func.loc, f"{script.module}.{func.qualname}")
        self.load(((entry, start, self.module_bit(entry.path), (_LOAD, entry.path, entry.name)),))
        key = (entry.path, func.qualname)
        memo = (_ENTER, entry.path, entry.name, func.qualname)
        self.enter((_ENTER, key, entry, func, start, False, self.function_bit(key), memo, None, func.events))
        return self.rec

    # -- programs ----------------------------------------------------------------

    def program(
        self, memo: tuple, mod: Module, events, imported: bool, func: FunctionFacts | None = None, receiver: tuple | None = None
    ) -> _Program:
        """The program of walking `events`: a module's body, or (`func`) a function's; `receiver`: the class
        (Module, ClassFacts) a method using `cls` was called on, where not the class that defines it."""
        project = self.project
        for prog in project._programs.get(memo, ()):
            if prog.search == self.search if prog.search is not None else prog.heads.isdisjoint(self.folder_names):
                return prog
        outer, project._heads = project._heads, set()
        try:
            ops = self._compile(mod, events, imported, func, receiver)
        finally:
            heads, project._heads = project._heads, outer
        prog = _Program(ops, heads, None if heads.isdisjoint(self.folder_names) else self.search)
        project._programs.setdefault(memo, []).append(prog)
        return prog

    def _compile(
        self, mod: Module, events, imported: bool, func: FunctionFacts | None = None, receiver: tuple | None = None
    ) -> list[tuple]:
        """The ops of walking `events`; `imported`: the module body runs on import, not as a script; `func`:
        the function whose body they are; `receiver` as in program."""
        ops: list[tuple] = []
        emit = ops.append
        path, resolve, search = mod.path, self.project.resolve, self.search
        # Its calls run with gradients off under a project decorator that turns them off, as under @torch.no_grad().
        no_grad = func is not None and func.decorators and self.project.disables_grad(mod, func, search)
        skipping = 0  # depth inside guard blocks that do not run this way
        for i, ev in enumerate(events):
            what = ev.what
            cls = what.__class__
            if cls is Guard:
                if (what.when == "main") == imported:
                    skipping += 1 if what.begin else -1
                continue
            if skipping:
                continue
            if cls is Import:
                targets = []
                backend = None  # a library of BACKENDS it imports, which chooses its backend then
                for dotted in what.modules:
                    target = self.project.find_module(dotted, search)
                    if target is not None:
                        memo = (_LOAD, target.path, target.name)
                        targets.append((target, Frame(path, ev.loc, target.name), self.module_bit(target.path), memo))
                        continue
                    if targets:  # the modules before it load first
                        emit((_LOAD, tuple(targets)))
                        targets = []
                    package = dotted.partition(".")[0]
                    if package:
                        emit((_LIB, package, (path, ev.loc)))
                        missing = self.project.missing_module(dotted, search)
                        if missing is not None:  # kept apart from the packages by its dot (see EntryTrace.missing)
                            emit((_LIB, missing, (path, ev.loc)))
                        if package in BACKENDS and backend is None:
                            backend = package
                            emit((_EMIT, TraceEvent(Imported(package), path, ev.loc)))
                if targets:
                    emit((_LOAD, tuple(targets)))
                continue
            if cls is Loader:
                self._compile_loader(ops, mod, ev)
                continue
            if cls is not Call:
                emit((_EMIT, TraceEvent(what, path, ev.loc)))
                continue
            if no_grad and not what.no_grad:
                what = Call(what.qualname, what.method, what.args, what.refs, True)
                ev = Event(ev.loc, what)
            qualname = what.qualname
            if receiver is not None and qualname and CLS_CALL in qualname:
                target = self.project.through_class(mod, qualname[len(THIS) + 1 :], receiver, search)
            else:
                target = resolve(qualname, mod, search) if qualname else None
            self._compile_call(ops, mod, ev, qualname, target, func, receiver)
            if qualname in START_METHOD_SETTERS and method_set(what.args):
                ops.append((_START, method_set(what.args)))
            refs = what.refs
            if refs and i + 1 < len(events) and self._builds_loader(mod, events[i + 1].what):
                refs = ()  # a DataLoader's callbacks run where its Loader event, next, says (in workers or not)
            # A fresh process (spawn, forkserver) runs them in its own state: see EntryTrace.processes.
            method = start_method(qualname, what.args) if refs else None
            for ref in refs:  # functions handed to a runner: Fire(main), spawn(worker)
                ref_target = resolve(ref, mod, search)
                if ref_target and ref_target[0] == "function":
                    enter = self._enter_op(mod, ev, ref_target[1], ref_target[2])
                    if method in FRESH_METHODS:
                        ops.append((_SPAWN, enter, qualname))
                    else:
                        ops.append((_DEFAULT, enter, qualname) if method == "default" else enter)
        return ops

    def _compile_call(
        self, ops: list[tuple], mod: Module, ev, qualname, target, func: FunctionFacts | None = None, receiver: tuple | None = None
    ) -> None:
        path, loc, what = mod.path, ev.loc, ev.what
        if target is None:
            # A call that leads nowhere, and that the call filter would have left out of the
            # facts (a module read with every call, see Project.module_at), is no event. Nor is a
            # `cls.name()` or `super().name()` that leads nowhere (`super().__init__()` of a library's
            # class), unless its method name is one the filter keeps, as for a callee it cannot name.
            named = None if qualname is not None and "<" in qualname else qualname
            if self.calls is None or what.refs or self.calls.dropped_library(named, what.method) is None:
                ops.append((_EMIT, TraceEvent(what, path, loc, (), qualname)))
            return
        kind = target[0]
        if kind == "model":
            name, model = target[1], target[2]
            for effect in model(what.args):
                ops.append((_EMIT, TraceEvent(effect, path, loc, (), name)))
            # `super().__init__(...)` is the modelled call, for the rules that ask what was called. So is a
            # helper the project re-exports (`from common import set_seed`, `import *`), for the rules that ask
            # what the catalogue says of it (its idiom). A `cls.name()` keeps the name as written.
            named = name if "<" not in qualname or SUPER_CALL in qualname else qualname
            ops.append((_EMIT, TraceEvent(what, path, loc, (), named)))
        elif kind == "function":
            # Only a classmethod's calls depend on the class it is called on (inline: this runs for every call).
            callee = self._receiver(mod, qualname, target, func, receiver) if target[2].params[:1] == ("cls",) else None
            # `super().name(...)` passes `self` as a call of the class does: its positions are sure.
            bound = SUPER_CALL in qualname
            ops.append(self._enter_op(mod, ev, target[1], target[2], receiver=callee, args=what.args, bound=bound))
        elif kind == "class":
            cls_mod, cls = target[1], target[2]
            ops.append((_CLASS, (cls_mod.path, cls.name), (cls_mod, cls)))
            hook = self.project.written_init_hook(cls_mod, cls, self.search)
            if hook is not None:
                # A dataclass's (or attrs class's) __init__, written by its decorator, binds the fields and
                # then calls the hook with no arguments but InitVars: what it passes, lint does not read.
                init = self.project.find_method(cls_mod, cls, hook, self.search)
                args = _HOOK_ARGS
            else:
                init = self.project.find_method(cls_mod, cls, "__init__", self.search)
                args = what.args
            if init and init[0] == "function":
                ops.append(self._enter_op(mod, ev, init[1], init[2], args=args, bound=True))
            elif init and init[0] == "model" and hook is None:
                for effect in init[2](what.args):
                    ops.append((_EMIT, TraceEvent(effect, path, loc, (), init[1])))

    def _receiver(
        self, mod: Module, qualname: str, target: tuple, func: FunctionFacts | None, receiver: tuple | None
    ) -> tuple | None:
        """The class a call of a method that uses `cls` calls it on (see program): `Task` of `Task.main()`;
        the caller's own class (or the one it was called on) for `cls.name()` and `super().name()`. None
        for the class that defines the method, or where the callee does not use `cls`."""
        callee_mod, callee = target[1], target[2]
        if not self.project.uses_cls(callee_mod, callee):
            return None
        got = None
        if CLS_CALL in qualname or SUPER_CALL in qualname:  # cls passes on unchanged
            if receiver is not None:
                got = receiver
            elif func is not None:
                owner = mod.facts.classes.get(func.qualname.rpartition(".")[0])
                got = (mod, owner) if owner is not None else None
        elif "." in qualname:
            found = self.project.resolve(qualname.rpartition(".")[0], mod, self.search)
            if found is not None and found[0] == "class":
                got = (found[1], found[2])
        if got is None or (got[0] is callee_mod and got[1].name == callee.qualname.rpartition(".")[0]):
            return None
        return got

    def _builds_loader(self, mod: Module, what) -> bool:
        """Whether an event is a Loader whose call builds a DataLoader (see Project.is_loader)."""
        if what.__class__ is not Loader:
            return False
        return all(self.project.is_loader(q, mod, self.search) for q in what.classes)

    def _compile_loader(self, ops: list[tuple], mod: Module, ev) -> None:
        """A DataLoader iterates: its dataset's `__getitem__`/`__iter__` and its collate_fn run in the
        main process with `num_workers` 0 or absent, in reseeded workers with a literal > 0;
        worker_init_fn runs only in workers (after torch reseeds them)."""
        what = ev.what
        if not self._builds_loader(mod, what):
            return
        workers = what.num_workers
        in_workers = workers is not UNKNOWN and isinstance(workers, int) and workers > 0
        project, search = self.project, self.search
        runs = []
        if what.dataset:
            target = project.resolve(what.dataset, mod, search)
            if target and target[0] == "class":
                for name in ("__getitem__", "__iter__"):
                    method = project.find_method(target[1], target[2], name, search)
                    if method and method[0] == "function":
                        runs.append((method, in_workers))
        for qualname, worker in ((what.collate_fn, in_workers), (what.worker_init_fn, True)):
            target = project.resolve(qualname, mod, search) if qualname else None
            if target and target[0] == "function":
                runs.append((target, worker))
        for (_, target_mod, func), worker in runs:
            ops.append(self._enter_op(mod, ev, target_mod, func, worker))

    def _enter_op(
        self,
        mod: Module,
        ev,
        target_mod: Module,
        func: FunctionFacts,
        worker: bool = False,
        receiver: tuple | None = None,
        args: CallArgs | None = None,
        bound: bool = False,
    ) -> tuple:
        """The op that enters `func`; with the call's `args` (`bound`: a call of its class, which passes `self`),
        without the events of the branches its guards leave out for them (see _skipped)."""
        display = f"{target_mod.name}.{func.qualname}" if target_mod.name else func.qualname
        key = (target_mod.path, func.qualname)
        memo = (_ENTER, target_mod.path, target_mod.name, func.qualname)
        if receiver is not None:  # walked apart for each class it is called on: its `cls.name()` calls differ
            memo += (receiver[0].path, receiver[0].name, receiver[1].name)
        events = func.events
        if func.forwards and args is not None:
            passed = self._pass_on(target_mod, func, args, bound)
            if passed is not None:  # walked, and shared, apart from the body as it is read
                memo = (*memo, passed[0])
                events = passed[1]
        if func.guards and args is not None:
            skipped = _skipped(func.guards, args, bound)
            if skipped:  # walked, and shared, apart from the body as a whole
                memo = (*memo, skipped)
                events = [ev for i, ev in enumerate(events) if not any(start <= i < end for start, end in skipped)]
        frame = Frame(mod.path, ev.loc, display)
        return (_ENTER, key, target_mod, func, frame, worker, self.function_bit(key), memo, receiver, events)

    def _pass_on(self, mod: Module, func: FunctionFacts, args: CallArgs, bound: bool) -> tuple[_Passed, list] | None:
        """What a call with `args` (`bound` as in _enter_op) gives the calls in the body of `func` (of `mod`) that
        pass one of its parameters on (its Forwards): the literal it binds the parameter to, where that call's
        callee may read it (it has guards or Forwards of its own: other callees would only be walked apart for
        nothing). With `func`'s events, those calls' arguments so; None where it gives none."""
        events = func.events
        given = []
        changed: dict[int, CallArgs] = {}
        reads: dict[int, bool] = {}
        for forward in func.forwards:
            value = _forwarded_value(forward, args, bound)
            if value is UNKNOWN:
                continue
            at = forward.event
            what = events[at].what
            if at not in reads:
                reads[at] = self._reads_passed(mod, what.qualname)
            if reads[at]:
                call_args = _pass(changed.get(at, what.args), forward.slot, value)
                if call_args is not None:
                    changed[at] = call_args
                    given.append((at, forward.slot, value))
        if not changed:
            return None
        out = list(events)
        for at, call_args in changed.items():
            ev = events[at]
            what = ev.what
            out[at] = Event(ev.loc, Call(what.qualname, what.method, call_args, what.refs, what.no_grad))
        return _Passed(tuple(given)), out

    def _reads_passed(self, mod: Module, qualname: str, depth: int = 0) -> bool:
        """Whether what a call of `qualname` in `mod` enters may read the arguments it is given: a project
        function (a class's `__init__`) with guards, or with Forwards to a callee that reads in turn. Most
        chains of Forwards end in no guard: walking each literal apart along them, for nothing, cost a
        tenth of a cold run on torch's own source."""
        project = self.project
        target = project.resolve(qualname, mod, self.search)
        if target is not None and target[0] == "class":
            target = project.find_method(target[1], target[2], "__init__", self.search)
        if target is not None and target[0] == "model":
            return True  # a framework's model reads its arguments (a Trainer subclass's `super().__init__(**kwargs)`)
        if target is None or target[0] != "function":
            return False
        func = target[2]
        if func.guards:
            return True
        if not func.forwards or depth >= 8:  # as deep as find_method looks
            return False
        key = (self.search, target[1].path, func.qualname)
        memo = project._reads_passed
        found = memo.get(key)
        if found is None:
            memo[key] = False  # a cycle of Forwards reads nothing it does not read already
            callee_mod, events = target[1], func.events
            found = memo[key] = any(self._reads_passed(callee_mod, events[f.event].what.qualname, depth + 1) for f in func.forwards)
        return found

    # -- walking -----------------------------------------------------------------

    def walk(self, prog: _Program) -> None:
        """Replay a program's ops in the walker's state, into the innermost record."""
        rec = self.rec
        if not prog.heads <= rec.heads:
            rec.heads |= prog.heads
        out = rec.ops
        for op in prog.ops:
            kind = op[0]
            if kind == _EMIT:
                if op[1].what.__class__ is not Call:
                    rec.effects.append((rec.count, op[1]))
                out.append(op)
                rec.count += 1
            elif kind == _ENTER:
                self.enter(op)
            elif kind == _LOAD:
                self.load(op[1])
            elif kind == _LIB:  # kept where the import is not too deep to follow, as load() would
                if not self._deep():
                    out.append(op)
            elif kind == _START:
                self.start = rec.sets_start = op[1]
            elif kind == _DEFAULT:
                if rec.sets_start is _UNSET and rec.need_start is _UNSET:
                    rec.need_start = self.start  # what the record depends on
                if self.start in FRESH_METHODS:
                    rec.spawns = True
                    out.append((_SPAWN, op[1], op[2]))
                else:
                    self.enter(op[1])
            else:
                if kind == _SPAWN:
                    rec.spawns = True
                out.append(op)

    def _deep(self) -> bool:
        """Whether a call or import here is too deep to follow; what the record depends on."""
        # Inside a record every walk starts afresh, so the depth is where the record began.
        # (load and enter do the same inline.)
        rec = self.rec
        if self.base >= MAX_DEPTH:
            rec.min_cut = 0
            return True
        if rec.max_pass < 0:
            rec.max_pass = 0
        return False

    def load(self, targets: tuple) -> None:
        """Run the top level of each project module an import loads, once per process, as Python does."""
        rec = self.rec
        if self.base >= MAX_DEPTH:  # as _deep()
            rec.min_cut = 0
            return
        if rec.max_pass < 0:
            rec.max_pass = 0
        for target, frame, bit, memo in targets:
            if self.loaded & bit:
                if rec.start_loaded & bit:
                    rec.need_loaded |= bit
                continue
            rec.need_unloaded |= bit
            self.loaded |= bit
            rec.added |= bit
            self.sub(memo, target, target.facts.body, frame, target.path, True, False)

    def enter(self, op: tuple) -> None:
        _, key, target_mod, func, frame, worker, bit, memo, receiver, events = op
        rec = self.rec
        if self.stack & bit:
            if rec.start_stack & bit:
                rec.need_stacked |= bit
            return
        rec.need_free |= bit
        if self.base >= MAX_DEPTH:  # as _deep()
            rec.min_cut = 0
            return
        if rec.max_pass < 0:
            rec.max_pass = 0
        outer = self.stack
        self.stack = outer | bit
        walked = self.sub(memo, target_mod, events, frame, key, False, worker, func, receiver)
        if not walked.need_stacked & ~bit:
            # It came round to no function below it: what it left entered (itself, and the
            # functions of its cycles) may run again.
            self.stack = outer
        # Else it is in a cycle with a function still being walked: it stays entered, with what
        # it left entered, until that one returns, so that a cycle's functions are walked once
        # each, not once per path through the cycle (a call met again adds nothing: its effects
        # are in the walk already made).

    def sub(
        self, memo: tuple, mod: Module, events, frame: Frame, what, imported: bool, worker: bool,
        func: FunctionFacts | None = None, receiver: tuple | None = None,
    ) -> _Record:  # fmt: skip
        """Walk `events` one call or import below the current point, or replay a record of that walk that holds.

        `worker`: they run in a DataLoader's worker processes (which does not change the walk); `func`: the
        function whose body they are; `receiver` as in program."""
        parent = self.rec
        base = self.base + 1
        found = None
        shared = self.project._records.get(memo)
        if shared is not None:
            found = self._holding(shared, base)
        if found is not None:
            rec = found
            self.loaded |= rec.added
            self.stack |= rec.blocks
            if rec.sets_start is not _UNSET:
                self.start = rec.sets_start
        else:
            prog = self.program(memo, mod, events, imported, func, receiver)
            rec = self.rec = _Record(self.loaded, self.stack)
            self.base = base
            try:
                self.walk(prog)
            finally:
                self.rec, self.base = parent, base - 1
            rec.blocks = self.stack & ~rec.start_stack
            if not rec.heads.isdisjoint(self.folder_names):
                rec.search = self.search
            self.project._records.setdefault(memo, []).append(rec)
        child_via = (frame,)
        self._absorb(parent, rec, child_via, worker)
        parent.ops.append((memo[0], what, rec, child_via, worker))
        return rec

    def _holding(self, records: list[_Record], base: int) -> _Record | None:
        """The first of `records` such that walking again here would do exactly what it did."""
        loaded, stack, names = self.loaded, self.stack, self.folder_names
        for rec in records:
            if (
                base + rec.max_pass < MAX_DEPTH <= base + rec.min_cut
                and not rec.need_unloaded & loaded
                and rec.need_loaded & loaded == rec.need_loaded
                and not rec.need_free & stack
                and rec.need_stacked & stack == rec.need_stacked
                and (rec.need_start is _UNSET or rec.need_start == self.start)
            ):
                if rec.search is not None:
                    if rec.search == self.search:
                        return rec
                # Whether its lookups miss this entry's folder: asked again for every entry there.
                elif rec.names_ok is names or (rec.heads.isdisjoint(names) and rec.ok_for(names)):
                    return rec
        return None

    def _absorb(self, parent: _Record, rec: _Record, child_via: tuple[Frame, ...], worker: bool) -> None:
        """Add what a record inside `parent` did, and depended on, to `parent`."""
        offset = len(child_via)
        if rec.max_pass >= 0 and offset + rec.max_pass > parent.max_pass:
            parent.max_pass = offset + rec.max_pass
        if offset + rec.min_cut < parent.min_cut:
            parent.min_cut = offset + rec.min_cut
        if not rec.heads <= parent.heads:
            parent.heads |= rec.heads
        parent.need_loaded |= rec.need_loaded & parent.start_loaded
        parent.need_unloaded |= rec.need_unloaded
        parent.need_stacked |= rec.need_stacked & parent.start_stack
        parent.need_free |= rec.need_free
        parent.added |= rec.added
        if rec.spawns:
            parent.spawns = True
        if rec.need_start is not _UNSET and parent.need_start is _UNSET and parent.sets_start is _UNSET:
            parent.need_start = rec.need_start
        if rec.sets_start is not _UNSET:
            parent.sets_start = rec.sets_start
        count = parent.count
        parent.effects += [
            (count + pos, TraceEvent(e.what, e.path, e.loc, child_via + e.via, e.api, worker or e.worker))
            for pos, e in rec.effects
        ]  # fmt: skip
        parent.count = count + rec.count

    # -- what may run in no known order ----------------------------------------

    @staticmethod
    def walked(root: _Record) -> set[tuple[str, str]]:
        """Every function entered on the way, by (path, qualname)."""
        # What is entered below each of the root's own imports and calls is kept on that record:
        # records are shared, and most entries of a package begin with the same `import` of it.
        walked: set[tuple[str, str]] = set()
        for op in root.ops:
            if op[0] == _ENTER or op[0] == _LOAD:
                if op[0] == _ENTER:
                    walked.add(op[1])
                child = op[2]
                if child.walked is None:
                    child.walked = frozenset(_entered_below(child))
                walked |= child.walked
        return walked

    def reachable(self, root: _Record, others: frozenset[tuple[str, str]] = frozenset()) -> list[TraceEvent]:
        """Calls of every function of the entry module and of the classes instantiated, and what they reach;
        not of `others` (run by another process)."""
        self.classes = dict(_classes_of(root))  # instantiated, in the order they first were
        calls: list[TraceEvent] = []
        done = self.walked(root) | others
        pending = [(self.entry, f) for f in self.entry.facts.functions.values()]
        pending += self.instantiated_methods()
        classes, push = self.classes, pending.append
        while pending:
            mod, func = pending.pop()
            key = (mod.path, func.qualname)
            if key in done:
                continue
            done.add(key)
            found, steps = self._calls_of(mod, func)
            calls.extend(found)
            for step in steps:
                if step[0] is not None:  # a function, left out where it is done already (it would be passed over)
                    if step[0] not in done:
                        push((step[1], step[2]))
                elif step[1] not in classes:  # a class instantiated: its methods may run
                    classes[step[1]] = step[2]
                    pending.extend(step[3])
        return calls

    def uncalled(self, root: _Record, others: frozenset[tuple[str, str]] = frozenset()) -> list[TraceEvent]:
        """The events of the entry module's functions and methods that its run never entered, and of
        what they call and import, each function walked once (the order does not matter here).

        A walk of its own from a fresh state (only the entry loaded), over the shared programs,
        without records: those hold for walks that enter a function again. The events keep
        their own `via`, relative to the function they are in. `others`: functions another
        process of the run walks, not uncalled.
        """
        entry, out = self.entry, []
        walked = self.walked(root) | others
        loaded, stack = {entry.path}, set()

        def walk(prog: _Program, depth: int) -> None:
            for op in prog.ops:
                kind = op[0]
                if kind == _EMIT:
                    if len(out) < MAX_EVENTS:
                        out.append(op[1])
                elif kind == _ENTER:
                    enter(op[1], op[2], op[3], depth, op[7], op[8], op[9])
                elif kind == _DEFAULT:  # walked as a fork's, whatever the start method: the order is not known here
                    enter(op[1][1], op[1][2], op[1][3], depth, op[1][7], op[1][8], op[1][9])
                elif kind == _LOAD and depth < MAX_DEPTH:
                    for target, *_ in op[1]:
                        if target is not None and target.path not in loaded:
                            loaded.add(target.path)
                            memo = (_LOAD, target.path, target.name)
                            walk(self.program(memo, target, target.facts.body, True), depth + 1)

        def enter(
            key: tuple[str, str], mod: Module, func: FunctionFacts, depth: int, memo: tuple, receiver: tuple | None, events: list
        ) -> None:
            if key in stack or depth >= MAX_DEPTH or key in walked:
                return
            stack.add(key)
            walked.add(key)
            walk(self.program(memo, mod, events, False, func, receiver), depth + 1)
            stack.discard(key)

        for func in entry.facts.functions.values():
            if func.qualname != "<class bodies>":
                enter((entry.path, func.qualname), entry, func, 0, (_ENTER, entry.path, entry.name, func.qualname), None, func.events)
        return out

    def processes(self, root: _Record) -> list[EntryTrace]:
        """The fresh processes a run's record starts (EntryTrace.processes), each walked from a fresh state."""
        found: list = []
        _spawns(root, 0, found, set())
        out = []
        for enter, api, pos in found[:MAX_PROCESSES]:
            inherited = [e for p, e in root.effects if p < pos and e.what.__class__ is EnvWrite]
            out.append(self._process(enter, api, inherited))
        return out

    def _process(self, enter: tuple, api: str, inherited: list[TraceEvent]) -> EntryTrace:
        _, key, target_mod, func, call, _, bit, memo, receiver, events = enter  # `call`: the starter's call site
        walker = _Walker(self.project, self.search, target_mod)
        walker.main = main = self.main
        root = walker.rec
        for event in inherited:  # the environment it starts with: set by the parent, as it was set there
            root.effects.append((root.count, event))
            root.ops.append((_EMIT, event))
            root.count += 1
        # Where the process begins, for the frames of its events: the function's definition, so that
        # its findings point into its module (`TraceEvent.anchor`), where its own setup belongs.
        start = Frame(target_mod.path, func.loc, call.callee)
        loads = [(main, start, self.module_bit(main.path), (_LOAD, main.path, main.name))]
        if target_mod.path != main.path:  # unpickling the function imports its module
            loads.append((target_mod, start, self.module_bit(target_mod.path), (_LOAD, target_mod.path, target_mod.name)))
        walker.load(tuple(loads))
        walker.enter((_ENTER, key, target_mod, func, start, False, bit, memo, receiver, events))
        return EntryTrace(target_mod, root, walker, Frame(call.path, call.loc, api))

    def instantiated_methods(self):
        out = []
        for cls_mod, cls in self.classes.values():
            for name in cls.methods:
                func = cls_mod.facts.functions.get(f"{cls.name}.{name}")
                if func:
                    out.append((cls_mod, func))
            bodies = cls_mod.facts.functions.get("<class bodies>")
            if bodies:
                out.append((cls_mod, bodies))
            for base in cls.bases:
                target = self.project.resolve(base, cls_mod, self.search) if base else None
                if target and target[0] == "class":
                    for name in target[2].methods:
                        func = target[1].facts.functions.get(f"{target[2].name}.{name}")
                        if func:
                            out.append((target[1], func))
        return out

    def _calls_of(self, mod: Module, func: FunctionFacts) -> tuple[list[TraceEvent], list[tuple]]:
        """A function's call events, and the project functions and classes they name, shared like a program.

        Each function named as ((path, qualname), Module, FunctionFacts), each class as (None, (path, name),
        (Module, ClassFacts), its methods as (Module, FunctionFacts)): worked out once, not on every entry's
        reachable walk that meets it.
        """
        project = self.project
        memo = ("calls", mod.path, mod.name, func.qualname)
        for prog in project._programs.get(memo, ()):
            if prog.search == self.search if prog.search is not None else prog.heads.isdisjoint(self.folder_names):
                return prog.ops
        outer, project._heads = project._heads, set()
        calls, targets = [], []
        try:
            no_grad = func.decorators and project.disables_grad(mod, func, self.search)  # as _compile
            for ev in func.events:
                call = ev.what
                if call.__class__ is not Call:
                    continue
                if no_grad and not call.no_grad:
                    call = Call(call.qualname, call.method, call.args, call.refs, True)
                q = call.qualname
                calls.append(TraceEvent(call, mod.path, ev.loc, (), q))
                target = project.resolve(q, mod, self.search) if q else None
                if target is None:
                    continue
                if target[0] == "function":
                    targets.append(((target[1].path, target[2].qualname), target[1], target[2]))
                elif target[0] == "class":
                    cls_mod, cls = target[1], target[2]
                    functions = cls_mod.facts.functions
                    methods = [(cls_mod, functions[f"{cls.name}.{m}"]) for m in cls.methods if f"{cls.name}.{m}" in functions]
                    targets.append((None, (cls_mod.path, cls.name), (cls_mod, cls), methods))
        finally:
            heads, project._heads = project._heads, outer
        prog = _Program((calls, targets), heads, None if heads.isdisjoint(self.folder_names) else self.search)
        project._programs.setdefault(memo, []).append(prog)
        return prog.ops
