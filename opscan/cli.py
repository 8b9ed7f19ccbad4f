"""The `opscan` command line: parse flags, call one feature, render through opscan.output.

Exit codes, as in ruff: 0 clean, 1 findings, 2 usage, configuration or input error.
"""

from __future__ import annotations

import os
import sys

from opscan._version import __version__

# subcommand -> module with add_arguments(parser) and run(args) -> int.
# Each module must be cheap to import: no torch, no libcst at import time.
COMMANDS = {
    "lint": ("opscan.commands.lint", "Static check of training scripts (no torch needed)."),
    "scan": ("opscan.commands.scan", "Run a model forward+backward in strict deterministic mode and list every op that raises."),
    "rule": ("opscan.commands.rule", "Print a rule's documentation, or list every rule."),
    "compare": ("opscan.commands.compare", "Compare two records and name where and why the runs part (no torch needed)."),
    "report": ("opscan.commands.report", "Which ops raise, switch to a deterministic path or differ silently, on this torch and GPU."),
    "bench": ("opscan.commands.bench", "Time a training step with and without determinism, and list the ops that pay for it."),
    "record": ("opscan.commands.record", "Record every op of N training steps, with bitwise fingerprints, to a JSON Lines file."),
    "diff": ("opscan.commands.diff", "Record a run twice (in two fresh processes) and name where and why the runs part."),
}

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _terminal_width() -> int:
    """What shutil.get_terminal_size() gives, without importing shutil (and bz2, lzma) on every run."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _parser_class():
    """argparse, and the parser class built on it: imported only once a run is not a replay (runcache)."""
    import argparse

    class _HelpFormatter(argparse.HelpFormatter):
        def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
            # argparse builds one of these per add_argument(); its default width imports shutil.
            super().__init__(prog, indent_increment, max_help_position, width if width is not None else _terminal_width() - 2)

    class _Parser(argparse.ArgumentParser):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("formatter_class", _HelpFormatter)
            super().__init__(*args, **kwargs)

        def error(self, message):  # argparse exits 2 already; keep its message short and clear
            self.print_usage(sys.stderr)
            self.exit(EXIT_ERROR, f"opscan: error: {message}\n")

    return _Parser


def build_parser(only: str | None = None):
    """The parser; with `only`, import just that subcommand's module (lint start-up stays small)."""
    import importlib

    _Parser = _parser_class()
    parser = _Parser(prog="opscan", description="Find why a seeded PyTorch run is not reproducible.")
    parser.add_argument("--version", action="version", version=f"opscan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    parser.subcommand_parsers = sub.choices  # argparse's own name -> parser map, for main's errors
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or name == only:
            module = importlib.import_module(module_name)
            module.add_arguments(p)
            p.set_defaults(_run=module.run)
    return parser


def _cwd_problem(argv: list[str]) -> str | None:
    """Why a command cannot run in this working directory (it was removed under the shell), or None.

    Every command but `rule` reads paths relative to it, and os.getcwd() raised FileNotFoundError deep
    in whichever came first (lint's config, a target's file), with a traceback. One getcwd: lint's start-up keeps its pace.
    """
    command = next((arg for arg in argv if arg != "--"), None)  # `opscan -- scan` under torchrun
    if command not in COMMANDS or command == "rule":
        return None
    try:
        os.getcwd()
    except FileNotFoundError:
        return "the working directory no longer exists (it was removed); cd to a folder that does and run opscan again"
    except OSError as exc:
        return f"cannot read the working directory: {exc.strerror or exc}"
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    problem = _cwd_problem(argv)
    if problem:
        print(f"opscan: error: {problem}", file=sys.stderr)
        return EXIT_ERROR
    if argv[:1] == ["lint"] and "--no-cache" not in argv:
        # A rerun over an unchanged tree: print what the last one printed (opscan.lint.runcache).
        # `--no-cache` anywhere makes a run ineligible (runcache._NOT_REPLAYED), so a cold run
        # does not import runcache only to be told so.
        from opscan.lint import runcache

        code = runcache.replay(argv[1:])
        if code is not None:
            return code
    only = argv[0] if argv and argv[0] in COMMANDS else None
    args = None
    if only == "lint":  # plainly spelled flags are read without argparse (opscan.commands.lint.parse_fast)
        from opscan.commands.lint import parse_fast

        args = parse_fast(argv[1:])
    if args is None:
        parser = build_parser(only)
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            # parse_args would say so with the top-level usage line; the command's own is the useful one.
            owner = parser.subcommand_parsers.get(getattr(args, "command", None), parser)
            owner.error(f"unrecognized arguments: {' '.join(unknown)}")
        if not getattr(args, "_run", None):
            parser.print_help(sys.stderr)
            return EXIT_ERROR
    args.lint_argv = argv[1:] if only == "lint" else None  # the run cache's key (opscan.lint.runcache)
    try:
        return args._run(args)
    except KeyboardInterrupt:
        print("opscan: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_ERROR


_HEAP_KEPT = 16 << 20  # see entry(): up to twice this is kept free at the top of the heap


def entry() -> None:
    """The `opscan` command (its console script and `python -m opscan`): main(), then exit.

    A lint process ends as soon as it has printed, so it runs without the cycle collector and
    exits without tearing the interpreter down: collecting and freeing what it built costs more
    than the work left (a tenth of a one-file lint; BENCHMARKS.md). Nothing it opened is still
    open by then, and no child is left. mypy's console entry exits so too (`mypy.util.hard_exit`).
    The other commands exit normally: torch and the record writer have exit handlers to run.
    main() itself, as tests and other callers use it, restores the collector's state and returns.
    """
    argv = sys.argv[1:]
    if argv[:1] != ["lint"]:
        from opscan import _launcher  # the tracing commands' concern: lint's start-up does without it

        _launcher.note_callers(sys._getframe(1))
        sys.exit(main(argv))
    import gc

    gc.disable()
    # glibc's malloc gives the top of its heap back to the system once 128 kB of it is free, and the
    # parser frees its arenas after every file: each parse then faults its memory in afresh (~90 pages
    # a script). A block taken from mmap and freed raises that threshold to twice its size (mallopt(3),
    # M_TRIM_THRESHOLD's dynamic setting): the heap is kept, and the parse floor's faults are gone.
    # bytes() asks calloc, which leaves mmap's fresh pages untouched. Elsewhere it is a free block.
    bytes(_HEAP_KEPT)
    code = main(argv)  # a SystemExit (--help, a usage error) exits the ordinary way
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # the reader has gone (as main() treats it), a full disk: what was printed is not all there
            code = EXIT_ERROR
        except (AttributeError, ValueError):  # no such stream, or closed
            pass
    os._exit(code)


if __name__ == "__main__":
    entry()
