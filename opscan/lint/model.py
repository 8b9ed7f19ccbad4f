"""Plain data that the lint passes exchange: locations, call arguments, what calls and statements do,
and the base of what a fix changes (`Edit`).

Everything here is picklable and holds no AST nodes, so a module's facts can be
cached by file content.
"""

from __future__ import annotations

from opscan._plain import Frozen, by_fields

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up ~3 ms; annotations are strings here
    from typing import Any

    from opscan.findings import Finding
    from opscan.lint.fix.planner import Planner


# Shared with the rules data (its `when` predicates), so it lives in the base layer.
from opscan._plain import UNKNOWN  # noqa: E402

class Named(str):
    """A string literal read through a name bound once to it (`WS = ":4096:2"`; `os.environ[...] = WS`).

    It is that string everywhere a value is compared or printed; a fix that
    would move the statement elsewhere sees that it reads a name.
    """

    __slots__ = ()


def truth(value: Any) -> Any:
    """`bool(value)` for a literal, UNKNOWN for an unknown: what an `if value:` decides, in a catalogue
    helper (`frameworks.If`) or a project function (`facts.Guarded`)."""
    return UNKNOWN if value is UNKNOWN else bool(value)


CUBLAS = "CUBLAS_WORKSPACE_CONFIG"
VALID_CUBLAS = (":4096:8", ":16:8")  # the only values torch's check accepts, compared as strings
CUBLAS_VALUE = VALID_CUBLAS[0]  # the value the fixes write
MISSING: Any = object()


class Loc(Frozen):
    """A source span: 1-based lines, 1-based columns, end exclusive as in ruff."""

    _fields = ("line", "col", "end_line", "end_col")
    __slots__ = _fields

    def __reduce__(self):  # by_fields spelled out: facts hold these by the hundred thousand, pickled to the parent
        return (Loc, (self.line, self.col, self.end_line, self.end_col))

    def __init__(self, line: int, col: int, end_line: int, end_col: int):
        self.line = line
        self.col = col
        self.end_line = end_line
        self.end_col = end_col

    # Spelled out: locations are compared and hashed by the hundred thousand (DET007's `seen`).
    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Loc:
            return NotImplemented
        return self.line == other.line and self.col == other.col and self.end_line == other.end_line and self.end_col == other.end_col

    def __hash__(self) -> int:
        return hash((self.line, self.col, self.end_line, self.end_col))


class CallArgs(Frozen):
    """The literal arguments of one call site: positional values and keyword values.

    Values are Python literals (str, int, float, bool, None, tuples) or UNKNOWN.
    `star` is True when the call passes *args or **kwargs, so absent
    parameters are unknown rather than defaulted.
    """

    _fields = ("args", "kwargs", "star")
    __slots__ = _fields

    def __reduce__(self):  # by_fields spelled out, as Loc's
        return (CallArgs, (self.args, self.kwargs, self.star))

    def __init__(self, args: tuple[Any, ...] = (), kwargs: tuple[tuple[str, Any], ...] = (), star: bool = False):
        self.args = args
        self.kwargs = kwargs
        self.star = star

    def get(self, name: str, pos: int | None = None, default: Any = None) -> Any:
        """The value passed for a parameter by keyword or position, else `default` (UNKNOWN under *args/**kwargs)."""
        for key, value in self.kwargs:
            if key == name:
                return value
        if pos is not None and pos < len(self.args):
            return self.args[pos]
        return UNKNOWN if self.star else default

    def passed(self, name: str, pos: int | None = None) -> bool:
        return any(k == name for k, _ in self.kwargs) or (pos is not None and pos < len(self.args))


class Built(Frozen):
    """An argument that is a settings object built in the same scope with literal arguments.

    `TrainingArguments(output_dir="out", full_determinism=True)`, passed inline or
    through a name bound to it, reaches `Trainer(args=...)` as this value instead of
    UNKNOWN, so the Trainer's model can read its settings and a fix can edit the
    call that built it (at `loc`). Only the classes `frameworks.SETTINGS_CLASSES`
    names are followed.
    """

    _fields = ("qualname", "args", "loc")
    __slots__ = _fields
    __reduce__ = by_fields  # pickled with the facts: smaller than the slots' state

    def __init__(self, qualname: str, args: CallArgs, loc: Loc):
        self.qualname = qualname
        self.args = args
        self.loc = loc


# -- what calls and statements do ------------------------------------------------
#
# A model (`apis`, `frameworks`) returns effects for one call; the facts pass records
# the effects it sees in the syntax (an `os.environ[...] =` assignment, a cuDNN flag
# assignment, `.cuda()`). Values that cannot be known statically are UNKNOWN.


class Effect(Frozen):
    """What a call or statement does to the state determinism depends on."""

    __slots__ = ()
    __reduce__ = by_fields  # pickled with the facts: smaller than the slots' state


class Seed(Effect):
    """Global RNGs seeded, in order: "random", "numpy", "torch", "torch-cuda", "torch-generator", ..."""

    _fields = ("libs",)
    __slots__ = _fields

    def __init__(self, libs: tuple[str, ...]):
        self.libs = libs


class Determinism(Effect):
    """`torch.use_deterministic_algorithms(mode, warn_only=warn_only)`: each a bool or UNKNOWN."""

    _fields = ("mode", "warn_only")
    __slots__ = _fields

    def __init__(self, mode: Any, warn_only: Any = False):
        self.mode = mode
        self.warn_only = warn_only


