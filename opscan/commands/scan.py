"""`opscan scan`: run targets forward and backward in strict deterministic mode and list every op that raises.

Importing this module imports no torch; `run` does, after the targets' spelling has been checked.
"""

from __future__ import annotations

import argparse
import re
import time

from opscan.commands.common import (
    EXIT_CLEAN,
    add_output_arguments,
    device_problem,
    emit,
    error,
    input_problem,
    loaded_problem,
    needs_torch,
    output_problem,
    run_folder,
)

_DIM = re.compile(r"\s*[0-9]+\s*")


def shape(text: str) -> tuple[int, ...]:
    """argparse type: '2,3,224,224' or '2x3x224x224'.

    Every part between the separators is a positive decimal integer: an empty one ('2,x', '2x', '2,,3') is refused,
    not dropped, and so are the spellings int() alone would take ('+2', '2_0', non-ASCII digits).
    """
    from opscan.config import shape_problem  # shared with the config's input-shape

    parts = re.split(r"[,x]", text)
    if not all(_DIM.fullmatch(part) for part in parts) or any(int(part) <= 0 for part in parts if len(part) <= 100):
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape like 2,3,224,224")
    # A part of thousands of digits is too large, not a ValueError from int() (Python's 4300-digit limit).
    dims = tuple(int(part) if len(part) <= 100 else 2**63 for part in parts)
    problem = shape_problem(dims)
    if problem:
        raise argparse.ArgumentTypeError(f"{text!r} is too large: {problem}")
    return dims


