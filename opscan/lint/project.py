"""The project pass: link module facts into what executes from each entry point.

An entry point is a linted file run as a script: its top level, its
`if __name__ == "__main__":` block and, transitively, the project functions and
methods those call, including ones imported from the project's other modules,
and the top level of each project module it imports (once, when the import
runs, without that module's `__main__` block). Calls of modelled APIs (torch,
numpy, random, os, and the framework helpers) become effects at the call site.
The result is an ordered trace of events, each remembering the chain of call
sites that led to it from the entry.
"""

from __future__ import annotations

from pathlib import Path

from opscan._plain import Frozen, Plain
from opscan.lint.facts import THIS, ClassFacts, FunctionFacts, ModuleFacts
from opscan.lint.model import UNKNOWN, Call, Guard, Import, Loader, Loc
from opscan.lint.modelled import MODELS

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up ~3 ms; annotations are strings here
    from typing import Callable

    from opscan.lint.model import Effect

MAX_DEPTH = 40
MAX_EVENTS = 50_000


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
        # The deepest point still in the entry file: the event itself, or the
        # call of the helper (in another module) that led to it.
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


class EntryTrace(Plain):
    _fields = ("entry", "events", "reachable_calls", "truncated", "uncalled", "libraries")
    __slots__ = _fields

    def __init__(self, entry: Module):
        self.entry = entry
        self.events: list[TraceEvent] = []  # in execution order
        # Calls that may run but whose order is unknown: all of the entry module's
        # functions, methods of classes it instantiates, class bodies.
        self.reachable_calls: list[TraceEvent] = []
        self.truncated = False
        # () -> the events of the entry module's functions and methods that its run never calls
        # (other code may: they are entry points too), each walked once; computed when asked.
        self.uncalled: Callable[[], list[TraceEvent]] = list
        # The top-level package of each import that runs and finds no project file ("torch",
        # "numpy", a project package the roots miss), with where it was first imported.
        self.libraries: dict[str, tuple[str, Loc]] = {}


