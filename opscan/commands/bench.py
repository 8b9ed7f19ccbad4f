"""`opscan bench`: what determinism costs on the user's model, and which ops pay for it.

Importing this module imports no torch; `run` does, after the flags and the target's spelling have been checked.
"""

from __future__ import annotations

import argparse

from opscan.commands.common import (
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
from opscan.commands.scan import add_target_arguments, input_shape_problem, load_targets, positive, target_paths, unrunnable

FORMATS = ("text", "json", "markdown", "html")
MIN_ROUNDS = 20
NEEDS_GPU = "opscan bench needs a CUDA GPU: it times steps with CUDA events and compares GPU kernels"


def precisions(text: str) -> tuple[str, ...]:
    """argparse type: 'fp32,bf16', 'bf16'."""
    from opscan.bench.variants import PRECISIONS

    chosen = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    if not chosen or any(p not in PRECISIONS for p in chosen):
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of precisions from {', '.join(PRECISIONS)}")
    return chosen


def non_negative(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 0")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from opscan.bench.measure import DEFAULT_PROFILE_STEPS, DEFAULT_ROUNDS, DEFAULT_TOP, DEFAULT_WARMUP

    add_target_arguments(parser, steps_flag=None)
    parser.add_argument(
        "--rounds", type=positive, metavar="N",
        help=f"timed steps per variant, one per round (default {DEFAULT_ROUNDS}, at least {MIN_ROUNDS})",
    )  # fmt: skip
    parser.add_argument(
        "--warmup", type=positive, metavar="N",
        help=f"untimed steps per variant first; they cover cuDNN's autotuning (default {DEFAULT_WARMUP})",
    )  # fmt: skip
    parser.add_argument("--precision", type=precisions, default=("fp32", "bf16"), help="fp32, bf16 or both (default fp32,bf16)")
    parser.add_argument(
        "--profile-steps", type=non_negative, default=DEFAULT_PROFILE_STEPS, metavar="N",
        help=f"profiled steps per variant for the per-op attribution; 0 turns it off (default {DEFAULT_PROFILE_STEPS})",
    )  # fmt: skip
    parser.add_argument("--top", type=positive, default=DEFAULT_TOP, metavar="N", help=f"ops listed per precision (default {DEFAULT_TOP})")
    parser.add_argument("--samples", action="store_true", help="add a table of every timed step")
    add_output_arguments(parser, formats=FORMATS)


def run(args: argparse.Namespace) -> int:
    from opscan.config import ConfigError
    from opscan.trace.runner import TargetError

    problem = output_problem(args)  # before the timing, not after
    if problem:
        return error(problem)
    try:
        targets, settings = load_targets(args, "bench")
    except (TargetError, ConfigError) as exc:
        return error(str(exc))
    if len(targets) != 1:
        return error("opscan bench measures one target at a time")
    target = targets[0]
    problem = input_problem(args, target_paths([target]))
    if problem:
        return error(problem)
    from opscan.bench.measure import DEFAULT_ROUNDS, DEFAULT_WARMUP

    rounds = args.rounds or settings.rounds or DEFAULT_ROUNDS
    if rounds < MIN_ROUNDS:
        return error(f"{rounds} rounds: a median of fewer than {MIN_ROUNDS} timed steps is not worth reporting (--rounds, or rounds in [tool.opscan.bench])")
    input_shape = args.input_shape or settings.input_shape
    problem = input_shape_problem(targets, input_shape)
    if problem:
        return error(problem)
    failed = unrunnable(target, "bench")
    if failed is not None:  # before "needs a GPU", which would hide it
        return emit(failed, args)
    missing = needs_torch("bench")
    if missing:
        return error(missing)

    import torch

    from opscan.trace.runner import resolve_device

    try:
        device = resolve_device(args.device or settings.device or "auto")
    except TargetError as exc:
        problem = device_problem(exc, args.device, settings)
        return error(f"{problem}; {NEEDS_GPU}" if not torch.cuda.is_available() else problem)
    if not device.startswith("cuda"):
        return error(f"{NEEDS_GPU}, and {'--device ' + device + ' was asked for' if torch.cuda.is_available() else 'none is available here'}")

    from opscan.bench.measure import bench

    cwd = run_folder()
    report = bench(
        target,
        device=device,
        precisions=args.precision,
        rounds=rounds,
        warmup=args.warmup or settings.warmup or DEFAULT_WARMUP,
        profile_steps=args.profile_steps,
        top=args.top,
        samples=args.samples,
        input_shape=input_shape,
    )
    refused = loaded_problem(args, [target], cwd)  # -o is a module the run imported, known only now: kept elsewhere
    return emit(report, args, refused)
