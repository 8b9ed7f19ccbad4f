"""The catalogue of third-party seeding and determinism helpers: what each one does, as lint effects.

One `Helper` entry per helper (`HELPERS`, at the end): the qualified names it
is imported by, the source it was modelled from (file and release), its
parameters, and its effects, in the order it performs them, as data: seeding
(`Seed`), flags (`Determinism`, `Cudnn`), environment writes (`EnvWrite`), and
the literal arguments they depend on (`If`, `Check`, `Arg`). A few helpers
whose logic does not fit that vocabulary (Lightning's Trainer, torchtune's debug
modes, MONAI's `seed=None`) name a small function instead, beside its comment.
An entry also says how a script turns determinism on in the helper's own terms
(`Idiom`, for DET001/DET002's fixes), how its warn-only mode is made strict
(`Strict`, for DET006's fix), which keyword sets `cudnn.benchmark`
(DET005's fix) and which older releases turn determinism off where the model
leaves it (`Resets`, for DET001): the rules read these, they do not name frameworks.

Conventions, shared with `opscan.lint.apis`:
- `Seed` lists the global RNGs in the order the helper seeds them: "random",
  "numpy", "torch", and "torch-cuda" where the helper also calls
  `torch.cuda.manual_seed[_all]` itself.
- A branch that depends on an argument we cannot read (UNKNOWN) is reported as
  the effects of the branch that enables determinism, with the undecided values
  UNKNOWN: the user can opt in at run time, and that route then needs what it
  sets (CUBLAS_WORKSPACE_CONFIG) as much as a literal one would.
- A literal argument that makes the helper (or torch) raise ends the list at
  the raise: the program stops there. Modelled: the helpers' own argument
  checks, torch's bool-only flags and `torch.manual_seed(None)`; numpy
  rejecting an out-of-range seed is not.
- Helpers that seed with a random value when given no seed (mmengine, composer,
  torchtune, detectron2) still report `Seed`: they do call the seeding functions.
  So does Lightning's `seed_everything()`, which seeds with PL_GLOBAL_SEED or 0
  since 2.2 (a random seed before it). A core API called with no seed or None
  (`random.seed()`, `np.random.seed(None)`) reseeds from the OS: no `Seed`
  (`opscan.lint.apis`).
- `os.environ.pop(...)` (ultralytics' `deterministic=False` branch) is not a write.

The module imports nothing heavy: it is data and small functions.
"""

from __future__ import annotations

from opscan._plain import Frozen
from opscan.lint.model import CUBLAS, UNKNOWN, Built, CallArgs, Cudnn, Determinism, EnvWrite, Seed, truth

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up ~3 ms; annotations are strings here
    from collections.abc import Callable
    from typing import Any

    from opscan.lint.model import Effect

UINT32_MAX = 2**32 - 1

# -- helpers shared by the models ------------------------------------------------


def _determinism(mode: Any, warn_only: Any = False) -> Determinism | None:
    """`torch.use_deterministic_algorithms(mode, warn_only=warn_only)`, or None where torch raises.

    torch's binding takes only a real bool for both (an int, str or None raises TypeError).
    """
    if (mode is not UNKNOWN and not isinstance(mode, bool)) or (
        warn_only is not UNKNOWN and not isinstance(warn_only, bool)
    ):
        return None
    return Determinism(mode, warn_only)


def _as_seed(value: Any) -> Any:
    """The helper's `int(seed)`: an int, UNKNOWN, or None where the conversion raises."""
    if value is UNKNOWN or isinstance(value, int):
        return value
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _in_uint32(seed: Any) -> bool:
    """The `0 <= seed <= 2**32 - 1` check several helpers make before seeding (False where it raises)."""
    if seed is UNKNOWN:
        return True
    if not isinstance(seed, (int, float)):
        return False  # None or str: the comparison raises TypeError
    return 0 <= seed <= UINT32_MAX


# -- the vocabulary of an entry's effects -----------------------------------------


class Arg(Frozen):
    """A value taken from the helper's argument `param`: `str(value)` where `text`, else the value itself."""

    _fields = ("param", "text")
    __slots__ = _fields

    def __init__(self, param: str, text: bool = True):
        self.param = param
        self.text = text


class Check(Frozen):
    """The helper raises unless its argument `param` passes `kind`; the effects stop there.

    kind: "uint32" (0 <= value <= 2**32-1), "uint32-or-none", "not-none", "int" (`int(value)`
    works), "isinstance-int" (`assert isinstance(seed, int)` or an explicit type check).
    """

    _fields = ("param", "kind")
    __slots__ = _fields

    def __init__(self, param: str, kind: str):
        self.param = param
        self.kind = kind


class If(Frozen):
    """`if <param>: then else: otherwise`, on the truth of a literal argument (UNKNOWN: `then`, undecided)."""

    _fields = ("param", "then", "otherwise")
    __slots__ = _fields

    def __init__(self, param: str, then: tuple = (), otherwise: tuple = ()):
        self.param = param
        self.then = then
        self.otherwise = otherwise


class Idiom(Frozen):
    """How a script that calls this helper turns determinism on in the helper's own terms.

    Pass `keyword=value` to the call (or, with `via` = (param, position), to the
    settings object passed there, e.g. the `TrainingArguments` a Trainer gets);
    `covers` says what that then does: "determinism" (use_deterministic_algorithms)
    and "cublas" (sets CUBLAS_WORKSPACE_CONFIG). `since` = (distribution, version):
    the first release of the package that provides the helper in which it does
    so (read in its wheel, cited in the entry's source), None where every release
    a user could run with the torch releases the rules know does, or where the
    raw fix would be no surer on the older ones (Lightning's Trainer, see
    _lightning_trainer). The rules use the idiom only where the project cannot
    be on an older release (its requirements, lock file or installed package say
    so; opscan.lint.target): on one, the fixed script would raise TypeError.
    `later` = ((cover, distribution, version), ...): a cover the keyword took on
    only in a later release than `since` (composer's `deterministic_mode` set
    CUBLAS_WORKSPACE_CONFIG from 0.4.0 on); on an older one the fix would leave
    that undone, so the rule that wants it gives its raw fix there.
    """

    _fields = ("keyword", "value", "covers", "via", "since", "later")
    __slots__ = _fields

    def __init__(
        self,
        keyword: str,
        value: str,
        covers: tuple[str, ...],
        via: tuple[str, int | None] | None = None,
        since: tuple[str, str] | None = None,
        later: tuple[tuple[str, str, str], ...] = (),
    ):
        self.keyword = keyword
        self.value = value  # source text
        self.covers = covers
        self.via = via
        self.since = since
        self.later = later

    def since_for(self, wants: str) -> tuple[str, str] | None:
        """The release from which the keyword does `wants` ("determinism", "cublas"); None: every release."""
        return next(((dist, version) for cover, dist, version in self.later if cover == wants), self.since)


class Strict(Frozen):
    """How DET006's fix makes a warn-only call strict: the argument `param` (or position `pos`) and `how`.

    how: "drop" (remove it where it is `True`), "true" (`"warn"` becomes `True`),
    "error" (`"warn"` becomes `"error"`, `1` becomes `2`).
    """

    _fields = ("param", "pos", "how")
    __slots__ = _fields

    def __init__(self, param: str, pos: int | None, how: str):
        self.param = param
        self.pos = pos
        self.how = how


