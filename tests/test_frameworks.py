"""The framework-helper models: exact effect lists, in order, for each interesting call shape."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opscan.lint.frameworks import MODELS
from opscan.lint.frameworks import HELPERS
from opscan.lint.model import UNKNOWN, Built, CallArgs, Cudnn, Determinism, Effect, EnvWrite, Loc, Seed
from tests.lint.helpers import read_expected

U = UNKNOWN
LOC = Loc(1, 1, 1, 2)
CUBLAS = "CUBLAS_WORKSPACE_CONFIG"
FIXTURES = Path(__file__).parent / "fixtures" / "lint" / "frameworks"


# Effects are compared by class and fields with each value's type, so True never passes for 1.
def _typed(value):
    return "UNKNOWN" if value is UNKNOWN else (type(value).__name__, value)


def _canon(effect: Effect) -> tuple:
    return type(effect).__name__, tuple((name, _typed(getattr(effect, name))) for name in effect._fields)


def seed(*libs):
    return _canon(Seed(libs))


def det(mode, warn_only):
    return _canon(Determinism(mode, warn_only))


def env(var, value):
    return _canon(EnvWrite(var, value))


def cudnn(flag, value):
    return _canon(Cudnn(flag, value))


def effects_of(name: str, args: tuple = (), kwargs: dict | None = None, star: bool = False) -> list:
    effects = MODELS[name](CallArgs(tuple(args), tuple((kwargs or {}).items()), star))
    assert all(isinstance(effect, Effect) for effect in effects)
    return [_canon(effect) for effect in effects]


def case(name, args=(), kwargs=None, expected=(), star=False, id=None):
    return pytest.param(name, args, kwargs or {}, star, list(expected), id=id)


PL = ("random", "numpy", "torch")
HF = ("random", "numpy", "torch", "torch-cuda")
TRAINER_ON = [cudnn("benchmark", False), det(True, False), env(CUBLAS, ":4096:8")]
TRAINER_UNKNOWN = [cudnn("benchmark", U), det(U, U), env(CUBLAS, ":4096:8")]
HF_ENV = [
    env("CUDA_LAUNCH_BLOCKING", "1"),
    env(CUBLAS, ":16:8"),
    env("ASCEND_LAUNCH_BLOCKING", "1"),
    env("HCCL_DETERMINISTIC", "1"),
    env("FLASH_ATTENTION_DETERMINISTIC", "1"),
]
HF_TRAINER_UNKNOWN = [seed(*HF), *HF_ENV, det(U, False), cudnn("deterministic", U), cudnn("benchmark", U)]
COMPOSER_DET = [det(True, False), cudnn("benchmark", False), cudnn("deterministic", True), env(CUBLAS, ":4096:8")]
TT = ("torch", "numpy", "random")
TT_STRICT = [cudnn("deterministic", True), cudnn("benchmark", False), env(CUBLAS, ":4096:8")]
MONAI = ("torch", "random", "numpy")

CASES = [
    # Lightning Trainer: keyword-only; benchmark, then the flag, then the env var (after the flag).
    case("lightning.Trainer", id="trainer-default"),
    case("lightning.Trainer", kwargs={"deterministic": True}, expected=TRAINER_ON, id="trainer-true"),
    case(
        "lightning.pytorch.Trainer", kwargs={"deterministic": False}, expected=[det(False, False)], id="trainer-false"
    ),
    case(
        "pytorch_lightning.Trainer",
        kwargs={"deterministic": "warn"},
        expected=[cudnn("benchmark", False), det(True, True), env(CUBLAS, ":4096:8")],
        id="trainer-warn",
    ),
    case(
        "lightning.Trainer",
        kwargs={"deterministic": True, "benchmark": True},
        expected=[cudnn("benchmark", True), det(True, False), env(CUBLAS, ":4096:8")],
        id="trainer-true-benchmark",
    ),
    case("lightning.Trainer", kwargs={"benchmark": True}, expected=[cudnn("benchmark", True)], id="trainer-benchmark"),
    # sentence-transformers' trainers are transformers' Trainer: args=None seeds 42, their arguments classes are read
    case("sentence_transformers.SentenceTransformerTrainer", expected=[seed("random", "numpy", "torch", "torch-cuda")], id="st-trainer-no-args"),
    case(
        "sentence_transformers.cross_encoder.trainer.CrossEncoderTrainer",
        args=(U, Built("sentence_transformers.CrossEncoderTrainingArguments", CallArgs((), (("seed", 3),)), LOC)),
        expected=[seed("random", "numpy", "torch", "torch-cuda")],
        id="st-trainer-args",
    ),
    # pytorch-lightning 1.x's Trainer.from_argparse_args(args, **kwargs): the command line unknown, the keywords win
    case(
        "pytorch_lightning.Trainer.from_argparse_args",
        args=(U,),
        expected=[cudnn("benchmark", U), det(U, U), env(CUBLAS, ":4096:8")],
        id="from-argparse-args",
    ),
    case(
        "pytorch_lightning.Trainer.from_argparse_args",
        args=(U,),
        kwargs={"deterministic": True, "benchmark": False},
        expected=[cudnn("benchmark", False), det(True, False), env(CUBLAS, ":4096:8")],
        id="from-argparse-args-keywords",
    ),
    case(
        "lightning.Trainer",
        kwargs={"deterministic": False, "benchmark": False},
        expected=[cudnn("benchmark", False), det(False, False)],
        id="trainer-false-nobenchmark",
    ),
    case("lightning.Trainer", kwargs={"deterministic": None}, id="trainer-none"),
    case("lightning.Trainer", kwargs={"deterministic": U}, expected=TRAINER_UNKNOWN, id="trainer-unknown"),
    case(
        "lightning.Trainer",
        kwargs={"deterministic": U, "benchmark": True},
        expected=[cudnn("benchmark", True), det(U, U), env(CUBLAS, ":4096:8")],
        id="trainer-unknown-benchmark",
    ),
    case("lightning.Trainer", star=True, expected=TRAINER_UNKNOWN, id="trainer-star"),
    case(
        "lightning.Trainer",
        kwargs={"deterministic": 1},
        expected=[cudnn("benchmark", False), env(CUBLAS, ":4096:8")],
        id="trainer-truthy-int-sets-env-but-no-flag",
    ),
    case("lightning.pytorch.trainer.trainer.Trainer", args=(True,), id="trainer-positional-ignored"),
    case("lightning.Trainer", kwargs={"deterministic": True, "benchmark": "yes"}, id="trainer-benchmark-str-raises"),
    # seed_everything: env, seed, env; bounds checked before anything.
    case(
        "lightning.seed_everything",
        args=(42,),
        expected=[env("PL_GLOBAL_SEED", "42"), seed(*PL), env("PL_SEED_WORKERS", "0")],
        id="seed-everything",
    ),
    case(
        "lightning_fabric.utilities.seed.seed_everything",
        args=(42, True),
        expected=[env("PL_GLOBAL_SEED", "42"), seed(*PL), env("PL_SEED_WORKERS", "1")],
        id="seed-everything-positional-workers",
    ),
    case(
        "pytorch_lightning.seed_everything",
        expected=[env("PL_GLOBAL_SEED", U), seed(*PL), env("PL_SEED_WORKERS", "0")],
        id="seed-everything-none",
    ),
    case(
        "lightning.pytorch.seed_everything",
        kwargs={"seed": U, "workers": U},
        expected=[env("PL_GLOBAL_SEED", U), seed(*PL), env("PL_SEED_WORKERS", U)],
        id="seed-everything-unknown",
    ),
    case(
        "lightning.fabric.seed_everything",
        args=("7",),
        expected=[env("PL_GLOBAL_SEED", "7"), seed(*PL), env("PL_SEED_WORKERS", "0")],
        id="seed-everything-str-int",
    ),
    case("lightning.seed_everything", args=(-1,), id="seed-everything-negative-raises"),
    case("lightning.seed_everything", args=(2**32,), id="seed-everything-too-big-raises"),
    case("lightning.seed_everything", args=("abc",), id="seed-everything-bad-str-raises"),
    case(
        "lightning.Fabric.seed_everything",
        args=(1234,),
        expected=[env("PL_GLOBAL_SEED", "1234"), seed(*PL), env("PL_SEED_WORKERS", "1")],
        id="fabric-seed-everything-workers-default-true",
    ),
    case(
        "lightning_fabric.Fabric.seed_everything",
        args=(1234,),
        kwargs={"workers": False},
        expected=[env("PL_GLOBAL_SEED", "1234"), seed(*PL), env("PL_SEED_WORKERS", "0")],
        id="fabric-seed-everything-workers-false",
    ),
    case("lightning.fabric.Fabric", kwargs={"accelerator": "cuda"}, id="fabric-constructor"),
    # LightningCLI: seed_everything(workers=True) unless seed_everything_default is False, then an unknown Trainer.
    case(
        "lightning.pytorch.cli.LightningCLI",
        args=(U,),
        expected=[env("PL_GLOBAL_SEED", U), seed(*PL), env("PL_SEED_WORKERS", "1"), *TRAINER_UNKNOWN],
        id="cli-default",
    ),
    case(
        "pytorch_lightning.cli.LightningCLI",
        args=(U, U, U, U, U, U, 123),
        expected=[env("PL_GLOBAL_SEED", "123"), seed(*PL), env("PL_SEED_WORKERS", "1"), *TRAINER_UNKNOWN],
        id="cli-positional-seed",
    ),
    case(
        "lightning.pytorch.cli.LightningCLI",
        kwargs={"seed_everything_default": False},
        expected=TRAINER_UNKNOWN,
        id="cli-no-seed",
    ),
    # transformers
    case("transformers.set_seed", args=(42,), expected=[seed(*HF)], id="hf-set-seed"),
    case("transformers.set_seed", args=(42, True), expected=[seed(*HF), det(True, False)], id="hf-set-seed-positional"),
    case(
        "transformers.trainer_utils.set_seed",
        args=(42,),
        kwargs={"deterministic": True},
        expected=[seed(*HF), det(True, False)],
        id="hf-set-seed-keyword",
    ),
    case("transformers.set_seed", args=(42,), kwargs={"deterministic": False}, expected=[seed(*HF)], id="hf-false"),
    case(
        "transformers.set_seed",
        args=(U,),
        kwargs={"deterministic": U},
        expected=[seed(*HF), det(U, False)],
        id="hf-set-seed-unknown",
    ),
    case("transformers.set_seed", args=(U,), star=True, expected=[seed(*HF), det(U, False)], id="hf-set-seed-star"),
    # set_seed(None): torch.manual_seed(None) raises after random and numpy were reseeded from the OS;
    # no argument at all is a TypeError before anything runs.
    case("transformers.set_seed", args=(None,), kwargs={"deterministic": True}, id="hf-set-seed-none-raises"),
    case("transformers.set_seed", id="hf-set-seed-no-argument-raises"),
    case("transformers.enable_full_determinism", args=(None,), id="hf-full-seed-none-raises"),
    case("transformers.enable_full_determinism", id="hf-full-no-argument-raises"),
    case(
        "transformers.enable_full_determinism",
        args=(0,),
        expected=[seed(*HF), *HF_ENV, det(True, False), cudnn("deterministic", True), cudnn("benchmark", False)],
        id="hf-full",
    ),
    case(
        "transformers.trainer_utils.enable_full_determinism",
        args=(0, True),
        expected=[seed(*HF), *HF_ENV, det(True, True), cudnn("deterministic", True), cudnn("benchmark", False)],
        id="hf-full-warn-only-positional",
    ),
    case(
        "transformers.enable_full_determinism",
        kwargs={"seed": 0, "warn_only": U},
        expected=[seed(*HF), *HF_ENV, det(True, U), cudnn("deterministic", True), cudnn("benchmark", False)],
        id="hf-full-warn-only-unknown",
    ),
    case(
        "transformers.enable_full_determinism",
        args=(0,),
        kwargs={"warn_only": 1},
        expected=[seed(*HF), *HF_ENV],
        id="hf-full-warn-only-int-raises-in-torch",
    ),
    case("transformers.Trainer", expected=[seed(*HF)], id="hf-trainer-no-args"),
    case(
        "transformers.Trainer",
        kwargs={"args": Built("transformers.TrainingArguments", CallArgs(kwargs=(("seed", None),)), LOC)},
        id="hf-trainer-seed-none-raises",
    ),
    case(
        "transformers.Trainer",
        kwargs={"args": Built("transformers.TrainingArguments", CallArgs(kwargs=(("seed", None), ("full_determinism", True))), LOC)},
        id="hf-trainer-full-determinism-seed-none-raises",
    ),
    case("transformers.Trainer", args=(U, None), expected=[seed(*HF)], id="hf-trainer-args-none"),
    case("transformers.trainer.Trainer", kwargs={"model": U, "args": U}, expected=HF_TRAINER_UNKNOWN, id="hf-trainer"),
    case("transformers.Seq2SeqTrainer", args=(U, U), expected=HF_TRAINER_UNKNOWN, id="hf-seq2seq-positional"),
    case("transformers.Trainer", star=True, expected=HF_TRAINER_UNKNOWN, id="hf-trainer-star"),
    # accelerate
    case("accelerate.utils.set_seed", args=(0,), expected=[seed(*HF)], id="accelerate"),
    case(
        "accelerate.utils.random.set_seed",
        args=(0, False, True),
        expected=[seed(*HF), det(True, False)],
        id="accelerate-positional",
    ),
    case("accelerate.utils.set_seed", args=(0, True), expected=[seed(*HF)], id="accelerate-device-specific-only"),
    case("accelerate.utils.set_seed", kwargs={"seed": None, "deterministic": True}, id="accelerate-seed-none-raises"),
    case("accelerate.utils.set_seed", id="accelerate-no-argument-raises"),
    case(
        "accelerate.utils.set_seed",
        args=(0,),
        kwargs={"deterministic": U},
        expected=[seed(*HF), det(U, False)],
        id="accelerate-unknown",
    ),
    # mmengine: cuDNN pair, then the flag
    case("mmengine.runner.set_random_seed", expected=[seed(*HF)], id="mmengine-no-seed-still-seeds"),
    case(
        "mmengine.runner.utils.set_random_seed",
        args=(0, True),
        expected=[seed(*HF), cudnn("deterministic", True), cudnn("benchmark", False), det(True, False)],
        id="mmengine-deterministic",
    ),
    case(
        "mmengine.runner.set_random_seed",
        args=(0,),
        kwargs={"deterministic": U},
        expected=[seed(*HF), cudnn("deterministic", U), cudnn("benchmark", U), det(U, False)],
        id="mmengine-unknown",
    ),
    # mmcv 1.x: PYTHONHASHSEED, cuDNN pair, never the flag
    case("mmcv.runner.set_random_seed", args=(0,), expected=[seed(*HF), env("PYTHONHASHSEED", "0")], id="mmcv"),
    case(
        "mmcv.runner.utils.set_random_seed",
        args=(3, True),
        expected=[seed(*HF), env("PYTHONHASHSEED", "3"), cudnn("deterministic", True), cudnn("benchmark", False)],
        id="mmcv-deterministic",
    ),
    case(
        "mmcv.runner.set_random_seed",
        args=(3,),
        kwargs={"use_rank_shift": True},
        expected=[seed(*HF), env("PYTHONHASHSEED", U)],
        id="mmcv-rank-shift",
    ),
    case("mmcv.runner.set_random_seed", args=(U,), expected=[seed(*HF), env("PYTHONHASHSEED", U)], id="mmcv-unknown"),
    case("mmcv.runner.set_random_seed", args=(None,), id="mmcv-none-raises"),
    # mmdet 2.x
    case("mmdet.apis.set_random_seed", args=(0,), expected=[seed(*HF)], id="mmdet"),
    case(
        "mmdet.apis.train.set_random_seed",
        args=(0, True),
        expected=[seed(*HF), cudnn("deterministic", True), cudnn("benchmark", False)],
        id="mmdet-deterministic",
    ),
    case(
        "mmdet.apis.set_random_seed",
        args=(U,),
        kwargs={"deterministic": U},
        expected=[seed(*HF), cudnn("deterministic", U), cudnn("benchmark", U)],
        id="mmdet-unknown",
    ),
    case("mmdet.apis.set_random_seed", id="mmdet-none-raises"),
    # composer
    case("composer.utils.reproducibility.seed_all", args=(42,), expected=[seed(*HF)], id="composer-seed-all"),
    case("composer.utils.reproducibility.seed_all", args=(-1,), id="composer-seed-all-negative-raises"),
    case("composer.utils.reproducibility.seed_all", args=(2**32,), id="composer-seed-all-too-big-raises"),
    case("composer.utils.reproducibility.seed_all", args=(U,), expected=[seed(*HF)], id="composer-seed-all-unknown"),
    case(
        "composer.utils.reproducibility.configure_deterministic_mode",
        expected=COMPOSER_DET,
        id="composer-configure",
    ),
    case("composer.Trainer", kwargs={"model": U}, expected=[seed(*HF)], id="composer-trainer-random-seed"),
    case(
        "composer.trainer.Trainer",
        kwargs={"model": U, "seed": 42, "deterministic_mode": True},
        expected=[seed(*HF), *COMPOSER_DET],
        id="composer-trainer-deterministic",
    ),
    case("composer.Trainer", kwargs={"seed": -5}, id="composer-trainer-bad-seed-raises"),
    case(
        "composer.trainer.trainer.Trainer",
        kwargs={"deterministic_mode": U},
        expected=[
            seed(*HF),
            det(U, False),
            cudnn("benchmark", U),
            cudnn("deterministic", U),
            env(CUBLAS, ":4096:8"),
        ],
        id="composer-trainer-unknown",
    ),
    case("composer.Trainer", args=(True,), expected=[seed(*HF)], id="composer-trainer-positional-ignored"),
    # torchtune: seeds torch, numpy, random; debug_mode as torch.set_deterministic_debug_mode
    case("torchtune.training.set_seed", args=(42,), expected=[seed(*TT)], id="torchtune"),
    case("torchtune.training.set_seed", expected=[seed(*TT)], id="torchtune-random-seed"),
    case("torchtune.training.set_seed", args=(2**32,), id="torchtune-too-big-raises"),
    case(
        "torchtune.training.seed.set_seed",
        args=(42, "warn"),
        expected=[seed(*TT), det(True, True), *TT_STRICT],
        id="torchtune-warn",
    ),
    case(
        "torchtune.training.set_seed",
        kwargs={"seed": 42, "debug_mode": 1},
        expected=[seed(*TT), det(True, True), *TT_STRICT],
        id="torchtune-1",
    ),
    case(
        "torchtune.training.set_seed",
        args=(42,),
        kwargs={"debug_mode": True},
        expected=[seed(*TT), det(True, True), *TT_STRICT],
        id="torchtune-true-is-1",
    ),
    case(
        "torchtune.utils.set_seed",
        args=(42, "error"),
        expected=[seed(*TT), det(True, False), *TT_STRICT],
        id="torchtune-error",
    ),
    case(
        "torchtune.utils.seed.set_seed",
        args=(42, 2),
        expected=[seed(*TT), det(True, False), *TT_STRICT],
        id="torchtune-2",
    ),
    case(
        "torchtune.training.set_seed",
        args=(42, "default"),
        expected=[seed(*TT), det(False, False), cudnn("deterministic", False), cudnn("benchmark", True)],
        id="torchtune-default",
    ),
    case(
        "torchtune.training.set_seed",
        args=(42, 0),
        expected=[seed(*TT), det(False, False), cudnn("deterministic", False), cudnn("benchmark", True)],
        id="torchtune-0",
    ),
    case("torchtune.training.set_seed", args=(42, "strict"), expected=[seed(*TT)], id="torchtune-bad-str-raises"),
    case("torchtune.training.set_seed", args=(42, 3), expected=[seed(*TT)], id="torchtune-bad-int-raises"),
    case("torchtune.training.set_seed", args=(42, 1.0), expected=[seed(*TT)], id="torchtune-float-raises"),
    case(
        "torchtune.training.set_seed",
        args=(42,),
        kwargs={"debug_mode": U},
        expected=[seed(*TT), det(U, U), cudnn("deterministic", U), cudnn("benchmark", U), env(CUBLAS, ":4096:8")],
        id="torchtune-unknown",
    ),
    # MONAI: seed=None restores the cuDNN flags and seeds nothing
    case(
        "monai.utils.set_determinism",
        expected=[seed(*MONAI), cudnn("deterministic", True), cudnn("benchmark", False)],
        id="monai-default-seed",
    ),
    case(
        "monai.utils.misc.set_determinism",
        args=(0,),
        expected=[seed(*MONAI), cudnn("deterministic", True), cudnn("benchmark", False)],
        id="monai",
    ),
    case(
        "monai.utils.set_determinism",
        kwargs={"seed": None},
        expected=[cudnn("deterministic", U), cudnn("benchmark", U)],
        id="monai-none",
    ),
    case(
        "monai.utils.set_determinism",
        args=(None, True),
        expected=[cudnn("deterministic", U), cudnn("benchmark", U), det(True, False)],
        id="monai-none-with-flag",
    ),
    case(
        "monai.utils.set_determinism",
        args=(0,),
        kwargs={"use_deterministic_algorithms": False},
        expected=[seed(*MONAI), cudnn("deterministic", True), cudnn("benchmark", False), det(False, False)],
        id="monai-flag-false",
    ),
    case(
        "monai.utils.set_determinism",
        args=(U, U),
        expected=[seed(*MONAI), cudnn("deterministic", U), cudnn("benchmark", U), det(U, False)],
        id="monai-unknown",
    ),
    case("monai.utils.set_determinism", args=("abc",), id="monai-bad-seed-raises"),
    case(
        "monai.utils.set_determinism",
        args=(0, 1),
        expected=[seed(*MONAI), cudnn("deterministic", True), cudnn("benchmark", False)],
        id="monai-int-flag-raises-in-torch",
    ),
    # timm: torch, numpy, random; no flag
    case("timm.utils.random_seed", args=(42, 0), expected=[seed("torch", "numpy", "random")], id="timm"),
    # stable-baselines3: using_cuda sets the cuDNN pair, never the flag
    case("stable_baselines3.common.utils.set_random_seed", args=(0,), expected=[seed("random", "numpy", "torch")], id="sb3"),
    case(
        "stable_baselines3.common.utils.set_random_seed",
        args=(0,),
        kwargs={"using_cuda": True},
        expected=[seed("random", "numpy", "torch"), cudnn("deterministic", True), cudnn("benchmark", False)],
        id="sb3-using-cuda",
    ),
    case(
        "stable_baselines3.common.utils.set_random_seed",
        args=(0, U),
        expected=[seed("random", "numpy", "torch"), cudnn("deterministic", U), cudnn("benchmark", U)],
        id="sb3-using-cuda-unknown",
    ),
    # stable-baselines3's and sb3-contrib's algorithms: seed= by keyword; the cuDNN pair on a CUDA device
    case("stable_baselines3.PPO", args=("MlpPolicy", "CartPole-v1"), expected=[], id="sb3-algorithm-no-seed"),
    case("stable_baselines3.PPO", kwargs={"seed": None}, expected=[], id="sb3-algorithm-seed-none"),
    case(
        "stable_baselines3.ppo.ppo.PPO",
        kwargs={"seed": 0},
        expected=[seed("random", "numpy", "torch"), cudnn("deterministic", True), cudnn("benchmark", False)],
        id="sb3-algorithm-auto",
    ),
    case(
        "stable_baselines3.SAC",
        kwargs={"seed": U, "device": "cuda:1"},
        expected=[seed("random", "numpy", "torch"), cudnn("deterministic", True), cudnn("benchmark", False)],
        id="sb3-algorithm-cuda-unknown-seed",
    ),
    case(
        "stable_baselines3.DQN",
        kwargs={"seed": 0, "device": "cpu"},
        expected=[seed("random", "numpy", "torch")],
        id="sb3-algorithm-cpu",
    ),
    case(
        "sb3_contrib.TQC",
        kwargs={"seed": 0, "device": U},
        expected=[seed("random", "numpy", "torch"), cudnn("deterministic", U), cudnn("benchmark", U)],
        id="sb3-algorithm-device-unknown",
    ),
    case("sb3_contrib.ARS", kwargs={"seed": 0}, expected=[seed("random", "numpy", "torch")], id="sb3-ars-cpu-default"),
    case(
        "sb3_contrib.ars.ARS",
        kwargs={"seed": 0, "device": "auto"},
        expected=[seed("random", "numpy", "torch"), cudnn("deterministic", True), cudnn("benchmark", False)],
        id="sb3-ars-auto",
    ),
    case("stable_baselines3.A2C", kwargs={"seed": 0, "_init_setup_model": False}, expected=[], id="sb3-algorithm-no-setup"),
    case("stable_baselines3.PPO", star=True, expected=[], id="sb3-algorithm-kwargs"),
    case(
        "stable_baselines3.PPO",
        kwargs={"seed": 3},
        star=True,
        expected=[seed("random", "numpy", "torch"), cudnn("deterministic", U), cudnn("benchmark", U)],
        id="sb3-algorithm-kwargs-and-seed",
    ),
    # detectron2: PYTHONHASHSEED from the seed; a generated one when None
    case(
        "detectron2.utils.env.seed_all_rng",
        args=(5,),
        expected=[seed("numpy", "torch", "random", "torch-cuda"), env("PYTHONHASHSEED", "5")],
        id="detectron2",
    ),
    case(
        "detectron2.utils.env.seed_all_rng",
        expected=[seed("numpy", "torch", "random", "torch-cuda"), env("PYTHONHASHSEED", U)],
        id="detectron2-generated-seed",
    ),
    case(
        "detectron2.engine.default_setup",
        args=(U, U),
        expected=[seed("numpy", "torch", "random", "torch-cuda"), env("PYTHONHASHSEED", U), cudnn("benchmark", U)],
        id="detectron2-default-setup",
    ),
    # ultralytics: warn-only determinism, cudnn.deterministic, the variable, PYTHONHASHSEED; else off
    case(
        "ultralytics.utils.torch_utils.init_seeds",
        args=(3,),
        kwargs={"deterministic": True},
        expected=[
            seed("random", "numpy", "torch"),
            det(True, True),
            cudnn("deterministic", True),
            env(CUBLAS, ":4096:8"),
            env("PYTHONHASHSEED", "3"),
        ],
        id="ultralytics-deterministic",
    ),
    case(
        "ultralytics.utils.torch_utils.init_seeds",
        expected=[seed("random", "numpy", "torch"), det(False, False), cudnn("deterministic", False)],
        id="ultralytics-default-off",
    ),
    case(
        "ultralytics.utils.torch_utils.init_seeds",
        args=(U, U),
        expected=[
            seed("random", "numpy", "torch"),
            det(U, True),
            cudnn("deterministic", U),
            env(CUBLAS, ":4096:8"),
            env("PYTHONHASHSEED", U),
        ],
        id="ultralytics-unknown",
    ),
    # fairseq: torch and CUDA; the assert rejects a non-int
    case("fairseq.utils.set_torch_seed", args=(1,), expected=[seed("torch", "torch-cuda")], id="fairseq"),
    case("fairseq.utils.set_torch_seed", args=("1",), id="fairseq-str-asserts"),
    case("fairseq.utils.set_torch_seed", args=(U,), expected=[seed("torch", "torch-cuda")], id="fairseq-unknown"),
    # ignite, PyG, keras, fastai
    case("ignite.utils.manual_seed", args=(0,), expected=[seed("random", "torch", "numpy")], id="ignite"),
    case(
        "torch_geometric.seed_everything",
        args=(0,),
        expected=[seed("random", "numpy", "torch", "torch-cuda")],
        id="torch-geometric",
    ),
    case("keras.utils.set_random_seed", args=(1,), expected=[seed("random", "numpy", "torch")], id="keras"),
    case("keras.utils.set_random_seed", args=(1.5,), id="keras-float-raises"),
    case(
        "fastai.torch_core.set_seed",
        args=(42, True),
        expected=[seed("torch", "torch-cuda", "numpy", "random"), cudnn("deterministic", True), cudnn("benchmark", False)],
        id="fastai-reproducible",
    ),
    case("fastai.vision.all.set_seed", args=(42,), expected=[seed("torch", "torch-cuda", "numpy", "random")], id="fastai"),
    # transformers Trainer with TrainingArguments built in the script
    case(
        "transformers.Trainer",
        kwargs={"args": Built("transformers.TrainingArguments", CallArgs(kwargs=(("output_dir", "out"),)), LOC)},
        expected=[seed(*HF)],
        id="hf-trainer-training-arguments-default",
    ),
    case(
        "transformers.Trainer",
        kwargs={
            "args": Built(
                "transformers.TrainingArguments", CallArgs(kwargs=(("full_determinism", True),)), LOC
            )
        },
        expected=[seed(*HF), *HF_ENV, det(True, False), cudnn("deterministic", True), cudnn("benchmark", False)],
        id="hf-trainer-full-determinism",
    ),
    case(
        "transformers.Trainer",
        kwargs={"args": Built("transformers.TrainingArguments", CallArgs(star=True), LOC)},
        expected=HF_TRAINER_UNKNOWN,
        id="hf-trainer-training-arguments-star",
    ),
    case("transformers.TrainingArguments", kwargs={"full_determinism": True}, id="hf-training-arguments-no-effect"),
]


@pytest.mark.parametrize(("name", "args", "kwargs", "star", "expected"), CASES)
def test_model_effects(name, args, kwargs, star, expected):
    assert effects_of(name, args, kwargs, star) == expected


def test_comparison_is_type_strict():
    # The helpers above must not let an int stand in for a bool.
    assert det(True, False) != det(1, False)
    assert env(CUBLAS, ":4096:8") != env(CUBLAS, ":16:8")


REQUIRED_KEYS = [
    *(
        f"{m}.seed_everything"
        for m in (
            "lightning",
            "lightning.pytorch",
            "lightning.fabric",
            "lightning.fabric.utilities.seed",
            "lightning_fabric",
            "lightning_fabric.utilities.seed",
            "pytorch_lightning",
        )
    ),
    *(
        f"{c}{suffix}"
        for c in ("lightning.Fabric", "lightning.fabric.Fabric", "lightning_fabric.Fabric")
        for suffix in ("", ".seed_everything")
    ),
    *(f"{m}.Trainer" for m in ("lightning", "lightning.pytorch", "pytorch_lightning")),
    "lightning.pytorch.trainer.trainer.Trainer",
    "transformers.set_seed",
    "transformers.trainer_utils.set_seed",
    "transformers.enable_full_determinism",
    "transformers.trainer_utils.enable_full_determinism",
    "accelerate.utils.set_seed",
    "accelerate.utils.random.set_seed",
    "mmengine.runner.set_random_seed",
    "mmcv.runner.set_random_seed",
    "mmdet.apis.set_random_seed",
    "composer.utils.reproducibility.seed_all",
    "composer.utils.reproducibility.configure_deterministic_mode",
    "composer.Trainer",
    "torchtune.training.set_seed",
    "torchtune.utils.set_seed",
    "monai.utils.set_determinism",
    "monai.utils.misc.set_determinism",
    "timm.utils.random_seed",
    "stable_baselines3.common.utils.set_random_seed",
    *(
        f"{package}.{cls}"
        for package, cls in [("stable_baselines3", "PPO"), ("stable_baselines3", "A2C"), ("stable_baselines3", "DQN")]
    ),
    *(
        f"{package}.{cls}"
        for package, cls in [("stable_baselines3", "SAC"), ("stable_baselines3", "TD3"), ("stable_baselines3", "DDPG")]
    ),
    "sb3_contrib.TQC",
    "sb3_contrib.QRDQN",
    "sb3_contrib.TRPO",
    "sb3_contrib.ARS",
    "sb3_contrib.MaskablePPO",
    "sb3_contrib.RecurrentPPO",
    "sb3_contrib.CrossQ",
    "stable_baselines3.ppo.PPO",
    "sb3_contrib.ppo_mask.ppo_mask.MaskablePPO",
    "detectron2.utils.env.seed_all_rng",
    "detectron2.engine.default_setup",
    "detectron2.engine.defaults.default_setup",
    "ultralytics.utils.torch_utils.init_seeds",
    "fairseq.utils.set_torch_seed",
    "ignite.utils.manual_seed",
    "torch_geometric.seed_everything",
    "lightning_fabric.seed_everything",
    "keras.utils.set_random_seed",
    "fastai.torch_core.set_seed",
    "transformers.TrainingArguments",
    "sentence_transformers.SentenceTransformerTrainer",
    "sentence_transformers.trainer.SentenceTransformerTrainer",
    "sentence_transformers.sparse_encoder.SparseEncoderTrainer",
    "sentence_transformers.SentenceTransformerTrainingArguments",
    "sentence_transformers.training_args.SentenceTransformerTrainingArguments",
]


@pytest.mark.parametrize("key", REQUIRED_KEYS)
def test_import_paths_are_modelled(key):
    assert key in MODELS


def test_keys_are_dotted_names():
    for key in MODELS:
        assert all(part.isidentifier() for part in key.split(".")), key


# -- every model, every literal argument shape: never raises, always well-formed effects -------------------

LIBS = {"random", "numpy", "torch", "torch-cuda"}
literals = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.tuples(inner, inner),
    max_leaves=4,
)
values = st.one_of(literals, st.just(UNKNOWN), st.sampled_from(["warn", "error", "default", 0, 1, 2, True, False]))
param_names = st.sampled_from(
    [
        "seed",
        "workers",
        "deterministic",
        "benchmark",
        "warn_only",
        "args",
        "device_specific",
        "diff_rank_seed",
        "use_rank_shift",
        "deterministic_mode",
        "debug_mode",
        "use_deterministic_algorithms",
        "seed_everything_default",
        "verbose",
        "using_cuda",
        "rank",
        "reproducible",
        "s",
        "full_determinism",
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    name=st.sampled_from(sorted(MODELS)),
    args=st.lists(values, max_size=8),
    kwargs=st.dictionaries(param_names, values, max_size=4),
    star=st.booleans(),
)
def test_models_never_raise_and_effects_are_well_formed(name, args, kwargs, star):
    effects = MODELS[name](CallArgs(tuple(args), tuple(kwargs.items()), star))
    assert isinstance(effects, list)
    for effect in effects:
        if isinstance(effect, Seed):
            assert effect.libs and set(effect.libs) <= LIBS
        elif isinstance(effect, Determinism):
            assert all(v is UNKNOWN or isinstance(v, bool) for v in (effect.mode, effect.warn_only))
        elif isinstance(effect, EnvWrite):
            assert isinstance(effect.var, str)
            assert effect.value is UNKNOWN or isinstance(effect.value, str)
        elif isinstance(effect, Cudnn):
            assert effect.flag in ("benchmark", "deterministic")
            assert effect.value is UNKNOWN or isinstance(effect.value, bool)
        else:
            pytest.fail(f"unexpected effect {effect!r}")


def test_cublas_is_only_ever_set_to_a_valid_value():
    # Every helper that sets the variable uses one of the two values torch accepts.
    seen = set()
    for model in MODELS.values():
        for call in (CallArgs(star=True), CallArgs((0, True)), CallArgs(kwargs=(("deterministic", True),))):
            for effect in model(call):
                if isinstance(effect, EnvWrite) and effect.var == CUBLAS:
                    seen.add(effect.value)
    assert seen == {":4096:8", ":16:8"}


def test_import_is_light():
    code = (
        "import sys, opscan.lint.frameworks;"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'numpy', 'libcst'});"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- the fixtures: well-formed, and each expected finding sits on a call or an assignment ------------------


def _fixture_scripts():
    return sorted(FIXTURES.glob("*.py"))


def test_there_is_a_fixture_per_helper_family():
    names = " ".join(p.stem for p in _fixture_scripts())
    for family in (
        "lightning",
        "hf_",
        "accelerate",
        "mmengine",
        "mmcv",
        "mmdet",
        "composer",
        "torchtune",
        "monai",
        "timm",
        "sb3",
        "detectron2",
        "ultralytics",
        "fairseq",
        "ignite",
        "torch_geometric",
        "lightning_fabric",
        "keras",
        "fastai",
        "st_trainer",
    ):
        assert family in names


@pytest.mark.parametrize("script", _fixture_scripts(), ids=lambda p: p.stem)
def test_fixture_expected_file_points_at_calls(script):
    expected = script.with_suffix(".expected")
    assert expected.is_file(), f"{expected.name} is missing"
    tree = ast.parse(script.read_text(encoding="utf-8"))
    starts = {(node.lineno, node.col_offset + 1) for node in ast.walk(tree) if isinstance(node, (ast.Call, ast.Assign))}
    lines = read_expected(expected)  # the golden file's `LINE:COL CODE` pairs (tests/fixtures/lint/README.md)
    for line in lines:
        match = re.fullmatch(r"(\d+):(\d+) (DET\d{3})", line)
        assert match, f"{expected.name}: bad line {line!r}"
        assert (int(match[1]), int(match[2])) in starts, f"{expected.name}: {line} is not the start of a call"
    assert lines == sorted(lines, key=lambda s: (int(s.split(":")[0]), int(s.split()[0].split(":")[1]), s))


# -- the catalogue is data: each entry says where it was read ------------------------------------------------


@pytest.mark.parametrize("entry", HELPERS, ids=lambda h: h.names[0])
def test_every_entry_cites_a_release_or_a_commit(entry):
    # A release read from its wheel or sdist ("2.9.2 wheel"), or a repository file at a commit.
    assert re.search(r"\d+\.\d+(\.\d+)? (wheel|sdist)|@[0-9a-f]{40}", entry.source), entry.source
    assert entry.names and all(part.isidentifier() for name in entry.names for part in name.split("."))


def test_no_name_is_in_two_entries():
    names = [name for entry in HELPERS for name in entry.names]
    assert len(names) == len(set(names))
