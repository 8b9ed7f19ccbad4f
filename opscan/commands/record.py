"""`opscan record`: run a target for N optimizer steps and write every op's fingerprints to a JSON Lines record.

Importing this module imports no torch; `run` does, once the flags and the target's spelling have been checked.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from opscan.commands.common import EXIT_CLEAN, check_output_path, device_problem, error, needs_torch
from opscan.commands.scan import add_target_arguments, input_shape_problem, parse_targets, target_file_problem, target_paths
from opscan.output import overwrites_input

SCHEMES = ("xor64+sum", "xor64")  # opscan.trace.fingerprint.SCHEMES, spelled here so that --help imports no torch
ENGINES = ("auto", "native", "python")  # opscan.trace.native.ENGINES, likewise


def seed(text: str) -> int:
    """argparse type: a seed torch.manual_seed takes, refused here rather than in the run (blamed on the target)."""
    from opscan.trace.spec import seed_problem

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    problem = seed_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def add_record_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that decide how a run is recorded, shared by `record` and `diff`."""
    parser.add_argument(
        "--seed", type=seed, default=None, metavar="N",
        help="seed torch, random and numpy before building the model (default 0 for a model target; "
        "a --run script seeds itself, and is seeded only if --seed is given)",
    )  # fmt: skip
    parser.add_argument(
        "--deterministic", action="store_true",
        help="turn determinism on: torch.use_deterministic_algorithms(True), cudnn.benchmark off "
        "(and CUBLAS_WORKSPACE_CONFIG=:4096:8 on torch before 2.10)",
    )  # fmt: skip
    parser.add_argument(
        "--benchmark", action=argparse.BooleanOptionalAction, default=None,
        help="set torch.backends.cudnn.benchmark (default: whatever the code sets)",
    )  # fmt: skip
    parser.add_argument(
        "--fingerprint", choices=SCHEMES, default=SCHEMES[0],
        help=f"fingerprint scheme (default {SCHEMES[0]}; see docs/record.md)",
    )  # fmt: skip
    parser.add_argument(
        "--engine", choices=ENGINES, default="auto",
        help="who does the per-op work: native (C++, built on first use: a compiler and, for CUDA, nvcc), "
        "python (a dispatch mode), or auto: native on a CUDA device where it builds, else python (docs/record.md)",
    )  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_arguments(parser, steps_flag="--steps", steps_default=1)
    add_record_arguments(parser)
    parser.add_argument(
        # Not argparse's required=True: run() says more where the -o went to the script instead.
        "-o", "--output-file", "--output", dest="record_path", metavar="FILE",
        help="the record to write, required (streamed to FILE.partial, renamed to FILE when the run has finished); "
        "under torchrun each rank writes its own, FILE.rankR with the rank before the suffix (run.rank1.jsonl)",
    )  # fmt: skip


def check_record_args(args: argparse.Namespace, command: str):
    """(the one Target, the config's scan settings) or an error exit code; imports no torch.

    Whether the target's file can be run is each command's own check: an error on stderr for record, whose -o is
    the record; in the report for diff, as for scan.
    """
    from opscan.trace.runner import TargetError

    try:
        targets = parse_targets(args)
    except TargetError as exc:
        return None, None, error(str(exc))
    if len(targets) != 1:
        return None, None, error(f"opscan {command} takes one target, got {len(targets)}")
    from opscan import config

    try:
        settings = config.load(target_paths(targets), args.config).scan
    except config.ConfigError as exc:
        return None, None, error(str(exc))
    target = targets[0]
    problem = input_shape_problem(targets, args.input_shape)
    if problem:
        return None, None, error(problem)
    return target, settings, None


_OUTPUT_FLAGS = ("-o", "--output-file", "--output")


def missing_output(args: argparse.Namespace) -> str:
    """The error for a record without -o, saying where an -o after `--run SCRIPT` went."""
    message = "record needs -o FILE, the record to write"
    script_args = (args.run or [])[1:]
    if any(a in _OUTPUT_FLAGS or a.startswith(("--output-file=", "--output=")) or (a.startswith("-o") and len(a) > 2) for a in script_args):
        message += "; the -o after --run SCRIPT went to the script, as everything after it does: put opscan's options before --run"
    return message


def partial_problem(path: str) -> str | None:
    """Why the record cannot be streamed to PATH.partial: one is there already, which the run would empty.

    That file is what a run cut short left, the readable prefix of its steps (docs/record.md): the user's to keep.
    """
    from opscan.trace.recordwriter import partial_path

    partial = partial_path(path)
    if partial is None or not os.path.lexists(partial):
        return None
    return f"{partial} is there already, left by an earlier record of {path} (a run cut short keeps its steps there): move or remove it, then record again"