class Resets(Frozen):
    """Older releases of the helper on which a call that does not pass `keyword` (or passes None) turns
    determinism off, `torch.use_deterministic_algorithms(False)`, undoing what ran before it. The
    entry's model is the later releases', which leave it as it is.

    `packages` = ((top-level module, distribution), ...): where a name of the helper under that module
    comes from. `releases`: the distribution's minor releases that do it ("1.5", ...), set against
    the releases the project may use (its requirements, lock file or installed package:
    opscan.lint.target.Versions.may_be). `shown` names them in a message ("1.5 to 1.9").
    """

    _fields = ("keyword", "packages", "releases", "shown")
    __slots__ = _fields

    def __init__(self, keyword: str, packages: tuple[tuple[str, str], ...], releases: tuple[str, ...], shown: str):
        self.keyword = keyword
        self.packages = packages
        self.releases = releases
        self.shown = shown

    def distribution(self, api: str) -> str | None:
        """The distribution a call of `api` ("pytorch_lightning.Trainer") comes from."""
        top = api.partition(".")[0]
        return next((dist for module, dist in self.packages if module == top), None)


class Helper(Frozen):
    """One catalogue entry: a helper, where it was read, and what it does.

    `params` is the signature in order, each (name, default); names after "*"
    are keyword-only. `effects` is a tuple of steps (effects, `If`, `Check`) or a
    function of the call's arguments for the few that do not fit. `resets`: older
    releases whose calls turn determinism off where this model leaves it.
    """

    _fields = ("names", "source", "params", "effects", "idiom", "strict", "benchmark", "backend", "resets")
    _compared = ("names",)
    __slots__ = _fields

    def __init__(
        self,
        names: tuple[str, ...],
        source: str,
        params: tuple = (),
        effects: tuple | Callable[[CallArgs], list[Effect]] = (),
        idiom: Idiom | None = None,
        strict: Strict | None = None,
        benchmark: str | None = None,
        backend: str | None = None,
        resets: Resets | None = None,
    ):
        self.names = names
        self.source = source
        self.params = params
        self.effects = effects
        self.idiom = idiom
        self.strict = strict
        self.benchmark = benchmark  # the keyword argument that sets cudnn.benchmark, if any
        # A library of BACKENDS: what the helper does to torch ("torch" in its Seed) it does only
        # where that library runs on torch (Context.backends_on_torch).
        self.backend = backend
        self.resets = resets

    def position(self, name: str) -> int | None:
        """The position a parameter may be passed at, None for a keyword-only or unknown one."""
        pos = 0
        for param in self.params:
            if param == "*":
                return None
            if param[0] == name:
                return pos
            pos += 1
        return None

    def model(self, args: CallArgs) -> list[Effect]:
        """The effects of one call, in order."""
        if callable(self.effects):
            return self.effects(args)
        values: dict[str, Any] = {}
        pos: int | None = 0
        for param in self.params:
            if param == "*":
                pos = None
                continue
            name, default = param
            values[name] = args.get(name, pos, default)
            if pos is not None:
                pos += 1
        out: list[Effect] = []
        _run(self.effects, values, out, False)
        return out


def _passes(kind: str, value: Any) -> bool:
    if value is UNKNOWN:
        return True
    if kind == "not-none":
        return value is not None
    if kind == "uint32-or-none":
        return value is None or _in_uint32(value)
    if kind == "uint32":
        return _in_uint32(value)
    if kind == "int":
        return _as_seed(value) is not None
    return isinstance(value, int)  # "isinstance-int"


def _resolve(value: Any, values: dict[str, Any]) -> Any:
    if value.__class__ is not Arg:
        return value
    got = values[value.param]
    if not value.text:
        return got
    return UNKNOWN if got is UNKNOWN or got is None else str(got)


def _run(steps: tuple, values: dict[str, Any], out: list, undecided: bool) -> bool:
    """Append the effects of `steps` to `out`; False where the helper raises (the rest never runs)."""
    for step in steps:
        cls = step.__class__
        if cls is Check:
            if not _passes(step.kind, values[step.param]):
                return False
        elif cls is If:
            passes = truth(values[step.param])
            branch = step.then if passes is UNKNOWN or passes else step.otherwise
            if not _run(branch, values, out, undecided or passes is UNKNOWN):
                return False
        elif cls is Determinism:
            flag = _determinism(_resolve(step.mode, values), _resolve(step.warn_only, values))
            if flag is None:
                return False  # torch's bool-only binding raises
            out.append(Determinism(UNKNOWN, flag.warn_only) if undecided else flag)
        elif cls is Cudnn:
            out.append(Cudnn(step.flag, UNKNOWN) if undecided else step)
        elif cls is EnvWrite:
            out.append(EnvWrite(step.var, _resolve(step.value, values)))
        else:  # Seed
            out.append(step)
    return True


# -- Lightning --------------------------------------------------------------------
# Read: lightning 2.6.6 (PyPI wheel; same code in pytorch_lightning / lightning_fabric 2.6.6),
#   lightning/fabric/utilities/seed.py, lightning/fabric/fabric.py (Fabric.seed_everything, __init__),
#   lightning/pytorch/trainer/connectors/accelerator_connector.py (_set_torch_flags),
#   lightning/pytorch/trainer/trainer.py, lightning/pytorch/cli.py;
#   also Lightning-AI/pytorch-lightning@99e7047c302ca1a3dbb4811e504bda3964d02942 (accelerator_connector.py).


# seed_everything(seed=None, workers=False, verbose=True): checks 0 <= seed <= 2**32-1 first (ValueError),
# then os.environ["PL_GLOBAL_SEED"], random.seed, np.random.seed, torch.manual_seed,
# os.environ["PL_SEED_WORKERS"]. No determinism flags. seed=None reads PL_GLOBAL_SEED, else uses 0
# (Lightning-AI/pytorch-lightning@014994ad91a56a71bbe3d6675f42b6f125789a26
# src/lightning/fabric/utilities/seed.py:39-42; PR #18846, in 2.2: before it, a random seed), so a call
# without one still seeds; 1.x also called torch.cuda.manual_seed_all.
def _lightning_seed_everything(args: CallArgs, workers_default: Any = False) -> list[Effect]:
    seed = args.get("seed", 0, None)
    if seed is None:
        seed_text = UNKNOWN  # from the PL_GLOBAL_SEED environment variable, else "0"
    else:
        seed = _as_seed(seed)
        if seed is None or not _in_uint32(seed):
            return []
        seed_text = UNKNOWN if seed is UNKNOWN else str(seed)
    effects = [EnvWrite("PL_GLOBAL_SEED", seed_text), Seed(("random", "numpy", "torch"))]
    workers = args.get("workers", 1, workers_default)
    if workers is None:  # Fabric.seed_everything turns workers=None into True
        workers = True
    if workers is UNKNOWN:
        effects.append(EnvWrite("PL_SEED_WORKERS", UNKNOWN))
    else:
        try:
            effects.append(EnvWrite("PL_SEED_WORKERS", str(int(workers))))
        except (TypeError, ValueError):
            pass  # int(workers) raises after seeding
    return effects


# Fabric.seed_everything(seed=None, workers=None, verbose=True) is a staticmethod: workers None -> True.
def _fabric_seed_everything(args: CallArgs) -> list[Effect]:
    return _lightning_seed_everything(args, workers_default=None)


# Fabric(...) (keyword-only) builds a connector and strategy; it touches no seed, determinism or cuDNN
# flag. Modelled so that `fabric = Fabric(...)` is a known class for `fabric.seed_everything(...)`.
def _fabric(args: CallArgs) -> list[Effect]:
    return []


