"""The flags and exit codes every command shares: `--output-format`, `-o`, `--exit-zero`, and 0 clean / 1 findings / 2 error."""

from __future__ import annotations

import argparse
import os
import sys

from opscan.output import FORMATS, check_output_path, overwrites_input

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def add_output_arguments(
    parser: argparse.ArgumentParser, formats: tuple[str, ...] = FORMATS, default: str = "text", findings: bool = True
) -> None:
    """The shared flags; `findings`: the command reports findings, so `--exit-zero` applies (as in lint and ruff)."""
    parser.add_argument("--output-format", choices=formats, default=default, help=f"report format (default {default})")
    parser.add_argument("-o", "--output-file", metavar="FILE", help="write the report to FILE (atomically) instead of stdout")
    if findings:
        parser.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings (errors still exit 2)")


def output_problem(args: argparse.Namespace) -> str | None:
    """check_output_path(args.output_file), and the path made absolute for the rest of the run.

    A `--run` script may change the working folder; the report still goes where the user said.
    """
    problem = check_output_path(args.output_file)
    args.output_named = args.output_file  # as given, for messages
    if problem is None and args.output_file not in (None, "-"):
        args.output_file = os.path.abspath(args.output_file)
    return problem


def input_problem(args: argparse.Namespace, inputs) -> str | None:
    """Why -o names one of the files this run reads (`inputs`, and --config's file), or None: refused before any work."""
    inputs = [*inputs, getattr(args, "config", None)]
    return overwrites_input(args.output_file, inputs, shown=getattr(args, "output_named", None))


def run_folder() -> str:
    """The working directory's real path, taken before a run (a --run script may chdir): where project modules live."""
    return os.path.realpath(os.getcwd())


def loaded_problem(args: argparse.Namespace, targets, cwd: str) -> str | None:
    """Why -o names a project module the run loaded (a module the script imports), or None.

    Known only once the targets have run, so asked after the run and before the report is written; the
    files named on the command line were refused before it (input_problem). `cwd`: run_folder() then.
    """
    if args.output_file in (None, "-") or not os.path.isfile(args.output_file):  # a new file replaces nothing
        return None
    from opscan.trace.sources import project_files, target_file

    files: set[str] = set()
    for target in targets:
        named = target_file(target.spec, target.kind)
        files.update(project_files(os.path.realpath(named) if named else None, cwd))
    return loaded_message(args, files)


def loaded_message(args: argparse.Namespace, loaded) -> str | None:
    """The error for -o naming one of `loaded`, the project modules the run loaded (real paths), or None."""
    return overwrites_input(
        args.output_file, [os.path.relpath(f) for f in sorted(loaded)], shown=getattr(args, "output_named", None),
        what="a project module the run loaded", after=", so it was not written",
    )  # fmt: skip


def device_problem(exc: Exception, flag: str | None, settings) -> str:
    """What resolve_device said of a bad device, naming the config file when the device came from there."""
    if flag is None and settings.device is not None and settings.device_from:
        return f"{settings.device_from}: {exc}"
    return str(exc)


def error(message: str) -> int:
    """Say what is wrong, on stderr, and give the error exit code."""
    print(f"opscan: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def emit(report, args: argparse.Namespace) -> int:
    """Render the report as asked, write it, and return its exit code.

    When the report does not go to stdout as text (a file, or json on
    stdout), its notices and errors (with their tracebacks) are repeated on
    stderr, so that a person watching the run still sees them; a text report
    on stdout carries them itself, once.
    """
    from opscan.output import render, withhold, write

    withheld = withhold(report, getattr(args, "output_named", args.output_file))  # a run that is all error leaves -o as it was
    try:
        if withheld is None:
            write(render(report, args.output_format), args.output_file)
    except OSError as exc:
        from opscan.output import cannot_write

        return cannot_write(exc, args.output_file)
    if args.output_format != "text" or args.output_file not in (None, "-"):
        for notice in report.notices:
            print(f"opscan: {notice}", file=sys.stderr)
        for problem in report.errors:
            print(f"opscan: error: {problem.message}", file=sys.stderr)
            if problem.detail:
                print(problem.detail.rstrip("\n"), file=sys.stderr)
    if withheld is not None:
        print(f"opscan: {withheld}", file=sys.stderr)
    code = report.exit_code()
    return EXIT_CLEAN if code == EXIT_FINDINGS and args.exit_zero else code


def needs_torch(command: str) -> str | None:
    """None if torch imports, else the message to give."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return f"opscan {command} needs torch; install opscan[trace]"
    return None
