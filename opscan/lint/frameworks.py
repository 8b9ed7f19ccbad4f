"""What third-party seeding and determinism helpers actually do, as lint effects.

Each model takes the literal arguments of one call site and returns the effects
the helper performs, in the order it performs them. Every model was written
from the helper's source in the release users have now; the comment above it
names the file read and notes older behaviour that differs.

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
  torchtune) still report `Seed`: they do call the seeding functions.

The module imports nothing heavy: it is data and small functions.
"""

from __future__ import annotations

from opscan.lint.model import CUBLAS, UNKNOWN, CallArgs, Cudnn, Determinism, EnvWrite, Seed

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


def _truth(value: Any) -> Any:
    """`bool(value)` for a literal, UNKNOWN for an unknown: what an `if value:` in the helper decides."""
    return UNKNOWN if value is UNKNOWN else bool(value)


def _if_enabled(condition: Any) -> list[Effect]:
    """`if condition: torch.use_deterministic_algorithms(True)`."""
    enabled = _truth(condition)
    if enabled is UNKNOWN:
        return [Determinism(UNKNOWN, False)]
    return [Determinism(True, False)] if enabled else []


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


# -- Lightning --------------------------------------------------------------------
# Read: lightning 2.6.6 (PyPI wheel; same code in pytorch_lightning / lightning_fabric 2.6.6),
#   lightning/fabric/utilities/seed.py, lightning/fabric/fabric.py (Fabric.seed_everything, __init__),
#   lightning/pytorch/trainer/connectors/accelerator_connector.py (_set_torch_flags),
#   lightning/pytorch/trainer/trainer.py, lightning/pytorch/cli.py;
#   also Lightning-AI/pytorch-lightning@99e7047c302ca1a3dbb4811e504bda3964d02942 (accelerator_connector.py).


# seed_everything(seed=None, workers=False, verbose=True): checks 0 <= seed <= 2**32-1 first (ValueError),
# then os.environ["PL_GLOBAL_SEED"], random.seed, np.random.seed, torch.manual_seed,
# os.environ["PL_SEED_WORKERS"]. No determinism flags. seed=None reads PL_GLOBAL_SEED, else uses 0
# (before 2.2 it picked a random seed; 1.x also called torch.cuda.manual_seed_all).
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
# Older behaviour (CHANGELOG, and 1.x _init_deterministic seen in the code index): up to at least 1.7 it
# called use_deterministic_algorithms(deterministic or False) even when unset, and also set
# HOROVOD_FUSION_THRESHOLD="0"; "warn" arrived in 1.7; 1.6.0-1.6.3 turned benchmark on by default.
def _lightning_trainer(args: CallArgs) -> list[Effect]:
    deterministic = args.get("deterministic", None, None)
    benchmark = args.get("benchmark", None, None)
    enabled = _truth(deterministic)
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


# set_seed(seed, deterministic=False): random.seed, np.random.seed, torch.manual_seed,
# torch.cuda.manual_seed_all, then `if deterministic: torch.use_deterministic_algorithms(True)`.
# No CUBLAS_WORKSPACE_CONFIG and no cuDNN flags.
def _hf_set_seed(args: CallArgs) -> list[Effect]:
    return [Seed(_HF_SEED_LIBS)] + _if_enabled(args.get("deterministic", 1, False))


# enable_full_determinism(seed, warn_only=False): set_seed(seed), the five environment writes above,
# torch.use_deterministic_algorithms(True, warn_only=warn_only), cudnn.deterministic = True,
# cudnn.benchmark = False.
def _hf_enable_full_determinism(args: CallArgs) -> list[Effect]:
    effects = [Seed(_HF_SEED_LIBS)] + [EnvWrite(var, value) for var, value in _HF_FULL_DETERMINISM_ENV]
    flag = _determinism(True, args.get("warn_only", 1, False))
    if flag is None:
        return effects
    return effects + [flag, Cudnn("deterministic", True), Cudnn("benchmark", False)]


# Trainer(model=None, args=None, ...): the first thing __init__ does is
#     if args is None: args = TrainingArguments(output_dir="tmp_trainer")      # seed=42, full_determinism=False
#     enable_full_determinism(args.seed) if args.full_determinism else set_seed(args.seed)
# (train() repeats it when model_init is given). TrainingArguments itself has no such effect. An `args`
# object is never a literal, and full_determinism is often a command-line flag (HfArgumentParser), so
# with `args` passed the branch is unknown: seeding, then enable_full_determinism's effects with the
# undecided values UNKNOWN (warn_only is known: the Trainer passes none).
def _hf_trainer(args: CallArgs) -> list[Effect]:
    if args.get("args", 1, None) is None:
        return [Seed(_HF_SEED_LIBS)]
    return (
        [Seed(_HF_SEED_LIBS)]
        + [EnvWrite(var, value) for var, value in _HF_FULL_DETERMINISM_ENV]
        + [
            Determinism(UNKNOWN, False),
            Cudnn("deterministic", UNKNOWN),
            Cudnn("benchmark", UNKNOWN),
        ]
    )