# Trainer(*, ..., deterministic=None, benchmark=None, ...) calls
# _set_torch_flags(deterministic=..., benchmark=...) first thing in _AcceleratorConnector.__init__:
#     if deterministic:                          # True, "warn", or any truthy value
#         if benchmark is None: benchmark = False
#     if benchmark is not None: torch.backends.cudnn.benchmark = benchmark
#     if deterministic == "warn": torch.use_deterministic_algorithms(True, warn_only=True)
#     elif isinstance(deterministic, bool): torch.use_deterministic_algorithms(deterministic)
#     if deterministic: os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"   # after the flag, overwriting
# cudnn.deterministic is never touched. Unset arguments may come from PL_TRAINER_DETERMINISTIC /
# PL_TRAINER_BENCHMARK at run time (@_defaults_from_env_vars); we model the code's defaults.
# Older behaviour: from 1.5 to 1.9 (the `lightning` distribution's 1.8 and 1.9 too) the connector's
# _init_deterministic called use_deterministic_algorithms(deterministic or False), so a Trainer built
# without `deterministic` (False by default to 1.7, None from 1.8) turned determinism off, undoing a
# use_deterministic_algorithms(True) that ran before it; it also set HOROVOD_FUSION_THRESHOLD="0"; "warn"
# arrived in 1.7; 1.6.0-1.6.3 turned benchmark on by default. Read in Lightning-AI/pytorch-lightning:
#   pytorch_lightning/trainer/connectors/accelerator_connector.py @4a5b315e92a113cb41d96d95a5e93dc098163d28
#     (1.6: `self.deterministic = deterministic or False; torch.use_deterministic_algorithms(self.deterministic)`)
#     and @00cce6a59d7a5ab799561c54153f2be8b0390992 (1.7: `use_deterministic_algorithms(deterministic)`
#     unless "warn", `deterministic: Union[bool, _LITERAL_WARN] = False`);
#   src/pytorch_lightning/trainer/connectors/accelerator_connector.py @33941cfe676e2200afb13a344bea5ebcc7c42162
#     (1.8) and @021a2c942955aa1122a879c076a72d3495c2afbb (2.0 in development, before the move to
#     src/lightning): `deterministic or False` still;
#   src/lightning/pytorch/trainer/connectors/accelerator_connector.py @002f8993df8627a08d3a4d1f6bea6d8756d25908:
#     _set_torch_flags, `elif isinstance(deterministic, bool):  # do not call this if deterministic wasn't
#     passed`, from PR #16653 ("Refactor deterministic and benchmark logic", merged 2023-02-06; 2.0.0 was
#     released 2023-03-15; 1.9.x kept the old connector), as the 2.6.6 wheel reads;
#   src/lightning/pytorch/CHANGELOG.md: 1.5.0 "Added support for `torch.use_deterministic_algorithms`
#     (#9121)". Before 1.5 (pytorch-lightning 1.4.0 wheel, trainer/connectors/accelerator_connector.py)
#     the Trainer set only cudnn.deterministic and HOROVOD_FUSION_THRESHOLD, no use_deterministic_algorithms
#     or CUBLAS_WORKSPACE_CONFIG.
# The model below is 2.x's; `_LIGHTNING_RESETS` gives 1.5-1.9's use_deterministic_algorithms(False), which
# the rules weigh against the Lightning release the project may use (Context.turned_off). The idiom,
# Trainer(deterministic=True), has no Idiom.since: the keyword is in every release (the
# pytorch-lightning 1.0.0 wheel has `deterministic: bool = False`), so the fix never makes the script raise.
def _lightning_trainer(args: CallArgs) -> list[Effect]:
    deterministic = args.get("deterministic", None, None)
    benchmark = args.get("benchmark", None, None)
    enabled = truth(deterministic)
    effects: list[Effect] = []
    if benchmark is not None and benchmark is not UNKNOWN and not isinstance(benchmark, bool):
        return effects  # torch's cudnn.benchmark setter takes only a bool: RuntimeError

    if benchmark is UNKNOWN or (benchmark is None and enabled is UNKNOWN):
        effects.append(Cudnn("benchmark", UNKNOWN))
    elif benchmark is not None:
        effects.append(Cudnn("benchmark", benchmark))
    elif enabled:
        effects.append(Cudnn("benchmark", False))

    if deterministic is UNKNOWN:
        effects.append(Determinism(UNKNOWN, UNKNOWN))
    elif deterministic == "warn":
        effects.append(Determinism(True, True))
    elif isinstance(deterministic, bool):
        effects.append(Determinism(deterministic, False))

    if enabled is UNKNOWN or enabled:
        effects.append(EnvWrite(CUBLAS, ":4096:8"))
    return effects


# Trainer.from_argparse_args(args, **kwargs), pytorch-lightning 1.x's way to build a Trainer from the
# command line (removed in 2.0), returns `cls(**trainer_kwargs)`: the Trainer parameters found in
# vars(args), updated with kwargs, so a keyword written in the call wins (pytorch-lightning 1.9.5 wheel:
# pytorch_lightning/utilities/argparse.py:56-66; Trainer.from_argparse_args, trainer/trainer.py:1951-1952,
# calls it). What the parsed command line holds is unknown here, as for LightningCLI.
def _lightning_from_argparse_args(args: CallArgs) -> list[Effect]:
    return _lightning_trainer(CallArgs((), args.kwargs, star=True))


# LightningCLI(model_class, datamodule_class, save_config_callback, save_config_kwargs, trainer_class,
# trainer_defaults, seed_everything_default=True, ...): parses the command line and config, then
#     _set_seed(): seed_everything(config seed, workers=True) unless the configured value is False
#                  (True means seed_everything(workers=True), i.e. PL_GLOBAL_SEED or 0)
#     instantiate_classes() -> Trainer(**config["trainer"])
# Trainer flags come from the config or `--trainer.deterministic`, so they are unknown here. With
# seed_everything_default=False the command line can still opt in to seeding; we report no seed then.
def _lightning_cli(args: CallArgs) -> list[Effect]:
    default = args.get("seed_everything_default", 6, True)
    effects: list[Effect] = []
    if default is not False:
        seed = None if default is True else default
        effects += _lightning_seed_everything(CallArgs(kwargs=(("seed", seed), ("workers", True))))
    return effects + _lightning_trainer(CallArgs(star=True))


# -- transformers -----------------------------------------------------------------
# Read: transformers 5.24.0 (PyPI wheel) transformers/trainer_utils.py, trainer.py (Trainer.__init__),
#   training_args.py, trainer_seq2seq.py, __init__.py; older: huggingface/transformers@
#   c599e989ac5fdb9c641254bde826c04f2fc8ebcf trainer_utils.py (4.x: set_seed(seed) had no `deterministic`,
#   added by PR #29778 in 2024; enable_full_determinism(seed) had no `warn_only` and set only
#   CUDA_LAUNCH_BLOCKING and CUBLAS_WORKSPACE_CONFIG; 4.x set_seed also seeded TensorFlow).

_HF_SEED_LIBS = ("random", "numpy", "torch", "torch-cuda")

# Written by enable_full_determinism before torch.use_deterministic_algorithms, in this order.
_HF_FULL_DETERMINISM_ENV = (
    ("CUDA_LAUNCH_BLOCKING", "1"),
    (CUBLAS, ":16:8"),
    ("ASCEND_LAUNCH_BLOCKING", "1"),
    ("HCCL_DETERMINISTIC", "1"),
    ("FLASH_ATTENTION_DETERMINISTIC", "1"),
)



