"""What a target is, parsed without importing torch, so that a command refuses a malformed one first.

Targets:
    path/to/file.py:callable     the callable returns (model, inputs) or (model, inputs, loss_fn)
    pkg.module:callable          the same, imported from a module
    torchvision:NAME, timm:NAME, hf:MODEL_TYPE[,key=value]   a model zoo's model, random init
    --run script.py ARGS         an unmodified training script
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass


class TargetError(Exception):
    """The target cannot be loaded or run as given: a message for the user, no traceback."""


ZOOS = ("torchvision", "timm", "hf")

# What torch.manual_seed takes (torch/csrc/Generator.cpp, unpack_uint64, 2.11 and 2.14): any
# uint64, or an int64 whose negative values wrap modulo 2**64. Past that it raises OverflowError.
SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1


def seed_problem(seed: int) -> str | None:
    """Why torch.manual_seed would refuse `seed`, or None."""
    if SEED_MIN <= seed <= SEED_MAX:
        return None
    return f"{seed} is out of range: torch.manual_seed takes -2**63 to 2**64-1"


@dataclass(frozen=True)
class Target:
    """What to run: `kind` is "callable" (FILE.py:NAME or MODULE:NAME), "zoo" or "script"."""

    spec: str
    kind: str
    argv: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.spec


def names_a_file(where: str) -> bool:
    """Whether WHERE of a WHERE:CALLABLE target is a file to import (a name ending in .py, or any path with a folder
    in it) rather than a module: the one rule for the runner that imports it and the commands that check it first."""
    return where.endswith(".py") or "/" in where or os.sep in where


def module_problem(spec: str, where: str) -> str | None:
    """Why WHERE of a MODULE:CALLABLE target is no module name importlib takes, or None.

    `.` and `..` (a folder, or a relative import with no package to be relative to) made importlib raise
    TypeError, said with its traceback; `a-b` is no module either.
    """
    if names_a_file(where) or all(part.isidentifier() for part in where.split(".")):
        return None
    return (
        f"{spec!r}: {where!r} is not a module name; use FILE.py:CALLABLE for a file, "
        "or a dotted module name (pkg.models:CALLABLE)"
    )


def parse_target(spec: str) -> Target:
    """Check a TARGET's spelling, without importing torch or the target."""
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in ZOOS:
        if not rest:
            raise TargetError(f"{spec!r}: name a model after '{prefix}:'")
        return Target(spec, "zoo")
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise TargetError(
            f"{spec!r} is not a target; use FILE.py:CALLABLE, MODULE:CALLABLE, torchvision:NAME, timm:NAME or hf:NAME "
            "(or --run SCRIPT to run a training script)"
        )
    if not all(part.isidentifier() for part in name.split(".")):
        raise TargetError(f"{spec!r}: {name!r} is not a Python name")
    problem = module_problem(spec, where)
    if problem:
        raise TargetError(problem)
    return Target(spec, "callable")


def script_target(path: str, argv: Sequence[str] = ()) -> Target:
    """A training script run as `python path argv...`."""
    if not path:
        raise TargetError("--run needs a script path")
    return Target(path, "script", tuple(argv))
