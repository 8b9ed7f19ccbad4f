"""The facts pass: read one module's syntax tree into plain data.

A module's facts are its import aliases, the functions and classes it defines,
and, for the module body and each function, the ordered list of events that
matter for reproducibility: calls (with their literal arguments; with a
CallFilter, only the calls that can matter), imports, writes and reads of
environment variables, cuDNN flag assignments and CUDA work. Nothing
here knows about rules or other modules; `project` links modules and `rules`
judge. The result is plain data, so it is cached by file content.
"""

from __future__ import annotations

# The node classes and the parser's flag come from `_ast`, the C module that `ast` re-exports
# (`from _ast import *`). `ast.py` itself would add `enum` and `contextlib` to every run's start-up,
# about 2.5 ms of a one-file lint's ~45, for the three helpers below that take ten lines.
import _ast as ast
import sys
import warnings

from opscan._plain import Frozen, Plain, by_fields
from opscan.lint import apis, frameworks
from opscan.lint.apis import CONTEXT_CLASSES, CONTEXT_GETTERS, DATALOADERS, PROCESS_STARTERS, READ_CALLS, RUNNERS
from opscan.lint.frameworks import SETTINGS_CLASSES
from opscan.lint.model import UNKNOWN, Built, Call, CallArgs, Cudnn, CudaWork, EnvRead, EnvWrite, Guard, Import, Loader, Loc, Named, truth
from opscan.lint.modelled import MODELS
from opscan.lint.nodes import iter_child_nodes, walk
from opscan.lint.stars import BUILTIN_NAMES, read_all, star_order

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from opscan.lint.model import Effect
    from opscan.lint.relevance import CallFilter

# Bump when the shape of the facts, or what they say of a file, changes, so stale cache entries are ignored.
FACTS_VERSION = 28  # 12: noqa lines numbered as Python numbers them (source_lines); 13: events pickled flat; 14: devices named from parts (f"cuda:{rank}"), `os.environ |=`; 15: functions in a dict, list, tuple or set passed or called through as refs; init_process_group's arguments read through constants and `args.x = "nccl"`; 16: Loader events name the class called (a project class too), classes whether they forward __init__; 17: a name bound to a conditional of such classes (_Scope.choices) builds one when called; 18: functions' project decorators, and whether one is a decorator (or a factory of them) that turns gradients off; 19: inference_mode(False) leaves gradients on, set_grad_enabled(False) turns them off; 20: multiprocessing contexts named by their class (SpawnContext), an imported function handed to a process starter is a ref; 21: `super().name` in methods (SUPER_CALL); 22: `cls.name` in methods (CLS_CALL); 23: functions' guards (FunctionFacts.guards), classes' attributes set to built objects (ClassFacts.attrs), `Aug = RandomFlip` binds another name (an alias); 24: star imports (stars, star_bound), `__all__` (exports), names a star import may bind as `$.name`; 25: guards read a literal default, None comparisons, positional-only parameters (ParamIf.default, .keyword); 26: sentence-transformers' TrainingArguments classes are settings objects (Built); 27: the hook a dataclass's or attrs class's written __init__ calls (ClassFacts.post_init); guards compare with any literal, and order (`> 0`); the packages each scope calls into (calls_into); 28: calls that pass a parameter on (FunctionFacts.forwards), the rest of a body after an `if` that returns is its else (ParamIf.end); runners (apis.RUNNERS) take imported functions, tables keep imported names

THIS = "$"  # stands for "this module" in qualified names until project linking
_THIS_DOT = THIS + "."
# In a method of class C, `cls.name` is "$.C<cls>.name" and `super().name` "$.C<super>.name" (any parts
# after the name follow): the linker looks `cls.name` up in the class the method was called on (C where
# that is not known) and `super().name` in C's bases. "<" is in no identifier: neither is mistaken for a name.
CLS_CALL = "<cls>."
SUPER_CALL = "<super>."
# No API or project module is named by more parts than this. A longer chain (`x.cuda().cuda()...`
# thousands deep) is unknown: naming each of its calls would take time and memory quadratic in its length.
_MAX_QUALNAME_PARTS = 64

_NO_GRAD = {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"}
# Context managers and decorators whose first argument (`mode`) says whether gradients go off: True for
# inference_mode (its default; `inference_mode(False)` leaves them on), False for set_grad_enabled.
_GRAD_MODE_OFF_WHEN = {
    "torch.inference_mode": True,
    "torch.autograd.inference_mode": True,
    "torch.autograd.grad_mode.inference_mode": True,
    "torch.set_grad_enabled": False,
    "torch.autograd.set_grad_enabled": False,
    "torch.autograd.grad_mode.set_grad_enabled": False,
}
_ENV = "os.environ"
# Calls that set environment variables: a name among their arguments is read through `_Scope.constant`.
_ENV_WRITERS = frozenset({"os.environ.setdefault", "os.environ.update", "os.putenv"})
# Calls whose arguments are read so: those, and the ones a rule reads by name (DET011's backend).
_CONSTANT_CALLS = _ENV_WRITERS | frozenset(READ_CALLS)
# Builtins that run none of the script's code but a value's __str__/__len__ (see _FactsBuilder.attribute_holds).
# The classes some of whose methods are modelled (torch.Generator, lightning's Fabric): a parameter annotated
# with one holds an instance (see _FactsBuilder.function); and their last names, the cheap first test.
_ANNOTATED = frozenset(
    owner for owner in (name.rpartition(".")[0] for name in (*apis.MODELS, *frameworks.MODELS)) if owner.rpartition(".")[2][:1].isupper()
)
_ANNOTATED_LAST = frozenset(owner.rpartition(".")[2] for owner in _ANNOTATED)
_PLAIN_BUILTINS = frozenset("print len str int float bool repr format isinstance min max sorted abs round".split())
_CONSTANT_TYPES = (str, int, float, bool, type(None))
_ENV_NAMES = ("CUBLAS_WORKSPACE_CONFIG", "PYTHONHASHSEED", "NCCL_ALGO")  # a constant naming one counts as reading it
_SETTINGS_ROOTS = frozenset(q.partition(".")[0] for q in SETTINGS_CLASSES)  # packages whose import may build one
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory,
# drop_last, timeout, worker_init_fn, ...): the positions of the parameters lint follows.
_LOADER_PARAMS = (("dataset", 0), ("num_workers", 5), ("collate_fn", 6), ("worker_init_fn", 10))
_LOADER_FOLLOWS = frozenset(("dataset", "collate_fn", "worker_init_fn"))  # what a Loader event is kept for
_COLLATE_AT = dict(_LOADER_PARAMS)["collate_fn"]  # a call with more positional arguments may pass it
# Displays whose items a call may run: `Fire({"train": train})`, `COMMANDS = {...}; COMMANDS[name]()`.
_DISPLAYS = frozenset((ast.Dict, ast.List, ast.Tuple, ast.Set))
# Expression nodes with nothing inside that can call, so nothing to record: names, operators,
# contexts (Load/Store), and lambdas, whose bodies run only when called.
_NO_EVENTS = frozenset(
    [ast.Name, ast.Lambda]
    + [c for base in (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop) for c in base.__subclasses__()]
)



def _named_as_class(qualname: str) -> bool:
    """Whether the last part of a dotted name is capitalised, as PEP 8 names classes."""
    return qualname.rpartition(".")[2][:1].isupper()


class Event(Plain):
    """One thing a statement does, in execution order: `what` happens at `loc`.

    `what` is a Call, an Import, a Guard (around the `__main__` block and its else
    branch), a Loader (after a DataLoader's call), or an effect visible in the
    syntax: EnvWrite (`os.environ[...] = value`), EnvRead, Cudnn
    (`torch.backends.cudnn.<flag> = value`) or CudaWork (`.cuda()`, `.to("cuda")`,
    `device="cuda"`).
    """

    _fields = ("loc", "what")
    __slots__ = _fields

    def __reduce__(self):  # by_fields spelled out, as Loc's
        return (Event, (self.loc, self.what))

    def __init__(self, loc: Loc, what: Call | Import | Guard | Loader | Effect):
        self.loc = loc
        self.what = what


def _pack_events(events: list[Event]) -> list[tuple]:
    """Events as flat tuples, for pickling: a Call's (most events) fields inline, 11 long; others 5 long.

    Pickle memoises and reduces every object it meets, so the three objects of a
    call event (Event, Loc, Call, with its CallArgs) cost four reductions; as one
    tuple of plain values they cost none. With each function packed as one tuple
    (ModuleFacts.__reduce__), dumping the facts of torch's tree went from 0.97 s to
    about 0.4 s of CPU, a worker's half of it on the read phase's path.
    """
    out = []
    append = out.append
    for event in events:
        loc, what = event.loc, event.what
        args = what.args if what.__class__ is Call else None
        if args.__class__ is CallArgs:
            append((loc.line, loc.col, loc.end_line, loc.end_col, what.qualname, what.method,
                    args.args, args.kwargs, args.star, what.refs, what.no_grad))  # fmt: skip
        else:
            append((loc.line, loc.col, loc.end_line, loc.end_col, what))
    return out


def _unpack_events(rows: list[tuple]) -> list[Event]:
    out = []
    append = out.append
    for row in rows:
        if len(row) == 11:
            line, col, end_line, end_col, qualname, method, args, kwargs, star, refs, no_grad = row
            append(Event(Loc(line, col, end_line, end_col), Call(qualname, method, CallArgs(args, kwargs, star), refs, no_grad)))
        else:
            append(Event(Loc(row[0], row[1], row[2], row[3]), row[4]))
    return out


def _module_facts(state: tuple) -> ModuleFacts:
    facts = ModuleFacts.__new__(ModuleFacts)
    for name, value in zip(ModuleFacts._fields, state):
        setattr(facts, name, value)
    facts.body = _unpack_events(facts.body)
    facts.functions = {
        key: FunctionFacts(
            qualname, Loc(line, col, end_line, end_col), _unpack_events(rows), params, decorators, grad_off, guards, calls_into,
            forwards,
        )
        for key, qualname, line, col, end_line, end_col, rows, params, decorators, grad_off, guards, calls_into, forwards in facts.functions
    }
    return facts


# What a function does with gradients to the function it decorates (FunctionFacts.grad_off).
GRAD_OFF_DECORATOR = 1  # called with a function, returns it run with gradients off: `return torch.no_grad()(fn)`
GRAD_OFF_FACTORY = 2  # returns such a decorator: yolov5's `smart_inference_mode()` (utils/torch_utils.py)


class ParamIf(Frozen):
    """An `if` of a function whose test reads one of its parameters alone (`if deterministic:`, `if not
    deterministic:`, `if seed is not None:`, `is True`, `== None`, `> 0`, ...): a call that binds it a literal,
    passed or its literal default, runs one branch only (the linker leaves out the other's events).

    `events[start:mid]` are the body's, `events[mid:end]` the `else`'s (an `elif` too), and for an `if` of the
    function's body itself whose body ends in `return` or `raise`, those of the rest of it. `pos` is where a
    call passes the parameter by position (None: keyword-only); in a method (`method`), where a call
    through an instance does (`self` not counted), which only a call of the class is sure to be.
    `keyword`: a call may pass it by keyword (False: positional-only). `default`: its default where that
    is a literal, else UNKNOWN (none, or an expression such as `SEED` or `os.environ.get(...)`).
    Only a parameter the function never binds again, in a function with no decorator (which may call
    it with other arguments) other than staticmethod and classmethod, has one.
    """

    _fields = ("param", "pos", "keyword", "default", "test", "const", "method", "start", "mid", "end")
    __slots__ = _fields
    __reduce__ = by_fields  # pickled with the facts: smaller than the slots' state

    def __init__(
        self, param: str, pos: int | None, keyword: bool, default: Any, test: str, const: Any, method: bool,
        start: int, mid: int, end: int,
    ):  # fmt: skip
        self.param = param
        self.pos = pos
        self.keyword = keyword
        self.default = default
        self.test = test  # "truth", "not", "is", "is not", "==", "!=", "<", "<=", ">", ">=": how the test reads the value
        self.const = const  # what a comparison compares with: True, False or None for "is", a literal for the others
        self.method = method
        self.start = start
        self.mid = mid
        self.end = end

    def runs(self, value: Any) -> Any:
        """Whether the test passes for a literal value of the parameter (UNKNOWN: any other value)."""
        if value is UNKNOWN or value.__class__ not in _GUARD_TYPES and not isinstance(value, str):
            return UNKNOWN
        test = self.test
        if test == "truth":
            return truth(value)
        if test == "not":
            return not value
        if test == "is" or test == "is not":  # const is True, False or None: the same object where equal and of its class
            same = value.__class__ is self.const.__class__ and value == self.const
            return same if test == "is" else not same
        if test == "==" or test == "!=":
            return (value == self.const) if test == "==" else (value != self.const)
        # An order: numbers with numbers, strings with strings; any other pair raises TypeError in Python.
        const = self.const
        if not (value.__class__ in _NUMBERS and const.__class__ in _NUMBERS or isinstance(value, str) and isinstance(const, str)):
            return UNKNOWN
        if test == "<":
            return value < const
        if test == "<=":
            return value <= const
        return value > const if test == ">" else value >= const


class Forward(Frozen):
    """A call in a function's body that passes one of the function's parameters on as it is: `_seed(seed=seed)`,
    `_seed(seed)`, `super().__init__(seed=seed)`, `super().__init__(**kwargs)`. Where a call of the function binds
    the parameter a literal, the linker gives the inner call that literal, so the guards of the function it calls
    (ParamIf) are decided by it (flair's Corpus, pykeen's ERModel and torchrl's GRPO pass `seed` down so).

    `event`: the inner call's index in the function's events; `slot`: where it passes the parameter, a position,
    a keyword, or None for a `**` parameter passed whole as the call's only star. `param`, `pos`, `keyword`,
    `default` and `method` as in ParamIf (for a `**` parameter: None, False, UNKNOWN, False), and `taken`, for a
    `**` parameter, the parameters that take a keyword (so hold none of its items). Only a parameter the function
    never binds again, in a function with no decorator other than staticmethod and classmethod, has one; a `**`
    parameter only where the body reads it nowhere but in such calls (nothing adds to it or takes from it).
    """

    _fields = ("event", "slot", "param", "pos", "keyword", "default", "method", "taken", "spill")
    __slots__ = _fields
    __reduce__ = by_fields  # pickled with the facts: smaller than the slots' state

    def __init__(
        self, event: int, slot: int | str | None, param: str, pos: int | None, keyword: bool, default: Any, method: bool,
        taken: tuple[str, ...] = (), spill: int | None = None,
    ):  # fmt: skip
        self.event = event
        self.slot = slot
        self.param = param
        self.pos = pos
        self.keyword = keyword
        self.default = default
        self.method = method
        self.taken = taken
        # For a `**` parameter passed on beside the function's own `*args` (`super().__init__(*args, **kwargs)`,
        # trl's trainers): how many positional parameters come before `*args` (`self` not counted). A call that
        # passes more fills `*args`, which the facts do not hold, so it passes nothing known on.
        self.spill = spill


_LEAVES = (ast.Return, ast.Raise)  # statements that leave the function
_GUARD_TYPES = (bool, int, float, str, type(None))  # the literals a guard decides on (Named too: a str)
# The standard library's modules: a call into one enters no project code, even in a module read with every
# call kept (a project that provides a library the call filter names, torch's own source: see CallFilter).
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
_GUARD_IDENTITY = {ast.Is: "is", ast.IsNot: "is not"}  # with True, False or None
_GUARD_COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}  # with a literal
_NUMBERS = (bool, int, float)
_SAFE_DECORATORS = frozenset({"staticmethod", "classmethod"})  # decorators that pass a call's arguments on unchanged