# Trainer(model=None, args=None, ...): the first thing __init__ does is
#     if args is None: args = TrainingArguments(output_dir="tmp_trainer")      # seed=42, full_determinism=False
#     enable_full_determinism(args.seed) if args.full_determinism else set_seed(args.seed)
# (train() repeats it when model_init is given). TrainingArguments itself has no such effect. `args` built
# in the script (`TrainingArguments(..., full_determinism=...)`, inline or through a name) is read; any
# other `args` (HfArgumentParser, a config) leaves full_determinism unknown: seeding, then
# enable_full_determinism's effects with the undecided values UNKNOWN (warn_only is known: none passed).
def _hf_trainer(args: CallArgs) -> list[Effect]:
    settings = args.get("args", 1, None)
    if settings is None:
        return [Seed(_HF_SEED_LIBS)]
    full, seed = UNKNOWN, UNKNOWN
    if isinstance(settings, Built) and settings.qualname in SETTINGS_CLASSES:
        full = truth(settings.args.get("full_determinism", None, False))
        seed = settings.args.get("seed", None, 42)  # TrainingArguments.seed defaults to 42
    if full is UNKNOWN:
        return (
            [Seed(_HF_SEED_LIBS)]
            + [EnvWrite(var, value) for var, value in _HF_FULL_DETERMINISM_ENV]
            + [
                Determinism(UNKNOWN, False),
                Cudnn("deterministic", UNKNOWN),
                Cudnn("benchmark", UNKNOWN),
            ]
        )
    if full:
        return _HF_ENABLE_FULL_DETERMINISM.model(CallArgs(kwargs=(("seed", seed),)))
    return [] if seed is None else [Seed(_HF_SEED_LIBS)]  # set_seed(None) raises


# -- sentence-transformers -----------------------------------------------------------
# Read: sentence-transformers 6.3.0 sdist, sentence_transformers/base/trainer.py: BaseTrainer(Trainer)
#   .__init__(model=None, args=None, ...) replaces args=None by `self.training_args_class(output_dir=...)`
#   (:194-197) and calls transformers' Trainer.__init__ with it (:280), which seeds (set_seed(args.seed),
#   or enable_full_determinism with args.full_determinism: the transformers entry below); its
#   SentenceTransformerTrainer, CrossEncoderTrainer, SparseEncoderTrainer and MultiVectorEncoderTrainer
#   (each in <kind>/trainer.py, exported by <kind>/__init__.py and the package) keep that __init__, and
#   base/training_args.py's BaseTrainingArguments(TrainingArguments) keeps `seed` and `full_determinism`.
#   sentence-transformers 5.1.2 wheel: trainer.py's SentenceTransformerTrainer(Trainer) does the same
#   (:156-159, super().__init__(**super_kwargs) at :266), training_args.py its arguments; the cross- and
#   sparse-encoder classes subclass them.
_ST_KINDS = (
    ("sentence_transformer", "SentenceTransformer"),
    ("cross_encoder", "CrossEncoder"),
    ("sparse_encoder", "SparseEncoder"),
    ("multi_vector_encoder", "MultiVectorEncoder"),
)
_ST_TRAINERS = tuple(
    name
    for module, kind in _ST_KINDS
    for name in (
        f"sentence_transformers.{kind}Trainer",
        f"sentence_transformers.{module}.{kind}Trainer",
        f"sentence_transformers.{module}.trainer.{kind}Trainer",
    )
) + ("sentence_transformers.trainer.SentenceTransformerTrainer",)  # 3.x to 5.x
_ST_TRAINING_ARGUMENTS = tuple(
    name
    for module, kind in _ST_KINDS
    for name in (
        f"sentence_transformers.{kind}TrainingArguments",
        f"sentence_transformers.{module}.{kind}TrainingArguments",
        f"sentence_transformers.{module}.training_args.{kind}TrainingArguments",
    )
) + ("sentence_transformers.training_args.SentenceTransformerTrainingArguments",)
_ST_SOURCE = "sentence-transformers 6.3.0 sdist: sentence_transformers/base/trainer.py, base/training_args.py; 5.1.2 wheel: trainer.py, training_args.py"

_TRAINING_ARGUMENTS = frozenset(
    {
        "transformers.TrainingArguments",
        "transformers.training_args.TrainingArguments",
        "transformers.Seq2SeqTrainingArguments",
        "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
    }
)


# -- torchtune ----------------------------------------------------------------------
# Read: torchtune 0.6.1 (PyPI wheel) torchtune/training/seed.py, torchtune/training/__init__.py; torchtune
#   0.1.1 and 0.2.1 wheels (torchtune/utils/seed.py, same logic, exported as torchtune.utils.set_seed;
#   moved to torchtune.training in 0.3); torch 2.14.1 torch.set_deterministic_debug_mode.
# set_seed(seed=None, debug_mode=None): seed None -> a random seed broadcast from rank 0 (still seeds);
# ValueError unless 0 <= seed <= 2**32 - world_size; torch.manual_seed, np.random.seed, random.seed
# (seed + rank). Then, if debug_mode is not None: torch.set_deterministic_debug_mode(debug_mode)
# ("default"/0: off; "warn"/1: warn_only; "error"/2: strict; anything else raises), and
#     mode 0:   cudnn.deterministic = False, cudnn.benchmark = True
#     mode 1/2: cudnn.deterministic = True, cudnn.benchmark = False, CUBLAS_WORKSPACE_CONFIG = ":4096:8"
_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def _torchtune_set_seed(args: CallArgs) -> list[Effect]:
    seed = args.get("seed", 0, None)
    if seed is not None and not _in_uint32(seed):
        return []
    effects = [Seed(("torch", "numpy", "random"))]
    debug_mode = args.get("debug_mode", 1, None)
    if debug_mode is None:
        return effects
    if debug_mode is UNKNOWN:
        return effects + [
            Determinism(UNKNOWN, UNKNOWN),
            Cudnn("deterministic", UNKNOWN),
            Cudnn("benchmark", UNKNOWN),
            EnvWrite(CUBLAS, ":4096:8"),
        ]
    if isinstance(debug_mode, str):
        level = _DEBUG_MODES.get(debug_mode)
    elif isinstance(debug_mode, int):  # bools included, as in torch: True == 1
        level = debug_mode if debug_mode in (0, 1, 2) else None
    else:
        level = None
    if level is None:
        return effects  # torch raises TypeError or RuntimeError
    if level == 0:
        return effects + [
            Determinism(False, False),
            Cudnn("deterministic", False),
            Cudnn("benchmark", True),
        ]
    return effects + [
        Determinism(True, level == 1),
        Cudnn("deterministic", True),
        Cudnn("benchmark", False),
        EnvWrite(CUBLAS, ":4096:8"),
    ]


# -- MONAI --------------------------------------------------------------------------
# Read: monai 1.6.1 (PyPI wheel) monai/utils/misc.py, monai/utils/__init__.py; monai 0.8.1 (same) and
#   0.5.3 (no `use_deterministic_algorithms` parameter) wheels.
# set_determinism(seed=2**32-1, use_deterministic_algorithms=None, additional_settings=None):
#     seed not None: torch.manual_seed(int(seed) % 2**32), random.seed, np.random.seed, each
#                    additional_settings(seed), cudnn.deterministic = True, cudnn.benchmark = False
#     seed None:     torch reseeded from a fresh random value, random.seed(None) and np.random.seed(None)
#                    (reseed from the OS: un-seeding), then cuDNN flags RESTORED to their values when
#                    monai.utils.misc was imported (unknown here)
#     then `if use_deterministic_algorithms is not None: torch.use_deterministic_algorithms(it)`.
# No CUBLAS_WORKSPACE_CONFIG. An unknown seed is taken as a seed (cuDNN flags unknown).
def _monai_set_determinism(args: CallArgs) -> list[Effect]:
    seed = args.get("seed", 0, UINT32_MAX)
    effects: list[Effect] = []
    if seed is None:
        effects += [Cudnn("deterministic", UNKNOWN), Cudnn("benchmark", UNKNOWN)]
    else:
        if _as_seed(seed) is None:
            return []  # int(seed) raises
        effects.append(Seed(("torch", "random", "numpy")))
        known = seed is not UNKNOWN
        effects += [
            Cudnn("deterministic", True if known else UNKNOWN),
            Cudnn("benchmark", False if known else UNKNOWN),
        ]
    flag = args.get("use_deterministic_algorithms", 1, None)
    if flag is not None:
        determinism = _determinism(flag)
        if determinism is not None:
            effects.append(determinism)
    return effects




