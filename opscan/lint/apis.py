"""Models of the core APIs (torch, random, numpy, os) that seed, enable determinism or set the environment.

Same interface as `frameworks.MODELS`: qualified name -> function of the call's
literal arguments returning the effects in the order they happen.
"""

from __future__ import annotations

from opscan.lint.model import UNKNOWN, CallArgs, Determinism, EnvWrite, Seed

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up ~3 ms; annotations are strings here
    from typing import Callable

    from opscan.lint.model import Effect


def _seed(param: str, *libs: str) -> Callable[[CallArgs], list[Effect]]:
    """A seeding call whose seed is parameter `param` (first position); no seed or a literal None is none.

    random.seed(a=None) and np.random.seed(seed=None) reseed from the OS's entropy (CPython
    Lib/random.py, Random.seed: "None or no argument seeds from current time or from an operating
    system specific randomness source"; numpy/random/mtrand.pyx, RandomState.seed -> _legacy_seeding:
    seed None -> a fresh SeedSequence), which un-seeds rather than seeds; torch.manual_seed(None),
    torch.cuda.manual_seed[_all](None) raise TypeError at `seed = int(seed)` (torch 2.14.1
    torch/random.py:63, torch/cuda/random.py:102 and :121) and Generator.manual_seed(None) raises
    RuntimeError ("manual_seed expected a long"), as does each without its argument.
    """

    def model(args: CallArgs) -> list[Effect]:
        return [] if args.get(param, 0, None) is None else [Seed(libs)]

    return model


def _use_deterministic_algorithms(args: CallArgs) -> list[Effect]:
    return [Determinism(args.get("mode", 0, UNKNOWN), args.get("warn_only", 1, False))]


# torch.set_deterministic(d), the name use_deterministic_algorithms had before 1.8: from the rename
# (pytorch/pytorch PR #49904) it warns and calls `use_deterministic_algorithms(d)` (torch/__init__.py:
# `def set_deterministic(d): ... warnings.warn(...); use_deterministic_algorithms(d)`), until its removal
# (issue #58096). Where it is gone, the call raises AttributeError before any training: counting it as
# enabling determinism never makes a false DET001 (fairseq's speech_to_speech benchmarking scripts).
def _set_deterministic(args: CallArgs) -> list[Effect]:
    return [Determinism(args.get("d", 0, UNKNOWN), False)]


def _set_deterministic_debug_mode(args: CallArgs) -> list[Effect]:
    # torch/__init__.py: "default"/0 -> off, "warn"/1 -> warn_only, "error"/2 -> strict.
    mode = args.get("debug_mode", 0, UNKNOWN)
    table = {"default": (False, False), 0: (False, False), "warn": (True, True), 1: (True, True), "error": (True, False), 2: (True, False)}
    if mode is UNKNOWN or mode not in table:
        return [Determinism(UNKNOWN, UNKNOWN)]
    on, warn = table[mode]
    return [Determinism(on, warn)]


def _environ_setdefault(args: CallArgs) -> list[Effect]:
    var = args.get("key", 0, UNKNOWN)
    return [EnvWrite(var, args.get("default", 1, None))] if isinstance(var, str) else []


def _putenv(args: CallArgs) -> list[Effect]:
    var = args.get("name", 0, UNKNOWN)
    return [EnvWrite(var, args.get("value", 1, UNKNOWN))] if isinstance(var, str) else []


def _environ_update(args: CallArgs) -> list[Effect]:
    effects = []
    mapping = args.args[0] if args.args else None
    if isinstance(mapping, dict):
        for var, value in mapping.items():
            if isinstance(var, str):
                effects.append(EnvWrite(var, value))
    for var, value in args.kwargs:
        effects.append(EnvWrite(var, value))
    return effects


# np.random.default_rng(seed=None) and RandomState(seed=None): None draws fresh OS entropy (numpy/random/
# _generator.pyx default_rng, mtrand.pyx RandomState.__init__ -> _legacy_seeding), so only a seed seeds.
_default_rng = _seed("seed", "numpy-generator")


MODELS: dict[str, Callable[[CallArgs], list[Effect]]] = {
    "torch.manual_seed": _seed("seed", "torch"),
    "torch.random.manual_seed": _seed("seed", "torch"),
    "torch.cuda.manual_seed": _seed("seed", "torch-cuda"),
    "torch.cuda.manual_seed_all": _seed("seed", "torch-cuda"),
    "torch.cuda.random.manual_seed": _seed("seed", "torch-cuda"),
    "torch.cuda.random.manual_seed_all": _seed("seed", "torch-cuda"),
    "torch.Generator.manual_seed": _seed("seed", "torch-generator"),
    "random.seed": _seed("a", "random"),
    "numpy.random.seed": _seed("seed", "numpy"),
    "numpy.random.default_rng": _default_rng,
    "numpy.random.RandomState": _default_rng,
    # Random(x=None) calls self.seed(x) (CPython Lib/random.py, Random.__init__): a generator of its own,
    # seeded as np.random.default_rng(seed) is, and unseeded without x.
    "random.Random": _seed("x", "random-generator"),
    "numpy.random.Generator": lambda args: [],
    "torch.use_deterministic_algorithms": _use_deterministic_algorithms,
    "torch.set_deterministic": _set_deterministic,
    "torch.set_deterministic_debug_mode": _set_deterministic_debug_mode,
    "os.environ.setdefault": _environ_setdefault,
    "os.environ.update": _environ_update,
    "os.putenv": _putenv,
}