def decidable(value: Any) -> Any:
    """`value` where a guard may decide on it (a literal of _GUARD_TYPES), else UNKNOWN."""
    return value if value.__class__ in _GUARD_TYPES or isinstance(value, str) else UNKNOWN


class FunctionFacts(Plain):
    _fields = ("qualname", "loc", "events", "params", "decorators", "grad_off", "guards", "calls_into", "forwards")
    __slots__ = _fields

    def __init__(
        self,
        qualname: str,
        loc: Loc,
        events: list[Event] | None = None,
        params: tuple[str, ...] = (),
        decorators: tuple[tuple[str, bool], ...] = (),
        grad_off: int = 0,
        guards: tuple[ParamIf, ...] = (),
        calls_into: tuple[str, ...] = (),
        forwards: tuple[Forward, ...] = (),
    ):
        self.qualname = qualname  # within the module, e.g. "main", "Net.forward"
        self.loc = loc
        self.events = [] if events is None else events
        self.params = params
        # The decorators that may be project code, outermost first: (qualified name, whether it is called:
        # `@smart_inference_mode()`). The linker marks the calls of the body no_grad where one turns gradients off.
        self.decorators = decorators
        self.grad_off = grad_off  # 0, GRAD_OFF_DECORATOR or GRAD_OFF_FACTORY
        self.guards = guards  # its `if`s on a parameter alone, which a literal argument decides (ParamIf)
        # What its body calls into, the calls the facts leave out included: the package and its first module
        # (`torch.nn` of `torch.nn.Linear(...)`, `torch` of `torch.cat(...)`; not the module's own functions),
        # what says whether a run uses torch (Context.uses_torch).
        self.calls_into = calls_into
        self.forwards = forwards  # its calls that pass a parameter on as it is (Forward)


class ClassFacts(Plain):
    _fields = ("name", "loc", "bases", "methods", "forwards_init", "attrs", "post_init")
    __slots__ = _fields
    __reduce__ = by_fields

    def __init__(
        self,
        name: str,
        loc: Loc,
        bases: tuple[str | None, ...] = (),
        methods: tuple[str, ...] = (),
        forwards_init: bool = True,
        attrs: tuple[tuple[str, str], ...] = (),
        post_init: str = "",
    ):
        self.name = name
        self.loc = loc
        self.bases = bases
        self.methods = methods
        # Whether calling it calls its base's __init__ with the same arguments: it defines no
        # __init__, or one that begins `super().__init__(*args, **kwargs)` and takes nothing else.
        self.forwards_init = forwards_init
        # (attribute, the class called to build it): `self.transform = Blur()` in one of its methods, the one
        # store to `self.transform` in any class of the module, so `self.transform(img)` runs Blur.__call__.
        self.attrs = attrs
        # The hook that the __init__ a class decorator writes calls last ("" where none is written):
        # `__post_init__` for a dataclass, `__attrs_post_init__` for an attrs class (see _post_init_hook).
        self.post_init = post_init


class ModuleFacts(Plain):
    _fields = (
        "path", "aliases", "body", "functions", "classes", "noqa", "file_noqa", "lines", "error", "error_loc",
        "dropped_libraries", "relative_imports", "stars", "star_bound", "exports", "calls_into",
    )  # fmt: skip
    __slots__ = _fields

    def __reduce__(self):
        # The events of the body and of each function packed flat (_pack_events), and each function
        # as one tuple: a module's functions by the hundred cost a reduction each otherwise.
        state = []
        for name in self._fields:
            value = getattr(self, name)
            if name == "body":
                value = _pack_events(value)
            elif name == "functions":
                value = [
                    (
                        key, f.qualname, f.loc.line, f.loc.col, f.loc.end_line, f.loc.end_col, _pack_events(f.events), f.params,
                        f.decorators, f.grad_off, f.guards, f.calls_into, f.forwards,
                    )
                    for key, f in value.items()
                ]  # fmt: skip
            state.append(value)
        return (_module_facts, (tuple(state),))

    def __init__(self, path: str, error: str | None = None):
        self.path = path
        self.aliases: dict[str, str] = {}  # module-level name -> qualified name
        self.body: list[Event] = []  # what runs at the top level; Guard events mark script-only and import-only parts
        self.functions: dict[str, FunctionFacts] = {}
        self.classes: dict[str, ClassFacts] = {}
        self.noqa: dict[int, frozenset[str] | None] = {}  # line -> codes, None = all
        self.file_noqa: frozenset[str] | None | bool = False  # False = none; None = all; else codes
        self.lines: list[str] | None = []  # None in facts from the cache or another process: read when needed
        self.error = error  # why the file could not be analysed (DET000)
        self.error_loc: Loc | None = None
        # Libraries whose calls a CallFilter left out; linking checks the project does not provide one.
        self.dropped_libraries: tuple[str, ...] = ()
        self.calls_into: tuple[str, ...] = ()  # as FunctionFacts.calls_into, of the top level (class bodies too)
        # Whether it has a relative import: the only part of the facts that depends on the package
        # the module is imported as. Without one, the facts serve every name it is reached by.
        self.relative_imports = False
        # Its top level's `from m import *` modules, in order, and (with any) how many of them come before
        # each name's last binding of its own (opscan.lint.stars.star_order): the linker looks a name
        # up in those that may bind it last. Empty for nearly every module.
        self.stars: tuple[str, ...] = ()
        self.star_bound: dict[str, int] = {}
        # Its `__all__` (opscan.lint.stars.read_all): None where it binds none, False where lint cannot read it.
        self.exports: tuple[str, ...] | bool | None = None


# ---------------------------------------------------------------- noqa

# Patterns, matched with re.I: compiled on first use (re caches them), not when lint starts,
# which is the only cost they would have on the many files that hold no `# noqa` at all.
# A line whose lowered text lacks "noqa" cannot match either (with re.I only N, O, Q and A
# match those letters), so `re` itself is imported only for a line that has it: a cold
# lint of a file with comments and no `# noqa` imports no `re` (~1.5 ms) and compiles nothing.
NOQA_DIRECTIVE = r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?"
_FILE_NOQA = r"^\s*#\s*opscan:\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?\s*$"


def _codes(text: str | None) -> frozenset[str] | None:
    if not text:
        return None
    import re

    return frozenset(c.upper() for c in re.split(r"[\s,]+", text.strip()) if c)


def scan_noqa(lines: list[str]) -> tuple[dict[int, frozenset[str] | None], frozenset[str] | None | bool]:
    """Line-level `# noqa[: CODES]` and file-level `# opscan: noqa[: CODES]` comments."""
    per_line: dict[int, frozenset[str] | None] = {}
    file_level: frozenset[str] | None | bool = False
    for number, text in enumerate(lines, 1):
        if "#" not in text or "noqa" not in text.lower():
            continue
        import re

        m = re.match(_FILE_NOQA, text, re.I)
        if m:
            codes = _codes(m.group("codes"))
            if codes is None or file_level is None:
                file_level = None
            else:
                file_level = codes | (file_level or frozenset())
            continue
        m = re.search(NOQA_DIRECTIVE, text, re.I)
        if m:
            per_line[number] = _codes(m.group("codes"))
    return per_line, file_level


# ---------------------------------------------------------------- literals


# Per node class, the fields that can hold child nodes, last first (the walk pushes them on
# a stack). Leaving out contexts, operators and names saves a getattr per field per node.
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "kind", "conversion", "is_async", "type_comment"})
_NODE_FIELDS: dict[type, tuple[str, ...]] = {}


def _node_fields(cls: type) -> tuple[str, ...]:
    if issubclass(cls, ast.AST):
        fields = tuple(f for f in reversed(cls._fields) if f not in _LEAF_FIELDS)
    else:  # not a node (a stray value in an unexpected field): nothing inside
        fields = ()
    _NODE_FIELDS[cls] = fields
    return fields


def literal(node: ast.AST | None) -> Any:
    """The Python value of a literal expression, else UNKNOWN. Containers may hold UNKNOWN items."""
    if node is None:
        return None
    cls = node.__class__
    if cls is ast.Constant:
        return node.value
    if cls is ast.Name or cls is ast.Attribute or cls is ast.Call:  # the common non-literals, first
        return UNKNOWN
    if cls is ast.Tuple or cls is ast.List:
        return tuple(literal(e) for e in node.elts)
    if cls is ast.Dict:
        if any(k is None for k in node.keys):  # {**other}
            return UNKNOWN
        out = {}
        for k, v in zip(node.keys, node.values):
            key = literal(k)
            if key is UNKNOWN or isinstance(key, (dict, list)):
                return UNKNOWN
            out[key] = literal(v)
        return out
    if cls is ast.UnaryOp and isinstance(node.op, (ast.USub, ast.UAdd)):
        negate = False
        while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):  # a loop: `- - - 1` may nest deep
            negate ^= isinstance(node.op, ast.USub)
            node = node.operand
        inner = literal(node)
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return -inner if negate else inner
    return UNKNOWN


def parse(text: str, path: str) -> ast.Module:
    """`ast.parse(text, filename=path)`: the same call of the compiler (see the import above)."""
    return compile(text, path, "exec", ast.PyCF_ONLY_AST)


def loc_of(node: ast.AST) -> Loc:
    line = getattr(node, "lineno", 1)
    col = getattr(node, "col_offset", 0) + 1
    end_line = getattr(node, "end_lineno", None) or line
    end_col = (getattr(node, "end_col_offset", None) or (col - 1)) + 1
    return Loc(line, col, end_line, end_col)


def _mentions_cuda(node: ast.AST) -> bool:
    for sub in walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.startswith("cuda"):
            return True
    return False


def _with_parents(dotted: str) -> list[str]:
    """'a.b.c' -> ['a', 'a.b', 'a.b.c']: importing a module loads its packages first."""
    parts = dotted.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


# Class decorators that write the class an __init__ calling a hook method last: the hook, and whether
# the written __init__ replaces one the class body defines. Read:
# - CPython 3.11 Lib/dataclasses.py, _process_class: `if init:` sets _init_fn, whose body ends with
#   `self.__post_init__(...)` where `hasattr(cls, '__post_init__')` (inherited too), through
#   _set_new_attribute, which leaves an __init__ the class body defines;
# - pydantic 2.14.4 pydantic/_internal/_dataclasses.py (complete_dataclass: `cls.__init__ = __init__`,
#   always, one that validates) and _generate_schema.py (`post_init=hasattr(dataclass, '__post_init__')`);
# - attrs 26.1.0 attr/_make.py (attrs(): auto_detect=False, so init=True writes __init__ over the body's;
#   the written one ends `self.__attrs_post_init__()`), attr/_next_gen.py (define(): auto_detect=True,
#   so a body's __init__ stays; mutable = define, frozen = partial(define, ...)), attr/__init__.py
#   (dataclass = partial(attrs, auto_attribs=True)), attrs/__init__.py (re-exports define, mutable, frozen).
# `init=False` writes none with each of them.
_POST_INIT_DECORATORS = {
    "dataclasses.dataclass": ("__post_init__", False),
    "pydantic.dataclasses.dataclass": ("__post_init__", True),
    "attr.s": ("__attrs_post_init__", True),
    "attr.attrs": ("__attrs_post_init__", True),
    "attr.dataclass": ("__attrs_post_init__", True),
    "attr.define": ("__attrs_post_init__", False),
    "attr.mutable": ("__attrs_post_init__", False),
    "attr.frozen": ("__attrs_post_init__", False),
    "attrs.define": ("__attrs_post_init__", False),
    "attrs.mutable": ("__attrs_post_init__", False),
    "attrs.frozen": ("__attrs_post_init__", False),
}