# -- accelerate -------------------------------------------------------------------
# Read: accelerate 1.15.0 (PyPI wheel) accelerate/utils/random.py; accelerate/utils/__init__.py re-exports
#   it; the top-level `accelerate` package does not. Accelerator(...) sets no seed or flag.
# set_seed(seed, device_specific=False, deterministic=False): random.seed, np.random.seed,
# torch.manual_seed, then one of torch.{xpu,npu,mlu,sdaa,musa,hpu,neuron,cuda}.manual_seed_all (cuda on a
# CUDA machine), xm.set_rng_state on XLA, then `if deterministic: torch.use_deterministic_algorithms(True)`.
# No CUBLAS_WORKSPACE_CONFIG and no cuDNN flags. 0.20.3 had no `deterministic` parameter (wheel read).
def _accelerate_set_seed(args: CallArgs) -> list[Effect]:
    return [Seed(("random", "numpy", "torch", "torch-cuda"))] + _if_enabled(args.get("deterministic", 2, False))


# -- OpenMMLab ----------------------------------------------------------------------
# Read: mmengine 0.10.7 (PyPI wheel) and open-mmlab/mmengine@13b1ffbf6201898021ea77c9ca2373ed8853b1c6
#   mmengine/runner/utils.py; mmengine 0.1.0, 0.4.0 and 0.7.0 wheels (same logic since the first release).
# set_random_seed(seed=None, deterministic=False, diff_rank_seed=False): seed None -> a random seed shared
# across ranks (still seeds); random.seed, np.random.seed, torch.manual_seed, torch.cuda.manual_seed_all
# (when CUDA is available), then if deterministic: cudnn.deterministic = True, cudnn.benchmark = False,
# torch.use_deterministic_algorithms(True) (on torch >= 1.10). No CUBLAS_WORKSPACE_CONFIG.
# Runner(randomness=dict(...)) calls it with a config dict we cannot read; Runner is not modelled.
def _mmengine_set_random_seed(args: CallArgs) -> list[Effect]:
    deterministic = args.get("deterministic", 1, False)
    return (
        [Seed(("random", "numpy", "torch", "torch-cuda"))]
        + _cudnn_deterministic_pair(deterministic)
        + _if_enabled(deterministic)
    )


# Read: mmcv 1.7.2 (PyPI sdist) mmcv/runner/utils.py, mmcv/runner/__init__.py. mmcv 2.x has no
# mmcv.runner (moved to mmengine).
# set_random_seed(seed, deterministic=False, use_rank_shift=False): random.seed, np.random.seed,
# torch.manual_seed, torch.cuda.manual_seed, torch.cuda.manual_seed_all,
# os.environ["PYTHONHASHSEED"] = str(seed), then if deterministic: cudnn.deterministic = True,
# cudnn.benchmark = False. Never use_deterministic_algorithms. seed=None raises in torch.manual_seed.
def _mmcv_set_random_seed(args: CallArgs) -> list[Effect]:
    seed = args.get("seed", 0, None)
    if seed is None:
        return []
    shifted = _truth(args.get("use_rank_shift", 2, False))
    hash_seed = str(seed) if seed is not UNKNOWN and shifted is False else UNKNOWN
    effects = [Seed(("random", "numpy", "torch", "torch-cuda")), EnvWrite("PYTHONHASHSEED", hash_seed)]
    return effects + _cudnn_deterministic_pair(args.get("deterministic", 1, False))


# Read: mmdet 2.28.2 (PyPI wheel) mmdet/apis/train.py, mmdet/apis/__init__.py. mmdet 3.x (3.3.0) has no
# set_random_seed (it uses mmengine's).
# set_random_seed(seed, deterministic=False): random.seed, np.random.seed, torch.manual_seed,
# torch.cuda.manual_seed_all, then if deterministic: cudnn.deterministic = True, cudnn.benchmark = False.
def _mmdet_set_random_seed(args: CallArgs) -> list[Effect]:
    if args.get("seed", 0, None) is None:
        return []  # torch.manual_seed(None) raises
    return [Seed(("random", "numpy", "torch", "torch-cuda"))] + _cudnn_deterministic_pair(
        args.get("deterministic", 1, False)
    )


def _cudnn_deterministic_pair(deterministic: Any) -> list[Effect]:
    """`if deterministic: cudnn.deterministic = True; cudnn.benchmark = False`."""
    enabled = _truth(deterministic)
    if enabled is UNKNOWN:
        return [Cudnn("deterministic", UNKNOWN), Cudnn("benchmark", UNKNOWN)]
    return [Cudnn("deterministic", True), Cudnn("benchmark", False)] if enabled else []


# -- composer -----------------------------------------------------------------------
# Read: mosaicml 0.32.1 (PyPI wheel) composer/utils/reproducibility.py, composer/trainer/trainer.py,
#   composer/utils/__init__.py (it does not re-export seed_all or configure_deterministic_mode; users
#   write `from composer.utils import reproducibility`); also mosaicml/composer@
#   02c872e43c708781bba06355a4e673557f3d5056 reproducibility.py (same logic, warned instead of logging).