# -- composer -----------------------------------------------------------------------
# Read: mosaicml 0.32.1 (PyPI wheel) composer/utils/reproducibility.py, composer/trainer/trainer.py,
#   composer/utils/__init__.py (it does not re-export seed_all or configure_deterministic_mode; users
#   write `from composer.utils import reproducibility`); also mosaicml/composer@
#   02c872e43c708781bba06355a4e673557f3d5056 reproducibility.py (same logic, warned instead of logging).

_COMPOSER_SEED_LIBS = ("random", "numpy", "torch", "torch-cuda")
# configure_deterministic_mode(): torch.use_deterministic_algorithms(True), cudnn.benchmark = False,
# cudnn.deterministic = True, os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8" (after the flag).
_COMPOSER_DETERMINISTIC_MODE = (
    Determinism(True, False),
    Cudnn("benchmark", False),
    Cudnn("deterministic", True),
    EnvWrite(CUBLAS, ":4096:8"),
)
# The idiom, Trainer(deterministic_mode=True), runs configure_deterministic_mode() right after seed_all
# (0.32.1 composer/trainer/trainer.py:1215-1217), before the model goes to the device (:1249) or any
# cuBLAS call; configure_deterministic_mode is composer/utils/reproducibility.py:124-129 (the four
# effects above). The keyword is in every release on PyPI (the oldest, mosaicml 0.2.3, and 0.2.4 wheels:
# composer/trainer/trainer.py:154 `deterministic_mode: bool = False`, :237-239 use_deterministic_algorithms(True)
# and cudnn.benchmark = False), so it needs no `since` for determinism; the CUBLAS_WORKSPACE_CONFIG write
# arrived in 0.4.0 (0.3.0 and 0.3.1 wheels: none; 0.4.0 wheel: composer/utils/reproducibility.py:75).
_COMPOSER_IDIOM = Idiom("deterministic_mode", "True", ("determinism", "cublas"), later=(("cublas", "mosaicml", "0.4.0"),))

# -- stable-baselines3 and sb3-contrib: the algorithms' `seed=` ------------------------
# Read: stable-baselines3 2.9.2 wheel. common/base_class.py: BaseAlgorithm.__init__ sets
#   `self.device = get_device(device)` (:128) and `self.seed = seed` (:140); BaseAlgorithm.set_random_seed
#   (:559-572) returns at once for None, else calls utils.set_random_seed(seed, using_cuda=self.device.type
#   == "cuda") (random, numpy, torch, then the cuDNN pair where using_cuda: see its entry). common/utils.py
#   get_device (:223-243): "auto" means "cuda", and "cuda" falls back to the CPU where CUDA is not
#   available. common/on_policy_algorithm.py:117 and off_policy_algorithm.py:179: _setup_model calls
#   self.set_random_seed(self.seed) first. Every algorithm's __init__ ends `if _init_setup_model:
#   self._setup_model()` (default True): A2C, PPO (on-policy), DQN, SAC, TD3, DDPG (off-policy), each
#   with device="auto". sb3-contrib 2.9.0 wheel: CrossQ, QRDQN, TQC (off-policy), TRPO (on-policy),
#   MaskablePPO, RecurrentPPO and ARS (their own _setup_model, set_random_seed(self.seed) first), device
#   "auto" except ARS's "cpu". No algorithm calls use_deterministic_algorithms.
# `seed` is the 20th-odd parameter of each, passed by keyword in practice: read by keyword only.
_SB3_ALGORITHMS = {
    "stable_baselines3": (("a2c", "A2C"), ("ppo", "PPO"), ("dqn", "DQN"), ("sac", "SAC"), ("td3", "TD3"), ("ddpg", "DDPG")),
    "sb3_contrib": (
        ("crossq", "CrossQ"),
        ("qrdqn", "QRDQN"),
        ("tqc", "TQC"),
        ("trpo", "TRPO"),
        ("ppo_mask", "MaskablePPO"),
        ("ppo_recurrent", "RecurrentPPO"),
        ("ars", "ARS"),
    ),
}


def _sb3_names(default_device: str) -> tuple[str, ...]:
    """Each algorithm's import paths (`stable_baselines3.PPO`, `.ppo.PPO`, `.ppo.ppo.PPO`) with that device default."""
    return tuple(
        name
        for package, algorithms in _SB3_ALGORITHMS.items()
        for module, cls in algorithms
        if (cls == "ARS") == (default_device == "cpu")
        for name in (f"{package}.{cls}", f"{package}.{module}.{cls}", f"{package}.{module}.{module}.{cls}")
    )


def _sb3_algorithm(default_device: str) -> Callable[[CallArgs], list[Effect]]:
    def effects(args: CallArgs) -> list[Effect]:
        if args.get("_init_setup_model", None, True) is False:
            return []  # nothing is seeded until the caller runs _setup_model() itself
        # seed=None (the default) seeds nothing. Under **kwargs with no seed= written, whether one is
        # passed is unknown: not taken as seeding, as a seed written but unknown (seed=args.seed) is.
        seed = args.get("seed", None, None) if args.passed("seed") else None
        if seed is None:
            return []
        effects: list[Effect] = [Seed(("random", "numpy", "torch"))]
        device = args.get("device", None, default_device)
        if device is UNKNOWN:
            effects += [Cudnn("deterministic", UNKNOWN), Cudnn("benchmark", UNKNOWN)]
        elif isinstance(device, str) and device.split(":")[0] in ("auto", "cuda"):
            # On the CPU fallback the pair is not set, but there it changes nothing either.
            effects += _SEED_CUDNN_PAIR
        return effects

    return effects


# -- Keras 3 ------------------------------------------------------------------------
# Read: keras 3.15.1 wheel. keras/src/backend/config.py picks the backend once, when keras is first
# imported: "tensorflow" by default (`_BACKEND = "tensorflow"`), else the "backend" of keras.json (in
# KERAS_HOME or ~/.keras), else `os.environ["KERAS_BACKEND"]` where it is set and not empty.
# keras/src/backend/__init__.py imports torch only `if backend() == "torch"`, and
# keras/src/utils/rng_utils.py's set_random_seed calls torch.manual_seed only `if backend.backend() ==
# "torch"` (random and numpy always, tf.random.set_seed where TensorFlow is installed). An older
# keras-team/keras@77d1b35f2735ba2446a1c89fb14834ee92160251 rng_utils.py has the same condition.

BACKENDS: dict[str, tuple[str, str]] = {"keras": ("KERAS_BACKEND", "torch")}
"""Libraries that run torch only under one of their backends, which they choose when first imported:
package -> (the `os.environ` variable that chooses it, its value for torch). Lint takes such a library
to run torch only where the script sets the variable to that value before it first imports it; with
another value, a computed one, or none (a default, a config file or the shell decides), it does not."""

# -- the catalogue --------------------------------------------------------------------
# One entry per helper. `source` names what was read: a PyPI release's wheel, or a repository
# file at a commit where the package is not on PyPI. Seeding order is the helper's own.


def _names(prefixes: tuple[str, ...], suffix: str) -> tuple[str, ...]:
    return tuple(f"{prefix}.{suffix}" for prefix in prefixes)


