"""`opscan diff`: record a target twice (in two fresh processes by default) and name where and why the runs part.

Importing this module imports no torch; neither does the command itself, unless --same-process:
the two `opscan record` processes do.
"""

from __future__ import annotations

import argparse
import importlib.util
import os

from opscan.commands.common import add_output_arguments, device_problem, emit, error, input_problem, loaded_message, output_problem
from opscan.commands.record import add_record_arguments, check_record_args
from opscan.commands.scan import add_target_arguments, positive, target_paths, unrunnable


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_arguments(parser, steps_flag="--steps", steps_default=2)
    add_record_arguments(parser)
    parser.add_argument(
        "--same-process", action="store_true",
        help="record both runs in this process (default: two fresh processes, so process-level causes show)",
    )  # fmt: skip
    parser.add_argument("--keep", metavar="DIR", help="keep the two records, as DIR/a.jsonl and DIR/b.jsonl (refused if DIR holds either already)")
    parser.add_argument(
        "--nproc-per-node", type=positive, default=None, metavar="N",
        help="record each run with torchrun on N ranks of this host (a fresh process group each time) and compare "
        "them rank by rank; the records are DIR/a.rankR.jsonl and DIR/b.rankR.jsonl",
    )  # fmt: skip
    add_output_arguments(parser)


def _keep_problem(args: argparse.Namespace) -> str | None:
    """Why --keep DIR cannot take this diff's records, known before anything runs, or None.

    The records replaced what DIR held under their names (an earlier diff's records, a file of the
    user's), with no word; and -o naming one of them lost the record to the report.
    """
    if args.keep is None:
        return None
    from opscan.diff import RECORDS, rank_path

    nproc = args.nproc_per_node
    names = list(RECORDS) if nproc is None else [rank_path(name, r) for name in RECORDS for r in range(nproc)]
    paths = [os.path.join(args.keep, name) for name in names]
    if args.output_file not in (None, "-"):
        output = os.path.realpath(args.output_file)
        for name, path in zip(names, paths):
            if os.path.realpath(path) == output:
                shown = getattr(args, "output_named", None) or args.output_file
                return f"-o {shown} is where --keep {args.keep} puts record {name}; give -o another file"
    # A record's .partial too: the record run would empty it (what an earlier record cut short left).
    there = [n for name, path in zip(names, paths) for n, p in ((name, path), (f"{name}.partial", f"{path}.partial")) if os.path.lexists(p)]
    if there:
        return f"--keep {args.keep} already holds {', '.join(there)}; remove {'them' if len(there) > 1 else 'it'} or keep the records in another folder"
    return None


def run(args: argparse.Namespace) -> int:
    target, settings, failed = check_record_args(args, "diff")
    if failed is not None:
        return failed
    problem = output_problem(args) or input_problem(args, target_paths([target]))  # before two runs are recorded, not after
    if problem:
        return error(problem)
    if args.keep is not None and os.path.exists(args.keep) and not os.path.isdir(args.keep):
        return error(f"--keep {args.keep}: not a directory")
    problem = _keep_problem(args)
    if problem:
        return error(problem)
    failed = unrunnable(target, "diff")  # before two runs are recorded, each of which would say it; and before torch, as bench
    if failed is not None:
        return emit(failed, args)
    if importlib.util.find_spec("torch") is None:
        return error("opscan diff needs torch; install opscan[trace]")
    if args.nproc_per_node is not None and args.same_process:
        return error("--nproc-per-node records each run with torchrun, in processes of its own: it cannot go with --same-process")
    device = args.device or settings.device
    from opscan.trace.runner import TargetError, resolve_device

    try:  # here, not in each run's process: a bad device is one error naming its flag or file, before anything runs
        resolved = resolve_device(device or "auto")
    except TargetError as exc:
        return error(device_problem(exc, args.device, settings))
    if args.same_process:
        device = resolved
    from opscan.diff import diff

    loaded: set[str] = set()
    report = diff(
        target, steps=args.steps or 2, device=device,
        seed=args.seed if args.seed is not None or target.kind == "script" else 0,
        deterministic=args.deterministic, benchmark=args.benchmark, input_shape=args.input_shape or settings.input_shape,
        fingerprint=args.fingerprint, engine=args.engine, same_process=args.same_process, keep=args.keep, nproc=args.nproc_per_node,
        loaded=loaded,
    )  # fmt: skip
    refused = loaded_message(args, loaded)  # -o is a module the runs imported, known only now: kept elsewhere
    return emit(report, args, refused)
