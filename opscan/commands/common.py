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

    Known only once the targets have run, so asked after the run and before the report is written, which
    then goes elsewhere (emit's `refused`); the files named on the command line were refused before it
    (input_problem). `cwd`: run_folder() then.
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
    """The error for -o naming one of `loaded`, the project modules the run loaded (real paths), or None.

    Unfinished: emit closes it with where the report went instead."""
    return overwrites_input(
        args.output_file, [os.path.relpath(f) for f in sorted(loaded)], shown=getattr(args, "output_named", None),
        what="a project module the run loaded", after=", so it was not written", then=None,
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


def emit(report, args: argparse.Namespace, refused: str | None = None) -> int:
    """Render the report as asked, write it, and return its exit code.

    When the report does not go to stdout as text (a file, or json on
    stdout), its notices and errors (with their tracebacks) are repeated on
    stderr, so that a person watching the run still sees them; a text report
    on stdout carries them itself, once.

    `refused`: why -o FILE may not take the report, known only after the run (loaded_message: a
    project module the run loaded). FILE is left alone, the report is kept (keep_report), and the
    error, closed with where the report is, exits 2.
    """
    from opscan.output import render, withhold, write

    withheld = withhold(report, getattr(args, "output_named", args.output_file))  # a run that is all error leaves -o as it was
    kept = None
    try:
        if withheld is None and refused is not None:
            kept = keep_report(render(report, args.output_format), args)
        elif withheld is None:
            write(render(report, args.output_format), args.output_file)
    except OSError as exc:
        from opscan.output import cannot_write

        return cannot_write(exc, None if refused is not None else args.output_file)  # keep_report's is stdout's
    if args.output_format != "text" or args.output_file not in (None, "-"):
        for notice in report.notices:
            print(f"opscan: {notice}", file=sys.stderr)
        for problem in report.errors:
            print(f"opscan: error: {problem.message}", file=sys.stderr)
            if problem.detail:
                print(problem.detail.rstrip("\n"), file=sys.stderr)
    if withheld is not None:
        print(f"opscan: {withheld}", file=sys.stderr)
    if refused is not None:
        return error(f"{refused}; {kept or 'give -o another file'}")
    code = report.exit_code()
    return EXIT_CLEAN if code == EXIT_FINDINGS and args.exit_zero else code


def keep_report(text: str, args: argparse.Namespace) -> str | None:
    """Keep a report that -o FILE may not take (emit's `refused`): the words that say where it is, or None.

    As `record` keeps its record in FILE.partial (recordwriter.partial_path) when FILE is a module the
    run loaded: a run can take minutes (a diff records twice, a bench times every variant), and a
    ruff or pytest user who gave -o expects the report in a file, in the format asked, with stdout
    left for people, not a SARIF or HTML document on it. So FILE.partial, a name Python and lint pass
    over, created whole and never over a file there. Where that cannot be (FILE.partial is there
    already: it is the user's; a write error), stdout, which is where the report goes without -o;
    None (not kept: the error says to give -o another file) where stdout is FILE itself (`> FILE`).
    """
    from opscan.fsutil import atomic_create_bytes
    from opscan.output import file_bytes, write
    from opscan.trace.recordwriter import partial_path

    partial = partial_path(args.output_file)
    shown = (getattr(args, "output_named", None) or args.output_file) + ".partial"
    why = None
    if partial is not None:
        try:
            atomic_create_bytes(partial, file_bytes(text))
            return f"the whole report is in {shown}: move it where you want it"
        except FileExistsError:
            why = f"{shown} is there already"
        except OSError as exc:
            why = f"cannot write {shown}: {exc.strerror or exc}"
    if _stdout_is(args.output_file):
        return None
    write(text, None)  # OSError: emit says stdout cannot be written
    return f"the report is on stdout{f' ({why})' if why else ''}"


def _stdout_is(path: str) -> bool:
    """Whether stdout is the file `path` names (`opscan scan -o m.py > m.py`)."""
    try:
        out, st = os.fstat(sys.stdout.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):  # no real stdout (a test's capture): not a file
        return False
    return (out.st_dev, out.st_ino) == (st.st_dev, st.st_ino)


def needs_torch(command: str) -> str | None:
    """None if torch imports, else the message to give."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return f"opscan {command} needs torch; install opscan[trace]"
    return None