def positive(text: str) -> int:
    """argparse type: an integer > 0."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def add_target_arguments(parser: argparse.ArgumentParser, *, steps_flag: str | None = "--max-steps", steps_default: int = 1) -> None:
    # Defaults are None here: a flag not given falls back to the config section, then to the default shown.
    """TARGET..., --run SCRIPT ARGS, the step count, --input-shape and --device: what every torch-side command takes.

    `steps_flag=None` leaves the step count out, for a command that decides it itself (bench).
    The step count takes both spellings, --steps and --max-steps, whichever the command shows first.
    """
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="FILE.py:CALLABLE or MODULE:CALLABLE returning (model, inputs[, loss_fn]); "
        "torchvision:NAME, timm:NAME or hf:MODEL_TYPE[,key=value...] (random init)",
    )
    parser.add_argument(
        "--run",
        nargs=argparse.REMAINDER,
        metavar="SCRIPT ARGS",
        help="run an unmodified training script (put opscan's own options before --run)",
    )
    if steps_flag is not None:
        other = "--steps" if steps_flag == "--max-steps" else "--max-steps"
        parser.add_argument(
            steps_flag, other, dest="steps", type=positive, default=None, metavar="N",
            help=f"optimizer steps to run (with --run: stop the script after N; default {steps_default})",
        )  # fmt: skip
    parser.add_argument("--input-shape", type=shape, metavar="SHAPE", help="input shape for zoo targets, e.g. 2,3,224,224")
    parser.add_argument("--device", default=None, help="cuda, cuda:N, cpu or auto (default: auto, cuda if available)")
    parser.add_argument("--config", metavar="FILE", help="pyproject.toml to read [tool.opscan] from (default: nearest)")


def parse_targets(args: argparse.Namespace) -> list:
    """The Targets the flags name, checked without importing torch; raises TargetError."""
    from opscan.trace.runner import TargetError, parse_target, script_target

    if not args.targets and args.run is None:
        raise TargetError("give a TARGET or --run SCRIPT (see --help)")
    targets = [parse_target(spec) for spec in args.targets]
    if args.run is not None:
        targets.append(script_target(args.run[0] if args.run else "", args.run[1:]))
    return targets


def input_shape_problem(targets, input_shape) -> str | None:
    """Why `input_shape` cannot go with these targets, or None: said before anything runs, by scan, record, diff and bench.

    A FILE.py:CALLABLE, MODULE:CALLABLE or --run target builds its own inputs; only a zoo target's are made from the shape.
    """
    if input_shape is None:
        return None
    own = [target.name for target in targets if target.kind != "zoo"]
    if not own:
        return None
    return f"--input-shape applies to torchvision:, timm: and hf: targets only; {own[0]} builds its own inputs"


def target_file(target) -> str | None:
    """The file a target runs, as the runner reads it: a --run script, or FILE of FILE:CALLABLE; None for a module or a zoo."""
    from opscan.trace.spec import names_a_file

    if target.kind == "script":
        return target.spec
    where = target.spec.rpartition(":")[0]
    return where if target.kind == "callable" and names_a_file(where) else None


def target_file_problem(target) -> str | None:
    """Why the file a target names cannot be run (not there, a directory, a device), or None; zoo and module targets name none."""
    from opscan._read import file_problem

    path = target_file(target)
    if path is None:
        return None
    return file_problem(path, "a Python script" if target.kind == "script" else "a Python file")


def unrunnable(target, command: str):
    """`command`'s Report whose one error is why the file `target` names cannot be run (target_file_problem), or None.

    The target is this run's input failing, as it is in scan's report: emitted, so that json is still json and
    -o's file is left as it was, where a line on stderr left --output-format json with nothing to read.
    """
    problem = target_file_problem(target)
    if problem is None:
        return None
    from opscan.findings import Problem, Report

    return Report(command, errors=[Problem(problem, target.name)])


def target_paths(targets) -> list[str]:
    """The files the targets name, for finding their pyproject.toml (the working directory for zoo targets)."""
    return [path for path in map(target_file, targets) if path is not None] or ["."]


def load_targets(args: argparse.Namespace, section: str):
    """(the Targets the flags name, the command's `[tool.opscan.<section>]` settings); raises TargetError or ConfigError."""
    from opscan import config

    targets = parse_targets(args)
    return targets, getattr(config.load(target_paths(targets), args.config), section)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_arguments(parser)
    parser.add_argument(
        "--probe", action="store_true",
        help="rerun each op on cloned inputs and report the ops whose bits differ without raising (DET101); "
        "determinism off, as torch's default, which finds the atomics",
    )  # fmt: skip
    parser.add_argument(
        "--strict", action="store_true",
        help="with --probe: probe in strict deterministic mode, which finds kernels that claim determinism and are not",
    )  # fmt: skip
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from opscan.config import ConfigError
    from opscan.trace.runner import TargetError

    if args.strict and not args.probe:
        return error("--strict goes with --probe (a plain scan is always strict)")
    problem = output_problem(args)  # before the model runs, not after
    if problem:
        return error(problem)
    try:
        targets, settings = load_targets(args, "scan")
    except (TargetError, ConfigError) as exc:
        return error(str(exc))
    problem = input_shape_problem(targets, args.input_shape) or input_problem(args, target_paths(targets))  # on stderr before anything runs
    if problem:
        return error(problem)
    missing = needs_torch("scan")
    if missing:
        return error(missing)

    from opscan.trace import ranks
    from opscan.trace.runner import resolve_device
    from opscan.trace.scan import scan

    try:
        device = resolve_device(args.device or settings.device or "auto")
    except TargetError as exc:
        return error(device_problem(exc, args.device, settings))
    steps = args.steps or settings.max_steps or 1
    probe = ("strict" if args.strict else "default") if args.probe else None
    rank = ranks.from_env()
    started = time.time()
    cwd = run_folder()
    report = scan(
        targets, device=device, steps=steps, input_shape=args.input_shape or settings.input_shape, probe=probe, rank=rank
    )  # fmt: skip
    refused = loaded_problem(args, targets, cwd)  # -o is a module the run imported, known only now: kept elsewhere
    if rank is None:
        return emit(report, args, refused)
    return _emit_rank(report, rank, args, started, refused)


def _emit_rank(report, rank, args: argparse.Namespace, started: float, refused: str | None = None) -> int:
    """One rank of a torchrun launch: its own report to -o FILE.rankR, and on rank 0 the merged one where -o says.

    The other ranks print nothing on stdout and exit 0 once their report is
    written (torchrun stops every rank when one exits non-zero, and rank 0 may
    still be waiting): rank 0's exit code is the launch's.
    """
    from opscan.output import render, write
    from opscan.trace import ranks

    folder = ranks.exchange_dir(args.output_file)
    try:
        if args.output_file not in (None, "-"):
            write(render(report, args.output_format), ranks.rank_path(args.output_file, rank.rank))
        if rank.rank != 0:
            ranks.leave(report, rank, folder)
            return EXIT_CLEAN
    except OSError as exc:
        return error(f"rank {rank.rank}: cannot write its report: {exc.strerror or exc}")
    others, missing = ranks.gather(rank, folder, since=started - 1.0)
    ranks.clean(folder, others)
    return emit(ranks.merge(report, rank, others, missing), args, refused)