def _post_init_hook(node: ast.ClassDef, decorators: list[str | None]) -> str:
    """The hook that the __init__ a class decorator writes for `node` calls, "" where none is written;
    `decorators`: the qualified names of its decorators (of a call's function)."""
    for decorator, name in zip(node.decorator_list, decorators):
        found = _POST_INIT_DECORATORS.get(name or "")
        if found is None:
            continue
        hook, replaces = found
        if decorator.__class__ is ast.Call and any(
            kw.arg == "init" and kw.value.__class__ is ast.Constant and kw.value.value is False for kw in decorator.keywords
        ):
            return ""
        if not replaces and any(s.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef) and s.name == "__init__" for s in node.body):
            return ""  # the body's own __init__ is the class's, and calls the hook only if it says so
        return hook
    return ""


def _package_and_module(dotted: str) -> str:
    """`torch.nn` of `torch.nn.functional`, `torch` of `torch`: what FunctionFacts.calls_into holds."""
    root, _, rest = dotted.partition(".")
    return f"{root}.{rest.partition('.')[0]}" if rest else root


def _forwards_init(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether an `__init__` takes `(self, *args, **kwargs)` alone and begins (after its docstring) by
    passing them on unchanged: `super().__init__(*args, **kwargs)`, or `super(Cls, self).__init__(...)`.

    Then its class is built from the arguments its base is, as yolov5's InfiniteDataLoader
    (utils/dataloaders.py) takes DataLoader's. Nothing before that call can change them.
    """
    a = node.args
    if node.__class__ is not ast.FunctionDef or a.posonlyargs or len(a.args) != 1 or a.kwonlyargs or not (a.vararg and a.kwarg):
        return False
    body = node.body
    first = body[0]
    if first.__class__ is ast.Expr and first.value.__class__ is ast.Constant and isinstance(first.value.value, str):
        if len(body) == 1:
            return False
        first = body[1]
    call = first.value if first.__class__ is ast.Expr else None
    if call.__class__ is not ast.Call or call.func.__class__ is not ast.Attribute or call.func.attr != "__init__":
        return False
    inner = call.func.value  # super() or super(Cls, self)
    if inner.__class__ is not ast.Call or inner.func.__class__ is not ast.Name or inner.func.id != "super" or inner.keywords:
        return False
    if inner.args and not (len(inner.args) == 2 and inner.args[1].__class__ is ast.Name and inner.args[1].id == a.args[0].arg):
        return False
    args, keywords = call.args, call.keywords
    return (
        len(args) == 1
        and args[0].__class__ is ast.Starred
        and args[0].value.__class__ is ast.Name
        and args[0].value.id == a.vararg.arg
        and len(keywords) == 1
        and keywords[0].arg is None
        and keywords[0].value.__class__ is ast.Name
        and keywords[0].value.id == a.kwarg.arg
    )


def _is_super(call: ast.Call, scope: _Scope) -> bool:
    """Whether a call in a method of `scope.class_name` is `super()`, or `super(C, self)` naming that
    class (by its own name) and a name: what the method's own class's bases provide."""
    func = call.func
    if func.__class__ is not ast.Name or func.id != "super" or call.keywords or scope.lookup("super") is not None:
        return False
    args = call.args
    if not args:
        return True
    return (
        len(args) == 2
        and args[0].__class__ is ast.Name
        and args[0].id == scope.class_name.rpartition(".")[2]
        and args[1].__class__ is ast.Name
    )


def _is_main_guard(test: ast.AST) -> bool:
    """`if __name__ == "__main__":` in either order."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return bool(names and consts)


# ---------------------------------------------------------------- the visitor


class _Scope:
    """Names visible in one function or module body, and what we know of them."""

    def __init__(self, parent: _Scope | None, class_name: str | None = None, node: ast.AST | None = None):
        self.parent = parent
        self.aliases: dict[str, str] = {}  # name -> qualified name (imports, local defs)
        self.instances: dict[str, str] = {}  # variable -> qualified name of the class it holds
        self.cuda_names: set[str] = set()  # variables that hold a CUDA device
        self.shadowed: set[str] = set()  # local variables that hide an outer alias
        self.class_name = class_name  # set inside methods, for self.method()
        self.built: dict[str, Built] = {}  # variable -> the settings object (frameworks.SETTINGS_CLASSES) it holds
        # variable -> the local functions named in the display (dict, list, tuple, set) last bound to it
        self.tables: dict[str, tuple[str, ...]] = {}
        # variable -> the classes a conditional last bound to it chooses among, where each may be a DataLoader:
        # `loader = DataLoader if image_weights else InfiniteDataLoader` (yolov5's utils/dataloaders.py)
        self.choices: dict[str, tuple[str, ...]] = {}
        self.node = node  # the module, function or class whose body this is
        self._bound: tuple[dict[str, Any], set[str], set[str]] | None = None
        # (name, attribute) -> [string, position in attr_calls]: `args.backend = "nccl"`, the last store to it
        # where the walk now stands, if it may still hold (see _FactsBuilder.store_attribute); and the calls
        # made since the first of them, which `attribute_holds` checks when one is read.
        self.attrs: dict[tuple[str, str], list] = {}
        self.attr_calls: list[tuple[ast.Call, str | None]] = []
        self._attr_facts: tuple[set[str], set[str], bool, set[str]] | None = None

    def constant(self, name: str) -> Any:
        """The literal a name holds where it is read: bound once, in the scope that binds it, to a literal
        (`WS = ":4096:2"`, a module-level constant read in a function too); else UNKNOWN."""
        scope: _Scope | None = self
        while scope is not None:
            if scope.node is not None:
                if scope._bound is None:
                    scope._bound = _bindings(scope.node)
                constants, bound, _ = scope._bound
                if name in bound:
                    return constants.get(name, UNKNOWN)
            scope = scope.parent
        return UNKNOWN

    def attr_facts(self) -> tuple[set[str], set[str], bool, set[str]]:
        """What `attribute_holds` asks of this body: the names it binds exactly once, the names its nested
        functions, lambdas and classes use (they may store to an attribute of one when called), whether
        it is a generator or coroutine (other code runs at each yield or await), and the names it binds."""
        if self._attr_facts is None:
            if self._bound is None:
                self._bound = _bindings(self.node)
            captured: set[str] = set()
            suspends = False
            pending = list(iter_child_nodes(self.node)) if not isinstance(self.node, ast.Module) else list(self.node.body)
            while pending:
                node = pending.pop()
                cls = node.__class__
                if cls in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef):
                    captured.update(n.id for n in walk(node) if n.__class__ is ast.Name)
                    continue
                if cls in (ast.Yield, ast.YieldFrom, ast.Await):
                    suspends = True
                pending.extend(iter_child_nodes(node))
            self._attr_facts = (self._bound[2], captured, suspends, self._bound[1])
        return self._attr_facts

    def lookup(self, name: str) -> str | None:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.aliases:
                return scope.aliases[name]
            if name in scope.shadowed:
                return None
            scope = scope.parent
        return None

    def instance(self, name: str) -> str | None:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.instances:
                return scope.instances[name]
            if name in scope.shadowed or name in scope.aliases:
                return None
            scope = scope.parent
        return None

    def _held(self, name: str, field: str) -> Any:
        """What the dict `field` of the nearest scope that binds `name` so holds for it, where a nearer
        one does not bind it otherwise (a parameter, an import, an instance); None if none does."""
        scope: _Scope | None = self
        while scope is not None:
            held = getattr(scope, field)
            if name in held:
                return held[name]
            if name in scope.shadowed or name in scope.aliases or name in scope.instances:
                return None
            scope = scope.parent
        return None

    def settings(self, name: str) -> Built | None:
        return self._held(name, "built")

    def table(self, name: str) -> tuple[str, ...]:
        """The local functions a name bound to a display names (`COMMANDS = {"train": train}`); () if none."""
        return self._held(name, "tables") or ()

    def choice(self, name: str) -> tuple[str, ...] | None:
        """The classes a name bound to a conditional of DataLoaders may hold (see `choices`); None if not one."""
        return self._held(name, "choices")

    def is_cuda(self, name: str) -> bool:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.cuda_names:
                return True
            scope = scope.parent
        return False


def _bindings(node: ast.AST) -> tuple[dict[str, Any], set[str], set[str]]:
    """The names a module, function or class body binds exactly once to a literal (with the literal),
    the names it binds, and those it binds exactly once.

    Every way to bind counts (assignment, augmented, for, with, except, walrus,
    import, def, class, del, match, parameters, and `global` / `nonlocal` in
    nested functions); counting one too many only leaves a value unknown.
    Nested function and lambda bodies are scopes of their own.
    """
    counts: dict[str, int] = {}
    values: dict[str, Any] = {}

    def bind(name: str | None, n: int = 1) -> None:
        if name:
            counts[name] = counts.get(name, 0) + n

    args = getattr(node, "args", None)
    if isinstance(args, ast.arguments):
        for a in args.posonlyargs + args.args + args.kwonlyargs + [x for x in (args.vararg, args.kwarg) if x]:
            bind(a.arg)
    stack: list[ast.AST] = list(reversed(node.body))
    while stack:
        n = stack.pop()
        cls = n.__class__
        if cls in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            bind(n.name)
            # Decorators, defaults and bases run here; the bodies are scopes of their own, but a
            # `global` or `nonlocal` in them rebinds a name of this one.
            stack += [*n.decorator_list, *getattr(n, "bases", ()), *getattr(n, "keywords", ())]
            if cls is not ast.ClassDef:
                stack += [d for d in n.args.defaults + n.args.kw_defaults if d is not None]
            for inner in walk(n):
                if isinstance(inner, (ast.Global, ast.Nonlocal)):
                    for name in inner.names:
                        bind(name, 2)
            continue
        if cls is ast.Lambda:
            continue
        if cls is ast.Name:
            if n.ctx.__class__ is not ast.Load:
                bind(n.id)
            continue
        if cls is ast.Import or cls is ast.ImportFrom:
            for alias in n.names:
                bind(alias.asname or alias.name.split(".")[0])
            continue
        if cls is ast.ExceptHandler or cls.__name__ in ("MatchAs", "MatchStar"):
            bind(getattr(n, "name", None))
        elif cls.__name__ == "MatchMapping":
            bind(n.rest)
        elif cls is ast.Assign and len(n.targets) == 1 and n.targets[0].__class__ is ast.Name:
            value = literal(n.value)
            if isinstance(value, _CONSTANT_TYPES):
                values.setdefault(n.targets[0].id, value)
        elif cls is ast.AnnAssign and n.value is not None and n.target.__class__ is ast.Name:
            value = literal(n.value)
            if isinstance(value, _CONSTANT_TYPES):
                values.setdefault(n.target.id, value)
        stack.extend(iter_child_nodes(n))
    once = {name for name, n in counts.items() if n == 1}
    return {name: value for name, value in values.items() if name in once}, set(counts), once


def _chain_root(node: ast.AST) -> str | None:
    """The name an attribute chain starts from, through calls as qualify goes (`a.b().c` -> "a"); None if none."""
    while node.__class__ is ast.Attribute:
        node = node.value
        if node.__class__ is ast.Call:
            node = node.func
    return node.id if node.__class__ is ast.Name else None


# The statements that hold blocks of statements (but for defs, classes and `match`, which _bound_by reads apart).
_BLOCKS = frozenset(
    [ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try] + ([ast.TryStar] if hasattr(ast, "TryStar") else [])
)


def _bound_by(body: list[ast.stmt], names: set[str]) -> set[str]:
    """Which of `names` the statements of a function's `body` bind: assignments, loops, `with`, `del`, imports,
    defs, `except ... as`, and `global` or `nonlocal` in a function defined inside it; a `match` or a `type`
    statement may bind any. Statements only, not expressions: a walrus is looked for in the text (see
    _FactsBuilder._rebound), and comprehensions bind in scopes of their own. Asked only of the functions
    with guards or Forwards, so the facts walk keeps no record of what every body binds."""
    found: set[str] = set()
    pending: list[tuple[ast.stmt, bool]] = [(s, False) for s in body]  # (statement, in a function defined inside)
    targets: list[ast.AST] = []
    while pending:
        stmt, inner = pending.pop()
        cls = stmt.__class__
        if cls is ast.Expr or cls is ast.Return:  # the commonest statements: they bind nothing, and hold no block
            continue
        if cls is ast.Assign:
            if not inner:
                targets += stmt.targets
            continue
        if cls is ast.Global or cls is ast.Nonlocal:
            if inner:
                found.update(n for n in stmt.names if n in names)
            continue
        if cls is ast.FunctionDef or cls is ast.AsyncFunctionDef or cls is ast.ClassDef:
            if not inner and stmt.name in names:
                found.add(stmt.name)
            pending += [(s, True) for s in stmt.body]
            continue
        if cls.__name__ in ("Match", "TypeAlias"):
            if not inner:
                return set(names)
            pending += [(s, True) for case in getattr(stmt, "cases", ()) for s in case.body]
            continue
        if not inner:
            if cls is ast.Delete:
                targets += stmt.targets
            elif cls is ast.AugAssign or cls is ast.AnnAssign or cls is ast.For or cls is ast.AsyncFor:
                targets.append(stmt.target)
            elif cls is ast.With or cls is ast.AsyncWith:
                targets += [item.optional_vars for item in stmt.items if item.optional_vars is not None]
            elif cls is ast.Import or cls is ast.ImportFrom:
                found.update(a.asname or a.name.partition(".")[0] for a in stmt.names if (a.asname or a.name.partition(".")[0]) in names)
            elif cls is ast.Try or cls.__name__ == "TryStar":
                found.update(h.name for h in stmt.handlers if h.name in names)
        if cls in _BLOCKS:
            for field in ("body", "orelse", "finalbody"):
                block = getattr(stmt, field, None)
                if block.__class__ is list:
                    pending += [(s, inner) for s in block]
            for handler in getattr(stmt, "handlers", ()):
                pending += [(s, inner) for s in handler.body]
    while targets:  # names, in tuples and lists, starred too; an attribute or subscript binds none
        target = targets.pop()
        cls = target.__class__
        if cls is ast.Name:
            if target.id in names:
                found.add(target.id)
        elif cls is ast.Tuple or cls is ast.List:
            targets += target.elts
        elif cls is ast.Starred:
            targets.append(target.value)
    return found