_LIGHTNING_SEED_MODULES = (
    "lightning",
    "lightning.pytorch",
    "lightning.fabric",
    "lightning.fabric.utilities.seed",
    "lightning_fabric",
    "lightning_fabric.utilities.seed",
    "pytorch_lightning",
    "pytorch_lightning.utilities.seed",  # pytorch_lightning < 2.0 defined it there
)
_FABRIC_CLASSES = (
    "lightning.Fabric",
    "lightning.fabric.Fabric",
    "lightning.fabric.fabric.Fabric",
    "lightning_fabric.Fabric",
    "lightning_fabric.fabric.Fabric",
)
_HF_MODULES = ("transformers", "transformers.trainer_utils")
_LIGHTNING_TRAINER_MODULES = (
    "lightning",
    "lightning.pytorch",
    "lightning.pytorch.trainer",
    "lightning.pytorch.trainer.trainer",
    "pytorch_lightning",
    "pytorch_lightning.trainer",
    "pytorch_lightning.trainer.trainer",
)
_LIGHTNING_SOURCE = (
    "lightning 2.6.6 wheel: lightning/fabric/utilities/seed.py, lightning/fabric/fabric.py, "
    "lightning/pytorch/trainer/connectors/accelerator_connector.py (_set_torch_flags), lightning/pytorch/cli.py; "
    "lightning-fabric 2.6.6 wheel: lightning_fabric/utilities/seed.py (the same seed_everything)"
)
_LIGHTNING_RESETS = Resets(
    "deterministic",
    (("pytorch_lightning", "pytorch-lightning"), ("lightning", "lightning")),
    ("1.5", "1.6", "1.7", "1.8", "1.9"),
    "1.5 to 1.9",
)
_LIGHTNING_RESETS_SOURCE = (
    "; 1.5 to 1.9 (Resets): Lightning-AI/pytorch-lightning trainer/connectors/accelerator_connector.py "
    "(_init_deterministic) at 4a5b315e, 00cce6a5, 33941cfe and 021a2c94; _set_torch_flags at 002f8993 (PR #16653, "
    "in 2.0.0)"
)
_HF_SOURCE = "transformers 5.24.0 wheel: transformers/trainer_utils.py, trainer.py (Trainer.__init__), training_args.py"
_STRICT_WARN = Strict("deterministic", None, "true")
_SEED_CUDNN_PAIR = (Cudnn("deterministic", True), Cudnn("benchmark", False))
_FASTAI_MODULES = ("fastai.torch_core", "fastai.basics", "fastai.vision.all", "fastai.text.all", "fastai.tabular.all")
# mmengine's set_random_seed(seed, deterministic=False, diff_rank_seed=False), which Runner.set_randomness calls.
_MMENGINE_SET_RANDOM_SEED = (
    Seed(("random", "numpy", "torch", "torch-cuda")),
    If("deterministic", (*_SEED_CUDNN_PAIR, Determinism(True, False))),
)

_HF_ENABLE_FULL_DETERMINISM = Helper(
    _names(_HF_MODULES, "enable_full_determinism"),
    _HF_SOURCE + " (enable_full_determinism(seed, warn_only=False): set_seed(seed), five environment "
    "writes, use_deterministic_algorithms(True, warn_only=warn_only), cudnn.deterministic = True, "
    "cudnn.benchmark = False; 4.x had no warn_only and wrote only CUDA_LAUNCH_BLOCKING and CUBLAS)",
    (("seed", None), ("warn_only", False)),
    (
        Check("seed", "not-none"),  # its set_seed(seed) raises for None first (see set_seed's entry)
        Seed(_HF_SEED_LIBS),
        *(EnvWrite(var, value) for var, value in _HF_FULL_DETERMINISM_ENV),
        Determinism(True, Arg("warn_only", text=False)),
        *_SEED_CUDNN_PAIR,
    ),
    strict=Strict("warn_only", 1, "drop"),
)