def run(args: argparse.Namespace) -> int:
    if args.record_path is None:
        return error(missing_output(args))
    target, settings, failed = check_record_args(args, "record")
    if failed is not None:
        return failed
    problem = target_file_problem(target)  # a directory was "no such file"
    if problem:
        return error(problem)
    if args.record_path == "-":
        # Every other command reads -o - as stdout; a record there would be mixed with what the
        # target prints. Say so rather than write a file named "-".
        return error("record writes a file: give -o a file name (-o /dev/stdout streams it to standard output)")
    from opscan.trace import ranks

    rank = ranks.from_env()
    path = args.record_path if rank is None else ranks.rank_path(args.record_path, rank.rank)
    problem = check_output_path(path) or overwrites_input(path, [*target_paths([target]), args.config]) or partial_problem(path)
    if problem:  # before the run
        return error(problem)
    missing = needs_torch("record")
    if missing:
        return error(missing)

    from opscan.trace.record import record
    from opscan.trace.runner import TargetError, resolve_device

    started = time.time()

    try:
        device = resolve_device(args.device or settings.device or "auto")
    except TargetError as exc:
        return error(device_problem(exc, args.device, settings))
    seed = args.seed if args.seed is not None or target.kind == "script" else 0
    from opscan.trace.native import recorder_for

    try:
        make_recorder, notice = recorder_for(args.engine, device)
    except ValueError as exc:  # --engine native where it cannot be built
        return error(f"{_who(rank)}{exc}")
    try:
        result = record(
            target, path, device=device, steps=args.steps or settings.max_steps or 1, seed=seed, deterministic=args.deterministic,
            benchmark=args.benchmark, input_shape=args.input_shape or settings.input_shape, scheme=args.fingerprint,
            make_recorder=make_recorder, notices=[notice] if notice else [],
        )  # fmt: skip
    except OSError as exc:
        return error(f"{_who(rank)}cannot write {path}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        # docs/record.md: a run cut short leaves PATH.partial "and opscan says so"; Ctrl-C said only "interrupted".
        if os.path.isfile(path + ".partial"):
            print(f"opscan: {_who(rank)}{path}.partial holds the steps recorded so far", file=sys.stderr)
        raise
    if rank is not None:
        return _finish_rank(result, rank, args.record_path, started)
    for notice in result.notices:
        print(f"opscan: {notice}", file=sys.stderr)
    if result.problem is not None:
        if result.problem.detail:
            print(result.problem.detail.rstrip(), file=sys.stderr)
        return error(result.problem.message)
    if result.steps == 0:  # a script that never called optimizer.step(): a record of no step has nothing to compare
        if result.path:
            os.remove(result.path)
        return error(f"the target took no optimizer step, so there was nothing to record (a step ends at each optimizer.step()); {path} was not written")
    print(f"opscan: wrote {result.path}: {result.steps} step(s), {result.ops} ops, {_size(result.bytes)}, {result.seconds:.1f} s", file=sys.stderr)
    return EXIT_CLEAN


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def _who(rank) -> str:
    return "" if rank is None else f"rank {rank.rank}: "


def _finish_rank(result, rank, record_path: str, started: float) -> int:
    """One rank of a torchrun launch: its record is written; rank 0 gathers what the others wrote and alone prints.

    A rank whose record failed says so (named by its rank) and exits 2, so
    that torchrun stops the launch rather than leave the other ranks waiting
    in a collective. The other ranks print nothing once their record is
    written, and exit 0; rank 0 waits for their word (OPSCAN_RANK_TIMEOUT
    seconds, 120 by default), then prints one summary.
    """
    from opscan.trace import ranks

    if result.problem is not None:
        for notice in result.notices:
            print(f"opscan: {_who(rank)}{notice}", file=sys.stderr)
        if result.problem.detail:
            print(result.problem.detail.rstrip(), file=sys.stderr)
        return error(f"{_who(rank)}{result.problem.message}")
    mine = ranks.RankRecord(rank.rank, result.path, result.steps, result.ops, result.bytes, result.seconds, tuple(result.notices))
    folder = ranks.exchange_dir(record_path, kind="record")
    if rank.rank != 0:
        try:
            ranks.leave_record(mine, rank, folder)
        except OSError as exc:
            return error(f"{_who(rank)}cannot tell rank 0 about its record: {exc.strerror or exc}")
        return EXIT_CLEAN
    others, missing = ranks.gather_records(rank, folder, since=started - 1.0)
    ranks.clean(folder, others)
    records = [mine, *(others[r] for r in sorted(others))]
    for notice in mine.notices:
        print(f"opscan: {notice}", file=sys.stderr)
    for other in records[1:]:
        for notice in other.notices:
            if notice not in mine.notices:
                print(f"opscan: rank {other.rank}: {notice}", file=sys.stderr)
    steps = sorted({r.steps for r in records})
    ops = sorted({r.ops for r in records})
    print(
        f"opscan: wrote {', '.join(r.path for r in records)} ({len(records)} of {rank.world_size} rank(s)): "
        f"{'/'.join(map(str, steps))} step(s), {'/'.join(map(str, ops))} ops per rank, "
        f"{_size(sum(r.bytes for r in records))}, {max(r.seconds for r in records):.1f} s",
        file=sys.stderr,
    )
    if missing:
        return error(
            f"no word from {ranks.ranks_text(missing)} of {rank.world_size} within the wait "
            "(OPSCAN_RANK_TIMEOUT): its record may be missing or incomplete"
        )
    if len(records) > 1:
        print(f"opscan: compare the replicas: opscan compare --ranks {' '.join(r.path for r in records)}", file=sys.stderr)
    return EXIT_CLEAN
