"""`opscan report`: the op compatibility report for this torch and GPU, the OpInfo sweep, and the diff of two reports.

    opscan report                                  # every rule's reproducer, measured here (GPU and CPU)
    opscan report --torch-version 2.9              # what the rules say for another torch (nothing measured)
    opscan report --sweep --time-limit 420         # torch's OpInfo samples, resumable
    opscan report --diff OLD.json [NEW.json]       # what changed (NEW defaults to a fresh report here)
    opscan report --load REPORT.json --output-format html

Importing this module imports no torch; measuring does.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from opscan.commands.common import EXIT_CLEAN, add_output_arguments, emit, error, input_problem, output_problem
from opscan.commands.scan import positive

DEFAULT_STATE = ".opscan_cache/sweep-state.jsonl"
DEFAULT_RUNS = 5
DEFAULT_TIME_LIMIT = 540.0
# Time kept back from --time-limit for writing the report after the last case.
WRAP_UP_S = 5.0


def seconds(text: str) -> float:
    """argparse type: a number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def torch_release(text: str) -> str:
    """argparse type: a torch version like 2.11 or 2.11.0."""
    from opscan.versions import parse_version

    try:
        parse_version(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a torch version like 2.11") from None
    return text.strip()


def runs_count(text: str) -> int:
    """argparse type: runs whose bits are compared, so at least two."""
    value = positive(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"{text!r} is too few: nondeterminism shows only between at least 2 runs")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--torch-version", type=torch_release, metavar="X.Y",
        help="the torch the rules are read for (default: the installed torch, else the newest known); "
        "another release than the installed one is reported from the rules only",
    )  # fmt: skip
    # --device and --runs default to None, so that _check can tell them given to --load, which measures nothing.
    parser.add_argument(
        "--device",
        help="where to measure: auto (cuda if there is a GPU, else cpu; the default), cuda, cuda:N, cpu, or none (the rules only)",
    )  # fmt: skip
    parser.add_argument("--runs", type=runs_count, metavar="N", help=f"runs per mode whose bits are compared (default {DEFAULT_RUNS})")
    parser.add_argument("--sweep", action="store_true", help="measure torch's OpInfo and ModuleInfo samples and some torchvision ops instead of the rules")
    parser.add_argument(
        "--time-limit", type=seconds, metavar="SECONDS",
        help=f"with --sweep: start no case after this many seconds from the start (default {DEFAULT_TIME_LIMIT:.0f})",
    )  # fmt: skip
    parser.add_argument("--ops", metavar="PATTERN", help="with --sweep: only the ops whose name matches a glob (comma-separated, e.g. 'index_*,nn.functional.*')")
    parser.add_argument("--samples", type=positive, metavar="N", help="with --sweep: sample inputs per op (default 3)")
    parser.add_argument(
        "--state", metavar="FILE",
        help=f"with --sweep: the state file it resumes from and appends to (default {DEFAULT_STATE}); "
        "Ctrl-C stops the sweep with exit 130 and no report (-o is left alone), the cases done kept there for the next run",
    )  # fmt: skip
    parser.add_argument(
        "--diff", nargs="+", metavar="REPORT.json",
        help="what changed from OTHER.json to a fresh report of this machine, or from A.json to B.json",
    )  # fmt: skip
    parser.add_argument("--load", metavar="REPORT.json", help="render a saved json report again (e.g. as markdown or html); measures nothing")
    add_output_arguments(parser)