class Project:
    """Finds and caches modules, resolves qualified names, builds entry traces."""

    def __init__(self, load_facts: Callable[..., ModuleFacts], roots: list[Path], entry_dirs: list[Path] = ()):
        # load_facts(path, package, keep_all=False) -> ModuleFacts; keep_all: record every call.
        self._load_facts = load_facts
        self.roots = [r.resolve() for r in roots]
        # Every folder an import may be searched in: the roots, and each entry's own folder.
        self._import_bases = list(dict.fromkeys([*(d.resolve() for d in entry_dirs), *self.roots]))
        self._provided: dict[str, bool] = {}
        # By (resolved path, package): relative imports, and so the facts, depend on the package.
        self._facts: dict[tuple[str, str], ModuleFacts] = {}
        self._any_facts: dict[str, ModuleFacts] = {}  # by path alone, for facts_of
        # By (path, dotted name): a file reached under two names (as an entry, and as imported
        # by a script) is named in messages as that script imports it, whatever ran first.
        self._modules: dict[tuple[str, str], Module] = {}
        self._found: dict[tuple[str, tuple[Path, ...]], Module | None] = {}
        self._resolved: dict[tuple[str, str, str, tuple[Path, ...]], object] = {}

    # -- modules --------------------------------------------------------------

    def module_at(self, path: Path, name: str) -> Module:
        key, package = _load_key(path, name)
        mod = self._modules.get((key, name))
        if mod is None:
            facts = self._facts.get((key, package))
            if facts is None:
                facts = self._load_facts(key, package)
                if any(self._provides(lib) for lib in facts.dropped_libraries):
                    # Calls into a package the project itself provides were left out as library
                    # calls (see opscan.lint.relevance): read this module again with every call.
                    facts = self._load_facts(key, package, keep_all=True)
                self._facts[(key, package)] = facts
                self._any_facts.setdefault(key, facts)
            mod = self._modules[(key, name)] = Module(key, name, facts)
        return mod

    def _provides(self, package: str) -> bool:
        """Whether an import of `package` (or of a module under it) could find a project file."""
        found = self._provided.get(package)
        if found is None:
            found = self._provided[package] = any(
                (base / package).is_dir() or (base / f"{package}.py").is_file() for base in self._import_bases
            )
        return found

    def entry_module(self, path: Path) -> Module:
        self._add_import_base(Path(path).resolve().parent)
        return self.module_at(path, self._dotted_name(path))

    def _add_import_base(self, folder: Path) -> None:
        if folder in self._import_bases:
            return
        # Not announced up front: modules read so far were checked without this folder.
        self._import_bases.append(folder)
        self._provided.clear()
        if any(self._provides(lib) for facts in self._facts.values() for lib in facts.dropped_libraries):
            self._facts.clear()
            self._any_facts.clear()
            self._modules.clear()
            self._found.clear()
            self._resolved.clear()

    def facts_of(self, path: str) -> ModuleFacts | None:
        """The facts of a module read so far, by its resolved path."""
        # Line texts and noqa comments, all that is asked for, do not depend on the package.
        return self._any_facts.get(path)

    def _dotted_name(self, path: Path) -> str:
        resolved = path.resolve()
        for root in self.roots:
            try:
                rel = resolved.relative_to(root)
            except ValueError:
                continue
            parts = list(rel.with_suffix("").parts)
            if parts and parts[-1] == "__init__":
                parts.pop()
            if parts:
                return ".".join(parts)
        return path.stem

    def find_module(self, dotted: str, search: list[Path]) -> Module | None:
        """The project file for a dotted module name, searching the entry's folder, then the roots."""
        key = (dotted, tuple(search))
        if key not in self._found:
            self._found[key] = self._find_module(dotted, search)
        return self._found[key]

    def _find_module(self, dotted: str, search: list[Path]) -> Module | None:
        if not all(part.isidentifier() for part in dotted.split(".")):
            return None
        rel = Path(*dotted.split("."))
        for base in search:
            for candidate in (base / rel.with_suffix(".py"), base / rel / "__init__.py"):
                if candidate.is_file():
                    return self.module_at(candidate, dotted)
        return None

    # -- names ----------------------------------------------------------------

    def resolve(self, qualname: str, mod: Module, search: list[Path], depth: int = 0):
        """What a qualified name names: ("model", name, fn), ("function", Module, FunctionFacts),
        ("class", Module, ClassFacts) or None."""
        if depth > 8 or not qualname:
            return None
        key = (qualname, mod.path, mod.name, tuple(search))  # the name: results carry modules named as reached
        if key not in self._resolved:
            self._resolved[key] = self._resolve(qualname, mod, search, depth)
        return self._resolved[key]

    def _resolve(self, qualname: str, mod: Module, search: list[Path], depth: int):
        if qualname in MODELS:
            return ("model", qualname, MODELS[qualname])
        if qualname.startswith(THIS + "."):
            return self._in_module(mod, qualname[len(THIS) + 1 :], search, depth)
        parts = qualname.split(".")
        for i in range(len(parts) - 1, 0, -1):
            target = self.find_module(".".join(parts[:i]), search)
            if target is not None:
                return self._in_module(target, ".".join(parts[i:]), search, depth)
        return None

    def _in_module(self, mod: Module, local: str, search: list[Path], depth: int):
        facts = mod.facts
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
        if alias and not alias.startswith(THIS + "."):  # re-exported from elsewhere
            return self.resolve(alias + ("." + rest if rest else ""), mod, search, depth + 1)
        return None

    def find_method(self, mod: Module, cls: ClassFacts, name: str, search: list[Path], depth: int = 0):
        """A method looked up through the class and its bases; model keys for framework bases."""
        names = ("__call__", "forward") if name == "__call__" else (name,)
        for n in names:
            key = f"{cls.name}.{n}"
            if key in mod.facts.functions:
                return ("function", mod, mod.facts.functions[key])
        if depth > 8:
            return None
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

    # -- traces ---------------------------------------------------------------

    def trace(self, entry: Module) -> EntryTrace:
        """The ordered events of running `entry` as a script, through project calls."""
        search = [Path(entry.path).parent.resolve()] + self.roots
        result = EntryTrace(entry)
        walker = _Walker(self, search, result)
        walker.walk(entry, entry.facts.body, ())
        result.uncalled = _memo(lambda ran=frozenset(walker.walked): self._uncalled(entry, search, ran))
        # Unordered but reachable: every function of the entry module and of instantiated classes.
        done = set(walker.walked)
        pending = [(entry, f) for f in entry.facts.functions.values()]
        pending += walker.instantiated_methods()
        while pending:
            mod, func = pending.pop()
            if (mod.path, func.qualname) in done:
                continue
            done.add((mod.path, func.qualname))
            calls, more = walker.collect_calls(mod, func)
            result.reachable_calls.extend(calls)
            pending.extend(more)
        return result


    def _uncalled(self, entry: Module, search: list[Path], ran: frozenset) -> list[TraceEvent]:
        """The effects of the entry module's functions and methods that its run never called."""
        out = EntryTrace(entry)
        walker = _Walker(self, search, out, once=True)
        walker.walked |= ran
        for func in entry.facts.functions.values():
            if func.qualname != "<class bodies>" and (entry.path, func.qualname) not in walker.walked:
                walker.enter(entry, Frame(entry.path, func.loc, func.qualname), entry, func, ())
        return out.events