HELPERS: tuple[Helper, ...] = (
    # -- Lightning
    Helper(_names(_LIGHTNING_SEED_MODULES, "seed_everything"), _LIGHTNING_SOURCE, effects=_lightning_seed_everything),
    Helper(_FABRIC_CLASSES, _LIGHTNING_SOURCE, effects=_fabric),
    Helper(_names(_FABRIC_CLASSES, "seed_everything"), _LIGHTNING_SOURCE, effects=_fabric_seed_everything),
    Helper(
        _names(_LIGHTNING_TRAINER_MODULES, "Trainer"),
        _LIGHTNING_SOURCE + _LIGHTNING_RESETS_SOURCE,
        effects=_lightning_trainer,
        idiom=Idiom("deterministic", "True", ("determinism", "cublas")),  # no `since`: see _lightning_trainer
        strict=_STRICT_WARN,
        benchmark="benchmark",
        resets=_LIGHTNING_RESETS,
    ),
    Helper(("lightning.pytorch.cli.LightningCLI", "pytorch_lightning.cli.LightningCLI"), _LIGHTNING_SOURCE, effects=_lightning_cli),
    Helper(
        _names(_LIGHTNING_TRAINER_MODULES, "Trainer.from_argparse_args"),
        "pytorch-lightning 1.9.5 wheel: pytorch_lightning/utilities/argparse.py (from_argparse_args(cls, args, "
        "**kwargs): cls(**Trainer parameters of vars(args), updated with kwargs)), trainer/trainer.py",
        (("args", None),),
        effects=_lightning_from_argparse_args,
        idiom=Idiom("deterministic", "True", ("determinism", "cublas")),
        strict=_STRICT_WARN,
        benchmark="benchmark",
    ),
    # -- transformers
    Helper(
        _names(_HF_MODULES, "set_seed"),
        _HF_SOURCE + " (set_seed(seed, deterministic=False); `deterministic` since PR #29778, 2024; "
        "set_seed(None) reseeds random and numpy from the OS, then torch.manual_seed(None) raises TypeError: "
        "huggingface/transformers@007360d654f36b1f4bc0c701c7b1b69273a7c4ed src/transformers/trainer_utils.py:92-105)",
        (("seed", None), ("deterministic", False)),
        (Check("seed", "not-none"), Seed(_HF_SEED_LIBS), If("deterministic", (Determinism(True, False),))),
    ),
    _HF_ENABLE_FULL_DETERMINISM,
    Helper(
        (
            "transformers.Trainer",
            "transformers.trainer.Trainer",
            "transformers.Seq2SeqTrainer",
            "transformers.trainer_seq2seq.Seq2SeqTrainer",
        ),
        _HF_SOURCE + ", trainer_seq2seq.py; transformers 4.18.0 and 4.19.0 wheels: training_args.py "
        "(TrainingArguments.full_determinism, a dataclass field, from 4.19.0: 4.18 raises TypeError for it)",
        effects=_hf_trainer,
        idiom=Idiom("full_determinism", "True", ("determinism", "cublas"), via=("args", 1), since=("transformers", "4.19.0")),
    ),
    # Settings only: read through `Built` by the Trainer's model (SETTINGS_CLASSES).
    Helper(tuple(sorted(_TRAINING_ARGUMENTS)), _HF_SOURCE + " (TrainingArguments.full_determinism, default False)"),
    # -- sentence-transformers: transformers' Trainer, with its own arguments classes
    Helper(
        _ST_TRAINERS,
        _ST_SOURCE + " (each Trainer's __init__ is transformers' Trainer.__init__ with args defaulted); "
        "transformers 4.18.0 and 4.19.0 wheels: training_args.py (full_determinism from 4.19.0, as for its Trainer)",
        effects=_hf_trainer,
        idiom=Idiom("full_determinism", "True", ("determinism", "cublas"), via=("args", 1), since=("transformers", "4.19.0")),
    ),
    Helper(_ST_TRAINING_ARGUMENTS, _ST_SOURCE + " (TrainingArguments subclasses: full_determinism, default False)"),
    # -- accelerate
    Helper(
        ("accelerate.utils.set_seed", "accelerate.utils.random.set_seed"),
        "accelerate 1.15.0 wheel: accelerate/utils/random.py (set_seed(seed, device_specific=False, "
        "deterministic=False): random, numpy, torch, the device's manual_seed_all, then "
        "`if deterministic: torch.use_deterministic_algorithms(True)`; no CUBLAS_WORKSPACE_CONFIG, no cuDNN flag). "
        "`deterministic` since 0.29.0 (PR #2569): accelerate 0.28.0 wheel, accelerate/utils/random.py, "
        "set_seed(seed, device_specific=False), which raises TypeError for it; accelerate 0.29.0 wheel, "
        "the same file, set_seed(seed, device_specific=False, deterministic=False). "
        "Accelerator(...) sets no seed or flag. set_seed(None): random.seed(None), np.random.seed(None), then "
        "torch.manual_seed(None) raises TypeError (the same file, both releases)",
        (("seed", None), ("device_specific", False), ("deterministic", False)),
        (
            Check("seed", "not-none"),
            Seed(("random", "numpy", "torch", "torch-cuda")),
            If("deterministic", (Determinism(True, False),)),
        ),
        idiom=Idiom("deterministic", "True", ("determinism",), since=("accelerate", "0.29.0")),
    ),
    # -- OpenMMLab
    Helper(
        ("mmengine.runner.set_random_seed", "mmengine.runner.utils.set_random_seed"),
        "mmengine 0.10.7 wheel and open-mmlab/mmengine@13b1ffbf6201898021ea77c9ca2373ed8853b1c6: "
        "mmengine/runner/utils.py (same logic since 0.1.0). seed None: a random seed shared across ranks. "
        "Runner(randomness=dict(...)) passes a config dict we cannot read (Runner.set_randomness, below, is modelled)",
        (("seed", None), ("deterministic", False), ("diff_rank_seed", False)),
        _MMENGINE_SET_RANDOM_SEED,
    ),
    Helper(
        (
            "mmengine.runner.Runner.set_randomness", "mmengine.runner.runner.Runner.set_randomness",
            # a runner built by the classmethod constructor (`runner = Runner.from_cfg(cfg)`), as the facts name it
            "mmengine.runner.Runner.from_cfg.set_randomness", "mmengine.runner.runner.Runner.from_cfg.set_randomness",
        ),
        "mmengine 0.10.7 wheel: mmengine/runner/runner.py:698-719, Runner.set_randomness(seed, diff_rank_seed=False, "
        "deterministic=False) calls set_random_seed(seed=seed, deterministic=deterministic, diff_rank_seed=...) "
        "(mmdet's tools/analysis_tools/test_robustness.py)",
        (("seed", None), ("diff_rank_seed", False), ("deterministic", False)),
        _MMENGINE_SET_RANDOM_SEED,
    ),
    Helper(
        ("mmcv.runner.set_random_seed", "mmcv.runner.utils.set_random_seed"),
        "mmcv 1.7.2 sdist: mmcv/runner/utils.py (mmcv 2.x has no mmcv.runner). seed None raises in "
        "torch.manual_seed; never use_deterministic_algorithms",
        (("seed", None), ("deterministic", False), ("use_rank_shift", False)),
        (
            Check("seed", "not-none"),
            Seed(("random", "numpy", "torch", "torch-cuda")),
            If("use_rank_shift", (EnvWrite("PYTHONHASHSEED", UNKNOWN),), (EnvWrite("PYTHONHASHSEED", Arg("seed")),)),
            If("deterministic", _SEED_CUDNN_PAIR),
        ),
    ),
    Helper(
        ("mmdet.apis.set_random_seed", "mmdet.apis.train.set_random_seed"),
        "mmdet 2.28.2 wheel: mmdet/apis/train.py (mmdet 3.x uses mmengine's)",
        (("seed", None), ("deterministic", False)),
        (Check("seed", "not-none"), Seed(("random", "numpy", "torch", "torch-cuda")), If("deterministic", _SEED_CUDNN_PAIR)),
    ),
    # -- composer
    Helper(
        ("composer.utils.reproducibility.seed_all",),
        "mosaicml 0.32.1 wheel: composer/utils/reproducibility.py (seed_all(seed) checks 0 <= seed <= 2**32-1)",
        (("seed", None),),
        (Check("seed", "uint32"), Seed(_COMPOSER_SEED_LIBS)),
    ),
    Helper(
        ("composer.utils.reproducibility.configure_deterministic_mode",),
        "mosaicml 0.32.1 wheel: composer/utils/reproducibility.py",
        effects=_COMPOSER_DETERMINISTIC_MODE,
    ),
    Helper(
        ("composer.Trainer", "composer.trainer.Trainer", "composer.trainer.trainer.Trainer"),
        "mosaicml 0.32.1 wheel: composer/trainer/trainer.py (keyword-only; seed None: a time-based seed; "
        "seed_all(seed + rank), then `if deterministic_mode: configure_deterministic_mode()`)",
        ("*", ("seed", None), ("deterministic_mode", False)),
        (Check("seed", "uint32-or-none"), Seed(_COMPOSER_SEED_LIBS), If("deterministic_mode", _COMPOSER_DETERMINISTIC_MODE)),
        idiom=_COMPOSER_IDIOM,
    ),
    # -- torchtune
    Helper(
        (
            "torchtune.training.set_seed",
            "torchtune.training.seed.set_seed",
            "torchtune.utils.set_seed",  # torchtune < 0.3
            "torchtune.utils.seed.set_seed",  # torchtune < 0.3
        ),
        "torchtune 0.6.1 wheel: torchtune/training/seed.py; 0.1.1 and 0.2.1 wheels: torchtune/utils/seed.py",
        effects=_torchtune_set_seed,
        strict=Strict("debug_mode", 1, "error"),
    ),
    # -- MONAI
    Helper(
        ("monai.utils.set_determinism", "monai.utils.misc.set_determinism"),
        "monai 1.6.1 wheel: monai/utils/misc.py; 0.8.1 (same) and 0.5.3 (no use_deterministic_algorithms) wheels",
        effects=_monai_set_determinism,
    ),
    # -- timm
    Helper(
        ("timm.utils.random_seed", "timm.utils.random.random_seed"),
        "timm 1.0.31 wheel: timm/utils/random.py (random_seed(seed=42, rank=0): torch.manual_seed, "
        "np.random.seed, random.seed, each with seed + rank; no flag)",
        (("seed", 42), ("rank", 0)),
        (Seed(("torch", "numpy", "random")),),
    ),
    # -- stable-baselines3
    Helper(
        ("stable_baselines3.common.utils.set_random_seed",),
        "stable-baselines3 2.9.2 wheel: stable_baselines3/common/utils.py (set_random_seed(seed, using_cuda=False): "
        "random, numpy, torch, then `if using_cuda: cudnn.deterministic = True; cudnn.benchmark = False`; "
        "never use_deterministic_algorithms). The algorithms' `seed=` calls it with using_cuda from the "
        "device (the entries below)",
        (("seed", None), ("using_cuda", False)),
        (Seed(("random", "numpy", "torch")), If("using_cuda", _SEED_CUDNN_PAIR)),
    ),
    *(
        Helper(
            _sb3_names(device),
            "stable-baselines3 2.9.2 wheel: stable_baselines3/common/base_class.py, common/utils.py, "
            "common/on_policy_algorithm.py, common/off_policy_algorithm.py and each algorithm's module; "
            "sb3-contrib 2.9.0 wheel: each algorithm's module (`seed=` seeds random, numpy and torch through "
            "set_random_seed, with the cuDNN pair on a CUDA device; never use_deterministic_algorithms)",
            effects=_sb3_algorithm(device),
        )
        for device in ("auto", "cpu")
    ),
    # -- detectron2 (not on PyPI)
    Helper(
        ("detectron2.utils.env.seed_all_rng",),
        "facebookresearch/detectron2@2954fb7d702ebfb0d5e3d51fb34d415c064502b6 detectron2/utils/env.py "
        "(seed_all_rng(seed=None): seed None -> pid + time + urandom; np.random, torch, random, "
        "torch.cuda.manual_seed_all where CUDA is available, os.environ['PYTHONHASHSEED'] = str(seed); no flag)",
        (("seed", None),),
        (Seed(("numpy", "torch", "random", "torch-cuda")), EnvWrite("PYTHONHASHSEED", Arg("seed"))),
    ),
    # Every detectron2 training script (tools/train_net.py, plain_train_net.py, lazyconfig_train_net.py)
    # calls default_setup, so seed_all_rng's call is there; the seed and the cuDNN flag come from the config.
    Helper(
        ("detectron2.engine.default_setup", "detectron2.engine.defaults.default_setup"),
        "facebookresearch/detectron2@084acd0f781f217e8d7b93a0099b08fce82cd88f detectron2/engine/defaults.py "
        "(default_setup(cfg, args): seed_all_rng(None if SEED < 0 else SEED + rank), SEED -1 by default; then, "
        "unless args.eval_only, cudnn.benchmark = CUDNN_BENCHMARK, False by default: both from the config); "
        "detectron2/engine/__init__.py @741dfbc7f9cd92c520838c035318d24641f14c78 re-exports it",
        (("cfg", None), ("args", None)),
        (Seed(("numpy", "torch", "random", "torch-cuda")), EnvWrite("PYTHONHASHSEED", UNKNOWN), Cudnn("benchmark", UNKNOWN)),
    ),
    # -- ultralytics
    Helper(
        ("ultralytics.utils.torch_utils.init_seeds",),
        "ultralytics 8.4.190 wheel: ultralytics/utils/torch_utils.py (init_seeds(seed=0, deterministic=False): "
        "random, numpy, torch; deterministic: use_deterministic_algorithms(True, warn_only=True), "
        "cudnn.deterministic = True, CUBLAS_WORKSPACE_CONFIG = ':4096:8', PYTHONHASHSEED = str(seed) (torch >= 2.0); "
        "else unset_deterministic(): use_deterministic_algorithms(False), cudnn.deterministic = False, and the two "
        "variables popped). BaseTrainer calls it with the `deterministic` setting, True by default (cfg/default.yaml)",
        (("seed", 0), ("deterministic", False)),
        (
            Seed(("random", "numpy", "torch")),
            If(
                "deterministic",
                (
                    Determinism(True, True),
                    Cudnn("deterministic", True),
                    EnvWrite(CUBLAS, ":4096:8"),
                    EnvWrite("PYTHONHASHSEED", Arg("seed")),
                ),
                (Determinism(False, False), Cudnn("deterministic", False)),
            ),
        ),
    ),
    # -- fairseq (the PyPI release is an sdist that does not build here)
    Helper(
        ("fairseq.utils.set_torch_seed",),
        "facebookresearch/fairseq@032a404d389307a0e8f7dd2a0d501c78afa78f39 fairseq/utils.py (version.txt 0.13.0): "
        "class set_torch_seed(seed): `assert isinstance(seed, int)`, saves the RNG state, torch.manual_seed, "
        "xm.set_rng_state on XLA, torch.cuda.manual_seed where CUDA is available; __exit__ restores the saved "
        "state, so `with set_torch_seed(s):` seeds only its block (called plainly, it stays seeded)",
        (("seed", None),),
        (Check("seed", "isinstance-int"), Seed(("torch", "torch-cuda"))),
    ),
    # -- ignite
    Helper(
        ("ignite.utils.manual_seed",),
        "pytorch-ignite 0.5.5 wheel: ignite/utils.py (manual_seed(seed): random, torch, xm.set_rng_state on XLA, "
        "numpy where installed; no flag)",
        (("seed", None),),
        (Seed(("random", "torch", "numpy")),),
    ),
    # -- PyG
    Helper(
        ("torch_geometric.seed_everything", "torch_geometric.seed.seed_everything"),
        "torch-geometric 2.8.1 wheel: torch_geometric/seed.py (seed_everything(seed): random, numpy, torch, "
        "torch.cuda.manual_seed_all; no flag)",
        (("seed", None),),
        (Seed(("random", "numpy", "torch", "torch-cuda")),),
    ),
    # -- Keras 3
    Helper(
        ("keras.utils.set_random_seed", "keras.src.utils.rng_utils.set_random_seed"),
        "keras 3.15.1 wheel: keras/src/utils/rng_utils.py (set_random_seed(seed): ValueError unless an int; "
        "random, numpy, tf.random where TensorFlow is installed, torch.manual_seed only `if backend.backend() == "
        '"torch"`; no flag), keras/src/backend/config.py (the backend: "tensorflow", else keras.json, else '
        "KERAS_BACKEND, read when keras is first imported)",
        (("seed", None),),
        (Check("seed", "isinstance-int"), Seed(("random", "numpy", "torch"))),
        backend="keras",
    ),
    # -- fastai
    Helper(
        _names(_FASTAI_MODULES, "set_seed"),
        "fastai 2.8.12 wheel: fastai/torch_core.py (set_seed(s, reproducible=False): torch, torch.cuda.manual_seed_all, "
        "numpy, random, then `if reproducible: cudnn.deterministic = True; cudnn.benchmark = False`; never "
        "use_deterministic_algorithms); each of these modules' `*` binds it (STARRED)",
        (("s", None), ("reproducible", False)),
        (Seed(("torch", "torch-cuda", "numpy", "random")), If("reproducible", _SEED_CUDNN_PAIR)),
    ),
)