def _passed_on(call: ast.Call, params: tuple[str, ...], at: int, found: list[tuple]) -> None:
    """Add to `found` each of `params` that `call` (the event at index `at`) passes as it is: (at, slot,
    parameter), the slot a position before any `*`, a keyword, or None for a `**` that is the call's only star."""
    args = call.args
    star = None  # the name of a `*name` among the arguments ("" for another starred expression)
    for pos, value in enumerate(args):
        if value.__class__ is ast.Starred:
            star = value.value.id if value.value.__class__ is ast.Name and pos == len(args) - 1 else ""
            break
        if value.__class__ is ast.Name and value.id in params:
            found.append((at, pos, value.id))
    spread = [k.value for k in call.keywords if k.arg is None]
    for k in call.keywords:
        value = k.value
        if value.__class__ is ast.Name and value.id in params:
            if k.arg is not None:
                found.append((at, k.arg, value.id))
            elif len(spread) == 1 and star is None:
                found.append((at, None, value.id))
            elif len(spread) == 1 and star:  # `*args, **kwargs`: `_forwards_of` keeps it where `args` is the function's own
                found.append((at, f"*{star}", value.id))


def _spread_only(node: ast.AST, name: str) -> bool:
    """Whether a function reads its `**name` parameter only to pass it on whole (`f(**name)`), so that it holds
    what the call of the function gave it: no `name.pop(...)`, `name["seed"] = ...` or `del name`."""
    reads = spreads = 0
    for n in walk(node):
        cls = n.__class__
        if cls is ast.Name and n.id == name:
            reads += 1
        elif cls is ast.keyword and n.arg is None and n.value.__class__ is ast.Name and n.value.id == name:
            spreads += 1
    return reads == spreads


def _for_targets(text: str, names: set[str]) -> set[str]:
    """Those of `names` that may be in the target of a `for` in `text` (a function's source): among the names
    that follow the word `for`, over commas, brackets, stars, space and comments, up to `in` or any other
    text (`[f(seed) for seed in seeds]`, `for (i, seed) in`). A comprehension's target is local to it and
    `_bound_by` reads statements only, so a call in it would seem to pass the parameter on."""
    found: set[str] = set()
    size = len(text)
    at = text.find("for")
    while at >= 0:
        i = at + 3
        if (at == 0 or not _is_word(text[at - 1])) and (i == size or not _is_word(text[i])):
            while i < size:
                c = text[i]
                if c in _TARGET_CHARS:
                    i += 1
                elif c == "#":  # a comment, inside brackets
                    i = text.find("\n", i)
                    if i < 0:
                        break
                elif _is_word(c):
                    j = i + 1
                    while j < size and _is_word(text[j]):
                        j += 1
                    word = text[i:j]
                    if word in names:
                        found.add(word)
                    elif word == "in":  # the target ends there
                        break
                    i = j
                else:
                    break
        at = text.find("for", at + 3)
    return found


def _is_word(c: str) -> bool:
    return c.isalnum() or c == "_"


_TARGET_CHARS = frozenset(" \t\n\\,()[]*")  # what may stand between the names of a `for` target


def _callee_at(facts: FunctionFacts, at: int) -> str:
    """The callee of the call event at index `at` of a function (one that passes a parameter on: named)."""
    return facts.events[at].what.qualname


def _call_loc(call: ast.Call) -> Loc:
    return Loc(call.lineno, call.col_offset + 1, call.end_lineno or call.lineno, (call.end_col_offset or call.col_offset) + 1)