class EnvWrite(Effect):
    """An environment variable set: `value` is a str, another literal, or UNKNOWN."""

    _fields = ("var", "value")
    __slots__ = _fields

    def __init__(self, var: str, value: Any):
        self.var = var
        self.value = value


class EnvRead(Effect):
    """An environment variable looked at (a constant naming it counts)."""

    _fields = ("var",)
    __slots__ = _fields

    def __init__(self, var: str):
        self.var = var


class Cudnn(Effect):
    """`torch.backends.cudnn.<flag> = value`: flag "benchmark" or "deterministic", value a literal or UNKNOWN."""

    _fields = ("flag", "value")
    __slots__ = _fields

    def __init__(self, flag: str, value: Any):
        self.flag = flag
        self.value = value


class CudaWork(Effect):
    """Work that starts CUDA; `call` says which, for messages: ".cuda()", ".to(cuda)", "torch.cuda.init"."""

    _fields = ("call",)
    __slots__ = _fields

    def __init__(self, call: str):
        self.call = call


class Imported(Effect):
    """The import of a library that chooses, when first imported, whether it runs torch (`frameworks.BACKENDS`:
    keras reads KERAS_BACKEND then). The linker adds one where an import of it runs; no facts hold it."""

    _fields = ("package",)
    __slots__ = _fields

    def __init__(self, package: str):
        self.package = package


# -- what the linker follows --------------------------------------------------------


class Call(Frozen):
    """A call site, as the facts pass records it.

    `qualname` is the callee resolved through aliases (THIS-prefixed for local
    definitions, None if unknown); `method` the bare attribute name of a call on
    an unknown receiver; `refs` the qualnames of local functions passed as
    arguments (`spawn(worker)`); `no_grad` whether it runs under no_grad or inference_mode.
    """

    _fields = ("qualname", "method", "args", "refs", "no_grad")
    __slots__ = _fields

    def __reduce__(self):  # by_fields spelled out, as Loc's
        return (Call, (self.qualname, self.method, self.args, self.refs, self.no_grad))

    def __init__(self, qualname: str | None, method: str | None, args: CallArgs, refs: tuple[str, ...] = (), no_grad: bool = False):
        self.qualname = qualname
        self.method = method
        self.args = args
        self.refs = refs
        self.no_grad = no_grad


class Import(Frozen):
    """An import statement: the dotted modules it may load, in order."""

    _fields = ("modules",)
    __slots__ = _fields
    __reduce__ = by_fields  # pickled with the facts: smaller than the slots' state

    def __init__(self, modules: tuple[str, ...]):
        self.modules = modules


class Loader(Frozen):
    """A `torch.utils.data.DataLoader(...)` built here, or maybe one, and the project code it runs while iterating.

    `classes` is what is called: torch's DataLoader, or a project class that the
    linker follows only if it is a subclass of it that takes its arguments
    (`Project.is_loader`). `dataset` is the qualified name of the dataset's class
    (its `__getitem__` and `__iter__` run), `collate_fn` and `worker_init_fn`
    those of the functions passed; each None when not passed or not known.
    `num_workers` is the literal passed (0 when absent, UNKNOWN when computed or
    under **kwargs): with more than 0, the dataset and collate_fn run in worker
    processes, and worker_init_fn runs only there.
    """

    _fields = ("classes", "dataset", "collate_fn", "worker_init_fn", "num_workers")
    __slots__ = _fields
    __reduce__ = by_fields  # pickled with the facts: smaller than the slots' state

    def __init__(
        self, classes: tuple[str, ...], dataset: str | None, collate_fn: str | None, worker_init_fn: str | None, num_workers: Any
    ):
        self.classes = classes
        self.dataset = dataset
        self.collate_fn = collate_fn
        self.worker_init_fn = worker_init_fn
        self.num_workers = num_workers


class Guard(Frozen):
    """One end of the events of `if __name__ == "__main__":` (`when` "main": run as a script)
    or of its else branch (`when` "import": run when imported); `begin` opens, else closes."""

    _fields = ("when", "begin")
    __slots__ = _fields
    __reduce__ = by_fields  # pickled with the facts: smaller than the slots' state

    def __init__(self, when: str, begin: bool):
        self.when = when
        self.begin = begin


# ---------------------------------------------------------------- what a fix changes

# The typed `Fix.edit` of lint's findings. Each rule that offers a fix defines its edit
# class in its own module, beside its check, and the edit plans itself: `plan(planner,
# finding)` finds its target in the file's syntax tree and records the change on the
# planner (`opscan.lint.fix.planner`), or returns False where the source does not have the
# shape the fix expects. libcst is imported only inside `plan`, so plain linting, which
# only builds edits, never loads it. (Here, not in a module of its own: every rule module
# imports it on every run, and a module costs lint's start-up ~0.1 ms.)


class Edit(Frozen):
    """A fix's change, planned with libcst when fixing. Subclasses are slotted value classes."""

    __slots__ = ()
    # The fixer plans a file's edits by `order`, then by position: edits in place first
    # (0-2), then statements moved or inserted at the top of the module (3-4), then the
    # insertion of DET001's call where seeding runs (5), which may add `import torch` below that top group.
    order = 0

    def plan(self, planner: Planner, finding: Finding) -> bool:
        """Record this edit on `planner` for `finding`; False where its target is not found."""
        raise NotImplementedError