STARRED: frozenset[str] = frozenset(_names(_FASTAI_MODULES, "set_seed"))
"""The catalogue names that `from <module> import *` binds (the linker follows them where the module is
no project file). fastai 2.8.12 wheel: fastai/torch_core.py:8-9 lists 'set_seed' in `__all__`, and
torch_basics.py:11 (`from .torch_core import *`), data/all.py:1, basics.py:1 (`from .data.all import *`)
and vision/all.py:2, text/all.py:1, tabular/all.py:1 (`from ..basics import *`) carry it on; none of
those defines `__all__`, and no other fastai module binds `set_seed` (linking fastai's own source
resolves `set_seed` of each to torch_core's)."""

BY_NAME: dict[str, Helper] = {name: helper for helper in HELPERS for name in helper.names}
"""Every catalogue name -> its entry."""

VERSIONED: tuple[str, ...] = tuple(
    sorted(
        {h.idiom.since[0] for h in HELPERS if h.idiom is not None and h.idiom.since is not None}
        | {dist for h in HELPERS if h.idiom is not None for _, dist, _ in h.idiom.later}
        | {dist for h in HELPERS if h.resets is not None for _, dist in h.resets.packages}
    )
)
"""The distributions whose version a rule may read for a file (opscan.lint.target.PackageVersions), for --show-settings."""

RESETTING: frozenset[str] = frozenset(module for h in HELPERS if h.resets is not None for module, _ in h.resets.packages)
"""The top-level modules with a helper whose older releases turn determinism off (Helper.resets): the
rules look for such a call only in a run that imports one."""

MODELS: dict[str, Callable[[CallArgs], list[Effect]]] = {name: helper.model for name, helper in BY_NAME.items()}
"""Every catalogue name -> the function of a call's literal arguments that returns its effects."""

SETTINGS_CLASSES = _TRAINING_ARGUMENTS | frozenset(_ST_TRAINING_ARGUMENTS)
"""Settings objects the facts pass follows from where they are built to the call that gets them (`Built`)."""