class _FactsBuilder:
    def __init__(self, facts: ModuleFacts, package: str, calls: CallFilter | None = None):
        self.facts = facts
        self.package = package  # dotted package of this module, for relative imports ("" if unknown)
        self.calls = calls  # which calls to record (None: all)
        self.dropped_libraries: set[str] = set()
        self.module_scope = _Scope(None)
        self.no_grad_depth = 0
        self.calls_into: set[str] = set()  # the packages the body being walked calls into (FunctionFacts.calls_into)
        self.may_build = False  # a package that defines settings classes was imported: follow them
        self.has_tables = False  # some name holds a display of local functions (_Scope.tables)
        self.has_choices = False  # some name holds a conditional of classes (_Scope.choices)
        # The names any scope binds to a function or class of this module (`$.name`): a name passed to a
        # call is looked up (for refs) only if it is one of them.
        self.local_defs: set[str] = set()
        # The call call_event saw last, and what its callee qualified to then (see assign_target_events).
        self._called: tuple[ast.Call | None, str | None] = (None, None)
        self.nested = 0  # how many branches, loops, `with` and `try` blocks hold the statement walked
        self._self_attrs: dict[str, tuple[str, str] | None] = {}  # attribute -> (class, callee) of its only store (_store_self)
        # The events, guards and parameters of the function walked, where it may have guards, and the calls that
        # pass one of its parameters on (event index, slot, parameter: see Forward), for `_sift_forwards`.
        self._guarded: tuple[list[Event], list[ParamIf], tuple[str, ...], list[tuple]] | None = None
        self.stars: list[str] = []  # the top level's `from m import *` modules so far (ModuleFacts.stars)
        # The functions with calls that pass a parameter on: (node, scope, facts, those calls), see _sift_forwards.
        self._forwarders: list[tuple] = []
        self._star_nodes: set[int] = set()

    # -- names ------------------------------------------------------------

    def qualify(self, node: ast.AST, scope: _Scope) -> str | None:
        """The qualified name an expression refers to, through imports and local definitions."""
        # A loop, not recursion: attribute and call chains (`a.b().c()...`) can be thousands long.
        attrs: list[str] = []  # outermost first
        Name, Attribute = ast.Name, ast.Attribute  # exact types: ast.parse makes no subclasses
        while True:
            cls = node.__class__
            if cls is Name:
                base = scope.lookup(node.id)
                break
            if cls is not Attribute:
                return None
            value = node.value
            if value.__class__ is Name:
                name = value.id
                if (name == "self" or name == "cls") and scope.class_name and scope.lookup(name) is None:
                    base = f"{THIS}.{scope.class_name}{'.' if name == 'self' else CLS_CALL}{node.attr}"
                    break
                held = scope.instance(name)
                if held:
                    base = f"{held}.{node.attr}"
                    break
            elif value.__class__ is ast.Call and scope.class_name and _is_super(value, scope):
                base = f"{THIS}.{scope.class_name}{SUPER_CALL}{node.attr}"
                break
            attrs.append(node.attr)
            if len(attrs) > _MAX_QUALNAME_PARTS:
                return None
            # torch.Generator().manual_seed, Fabric().seed_everything: through the call to what is called
            node = value.func if value.__class__ is ast.Call else value
        if not base:
            if not self.stars:
                return None
            base = self._star_global(node.id, scope)  # `node` is the Name the chain starts from
            if not base:
                return None
        if not attrs:  # `f(x)`, `self.f(x)`, `torch.f(x)`: most names are one or two parts long
            return base
        if len(attrs) == 1:
            return f"{base}.{attrs[0]}"
        return ".".join([base, *reversed(attrs)])

    def _reference(self, node: ast.AST, scope: _Scope) -> str | None:
        """The qualified name of a name, or of an attribute chain on one, that an import or a definition binds
        (`RandomFlip`, `np.random.shuffle`); None for a variable's, `self`'s or an instance's attributes."""
        root = node
        while root.__class__ is ast.Attribute:
            root = root.value
        if root.__class__ is not ast.Name or root.id == "self" or scope.instance(root.id) or scope.lookup(root.id) is None:
            return None
        return self.qualify(node, scope)

    def _import(self, node: ast.Import | ast.ImportFrom, scope: _Scope) -> tuple[str, ...]:
        """Bind the names an import statement binds; return the modules it may load, in order.

        `import a.b` loads a, then a.b; `from a import b` loads a, and a.b if that is a
        module. Each loaded module's top level runs then (the linker follows project ones).
        """
        loads: list[str] = []
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        if not self.may_build and any(n.partition(".")[0] in _SETTINGS_ROOTS for n in names):
            self.may_build = True
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    scope.aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    scope.aliases[top] = top
                loads += _with_parents(alias.name)
            return tuple(dict.fromkeys(loads))
        if node.level:
            self.facts.relative_imports = True
            parts = self.package.split(".") if self.package else []
            if node.level - 1 > len(parts):
                return ()
            base_parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
            module = ".".join(base_parts + ([node.module] if node.module else []))
            module = module or "."  # relative import from a top-level script's folder
        else:
            module = node.module or ""
        if module != ".":
            loads += _with_parents(module)
        for alias in node.names:
            if alias.name == "*":
                # Python allows it at a module's top level only (a SyntaxError elsewhere).
                if scope is self.module_scope and module != ".":
                    self.stars.append(module)
                    self._star_nodes.add(id(node))
                continue
            qualname = f"{module}.{alias.name}" if module != "." else alias.name
            scope.aliases[alias.asname or alias.name] = qualname
            loads.append(qualname)  # a submodule, if there is such a file
        return tuple(dict.fromkeys(loads))

    def _star_global(self, name: str, scope: _Scope) -> str | None:
        """`$.name` for a name no scope binds (nor builtins), in a module with star imports: the linker
        looks it up in them (Project._through_stars); None for any other name."""
        if name in BUILTIN_NAMES:
            return None
        module = self.module_scope
        while scope is not None:
            if name in scope.shadowed or name in scope.aliases or name in scope.instances:
                return None
            if scope is not module and scope.node is not None:
                # A function's (or class body's) name is local wherever it binds it, before this use or after.
                if scope._bound is None:
                    scope._bound = _bindings(scope.node)
                if name in scope._bound[1]:
                    return None
            scope = scope.parent
        return f"{THIS}.{name}"

    # -- events ------------------------------------------------------------

    def call_args(self, call: ast.Call, scope: _Scope | None = None, *, constants: bool = False) -> CallArgs:
        """The call's literal arguments; with `constants`, names bound once to a literal read as that literal."""
        value = (lambda node: self.value(node, scope)) if constants and scope is not None else literal
        star = False  # *args or **kwargs: parameters not seen are unknown, not defaulted
        follow = self.may_build and scope is not None  # settings objects (`Built`) passed along
        args = []
        for a in call.args:
            if a.__class__ is ast.Starred:
                star = True
                break
            v = value(a)
            args.append(self._settings(a, scope) or v if follow and v is UNKNOWN else v)
        kwargs = []
        for k in call.keywords:
            if k.arg is None:
                star = True
            else:
                v = value(k.value)
                kwargs.append((k.arg, self._settings(k.value, scope) or v if follow and v is UNKNOWN else v))
        return CallArgs(tuple(args), tuple(kwargs), star)

    def _context(self, call: ast.Call, scope: _Scope) -> str | None:
        """The class of the multiprocessing context a call returns: `get_context("spawn")` is a SpawnContext;
        None where it is not such a call, or its method is not a literal."""
        if self.qualify(call.func, scope) not in CONTEXT_GETTERS:
            return None
        node = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "method"), None)
        method = self.value(node, scope) if node is not None else None
        return CONTEXT_CLASSES.get(method) if isinstance(method, str) else None

    def _settings(self, node: ast.AST, scope: _Scope) -> Built | None:
        """The settings object an argument is, built inline or bound to a name in scope."""
        if node.__class__ is ast.Name:
            return scope.settings(node.id)
        if node.__class__ is ast.Call:
            qualname = self.qualify(node.func, scope)
            if qualname in SETTINGS_CLASSES:
                return Built(qualname, self.call_args(node, scope), loc_of(node))
        return None

    def _loader(self, call: ast.Call, scope: _Scope, args: CallArgs, classes: tuple[str, ...]) -> Loader:
        """What a DataLoader (one of `classes`) runs: its dataset's class, the collate and worker-init functions, num_workers."""
        found: dict[str, ast.AST] = {}
        positional = []
        for a in call.args:
            if a.__class__ is ast.Starred:
                break
            positional.append(a)
        for name, pos in _LOADER_PARAMS:
            node = next((k.value for k in call.keywords if k.arg == name), None)
            if node is None and pos < len(positional):
                node = positional[pos]
            if node is not None:
                found[name] = node
        dataset = found.get("dataset")
        if dataset.__class__ is ast.Name:
            dataset = scope.instance(dataset.id)
        elif dataset.__class__ is ast.Call:
            dataset = self.qualify(dataset.func, scope)
        else:
            dataset = None
        collate, init = (self.qualify(found[n], scope) if n in found else None for n in ("collate_fn", "worker_init_fn"))
        return Loader(classes, dataset, collate, init, args.get("num_workers", 5, 0))

    @staticmethod
    def _may_load(call: ast.Call, scope: _Scope) -> bool:
        """Whether a call of a project callee named as PEP 8 names classes (the caller tests that, for every
        call the facts keep: ~165,000 on torch's own tree) may build a DataLoader subclass with something to
        follow (see _loader): the class of a dataset passed first is named so (an instance, or a class called
        there; the linker follows a dataset only where it is a class), or a collate_fn or worker_init_fn may be
        among its arguments."""
        args = call.args
        if args:
            first = args[0]
            cls = first.__class__
            if cls is ast.Call:
                func = first.func
                kind = func.__class__
                if (func.id if kind is ast.Name else func.attr if kind is ast.Attribute else "")[:1].isupper():
                    return True
            elif cls is ast.Name:
                held = scope.instance(first.id)
                if held and _named_as_class(held):
                    return True
        return len(args) > _COLLATE_AT or any(k.arg in _LOADER_FOLLOWS for k in call.keywords)

    def _classes_chosen(self, node: ast.IfExp, scope: _Scope) -> tuple[str, ...] | None:
        """The classes a conditional chooses among (`A if c else B if d else C`), where each is named and may
        be a DataLoader: torch's, or one named as a class (see call_event); else None."""
        chosen: list[str] = []
        pending: list[ast.AST] = [node]  # without recursion, as _device_is_cuda
        while pending:
            node = pending.pop()
            if node.__class__ is ast.IfExp:
                pending += (node.orelse, node.body)
                continue
            qualname = self.qualify(node, scope)
            if qualname is None or not (qualname in DATALOADERS or _named_as_class(qualname)):
                return None
            chosen.append(qualname)
        return tuple(dict.fromkeys(chosen))

    def refs_in(self, node: ast.AST, scope: _Scope, imported: bool = False) -> list[str]:
        """The local functions named in a display, nested ones too: a dict's values, the items of a list,
        tuple or set (`{"train": train}`, `[a, b]`). A callee that gets the display may call any of them.
        `imported`: imported names too (for a runner, apis.RUNNERS, or a table one may get)."""
        refs: list[str] = []
        pending = [node]  # without recursion: displays may nest deep
        Name = ast.Name
        while pending:
            node = pending.pop()
            items = node.values if node.__class__ is ast.Dict else node.elts
            for item in reversed(items):
                cls = item.__class__
                if cls is Name:
                    q = scope.lookup(item.id)
                    if q and (imported or q.startswith(_THIS_DOT)):
                        refs.append(q)
                elif cls in _DISPLAYS:
                    pending.append(item)
        return refs

    @staticmethod
    def _table(scope: _Scope, name: str, imported: bool) -> list[str] | tuple[str, ...]:
        """The functions a name bound to a display names (_Scope.table): the local ones, and for a runner
        or a process starter (`imported`) the imported ones too."""
        held = scope.table(name)
        return held if imported else [q for q in held if q.startswith(_THIS_DOT)]

    def value(self, node: ast.AST | None, scope: _Scope) -> Any:
        """`literal(node)`, where a name (or a dict's key or value) bound once to a literal is that literal."""
        cls = node.__class__
        if cls is ast.Name:
            value = scope.constant(node.id)
            return Named(value) if isinstance(value, str) else value
        if cls is ast.Attribute and scope.attrs and node.value.__class__ is ast.Name:
            held = scope.attrs.get((node.value.id, node.attr))
            if held is not None and self.attribute_holds(node.value.id, held, scope):
                return Named(held[0])
        if cls is ast.Dict and all(k is not None for k in node.keys):
            out = {}
            for k, v in zip(node.keys, node.values):
                key = self.value(k, scope)
                if key is UNKNOWN or isinstance(key, (dict, list)):
                    return UNKNOWN
                out[key] = self.value(v, scope)
            return out
        return literal(node)

    def _device_is_cuda(self, node: ast.AST, scope: _Scope) -> bool:
        pending = [node]  # the alternatives `a if c else b if d else ...`, without recursion
        while pending:
            node = pending.pop()
            if isinstance(node, ast.Name):
                if scope.is_cuda(node.id):
                    return True
            elif isinstance(node, ast.Constant):
                if isinstance(node.value, str) and node.value.startswith("cuda"):
                    return True
            elif isinstance(node, ast.Call) and self.qualify(node.func, scope) == "torch.device":
                if node.args:
                    pending.append(node.args[0])
            elif isinstance(node, ast.IfExp):
                pending += (node.orelse, node.body)
            # A device named from parts, as data-parallel scripts name theirs: f"cuda:{rank}",
            # "cuda:" + str(rank), "cuda:%d" % rank, "cuda:{}".format(rank).
            elif isinstance(node, ast.JoinedStr):
                if node.values:
                    first = node.values[0]
                    pending.append(first.value if isinstance(first, ast.FormattedValue) else first)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
                pending.append(node.left)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
                if isinstance(node.func.value, ast.Constant):
                    pending.append(node.func.value)
        return False

    def expression_events(self, node: ast.AST, scope: _Scope, out: list[Event]) -> None:
        """Events of the calls inside an expression, innermost (evaluated first) first."""
        # Post-order with an explicit stack: `1 + 1 + ... + 1` nests one level per term, and
        # CPython compiles such chains thousands deep. This loop is the hottest code in lint,
        # hence the exact-type tests, the per-class table of fields that can hold nodes, and
        # the commonest nodes (names, attribute chains, calls) handled without that table.
        stack: list = [node]
        pop, push = stack.pop, stack.append
        Attribute, Call, Constant, Name = ast.Attribute, ast.Call, ast.Constant, ast.Name
        no_events, table = _NO_EVENTS, _NODE_FIELDS
        while stack:
            node = pop()
            cls = node.__class__
            while cls is Attribute:  # `a.b.c`: nothing but its value can call
                node = node.value
                cls = node.__class__
            if cls is Name:
                continue
            if cls is Call:
                push((node,))  # popped once the arguments are done: the call itself
                keywords = node.keywords
                if keywords:  # most calls have none
                    for i in range(len(keywords) - 1, -1, -1):  # a keyword's value is all it holds
                        value = keywords[i].value
                        if value.__class__ is not Name:
                            push(value)
                args = node.args
                if args:
                    for i in range(len(args) - 1, -1, -1):
                        value = args[i]
                        if value.__class__ is not Name:
                            push(value)
                push(node.func)  # popped first: the callee is evaluated before the arguments
                continue
            if cls is tuple:  # (call,): its arguments are done, now the call itself
                self.call_event(node[0], scope, out)
                continue
            if cls is Constant:
                if node.value in _ENV_NAMES:
                    out.append(Event(loc_of(node), EnvRead(node.value)))
                continue
            if cls in no_events:
                continue
            fields = table.get(cls)
            if fields is None:
                fields = _node_fields(cls)
            for name in fields:  # reversed order: the first child is popped first
                value = getattr(node, name, None)
                if value.__class__ is list:
                    for item in reversed(value):
                        if item is not None:  # a dict's `**other` has key None
                            push(item)
                elif value is not None:
                    push(value)

    def call_event(self, call: ast.Call, scope: _Scope, out: list[Event]) -> None:
        func = call.func
        is_name = func.__class__ is ast.Name
        qualname = self.qualify(func, scope)
        self._called = (call, qualname)
        if qualname is not None:
            root, _, rest = qualname.partition(".")
            if root == THIS:
                if self.stars:
                    name = rest.partition(".")[0]
                    if name not in self.local_defs and name not in self.module_scope.aliases:
                        # `$.name` that a star import may bind (_star_global): a call into what it imports.
                        self.calls_into.update(_package_and_module(m) for m in self.stars)
            else:  # the package and its first module: some packages are torch-free in part (TORCH_FREE_MODULES)
                self.calls_into.add(f"{root}.{rest.partition('.')[0]}" if rest else root)
        if qualname is None and is_name:
            held = scope.instance(func.id)
            if held:
                qualname = f"{held}.__call__"  # model(x) runs Net.forward
        method = func.attr if func.__class__ is ast.Attribute else None
        if method == "Process" and func.value.__class__ is ast.Call:  # get_context("spawn").Process(...)
            context = self._context(func.value, scope)
            if context:
                qualname = f"{context}.Process"
        # What a new process runs may be imported: mp.Process(target=spawned_train) (OpenNMT's onmt/bin/train.py).
        starter = qualname in PROCESS_STARTERS
        # Local functions handed over by name, alone or in a display (or a name bound to one): Fire(main),
        # spawn(worker), Fire({"train": train}); or called through a subscription of such a name,
        # COMMANDS[name](). Each may run there, as a call of it would.
        refs: list[str] = []
        loader = qualname in DATALOADERS  # its callbacks are followed by its Loader event instead
        # The parameters of the function whose body this is, where it may pass one on (see Forward).
        guarded = self._guarded
        params = guarded[2] if guarded is not None and out is guarded[0] else ()
        passes = False  # a name among the arguments is one of them
        # A name bound to a choice of classes that may be DataLoaders: `loader(dataset, ...)`.
        chosen = scope.choice(func.id) if qualname is None and is_name and self.has_choices else None
        if not loader:
            Name, tables, local_defs = ast.Name, self.has_tables, self.local_defs
            # A process starter or a command-line runner may get a function imported from another module.
            imported = starter or qualname in RUNNERS
            for value in call.args:
                cls = value.__class__
                if cls is Name:
                    if value.id in params:
                        passes = True
                    q = scope.lookup(value.id) if imported or value.id in local_defs else None  # an imported worker too
                    if q and (imported or q.startswith(_THIS_DOT)):
                        refs.append(q)
                    elif tables:
                        refs += self._table(scope, value.id, imported)
                elif cls in _DISPLAYS:
                    refs += self.refs_in(value, scope, imported)
            for k in call.keywords:
                value = k.value
                cls = value.__class__
                if cls is Name:
                    if value.id in params:
                        passes = True
                    q = scope.lookup(value.id) if imported or value.id in local_defs else None  # an imported worker too
                    if q and (imported or q.startswith(_THIS_DOT)):
                        refs.append(q)
                    elif tables:
                        refs += self._table(scope, value.id, imported)
                elif cls in _DISPLAYS:
                    refs += self.refs_in(value, scope, imported)
            if func.__class__ is ast.Subscript:  # `COMMANDS[name]()` calls one of them, an imported one too
                held = func.value
                if held.__class__ is Name:
                    if tables:
                        refs += scope.table(held.id)
                elif held.__class__ in _DISPLAYS:
                    refs += self.refs_in(held, scope, imported=True)
        dropped = None if self.calls is None or refs else self.calls.dropped_library(qualname, method)
        args = None
        loc = None  # made only for a call with an event (most are dropped); then its events share it
        if dropped is None:
            args = self.call_args(call, scope, constants=qualname in _CONSTANT_CALLS)
            loc = _call_loc(call)
            out.append(Event(loc, Call(qualname, method, args, tuple(refs), self.no_grad_depth > 0)))
            # Only a call the linker may enter gets a value passed on (see Forward): not a modelled API's, nor
            # one into a library the project does not provide (kept for an op rule), which it never enters.
            if (
                passes and qualname is not None and qualname not in MODELS
                and qualname.partition(".")[0] not in (_STDLIB if self.calls is None else self.calls.libraries)
            ):  # fmt: skip
                _passed_on(call, params, len(out) - 1, guarded[3])
        elif dropped:
            self.dropped_libraries.add(dropped)
        if loader:
            loc = loc or _call_loc(call)
            out.append(Event(loc, self._loader(call, scope, args or self.call_args(call), (qualname,))))
        elif chosen or (
            # inline, _named_as_class and the cheap tests of _may_load first: this runs for every call the facts keep
            args is not None and qualname is not None and qualname[qualname.rfind(".") + 1 :][:1].isupper()
            and (call.args or call.keywords) and self._may_load(call, scope)
        ):  # fmt: skip
            # A class of the project's may subclass DataLoader: what it would run is kept where there is
            # something to follow, and the linker follows it only if the class is one that takes
            # DataLoader's arguments (Project.is_loader).
            found = self._loader(call, scope, args or self.call_args(call), chosen or (qualname,))
            if found.dataset and not _named_as_class(found.dataset):
                # A function's result (`build_dataset(cfg)`): the linker follows a dataset that is a class only.
                found = Loader(found.classes, None, found.collate_fn, found.worker_init_fn, found.num_workers)
            if found.dataset or found.collate_fn or found.worker_init_fn:
                out.append(Event(loc or _call_loc(call), found))
        # CUDA work visible in the syntax, whatever the receiver is.
        if method == "cuda" and qualname != "torch.cuda":
            out.append(Event(loc or _call_loc(call), CudaWork(".cuda()")))
        elif method == "to":
            targets = list(call.args[:1]) + [k.value for k in call.keywords if k.arg == "device"]
            if any(self._device_is_cuda(t, scope) for t in targets):
                out.append(Event(loc or _call_loc(call), CudaWork(".to(cuda)")))
        elif qualname and qualname.startswith("torch."):
            if qualname in ("torch.cuda.init", "torch.set_default_device") and (
                qualname == "torch.cuda.init" or (call.args and self._device_is_cuda(call.args[0], scope))
            ):
                out.append(Event(loc or _call_loc(call), CudaWork(qualname)))
            else:
                for k in call.keywords:
                    if k.arg == "device" and self._device_is_cuda(k.value, scope):
                        loc = loc or _call_loc(call)
                        out.append(Event(loc, CudaWork(f"{qualname}(device=cuda)")))
        if scope.attrs:  # after its arguments were read: the call runs after that
            scope.attr_calls.append((call, qualname))

    # -- attributes bound to strings -----------------------------------------------
    #
    # `args.dist_backend = "nccl"`, then `init_process_group(backend=args.dist_backend, ...)` (torchvision's
    # references/classification/utils.py init_distributed_mode, copied into DeiT, MAE, DETR, ...). Where
    # the arguments of a call are read through constants (`value`), `NAME.attr` reads as the string last
    # stored to it only where nothing can have changed it since, that is where all of these hold:
    # - the store is `NAME.attr = "<string>"` (no other value, no name), and the read is in the same function
    #   or module body (not in a nested function, which may run at any time), in the same block as the
    #   store or one nested in it (not after an `if`, `with` or `try` the store is inside), and not inside a
    #   loop entered after the store, nor after one (an iteration may follow a store further down the loop);
    # - NAME is bound exactly once in that body (a parameter, or one assignment), so it is the same
    #   object, and the body is no generator or coroutine (other code runs at each yield or await);
    # - no other store or `del` of NAME.attr runs in between (augmented, a for or with target, in a tuple);
    # - no call in between gets NAME itself: anywhere in its arguments (`f(args)`, `setattr(args, ...)`,
    #   `vars(args)`, `f(*args)`), or as what its callee is reached through (`args.update(...)`,
    #   `args.__dict__.update(...)`). A call that gets only a value read from it (`print(args.rank)`, as
    #   torchvision does between the two lines) does not count;
    # - where NAME is a module-level name, or one a nested function, lambda or class of the body uses,
    #   no call in between of code that may name it: a function or class of this module, or a callee lint
    #   cannot name (a method of an object: `trainer.setup()`), but a builtin that runs none of the
    #   script's code (`print`, `len`, ...). A function imported from elsewhere
    #   (`torch.use_deterministic_algorithms`) cannot name the script's own variables.
    # Not modelled: a property or `__setattr__` of the object's class that stores another value, and code
    # called in between that stores through another reference to the same object (one the caller kept).
    # argparse's Namespace, which this pattern uses, has neither.

    def store_attribute(self, target: ast.Attribute, value: ast.AST | None, scope: _Scope) -> None:
        """A store to `NAME.attr` (`value` None: of no value known here, or a `for`/`with` target).

        Cheap, as every `self.x = ...` comes here: what may have changed the store is asked only
        where it is read (`attribute_holds`), which few are."""
        attrs = scope.attrs
        key = (target.value.id, target.attr)
        if attrs:
            attrs.pop(key, None)
        if value.__class__ is not ast.Constant or value.value.__class__ is not str:
            return
        if scope.node is None or scope.node.__class__ is ast.ClassDef:
            return
        if not attrs:
            scope.attr_calls = []
        attrs[key] = [value.value, len(scope.attr_calls)]

    def _store_self(self, attr: str, value: ast.AST | None, scope: _Scope) -> None:
        """A store to `self.<attr>` in a method: kept (ClassFacts.attrs) where it is the module's only one and
        builds an object of a named callee, `self.transform = Blur()`; any other store of it forgets it."""
        stores = self._self_attrs
        if attr in stores or value.__class__ is not ast.Call:
            stores[attr] = None
            return
        callee = self.qualify(value.func, scope)
        stores[attr] = (scope.class_name, callee) if callee else None

    def attribute_holds(self, base: str, held: list, scope: _Scope) -> bool:
        """Whether the store kept in `held` (to an attribute of `base`) is what a read here sees (see above)."""
        once, captured, suspends, _ = scope.attr_facts()
        if base not in once or suspends:
            return False
        fragile = scope.node.__class__ is ast.Module or base in captured  # the script's own code may reach it
        return not any(self._reaches(call, qualname, base, fragile, scope) for call, qualname in scope.attr_calls[held[1] :])

    def _reaches(self, call: ast.Call, qualname: str | None, base: str, fragile: bool, scope: _Scope) -> bool:
        """Whether a call may store to an attribute of `base`: it gets `base` itself, or (`fragile`) it may be
        the script's own code, which may name it."""
        if fragile and (qualname is None or qualname.startswith(_THIS_DOT)):
            func = call.func
            builtin = (
                qualname is None
                and func.__class__ is ast.Name
                and func.id in _PLAIN_BUILTINS
                and not any(func.id in s.attr_facts()[3] for s in (scope, self.module_scope) if s.node is not None)
            )
            if not builtin:
                return True
        root = call.func
        while True:  # what the callee is reached through: args.__dict__.update -> args
            cls = root.__class__
            if cls is ast.Attribute or cls is ast.Subscript:
                root = root.value
            elif cls is ast.Call:
                root = root.func
            else:
                break
        if root.__class__ is ast.Name and root.id == base:
            return True
        read_from: set[int] = set()  # names an attribute is read from: that passes a value, not the object
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            for sub in walk(arg):  # breadth first: an attribute before the name it is read from
                cls = sub.__class__
                if cls is ast.Attribute:
                    read_from.add(id(sub.value))
                elif cls is ast.Name and sub.id == base and id(sub) not in read_from:
                    return True
        return False

    def block(self, stmts: list[ast.stmt], scope: _Scope, out: list[Event], prefix: str, loop: bool = False) -> None:
        """The statements of a block nested in the body (an `if` branch, a loop's, a `try` clause): the
        attribute stores kept (`_Scope.attrs`) that it makes end with it; a loop's see none kept before it,
        and none are kept after it."""
        before = scope.attrs
        self.nested += 1
        if not before:  # the common case: nothing kept, no copy
            self.body(stmts, scope, out, prefix)
            self.nested -= 1
            if scope.attrs:
                scope.attrs = {}
            return
        scope.attrs = {} if loop else dict(before)
        self.body(stmts, scope, out, prefix)
        self.nested -= 1
        after = scope.attrs
        # The calls made inside stay in attr_calls: they count for the stores kept from before.
        scope.attrs = {} if loop else {key: held for key, held in before.items() if after.get(key) is held}

    def assign_target_events(self, target: ast.AST, value: ast.AST | None, scope: _Scope, out: list[Event], node):
        cls = target.__class__
        if cls is ast.Name:  # the commonest target, first
            name = target.id
            if scope.aliases:  # most are empty, and a test costs less than a call
                scope.aliases.pop(name, None)
            if scope.instances:
                scope.instances.pop(name, None)
            if scope.built:
                scope.built.pop(name, None)
            if scope.tables:
                scope.tables.pop(name, None)
            if scope.choices:
                scope.choices.pop(name, None)
            if scope.cuda_names:
                scope.cuda_names.discard(name)
            scope.shadowed.add(name)
            if value is None:
                return
            if value.__class__ in _DISPLAYS:
                refs = self.refs_in(value, scope, imported=True)  # a runner may get it; other callees take the local ones
                if refs:
                    scope.tables[name] = tuple(refs)
                    self.has_tables = True
                return
            if value.__class__ is not ast.Call:
                if value.__class__ is ast.IfExp:
                    chosen = self._classes_chosen(value, scope)
                    if chosen:
                        scope.choices[name] = chosen
                        self.has_choices = True
                        return
                elif (value.__class__ is ast.Name or value.__class__ is ast.Attribute) and not self.nested:
                    # `Aug = RandomFlip`, `shuffle = np.random.shuffle`: another name for what it names, from here
                    # on; not in a branch or loop, where it may not run (there the name is forgotten, as above).
                    referred = self._reference(value, scope)
                    if referred:
                        scope.aliases[name] = referred
                        return
                if self._device_is_cuda(value, scope):
                    scope.cuda_names.add(name)
                return
            func = value.func
            # The callee as call_event named it, where nothing it is named through was bound since: the
            # call's own event was the last (`x = f(y)`; a second target may rebind a name), and the name
            # the callee's chain starts from is not the one just unbound (`model = model.to(device)`).
            called, callee = self._called
            self._called = (None, None)
            if called is not value or _chain_root(func) == name:
                callee = self.qualify(func, scope)
            if callee in CONTEXT_GETTERS:  # mp = get_context("spawn"): its class, which says how it starts processes
                callee = self._context(value, scope) or callee
            if callee:
                scope.instances[name] = callee
                if callee in SETTINGS_CLASSES:
                    scope.built[name] = Built(callee, self.call_args(value, scope), loc_of(value))
            # `torch.device("cuda")`, or one whose argument is a CUDA device or mentions "cuda". The
            # callee is named again now that `name` holds an instance: a chain through `name` may
            # name another callee. Only an attribute chain ending in `.device` can be torch.device;
            # a bare name is looked up among aliases, which the instance does not change.
            if func.__class__ is ast.Attribute:
                device = func.attr == "device" and self.qualify(func, scope) == "torch.device"
            else:
                device = callee == "torch.device"
            if device and ((value.args and self._device_is_cuda(value.args[0], scope)) or _mentions_cuda(value)):
                scope.cuda_names.add(name)
            elif func.__class__ is ast.Attribute and func.attr == "format" and self._device_is_cuda(value, scope):
                scope.cuda_names.add(name)  # "cuda:{}".format(rank)
            return
        if cls is ast.Tuple or cls is ast.List:
            for t in target.elts:
                self.assign_target_events(t, None, scope, out, node)
            return
        if cls is ast.Subscript:
            container = self.qualify(target.value, scope)
            if container == _ENV:
                key = self.value(target.slice, scope)
                if isinstance(key, str):
                    out.append(Event(loc_of(node), EnvWrite(key, self.value(value, scope) if value is not None else UNKNOWN)))
            return
        if cls is ast.Attribute:
            if target.value.__class__ is ast.Name:
                self.store_attribute(target, value, scope)
                if target.value.id == "self" and scope.class_name is not None:
                    self._store_self(target.attr, value, scope)
                else:  # `dataset.transform = None`: the store may be to such an object
                    self._self_attrs[target.attr] = None
            else:
                self._self_attrs[target.attr] = None
            q = self.qualify(target, scope)
            if q in ("torch.backends.cudnn.benchmark", "torch.backends.cudnn.deterministic"):
                out.append(Event(loc_of(node), Cudnn(q.rsplit(".", 1)[1], literal(value) if value is not None else UNKNOWN)))
            return

    # -- statements ----------------------------------------------------------

    def body(self, stmts: list[ast.stmt], scope: _Scope, out: list[Event], prefix: str) -> None:
        for stmt in stmts:
            self.statement(stmt, scope, out, prefix)

    def statement(self, stmt: ast.stmt, scope: _Scope, out: list[Event], prefix: str) -> None:
        cls = stmt.__class__
        if cls is ast.Expr or cls is ast.Return:  # the commonest statements, first
            if stmt.value is not None:
                self.expression_events(stmt.value, scope, out)
        elif cls is ast.Assign:
            self.expression_events(stmt.value, scope, out)
            for t in stmt.targets:
                if t.__class__ is not ast.Name:  # a name has nothing inside that runs
                    self.target_subexpressions(t, scope, out)
                self.assign_target_events(t, stmt.value, scope, out, stmt)
        elif cls is ast.Import or cls is ast.ImportFrom:
            loads = self._import(stmt, scope)
            if loads:
                out.append(Event(loc_of(stmt), Import(loads)))
        elif cls is ast.FunctionDef or cls is ast.AsyncFunctionDef:
            for d in stmt.decorator_list:
                self.expression_events(d, scope, out)
            self.function(stmt, scope, prefix, class_name=None)
        elif cls is ast.ClassDef:
            for d in stmt.decorator_list + stmt.bases:
                self.expression_events(d, scope, out)
            self.class_def(stmt, scope, prefix)
        elif cls is ast.AnnAssign or cls is ast.AugAssign:
            if stmt.value is not None:
                self.expression_events(stmt.value, scope, out)
            if cls is ast.AugAssign and stmt.op.__class__ is ast.BitOr and self.qualify(stmt.target, scope) == _ENV:
                # `os.environ |= {...}` (3.9 on) writes as `os.environ.update({...})` does: modelled as that call.
                at = {"lineno": stmt.lineno, "col_offset": stmt.col_offset, "end_lineno": stmt.end_lineno, "end_col_offset": stmt.end_col_offset}
                update = ast.Attribute(value=stmt.target, attr="update", ctx=ast.Load(), **at)
                self.call_event(ast.Call(func=update, args=[stmt.value], keywords=[], **at), scope, out)
            self.target_subexpressions(stmt.target, scope, out)
            if stmt.value is not None or isinstance(stmt, ast.AugAssign):
                self.assign_target_events(stmt.target, stmt.value if isinstance(stmt, ast.AnnAssign) else None, scope, out, stmt)
        elif cls is ast.If:
            self.expression_events(stmt.test, scope, out)
            if _is_main_guard(stmt.test) and scope is self.module_scope:
                # The block runs when the file runs as a script, its else branch when it is imported.
                for when, block in (("main", stmt.body), ("import", stmt.orelse)):
                    if block:
                        out.append(Event(loc_of(stmt), Guard(when, True)))
                        self.block(block, scope, out, prefix)
                        out.append(Event(loc_of(stmt), Guard(when, False)))
            else:
                guarded = self._guarded
                if guarded is None or out is not guarded[0]:  # no guards here (see _walk_function)
                    self.block(stmt.body, scope, out, prefix)
                    self.block(stmt.orelse, scope, out, prefix)
                else:
                    start = len(out)
                    self.block(stmt.body, scope, out, prefix)
                    mid = len(out)
                    self.block(stmt.orelse, scope, out, prefix)
                    # An `if` of the body itself (in no block) whose body ends leaving the function: what follows
                    # it runs only where its test fails, as its `else` does (`if seed is None: return`). Its end,
                    # the body's, is set once the body is walked (_walk_function).
                    leaves = not self.nested and stmt.body[-1].__class__ in _LEAVES
                    if len(out) > start or leaves:
                        self._guard(stmt.test, scope, guarded, start, mid, -1 if leaves else len(out))
        elif cls is ast.With or cls is ast.AsyncWith:
            no_grad = 0
            for item in stmt.items:
                self.expression_events(item.context_expr, scope, out)
                if self._turns_grad_off(item.context_expr, scope):
                    no_grad += 1
                if item.optional_vars is not None:
                    self.assign_target_events(item.optional_vars, None, scope, out, stmt)
            self.no_grad_depth += no_grad
            self.block(stmt.body, scope, out, prefix)
            self.no_grad_depth -= no_grad
        elif cls is ast.For or cls is ast.AsyncFor:
            self.expression_events(stmt.iter, scope, out)
            self.assign_target_events(stmt.target, None, scope, out, stmt)
            self.block(stmt.body, scope, out, prefix, loop=True)
            self.block(stmt.orelse, scope, out, prefix, loop=True)
        elif cls is ast.While:
            self.expression_events(stmt.test, scope, out)
            self.block(stmt.body, scope, out, prefix, loop=True)
            self.block(stmt.orelse, scope, out, prefix, loop=True)
        elif isinstance(stmt, (ast.Try,) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())):
            self.block(stmt.body, scope, out, prefix)
            # `try: import torch` / `except ImportError: torch = None`: the import is what
            # the rest of the file means by the name, so a handler does not undo it.
            imported = dict(scope.aliases)
            for handler in stmt.handlers:
                self.block(handler.body, scope, out, prefix)
            for name, qualname in imported.items():
                if name not in scope.aliases:
                    scope.aliases[name] = qualname
                    scope.shadowed.discard(name)
            self.block(stmt.orelse, scope, out, prefix)
            self.block(stmt.finalbody, scope, out, prefix)
        elif hasattr(ast, "Match") and isinstance(stmt, ast.Match):
            self.expression_events(stmt.subject, scope, out)
            for case in stmt.cases:
                self.block(case.body, scope, out, prefix)
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if target.__class__ is ast.Attribute:  # of `self` or of another object: forgotten (see _store_self)
                    self._self_attrs[target.attr] = None
            if scope.attrs:
                for target in stmt.targets:
                    for sub in walk(target):
                        if sub.__class__ is ast.Attribute and sub.value.__class__ is ast.Name:
                            scope.attrs.pop((sub.value.id, sub.attr), None)
        elif isinstance(stmt, (ast.Global, ast.Nonlocal)):
            for name in stmt.names:
                scope.shadowed.discard(name)
        else:  # Expr, Return, Raise, Assert, ...
            for child in iter_child_nodes(stmt):
                self.expression_events(child, scope, out)

    def target_subexpressions(self, target: ast.AST, scope: _Scope, out: list[Event]) -> None:
        """Calls inside an assignment target, e.g. `x[f()] = 1`, still run."""
        if isinstance(target, ast.Subscript):
            self.expression_events(target.value, scope, out)
            self.expression_events(target.slice, scope, out)
        elif isinstance(target, ast.Attribute):
            self.expression_events(target.value, scope, out)

    def function(self, node, scope: _Scope, prefix: str, class_name: str | None) -> None:
        qualname = f"{prefix}{node.name}"
        if class_name is None:
            scope.aliases[node.name] = f"{THIS}.{qualname}"
            self.local_defs.add(node.name)
        inner = _Scope(scope, class_name=class_name, node=node)
        a = node.args
        named = a.posonlyargs + a.args + a.kwonlyargs
        params = [p.arg for p in named]
        for extra in (a.vararg, a.kwarg):
            if extra:
                params.append(extra.arg)
        for p in params:
            inner.shadowed.add(p)
        # A parameter annotated with a class whose methods are modelled holds an instance of it:
        # `def main(fabric: L.Fabric, seed)` then `fabric.seed_everything(seed)` (litgpt, lit-gpt's
        # scripts, run through `fabric.launch(main)`). The last name is tested first: it is rarely one.
        for p in named:
            ann = p.annotation
            if ann is not None:
                cls = ann.__class__
                if (cls is ast.Attribute and ann.attr in _ANNOTATED_LAST) or (cls is ast.Name and ann.id in _ANNOTATED_LAST):
                    held = self.qualify(ann, scope)
                    if held in _ANNOTATED:
                        inner.instances[p.arg] = held
        if class_name is not None and params and params[0] in ("self", "cls"):
            inner.shadowed.discard(params[0])
        facts = FunctionFacts(qualname, loc_of(node), params=tuple(params))
        decorated_no_grad = False
        if node.decorator_list:
            decorators = []
            for d in node.decorator_list:
                called = d.__class__ is ast.Call
                q = self.qualify(d.func if called else d, scope)
                if (q in _NO_GRAD or q in _GRAD_MODE_OFF_WHEN) and self._turns_grad_off(d, scope):
                    decorated_no_grad = True
                elif q and (self.calls is None or self.calls.dropped_library(q, None) is None):
                    decorators.append((q, called))  # project code, maybe: the linker looks at what it does
            facts.decorators = tuple(decorators)
        # The body runs when the function is called, and Python looks its names up then: after
        # the rest of the enclosing body (a `main()` at the top may call helpers defined below it).
        self._deferred.append((node, inner, facts, decorated_no_grad))

    def _walk_function(self, node, inner: _Scope, facts: FunctionFacts, decorated_no_grad: bool) -> None:
        outer_no_grad, outer_deferred = self.no_grad_depth, self._deferred
        self.no_grad_depth = 1 if decorated_no_grad else 0
        self._deferred = []
        # Its guards (ParamIf), where no decorator may call it with other arguments than its callers pass.
        decorators = node.decorator_list
        plain = not decorators or all(d.__class__ is ast.Name and d.id in _SAFE_DECORATORS for d in decorators)
        guards: list[ParamIf] = []
        passed: list[tuple] = []
        if plain:
            # The parameters a call binds one by one (`_place`): not `*args`, nor a method's `self`.
            a = node.args
            params = facts.params if a.vararg is None else tuple(p for p in facts.params if p != a.vararg.arg)
            if inner.class_name is not None and (a.posonlyargs or a.args) and not any(d.id == "staticmethod" for d in decorators):
                params = params[1:]
            self._guarded = (facts.events, guards, params, passed)
        else:
            self._guarded = None
        outer_calls, self.calls_into = self.calls_into, set()
        self.body(node.body, inner, facts.events, prefix=f"{facts.qualname}.")
        facts.calls_into, self.calls_into = tuple(sorted(self.calls_into)), outer_calls
        self._guarded = None
        functions = self.facts.functions
        before = len(functions)
        self._walk_deferred()  # functions defined inside, once this body's names are all bound
        # Now that the functions inside it, which may rebind its names (`nonlocal`), are walked:
        if guards:
            rebound = self._rebound({g.param for g in guards}, node, inner)
            end = len(facts.events)  # where an `if` that leaves the function has its `else` end (see statement)
            facts.guards = tuple(
                g if g.end >= 0 else ParamIf(g.param, g.pos, g.keyword, g.default, g.test, g.const, g.method, g.start, g.mid, end)
                for g in guards
                if g.param not in rebound
            )
        if passed:  # sifted once every function of the module is walked (see _sift_forwards)
            self._forwarders.append((node, inner, facts, passed))
        self.no_grad_depth, self._deferred = outer_no_grad, outer_deferred
        # Whether it turns gradients off for what it decorates (see below), where its last statement may
        # return what such a function does: `G()(fn)`, `torch.no_grad()`, a conditional, or a function it
        # defines. The cheap tests first: few functions decorate, and most end `return x` or `return f(x)`.
        # (Calling an `async def` gives a coroutine, no function.)
        last = node.body[-1]
        if last.__class__ is ast.Return and node.__class__ is ast.FunctionDef:
            value = last.value
            cls = value.__class__
            if (
                (cls is ast.Call and (value.func.__class__ in (ast.Call, ast.IfExp) or not (value.args or value.keywords)))
                or cls is ast.IfExp
                or (cls is ast.Name and len(functions) > before)
            ):
                facts.grad_off = self._grad_off(node, inner, facts.qualname)
        functions[facts.qualname] = facts

    def _guard(self, test: ast.AST, scope: _Scope, guarded: tuple, start: int, mid: int, end: int) -> None:
        """Add the `if` whose test is `test` and whose events are `start:mid` (body) and `mid:end` (else) to the
        function's guards (`guarded`: its events, guards and parameters) where the test reads a parameter alone
        (`_rebound` then tells the parameters the function binds again)."""
        cls = test.__class__
        const = None
        if cls is ast.Name:
            name, kind = test.id, "truth"
        elif cls is ast.UnaryOp and test.op.__class__ is ast.Not and test.operand.__class__ is ast.Name:
            name, kind = test.operand.id, "not"
        elif cls is ast.Compare and len(test.ops) == 1 and test.left.__class__ is ast.Name:
            op, const = test.ops[0].__class__, literal(test.comparators[0])  # `-1` too: a unary minus of a constant
            if op in _GUARD_IDENTITY and (const.__class__ is bool or const is None):
                kind = _GUARD_IDENTITY[op]
            elif op in _GUARD_COMPARE and const.__class__ in _GUARD_TYPES:  # neuralforecast's `if n_static_features > 0:`
                kind = _GUARD_COMPARE[op]
            else:
                return
            name = test.left.id
        else:
            return
        if name not in guarded[2]:
            return  # a local variable, the commonest case
        place = self._place(name, scope)
        if place is not None:
            pos, keyword, default, method = place
            guarded[1].append(ParamIf(name, pos, keyword, default, kind, const, method, start, mid, end))

    @staticmethod
    def _place(name: str, scope: _Scope) -> tuple[int | None, bool, Any, bool] | None:
        """How a call binds the parameter `name` of the function whose body `scope` is: its `pos`, `keyword`,
        `default` and `method`, as ParamIf has them. None for `*args`, `**kwargs` and a method's `self`."""
        node = scope.node
        a = node.args
        positional = a.posonlyargs + a.args
        pos = next((i for i, p in enumerate(positional) if p.arg == name), None)
        if pos is not None:
            # Defaults fill the last positional parameters, and one before the `/` takes no keyword (the
            # reference's "Function definitions", https://docs.python.org/3/reference/compound_stmts.html#function-definitions).
            at = pos - (len(positional) - len(a.defaults))
            default = literal(a.defaults[at]) if at >= 0 else UNKNOWN
            keyword = pos >= len(a.posonlyargs)
        else:
            at = next((i for i, p in enumerate(a.kwonlyargs) if p.arg == name), None)
            if at is None:
                return None  # *args or **kwargs: no literal
            default = a.kw_defaults[at]  # None: a keyword-only parameter with no default
            default = UNKNOWN if default is None else literal(default)
            keyword = True
        method = scope.class_name is not None
        if method and any(d.id == "staticmethod" for d in node.decorator_list):  # all Names: see _walk_function
            method = False  # no receiver: a call passes its arguments as they are, through the class or an instance
        elif method and pos is not None:
            if not pos:
                return None  # `self` (`cls`): the receiver, never an argument
            pos -= 1  # as a call through an instance passes it; `self` is never passed so
        return pos, keyword, default, method

    def _rebound(self, names: set[str], node, scope: _Scope, comprehensions: bool = False) -> set[str]:
        """Those of a function's parameters `names` that its body binds again: as its statements bind names
        (`_bound_by`), where no walrus is on one of its lines; else as `_bindings` reads every node. With
        `comprehensions`, also those a `for` may bind (`_for_targets`: a comprehension's, which a call in it
        reads; a loop's binds it again anyway). Asked of few functions."""
        lines = self.facts.lines
        text = None if lines is None else "\n".join(lines[node.lineno - 1 : node.end_lineno])
        if text is None or ":=" in text:
            if scope._bound is None:
                scope._bound = _bindings(node)
            once = scope._bound[2]
            found = {name for name in names if name not in once}
        else:
            found = _bound_by(node.body, names)
        if comprehensions and text is not None and "for" in text:
            found |= _for_targets(text, names)
        return found

    def _sift_forwards(self) -> None:
        """Set the Forwards of the module's functions, from the calls of each that pass a parameter on, keeping
        those whose callee may read what it is given: not a function of this module with neither guards nor
        calls that pass one on to such a callee in turn (most are not: the few this leaves are worth the
        look at what each function binds again, in `_forwards_of`)."""
        functions, classes = self.facts.functions, self.facts.classes
        reads = {qualname for qualname, f in functions.items() if f.guards}
        if self.stars:  # a star import may bind any name last (Project._through_stars): any may be read
            reads = None

        libraries = self.calls.libraries if self.calls is not None else None

        def may_read(qualname: str) -> bool:
            if SUPER_CALL in qualname and libraries is not None:
                # `super().__init__(in_features, ...)` of an nn.Module subclass: where every base of the class
                # is a library's, the call goes into no project code, which alone reads what it is given.
                owner = classes.get(qualname[len(_THIS_DOT) : qualname.index(SUPER_CALL)])
                if owner is not None and owner.bases and all(
                    b and b.partition(".")[0] in libraries and b not in MODELS and f"{b}.__init__" not in MODELS for b in owner.bases
                ):  # a modelled base (transformers' Trainer) reads what it is given
                    return False
            if reads is None or not qualname.startswith(_THIS_DOT) or "<" in qualname:
                return True  # another module's, or `cls.name()`, `super().name()`: not known here
            local = qualname[len(_THIS_DOT) :]
            if local in classes:
                local += ".__init__"  # a base's where not its own, maybe in another module
                if local not in functions:
                    return True
            return local in reads if local in functions else True

        pending = self._forwarders
        changed = True
        while changed and reads is not None:  # who passes on to a reader reads too, up the module's chains
            changed = False
            for _, _, facts, passed in pending:
                if facts.qualname not in reads and any(may_read(_callee_at(facts, at)) for at, _, _ in passed):
                    reads.add(facts.qualname)
                    changed = True
        for node, scope, facts, passed in pending:
            kept = [c for c in passed if may_read(_callee_at(facts, c[0]))]
            if kept:
                facts.forwards = self._forwards_of(kept, node, scope)

    def _forwards_of(self, passed: list[tuple], node, scope: _Scope) -> tuple[Forward, ...]:
        """A function's Forwards, from the calls that pass one of its parameters on (`passed`: event index, slot,
        parameter): those of a parameter a call binds (not `*args`, nor `self`) that it never binds again, and
        of its `**` parameter passed whole where it reads that nowhere else (see Forward)."""
        a = node.args
        spread = a.kwarg.arg if a.kwarg is not None else None
        places: dict[str, tuple | None] = {}
        kept = []
        vararg = a.vararg.arg if a.vararg is not None else None
        for at, slot, name in passed:
            if slot is None or (slot.__class__ is str and slot[:1] == "*"):
                if name == spread and (slot is None or slot == f"*{vararg}"):
                    kept.append((at, slot, name, None))
                continue
            if name not in places:
                places[name] = self._place(name, scope)
            if places[name] is not None:
                kept.append((at, slot, name, places[name]))
        if not kept:
            return ()
        spills = any(slot.__class__ is str and slot[:1] == "*" for _, slot, _, _ in kept)
        rebound = self._rebound({name for _, _, name, _ in kept} | ({vararg} if spills else set()), node, scope, comprehensions=True)
        if (
            spread is not None and spread not in rebound and any(place is None for _, _, _, place in kept)
            and not _spread_only(node, spread)
        ):  # fmt: skip
            rebound.add(spread)
        taken = tuple(p.arg for p in a.args + a.kwonlyargs)
        # How many positional parameters fill before `*args`, `self` not counted (as ParamIf.pos counts).
        method = scope.class_name is not None and not any(d.__class__ is ast.Name and d.id == "staticmethod" for d in node.decorator_list)
        spill = len(a.posonlyargs + a.args) - (1 if method else 0)
        return tuple(
            Forward(at, slot, name, *place) if place is not None
            else Forward(at, None, name, None, False, UNKNOWN, method, taken, None if slot is None else spill)
            for at, slot, name, place in kept
            if name not in rebound and not (slot is not None and vararg in rebound)
        )

    def _turns_grad_off(self, node: ast.AST, scope: _Scope) -> bool:
        """Whether a context manager or decorator expression turns gradients off: `torch.no_grad()`,
        `torch.inference_mode()`, `torch.set_grad_enabled(False)`. A mode that is not a literal counts
        as off for inference_mode (its usual use) and as on for set_grad_enabled (`set_grad_enabled(train)`
        in a loop that trains)."""
        called = node.__class__ is ast.Call
        q = self.qualify(node.func if called else node, scope)
        off_when = _GRAD_MODE_OFF_WHEN.get(q)
        if off_when is None:
            return q in _NO_GRAD
        if not called:  # `@torch.inference_mode` without parentheses decorates as inference_mode() does
            return off_when
        mode = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "mode"), None)
        if mode is None:
            return off_when  # inference_mode()'s default; set_grad_enabled() needs its mode
        if mode.__class__ is ast.Constant and mode.value.__class__ is bool:
            return mode.value is off_when
        return off_when

    # -- decorators that turn gradients off ----------------------------------------
    #
    # yolov5's utils/torch_utils.py, used as `@smart_inference_mode()` on val.py's and detect.py's run():
    #     def smart_inference_mode(torch_1_9=check_version(torch.__version__, "1.9.0")):
    #         def decorate(fn):
    #             return (torch.inference_mode if torch_1_9 else torch.no_grad)()(fn)
    #         return decorate
    # A function is a decorator that turns gradients off (GRAD_OFF_DECORATOR) where it takes one parameter
    # and every `return` in it (there is one at its end, and it is no generator) gives that parameter
    # decorated by a no_grad or inference_mode object, made with no arguments: `torch.no_grad()(fn)`, or a
    # conditional of such objects or of their classes. It is a factory of one (GRAD_OFF_FACTORY) where every
    # `return` gives such an object (`return torch.no_grad()`: it decorates too) or names such a decorator
    # defined in its body, and bound once there. Anything else (a wrapper that calls the function inside
    # `with torch.no_grad():`, a decorator that may return the function unchanged) does not count.

    def _grad_off(self, node: ast.FunctionDef, scope: _Scope, qualname: str) -> int:
        """GRAD_OFF_DECORATOR or GRAD_OFF_FACTORY where the function `qualname` is one (see above); else 0."""
        a = node.args
        param = a.args[0].arg if len(a.args) == 1 and not (a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg) else None
        for kind in (GRAD_OFF_DECORATOR, GRAD_OFF_FACTORY):
            if kind == GRAD_OFF_DECORATOR and param is None:
                continue
            if self._returns_grad_off(node.body[-1].value, kind, param, scope, qualname):
                # The last statement returns one; so must every other `return` (nested scopes are not this body's).
                pending = list(node.body[:-1])
                while pending:
                    sub = pending.pop()
                    cls = sub.__class__
                    if cls is ast.Return:
                        if sub.value is None or not self._returns_grad_off(sub.value, kind, param, scope, qualname):
                            return 0
                    elif cls is ast.Yield or cls is ast.YieldFrom:
                        return 0
                    elif cls not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda):
                        pending.extend(iter_child_nodes(sub))
                return kind
        return 0

    def _returns_grad_off(self, value: ast.AST, kind: int, param: str | None, scope: _Scope, qualname: str) -> bool:
        """Whether a `return` of the function `qualname` gives what one of that kind does (see above)."""
        if kind == GRAD_OFF_DECORATOR:  # grad_off_object(param)
            return (
                value.__class__ is ast.Call
                and len(value.args) == 1
                and not value.keywords
                and value.args[0].__class__ is ast.Name
                and value.args[0].id == param
                and self._grad_off_object(value.func, scope)
            )
        if value.__class__ is ast.Name:  # a decorator defined here, and bound once
            if scope.lookup(value.id) != f"{_THIS_DOT}{qualname}.{value.id}":
                return False
            inner = self.facts.functions.get(f"{qualname}.{value.id}")  # walked already: it is nested in this one
            if inner is None or inner.grad_off != GRAD_OFF_DECORATOR:
                return False
            if scope._bound is None:
                scope._bound = _bindings(scope.node)
            return value.id in scope._bound[2]
        return self._grad_off_object(value, scope)

    def _grad_off_object(self, node: ast.AST, scope: _Scope) -> bool:
        """Whether an expression is a no_grad or inference_mode object made with no arguments (`torch.no_grad()`,
        `(torch.inference_mode if new else torch.no_grad)()`), or a conditional of such objects."""
        pending = [node]
        while pending:
            node = pending.pop()
            if node.__class__ is ast.IfExp:
                pending += (node.body, node.orelse)
                continue
            if node.__class__ is not ast.Call or node.args or node.keywords:
                return False
            classes = [node.func]
            while classes:
                cls = classes.pop()
                if cls.__class__ is ast.IfExp:
                    classes += (cls.body, cls.orelse)
                elif self.qualify(cls, scope) not in _NO_GRAD:
                    return False
        return True

    def _walk_deferred(self) -> None:
        while self._deferred:
            pending, self._deferred = self._deferred, []
            for item in pending:
                self._walk_function(*item)

    def class_def(self, node: ast.ClassDef, scope: _Scope, prefix: str) -> None:
        qualname = f"{prefix}{node.name}"
        if prefix == "":
            scope.aliases[node.name] = f"{THIS}.{qualname}"
            self.local_defs.add(node.name)
        methods = []
        forwards_init = True
        body_scope = _Scope(scope, node=node)
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(stmt, scope, f"{qualname}.", class_name=qualname)
                methods.append(stmt.name)
                if stmt.name == "__init__":  # the last one defined is the class's
                    forwards_init = _forwards_init(stmt)
            elif isinstance(stmt, ast.ClassDef):
                self.class_def(stmt, body_scope, f"{qualname}.")
            else:
                # Class-body statements run at definition time; keep their events with the module.
                self.statement(stmt, body_scope, self._class_body_events, f"{qualname}.")
        bases = tuple(self.qualify(b, scope) for b in node.bases)
        post_init = _post_init_hook(node, [self.qualify(d.func if d.__class__ is ast.Call else d, scope) for d in node.decorator_list])
        self.facts.classes[qualname] = ClassFacts(qualname, loc_of(node), bases, tuple(methods), forwards_init, post_init=post_init)

    def run(self, tree: ast.Module) -> None:
        self.module_scope.node = tree
        self._class_body_events: list[Event] = []
        self._deferred = []
        out: list[Event] = []
        self.calls_into = set()
        self.body(tree.body, self.module_scope, out, prefix="")
        self.facts.calls_into = tuple(sorted(self.calls_into))
        self._walk_deferred()  # function and method bodies see the module as it is once it has run
        self.facts.body = out
        if self._forwarders:
            self._sift_forwards()
        classes = self.facts.classes
        for attr, kept in self._self_attrs.items():
            if kept is not None and kept[0] in classes:
                owner = classes[kept[0]]
                owner.attrs = (*owner.attrs, (attr, kept[1]))
        if self._class_body_events:
            # Calls in class bodies (layers built as class attributes) are reachable, not ordered.
            self.facts.functions["<class bodies>"] = FunctionFacts("<class bodies>", Loc(1, 1, 1, 1), self._class_body_events)
        self.facts.aliases = dict(self.module_scope.aliases)
        self.facts.dropped_libraries = tuple(sorted(self.dropped_libraries))
        if self.stars:
            self.facts.stars = tuple(self.stars)
            self.facts.star_bound = star_order(tree, self._star_nodes)
        module = self.module_scope
        if "__all__" in module.shadowed or "__all__" in module.aliases:  # bound at the top level: read it
            self.facts.exports = read_all(tree, self.facts.lines)