_COMPOSER_SEED_LIBS = ("random", "numpy", "torch", "torch-cuda")


# seed_all(seed): raises ValueError unless 0 <= seed <= 2**32-1, then random.seed, np.random.seed,
# torch.manual_seed, torch.cuda.manual_seed_all.
def _composer_seed_all(args: CallArgs) -> list[Effect]:
    return [Seed(_COMPOSER_SEED_LIBS)] if _in_uint32(args.get("seed", 0, None)) else []


# configure_deterministic_mode(): torch.use_deterministic_algorithms(True), cudnn.benchmark = False,
# cudnn.deterministic = True, os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8" (after the flag).
def _composer_configure_deterministic_mode(args: CallArgs) -> list[Effect]:
    return [
        Determinism(True, False),
        Cudnn("benchmark", False),
        Cudnn("deterministic", True),
        EnvWrite(CUBLAS, ":4096:8"),
    ]


# Trainer(*, model, ..., seed=None, deterministic_mode=False, ...): seed None -> a time-based random seed;
# ValueError unless 0 <= seed <= 2**32-1; seed_all(seed + rank); then
# `if deterministic_mode: configure_deterministic_mode()`. (fit() reseeds with the same seed.)
def _composer_trainer(args: CallArgs) -> list[Effect]:
    seed = args.get("seed", None, None)
    if seed is not None and not _in_uint32(seed):
        return []
    effects = [Seed(_COMPOSER_SEED_LIBS)]
    enabled = _truth(args.get("deterministic_mode", None, False))
    if enabled is UNKNOWN:
        return effects + [
            Determinism(UNKNOWN, False),
            Cudnn("benchmark", UNKNOWN),
            Cudnn("deterministic", UNKNOWN),
            EnvWrite(CUBLAS, ":4096:8"),
        ]
    if enabled:
        effects += _composer_configure_deterministic_mode(CallArgs())
    return effects


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


# -- the table ------------------------------------------------------------------------


def _names(prefixes: tuple[str, ...], suffix: str) -> list[str]:
    return [f"{prefix}.{suffix}" for prefix in prefixes]


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

MODELS: dict[str, Callable[[CallArgs], list[Effect]]] = {
    **{name: _lightning_seed_everything for name in _names(_LIGHTNING_SEED_MODULES, "seed_everything")},
    **{name: _fabric for name in _FABRIC_CLASSES},
    **{f"{name}.seed_everything": _fabric_seed_everything for name in _FABRIC_CLASSES},
    **{name: _lightning_trainer for name in _names(_LIGHTNING_TRAINER_MODULES, "Trainer")},
    "lightning.pytorch.cli.LightningCLI": _lightning_cli,
    "pytorch_lightning.cli.LightningCLI": _lightning_cli,
    # transformers
    **{name: _hf_set_seed for name in _names(_HF_MODULES, "set_seed")},
    **{name: _hf_enable_full_determinism for name in _names(_HF_MODULES, "enable_full_determinism")},
    "transformers.Trainer": _hf_trainer,
    "transformers.trainer.Trainer": _hf_trainer,
    "transformers.Seq2SeqTrainer": _hf_trainer,
    "transformers.trainer_seq2seq.Seq2SeqTrainer": _hf_trainer,
    # accelerate
    "accelerate.utils.set_seed": _accelerate_set_seed,
    "accelerate.utils.random.set_seed": _accelerate_set_seed,
    # OpenMMLab
    "mmengine.runner.set_random_seed": _mmengine_set_random_seed,
    "mmengine.runner.utils.set_random_seed": _mmengine_set_random_seed,
    "mmcv.runner.set_random_seed": _mmcv_set_random_seed,
    "mmcv.runner.utils.set_random_seed": _mmcv_set_random_seed,
    "mmdet.apis.set_random_seed": _mmdet_set_random_seed,
    "mmdet.apis.train.set_random_seed": _mmdet_set_random_seed,
    # composer
    "composer.utils.reproducibility.seed_all": _composer_seed_all,
    "composer.utils.reproducibility.configure_deterministic_mode": _composer_configure_deterministic_mode,
    "composer.Trainer": _composer_trainer,
    "composer.trainer.Trainer": _composer_trainer,
    "composer.trainer.trainer.Trainer": _composer_trainer,
    # torchtune
    "torchtune.training.set_seed": _torchtune_set_seed,
    "torchtune.training.seed.set_seed": _torchtune_set_seed,
    "torchtune.utils.set_seed": _torchtune_set_seed,  # torchtune < 0.3
    "torchtune.utils.seed.set_seed": _torchtune_set_seed,  # torchtune < 0.3
    # MONAI
    "monai.utils.set_determinism": _monai_set_determinism,
    "monai.utils.misc.set_determinism": _monai_set_determinism,
}