# torch's DataLoader: built in code that runs, it runs its dataset's __getitem__/__iter__, its collate_fn
# and its worker_init_fn (the facts pass records a Loader event; the linker follows them). A project
# subclass that takes its arguments does the same (Project.is_loader).
DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})

# Global RNG functions whose results change run to run unless the library is seeded.
RANDOM_FUNCTIONS = frozenset(
    "random uniform randint randrange choice choices shuffle sample gauss normalvariate lognormvariate "
    "expovariate vonmisesvariate gammavariate betavariate paretovariate weibullvariate triangular getrandbits "
    "randbytes binomialvariate".split()
)
NUMPY_RANDOM_EXCLUDED = frozenset(
    "seed default_rng RandomState Generator SeedSequence BitGenerator PCG64 PCG64DXSM MT19937 Philox SFC64 "
    "get_state set_state get_bit_generator set_bit_generator".split()
)


def global_rng_library(qualname: str) -> str | None:
    """'random' or 'numpy' if the call draws from that library's global RNG."""
    module, _, name = qualname.rpartition(".")
    if module == "random" and name in RANDOM_FUNCTIONS:
        return "random"
    if module == "numpy.random" and name not in NUMPY_RANDOM_EXCLUDED and not name.startswith("_"):
        return "numpy"
    return None


# -- calls a rule reads by name, without effects ------------------------------------
#
# torch.distributed's entry points change no determinism state, so no model above has
# them; DET011 reads their arguments (the backend, the mesh's device type), so the facts
# pass must keep their calls (opscan.lint.relevance).
INIT_PROCESS_GROUP = ("torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group")
INIT_DEVICE_MESH = ("torch.distributed.init_device_mesh", "torch.distributed.device_mesh.init_device_mesh")
# The process-wide start method that a bare `Process` uses (the linker reads it: see _STARTERS below).
START_METHOD_SETTERS = ("multiprocessing.set_start_method", "torch.multiprocessing.set_start_method")
READ_CALLS = (*INIT_PROCESS_GROUP, *INIT_DEVICE_MESH, *START_METHOD_SETTERS)


# -- calls that run a function in new processes ------------------------------------------
#
# A child started by spawn (or forkserver) is a fresh interpreter: it inherits the parent's
# environment variables, but not torch's determinism and cuDNN flags nor any RNG's state, which
# it sets up again from its own code (the main module's top level, run again as __mp_main__, and
# the target's). A forked child starts as a copy of the parent, state and all.

# multiprocessing.get_context(method) returns an instance of one of these (torch.multiprocessing
# re-exports multiprocessing's); the facts pass names a variable bound to one by its class.
CONTEXT_GETTERS = frozenset({"multiprocessing.get_context", "torch.multiprocessing.get_context"})
CONTEXT_CLASSES = {
    "spawn": "multiprocessing.context.SpawnContext",
    "forkserver": "multiprocessing.context.ForkServerContext",
    "fork": "multiprocessing.context.ForkContext",
}
FRESH_METHODS = frozenset({"spawn", "forkserver"})
# Calls whose function arguments run in the new processes: where the start method is read
# (keyword, position) and its default. A bare `multiprocessing.Process` starts by the method
# `set_start_method` chose, else by the platform's default ("default": fork on Linux through
# Python 3.13, read as fork; see docs/rules.md, DET001).
_STARTERS: dict[str, tuple[str | None, int | None, str]] = {
    **dict.fromkeys(
        (
            "torch.multiprocessing.spawn",
            "torch.multiprocessing.spawn.spawn",
            "torch.multiprocessing.start_processes",
            "torch.multiprocessing.spawn.start_processes",
        ),
        ("start_method", 5, "spawn"),
    ),
    **{f"{cls}.Process": (None, None, method) for method, cls in CONTEXT_CLASSES.items()},
    **dict.fromkeys(("multiprocessing.Process", "multiprocessing.context.Process", "torch.multiprocessing.Process"), (None, None, "default")),
}
PROCESS_STARTERS = frozenset(_STARTERS)

# Command-line runners that call the functions they are handed, in this process: a function imported from
# another module is followed as one defined in the script is (litgpt's `CLI(PARSER_DATA)` of its
# subcommands). Read: jsonargparse 4.53.0 jsonargparse/_cli.py (CLI and auto_cli end in
# `_run_component(...)`, which calls the chosen function); fire 0.7.1 fire/core.py (Fire calls the
# component the command line names); typer 0.29.3 typer/main.py (`run(function)` builds an app of it and
# runs it); absl-py 2.5.1 absl/app.py (`run(main)` -> `_run_main` -> `sys.exit(main(argv))`).
RUNNERS = frozenset({"jsonargparse.CLI", "jsonargparse.auto_cli", "fire.Fire", "typer.run", "absl.app.run"})


def start_method(qualname: str | None, args: CallArgs) -> str | None:
    """How a call starts the processes that run the functions it gets ("spawn", "fork", ..., "default" for
    the method set process-wide); None where it starts none, or the method is not a literal."""
    found = _STARTERS.get(qualname) if qualname else None
    if found is None:
        return None
    keyword, position, default = found
    method = args.get(keyword, position, default) if keyword else default
    return method if isinstance(method, str) else None


def method_set(args: CallArgs) -> str | None:
    """The start method a `set_start_method(...)` call sets, where it is a literal."""
    method = args.get("method", 0, UNKNOWN)
    return method if isinstance(method, str) else None