def decode_source(data: bytes) -> str:
    """Decode source bytes as Python would (PEP 263 cookie, BOM), raising UnicodeDecodeError/SyntaxError."""
    # Nearly every file has neither a BOM nor a coding cookie (which must sit in the first two
    # lines): that is UTF-8, and deciding it here spares importing tokenize on every run.
    second_newline = data.find(b"\n", data.find(b"\n") + 1)
    head = data if second_newline < 0 else data[:second_newline]
    if not data.startswith(b"\xef\xbb\xbf") and b"coding" not in head:
        return data.decode("utf-8")
    import io
    import tokenize

    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    return text[1:] if text.startswith("\ufeff") else text


def source_lines(text: str) -> list[str]:
    """The lines of source text as Python numbers them: split at `\\r\\n`, `\\r` and `\\n` only.

    `str.splitlines` also splits at form feeds, vertical tabs, U+2028 and other characters
    that Python's tokenizer reads as ordinary ones: after any of them, a `# noqa` and the
    quoted line text would belong to the wrong line.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines[-1] == "":  # the newline ending the last line starts no line of its own
        lines.pop()
    return lines


def extract(path: str, data: bytes, package: str = "", calls: CallFilter | None = None) -> ModuleFacts:
    """Build a module's facts from its bytes. Never raises for bad input: sets `error` instead.

    With `calls`, only the calls it keeps are recorded (see opscan.lint.relevance).
    """
    facts = ModuleFacts(path=path)
    try:
        text = decode_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        facts.error = f"cannot decode file: {exc}"
        return facts
    facts.lines = source_lines(text)
    facts.noqa, facts.file_noqa = scan_noqa(facts.lines)
    try:
        with warnings.catch_warnings():  # the user's invalid escapes etc. are not ours to print (3.12+ warns)
            warnings.simplefilter("ignore")
            tree = parse(text, path)
    except SyntaxError as exc:
        facts.error = f"syntax error: {exc.msg}"
        line = exc.lineno or 1
        facts.error_loc = Loc(line, max(exc.offset or 1, 1), line, max(exc.offset or 1, 1))
        return facts
    except RecursionError:  # deeper than CPython itself can compile
        facts.error = "cannot parse file: expressions are nested too deeply for Python's parser"
        return facts
    except MemoryError:  # the parser's own stack overflows this way on some versions
        facts.error = "cannot parse file: too deeply nested or too large for Python's parser (MemoryError)"
        return facts
    except ValueError as exc:  # NUL bytes on 3.10, which 3.11+ report as the SyntaxError above
        if "null bytes" in str(exc):
            facts.error = f"syntax error: {exc}"  # the same finding on every supported Python
            facts.error_loc = Loc(1, 1, 1, 1)
        else:
            facts.error = f"cannot parse file: {exc}" if str(exc) else "cannot parse file: ValueError"
        return facts
    try:
        _FactsBuilder(facts, package, calls).run(tree)
    except RecursionError:
        facts.error = "cannot analyse file: expressions are nested too deeply"
        facts.body, facts.functions, facts.classes = [], {}, {}
    return facts