def _check(args: argparse.Namespace) -> str | None:
    sweep_only = [flag for flag, value in (("--time-limit", args.time_limit), ("--ops", args.ops), ("--samples", args.samples), ("--state", args.state)) if value is not None]
    if sweep_only and not args.sweep:
        return f"{', '.join(sweep_only)} goes with --sweep"
    if args.diff is not None and len(args.diff) > 2:
        return "--diff takes one report (compared with this machine's) or two"
    exclusive = [flag for flag, value in (("--sweep", args.sweep), ("--diff", args.diff), ("--load", args.load)) if value]
    if len(exclusive) > 1:
        return f"{' and '.join(exclusive)} do not go together"
    if args.ops is not None and not [p for p in args.ops.split(",") if p.strip()]:
        return "--ops needs a pattern"
    # What makes a report here means nothing where none is made: a word, not a flag silently ignored.
    made_here = [flag for flag, value in (("--torch-version", args.torch_version), ("--device", args.device), ("--runs", args.runs)) if value is not None]
    saved = "--load" if args.load else "--diff with two reports" if args.diff is not None and len(args.diff) == 2 else ""
    if made_here and saved:
        return f"{', '.join(made_here)} and {saved} do not go together: a saved report is read as it is, and nothing is measured"
    if args.torch_version is not None and args.sweep:
        return "--torch-version and --sweep do not go together: the sweep measures the installed torch"
    return None


def _inputs(args: argparse.Namespace) -> list[str]:
    """The files this run reads, which -o must not name: the saved reports, the sweep's state file."""
    return [*filter(None, [args.load]), *(args.diff or []), *([args.state or DEFAULT_STATE] if args.sweep else [])]


def _progress(what: str, deadline: float | None = None):
    from opscan.report.progress import Progress

    return Progress(what, deadline=deadline)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    problem = _check(args) or output_problem(args) or input_problem(args, _inputs(args))  # before measuring, not after
    if problem:
        return error(problem)
    from opscan.report import build, diff, matrix
    from opscan.rules import RulesError

    try:
        if args.load:
            return _render(matrix.load(args.load), args)
        if args.diff:
            before = matrix.load(args.diff[0])
            after = matrix.load(args.diff[1]) if len(args.diff) == 2 else _fresh(args)
            report, _changed = diff.diff(before, after)
            return emit(report, args)  # 1 when rows changed: the report's own outcome
        if args.sweep:
            limit = args.time_limit if args.time_limit is not None else DEFAULT_TIME_LIMIT
            deadline = started + max(0.0, limit - WRAP_UP_S)
            bar = _progress("sweep", deadline)
            try:
                report = build.sweep_report(
                    device=args.device or "auto", runs=args.runs or DEFAULT_RUNS, samples=args.samples or 3,
                    patterns=[p.strip() for p in args.ops.split(",") if p.strip()] if args.ops else None,
                    state_path=args.state or DEFAULT_STATE, deadline=deadline, progress=bar.update,
                )  # fmt: skip
            finally:
                bar.close()
            return emit(report, args)
        report = _fresh(args)
    except matrix.ReportFileError as exc:
        # A saved report that cannot be read is this run's input failing, as a record is for compare: an error in
        # the report, so that json is still json (it printed nothing), and -o's file is left as it was (emit).
        from opscan.findings import Problem, Report

        return emit(Report("report", errors=[Problem(str(exc), exc.path)]), args)
    except build.ReportError as exc:
        return error(str(exc))
    except RulesError as exc:  # opscan's own data, missing or malformed: no report can be made (it was a traceback)
        return error(exc.problem)
    except build.SweepInterrupted as exc:
        said = "interrupted" if exc.signum == signal.SIGINT else "terminated"
        print(f"opscan: {said}: {exc}", file=sys.stderr)
        return 128 + exc.signum  # 130 at Ctrl-C, as every command; 143 at SIGTERM, as a process it ends
    return emit(report, args)


def _render(report, args: argparse.Namespace) -> int:
    """Write a saved report again: 0 once written, whatever it records (its errors were its run's)."""
    from opscan.output import render, write

    try:
        write(render(report, args.output_format), args.output_file)
    except OSError as exc:
        from opscan.output import cannot_write

        return cannot_write(exc, args.output_file)
    return EXIT_CLEAN


def _fresh(args: argparse.Namespace):
    """This machine's report of the rules' reproducers (or the rules alone)."""
    from opscan.report import build

    bar = _progress("report")
    try:
        return build.rules_report(torch_version=args.torch_version, device=args.device or "auto", runs=args.runs or DEFAULT_RUNS, progress=bar.update)
    finally:
        bar.close()