def _memo(compute):
    """`compute()` once, on the first call."""
    done: list = []

    def get():
        if not done:
            done.append(compute())
        return done[0]

    return get


def _load_key(path: Path, name: str) -> tuple[str, str]:
    """A module file's resolved path, and the package its relative imports start from."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return str(path.resolve()), package


class _Walker:
    def __init__(self, project: Project, search: list[Path], result: EntryTrace, once: bool = False):
        self.project = project
        self.search = search
        self.result = result
        self.once = once  # walk each function at most once (order does not matter: uncalled code)
        self.in_workers = 0  # depth inside code a DataLoader runs in its worker processes
        self.stack: set[tuple[str, str]] = set()
        self.walked: set[tuple[str, str]] = set()
        self.classes: dict[tuple[str, str], tuple[Module, ClassFacts]] = {}
        self.loaded: set[str] = {result.entry.path}  # modules whose top level has run (the entry runs as __main__)

    def emit(self, event: TraceEvent) -> None:
        if len(self.result.events) >= MAX_EVENTS:
            self.result.truncated = True
            return
        if self.in_workers:
            event.worker = True
        self.result.events.append(event)

    def walk(self, mod: Module, events, via: tuple[Frame, ...], imported: bool = False) -> None:
        """Follow events in order; `imported`: the module body runs on import, not as a script."""
        skipping = 0  # depth inside guard blocks that do not run this way
        for ev in events:
            what = ev.what
            cls = what.__class__
            if cls is Guard:
                if (what.when == "main") == imported:
                    skipping += 1 if what.begin else -1
                continue
            if skipping:
                continue
            if cls is Import:
                self.load(mod, ev, via)
                continue
            if cls is Loader:
                self.loader(mod, ev, via)
                continue
            if cls is not Call:
                self.emit(TraceEvent(what, mod.path, ev.loc, via))
                continue
            qualname = what.qualname
            target = self.project.resolve(qualname, mod, self.search) if qualname else None
            self.call(mod, ev, qualname, target, via)
            for ref in what.refs:  # functions handed to a runner: Fire(main), spawn(worker)
                ref_target = self.project.resolve(ref, mod, self.search)
                if ref_target and ref_target[0] == "function":
                    self.enter(mod, ev, ref_target[1], ref_target[2], via)

    def load(self, mod: Module, ev, via: tuple[Frame, ...]) -> None:
        """Run the top level of each project module an import loads, once per process, as Python does."""
        if len(via) >= MAX_DEPTH:
            return
        for dotted in ev.what.modules:
            target = self.project.find_module(dotted, self.search)
            if target is None:
                root = dotted.partition(".")[0]
                if root and root not in self.result.libraries and not self.project._provides(root):
                    self.result.libraries[root] = (mod.path, ev.loc)
                continue
            if target.path in self.loaded:
                continue
            self.loaded.add(target.path)
            self.walk(target, target.facts.body, via + (Frame(mod.path, ev.loc, target.name),), imported=True)

    def loader(self, mod: Module, ev, via: tuple[Frame, ...]) -> None:
        """A DataLoader iterates: its dataset's `__getitem__`/`__iter__` and its collate_fn run in the
        main process with `num_workers` 0 or absent, in reseeded workers with a literal > 0;
        worker_init_fn runs only in workers (after torch reseeds them)."""
        what = ev.what
        workers = what.num_workers
        in_workers = workers is not UNKNOWN and isinstance(workers, int) and workers > 0
        runs = []
        if what.dataset:
            target = self.project.resolve(what.dataset, mod, self.search)
            if target and target[0] == "class":
                for name in ("__getitem__", "__iter__"):
                    method = self.project.find_method(target[1], target[2], name, self.search)
                    if method and method[0] == "function":
                        runs.append((method, in_workers))
        for qualname, worker in ((what.collate_fn, in_workers), (what.worker_init_fn, True)):
            target = self.project.resolve(qualname, mod, self.search) if qualname else None
            if target and target[0] == "function":
                runs.append((target, worker))
        for (_, target_mod, func), worker in runs:
            self.in_workers += worker
            self.enter(mod, ev, target_mod, func, via)
            self.in_workers -= worker

    def call(self, mod: Module, ev, qualname, target, via) -> None:
        if target is None:
            self.emit(TraceEvent(ev.what, mod.path, ev.loc, via, qualname))
            return
        kind = target[0]
        if kind == "model":
            name, model = target[1], target[2]
            for effect in model(ev.what.args):
                self.emit(TraceEvent(effect, mod.path, ev.loc, via, name))
            self.emit(TraceEvent(ev.what, mod.path, ev.loc, via, qualname))
        elif kind == "function":
            self.enter(mod, ev, target[1], target[2], via)
        elif kind == "class":
            cls_mod, cls = target[1], target[2]
            self.classes[(cls_mod.path, cls.name)] = (cls_mod, cls)
            init = self.project.find_method(cls_mod, cls, "__init__", self.search)
            if init and init[0] == "function":
                self.enter(mod, ev, init[1], init[2], via)
            elif init and init[0] == "model":
                for effect in init[2](ev.what.args):
                    self.emit(TraceEvent(effect, mod.path, ev.loc, via, init[1]))

    def enter(self, mod: Module, ev, target_mod: Module, func: FunctionFacts, via) -> None:
        key = (target_mod.path, func.qualname)
        if key in self.stack or len(via) >= MAX_DEPTH or (self.once and key in self.walked):
            return
        display = f"{target_mod.name}.{func.qualname}" if target_mod.name else func.qualname
        self.stack.add(key)
        self.walked.add(key)
        self.walk(target_mod, func.events, via + (Frame(mod.path, ev.loc, display),))
        self.stack.discard(key)

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

    def collect_calls(self, mod: Module, func: FunctionFacts):
        """Call events of a function, unordered, and the project functions it reaches."""
        calls, more = [], []
        for ev in func.events:
            call = ev.what
            if call.__class__ is not Call:
                continue
            q = call.qualname
            calls.append(TraceEvent(call, mod.path, ev.loc, (), q))
            target = self.project.resolve(q, mod, self.search) if q else None
            if target and target[0] == "function":
                more.append((target[1], target[2]))
            elif target and target[0] == "class":
                cls_mod, cls = target[1], target[2]
                if (cls_mod.path, cls.name) not in self.classes:
                    self.classes[(cls_mod.path, cls.name)] = (cls_mod, cls)
                    more.extend(
                        (cls_mod, cls_mod.facts.functions[f"{cls.name}.{m}"])
                        for m in cls.methods
                        if f"{cls.name}.{m}" in cls_mod.facts.functions
                    )
        return calls, more
