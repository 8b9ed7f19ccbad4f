"""`opscan lint`: flags, configuration, and exit codes. Imports neither torch nor libcst."""

from __future__ import annotations

import os
import sys

from opscan.output import FORMATS

LINT_FORMATS = ("text", "json", "sarif", "github")

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from opscan.findings import Problem


def _codes(value: str) -> list[str]:
    # An empty part is kept, so that it is refused as an unknown selector (as ruff refuses `--select ""`):
    # dropped, `--select ""` (an unset shell variable) selected no rule and said "All checks passed!".
    return [c.strip() for c in value.split(",")]


# Lint's options, for argparse (add_arguments) and for parse_fast, which reads their plain
# spellings without it: argparse, with gettext and locale, costs lint ~3 ms of start-up.
_OPTIONS: tuple[tuple[tuple[str, ...], dict], ...] = (
    (("--select",), {"type": _codes, "metavar": "CODES", "help": "comma-separated codes or prefixes to enable (default: ALL)"}),
    (("--extend-select",), {"type": _codes, "metavar": "CODES", "help": "codes or prefixes to enable on top of the selection"}),
    (("--ignore",), {"type": _codes, "metavar": "CODES", "help": "comma-separated codes or prefixes to disable"}),
    (("--output-format",), {"choices": LINT_FORMATS, "default": "text", "help": "how to print findings (default: text)"}),
    (("-o", "--output-file"), {"metavar": "FILE", "help": "write the report to FILE instead of stdout"}),
    (("--statistics",), {"action": "store_true", "help": "print a count per rule instead of each finding"}),
    (("--exit-zero",), {"action": "store_true", "help": "exit 0 even when there are findings"}),
    (("--torch-version",), {
        "metavar": "SPEC",
        "help": "torch release or range to check against, e.g. 2.11 or '>=2.4,<2.7' (default: the project's "
        "torch requirement, else the installed torch, else every release the rules know)",
    }),
    (("--config",), {"metavar": "FILE", "help": "pyproject.toml to read [tool.opscan] from (default: nearest)"}),
    (("--no-cache",), {"action": "store_true", "help": "do not read or write the facts cache"}),
    (("--force-exclude",), {"action": "store_true", "help": "apply exclusions to files named on the command line too (for pre-commit)"}),
    (("--fix",), {"action": "store_true", "help": "apply safe fixes"}),
    (("--unsafe-fixes",), {"action": "store_true", "help": "with --fix or --diff, also apply fixes that can change behaviour"}),
    (("--diff",), {"action": "store_true", "help": "print the fixes as a unified diff on stdout and change no file; the report (its summary line) goes to stderr, or to -o FILE"}),
    (("--show-fixes",), {"action": "store_true", "help": "list the fixes that were applied"}),
    (("--exit-non-zero-on-fix",), {"action": "store_true", "help": "with --fix, exit 1 when files were changed, even if nothing remains"}),
    (("-q", "--quiet"), {"action": "store_true", "help": "print findings only, no summary or notices"}),
    (("-v", "--verbose"), {"action": "store_true", "help": "also say on stderr which torch releases each file targets and why, and which imports resolved nowhere"}),
    (("--show-settings",), {"action": "store_true", "help": "print the settings the paths would be linted with, and exit without linting"}),
    (("--add-noqa",), {"action": "store_true", "help": "add `# noqa: CODE` to each line with a finding, and change nothing else"}),
    (("--stdin-filename",), {
        "metavar": "PATH",
        "help": "with `-` (or no path): lint stdin as if it were PATH (its config, per-file-ignores and imports); with --fix, print the fixed source, and the report on stderr or in -o FILE",
    }),
)  # fmt: skip


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", help="files or folders to check (default: .); `-` reads one file from stdin")
    for flags, options in _OPTIONS:
        p.add_argument(*flags, **options)


class Args:
    """What argparse's Namespace holds for lint, built by parse_fast."""

    def __init__(self, **values):
        self.__dict__.update(values)


def parse_fast(argv: list[str]) -> Args | None:
    """The flags argparse would give `opscan lint ARGV`, when they are spelled plainly; None otherwise.

    Plainly: every flag whole (no abbreviation, no `-qv`, no `-oFILE`), a value
    after its flag or after `=` (one that starts with `-` only if it is `-`),
    the paths together in one run, no `--`. Anything else, and every error
    (an unknown flag, a format not in the choices), is left to argparse, which
    reads it or says what is wrong.
    """
    names = {flag: (flags, options) for flags, options in _OPTIONS for flag in flags}
    values: dict = {"command": "lint", "paths": []}
    for flags, options in _OPTIONS:
        values[flags[-1].lstrip("-").replace("-", "_")] = False if options.get("action") == "store_true" else options.get("default")
    paths_state = 0  # 0: none yet, 1: reading them, 2: done
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg[:1] != "-" or arg == "-":
            if paths_state == 2:
                return None
            paths_state = 1
            values["paths"].append(arg)
            continue
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        found = names.get(name)
        if found is None:
            return None
        flags, options = found
        dest = flags[-1].lstrip("-").replace("-", "_")
        if options.get("action") == "store_true":
            if eq:
                return None
            values[dest] = True
        else:
            if not eq:
                if i == len(argv) or (argv[i][:1] == "-" and argv[i] != "-"):
                    return None
                value = argv[i]
                i += 1
            if "choices" in options and value not in options["choices"]:
                return None
            values[dest] = options["type"](value) if "type" in options else value
        if paths_state == 1:
            paths_state = 2
    return Args(**values, _run=run)

def _progress():
    """A progress line on stderr, where a person watches it (a terminal); none in CI logs and pipes."""
    try:
        interactive = sys.stderr.isatty()
    except (AttributeError, ValueError):
        interactive = False
    if not interactive or os.environ.get("TERM") == "dumb":
        return None
    from opscan.lint.engine import Progress

    return Progress(sys.stderr)


def run(args: argparse.Namespace) -> int:
    import gc

    # Lint allocates hundreds of thousands of small objects with no reference cycles (facts,
    # events); the default thresholds would run the cycle collector over them again and again.
    # What exists before the run (modules, config) is never garbage: keep it out of collections.
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    # `opscan lint - --fix` from an editor: stdout becomes the buffer, so an error must not leave it empty (bad config,
    # an unknown selector, a bad -o: exit 2 before anything was printed). As ruff echoes a source it cannot fix, and as
    # a file lint cannot parse (DET000) is echoed, the source then goes to stdout unchanged.
    echoes = (args.paths == ["-"] or args.stdin_filename is not None) and args.fix and not args.diff
    try:
        if args.no_cache or not _replayable(args):
            code = _run(args)
        else:
            code = _run_recorded(args)
        if code == 2 and echoes and not getattr(args, "stdin_printed", False):
            _echo_stdin(getattr(args, "stdin_data", None))
        return code
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _echo_stdin(data: bytes | None) -> None:
    """Put stdin on stdout unchanged (`data`: what lint read of it, None: nothing yet). A terminal is left alone:
    no editor is there, and reading it would wait for the user to type."""
    try:
        if data is None:
            if sys.stdin is None or sys.stdin.isatty():
                return
            data = sys.stdin.buffer.read()
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):  # no stdin or stdout to speak of: the error said what it had to
        pass


def _replayable(args) -> bool:
    from opscan.lint import runcache

    argv = getattr(args, "lint_argv", None)
    return argv is not None and runcache.eligible(argv) and not args.add_noqa


def _run_recorded(args) -> int:
    """_run, keeping what it prints and what it read, for `opscan.lint.runcache.replay` next time."""
    import time

    from opscan.lint import runcache

    started = time.time_ns()
    out, err = runcache.Tee(sys.stdout), runcache.Tee(sys.stderr)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    deps: set[str] = set()
    args.deps = deps
    try:
        code = _run(args)
    finally:
        sys.stdout, sys.stderr = saved
    folder = getattr(args, "cache_folder", None)
    if folder is not None and not getattr(args, "progress_shown", False):
        runcache.save(folder, args.lint_argv, os.getcwd(), started, deps, out.bytes(), err.bytes(), code)
    return code


def _run(args: argparse.Namespace) -> int:
    from opscan import config as config_mod
    from opscan.lint import engine
    from opscan.lint.rules import RULES, lint_codes
    from opscan.rules import RulesError

    # As ruff: `-`, or --stdin-filename, reads the one file from stdin; beside --stdin-filename,
    # the paths are ignored with a warning (they were linted, and the flag ignored, without a word).
    from_stdin = args.paths == ["-"] or args.stdin_filename is not None
    if args.stdin_filename is not None:
        for path in args.paths:
            if path != "-":
                print(f"warning: Ignoring file {path} in favor of standard input.", file=sys.stderr)
        args.paths = []
    if not args.paths:
        args.paths = ["."]
    if "-" in args.paths and not from_stdin:
        print("opscan: error: `-` (stdin) cannot be linted together with other paths", file=sys.stderr)
        return 2
    if from_stdin and args.add_noqa:
        print("opscan: error: --add-noqa edits files; it cannot take stdin", file=sys.stderr)
        return 2
    if args.add_noqa and (args.fix or args.diff):
        print("opscan: error: --add-noqa cannot be combined with --fix or --diff", file=sys.stderr)
        return 2
    if args.exit_zero and args.exit_non_zero_on_fix:  # each says the opposite of the other, as ruff refuses it
        print("opscan: error: --exit-zero cannot be combined with --exit-non-zero-on-fix", file=sys.stderr)
        return 2
    if args.diff and args.statistics:  # as ruff refuses it: the patch holds no finding to count
        print("opscan: error: --diff cannot be combined with --statistics", file=sys.stderr)
        return 2
    from opscan.output import STATISTICS_FORMATS, check_output_path

    if args.statistics and args.output_format not in STATISTICS_FORMATS:  # as ruff refuses it; it printed the findings instead
        print(f"opscan: error: --statistics cannot be printed as {args.output_format}: use --output-format text or json", file=sys.stderr)
        return 2
    if args.show_settings and args.output_format != "text":  # the settings are text alone; the format was ignored
        print(f"opscan: error: --show-settings cannot be printed as {args.output_format}: use --output-format text", file=sys.stderr)
        return 2
    problem = check_output_path(args.output_file)  # every command's check, before anything is read
    if problem:
        print(f"opscan: error: {problem}", file=sys.stderr)
        return 2
    stdin_path = None
    if from_stdin:
        # Linted as if at --stdin-filename (or as `-` in this folder): its config, ignores and imports.
        stdin_path = args.stdin_filename or "-"
        args.paths = [stdin_path] if args.stdin_filename else ["."]

    deps = getattr(args, "deps", None)  # what the result depends on, for the run cache
    if deps is not None:
        folders = config_mod.pyproject_folders(args.paths)
        for folder in folders:  # present or not: one that appears may configure the run
            deps.add(str(folder / "pyproject.toml"))
        if args.config:
            deps.add(os.path.abspath(args.config))
    for flag, codes in (("--select", args.select), ("--extend-select", args.extend_select), ("--ignore", args.ignore)):
        if codes is not None and "" in codes:  # `--select ""` (an unset shell variable), `DET001,,DET002`
            print(f"opscan: error: unknown rule selector '' in {flag}: give comma-separated codes or prefixes", file=sys.stderr)
            return 2
    try:
        cfg = config_mod.load(args.paths, args.config)
        if args.select is not None:
            cfg.select = args.select
        if args.extend_select:
            cfg.extend_select = cfg.extend_select + args.extend_select
        if args.ignore:
            cfg.ignore = cfg.ignore + args.ignore
        if args.torch_version is not None:  # "" too: refused below, as any bad version is (it was the default, silently)
            cfg.torch_version, cfg.torch_version_from = args.torch_version, "--torch-version"
        cfg.validate(lint_codes())
        targets = engine.torch_targets(cfg)
    except config_mod.ConfigError as exc:
        print(f"opscan: error: {exc}", file=sys.stderr)
        return 2
    except RulesError as exc:
        print(f"opscan: error: {exc.problem}", file=sys.stderr)
        return 2
    for warning in cfg.warnings:
        print(warning, file=sys.stderr)

    from opscan.findings import Problem, Report

    # A mistyped path must not pass CI silently, nor cost the other paths their check (ruff's E902).
    missing: list[Problem] = []
    if not from_stdin:
        for p in args.paths:
            why = _unlintable(p, cfg, args.force_exclude)
            if why is not None:
                missing.append(Problem(f"{why}: {p}", p))
                if deps is not None:  # the run cache replays this error only while the path stays as it is
                    deps.add(os.path.abspath(p))
    elif _notebook(stdin_path, cfg, args.force_exclude):  # as a named one: stdin as x.ipynb was linted as Python
        missing.append(Problem(f"{NOT_NOTEBOOKS}: {stdin_path}", stdin_path))
    unlisted = {problem.target for problem in missing}
    paths = [p for p in ([stdin_path] if from_stdin else args.paths) if p not in unlisted]

    problem = _output_is_linted(args.output_file, paths, cfg, args.force_exclude)
    if problem:
        print(f"opscan: error: {problem}", file=sys.stderr)
        return 2
    if args.show_settings:
        return show_settings(cfg, paths, missing, targets, args, stdin_path if paths else None)

    unresolved: dict | None = {} if args.verbose else None

    # What the linted code reads besides the named files (the modules it imports) is known only as it is linted:
    # gathered, where -o names a file already there, so that the report does not replace one of them.
    read = deps if deps is not None or not _existing_file(args.output_file) else set()

    stdin_sources: dict[str, bytes] = {}
    if from_stdin:
        stdin_sources[os.path.realpath(stdin_path)] = args.stdin_data = sys.stdin.buffer.read()

    def lint(overlay: dict[str, bytes] | None = None):
        if not paths:
            return Report("lint")
        progress = _progress()
        try:
            return engine.run(
                paths, cfg, targets=targets, use_cache=not args.no_cache,
                force_exclude=args.force_exclude, overlay={**stdin_sources, **(overlay or {})} or None,
                unresolved=unresolved, progress=progress, stdin=stdin_path, deps=read,
            )  # fmt: skip
        finally:
            if progress is not None and progress.drawn_at:
                args.progress_shown = True

    if deps is not None:
        override = os.environ.get("OPSCAN_CACHE_DIR")
        args.cache_folder = override or str(cfg.root / ".opscan_cache")

    try:
        report = lint()
    except RulesError as exc:
        print(f"opscan: error: {exc.problem}", file=sys.stderr)
        return 2
    problem = _output_was_read(args.output_file, read)  # before --fix writes anything
    if problem:
        print(f"opscan: error: {problem}", file=sys.stderr)
        return 2
    if args.verbose:
        for line in _target_lines(targets) + _unresolved_lines(cfg, unresolved or {}, cfg.import_roots(targets.projects)):
            print(f"opscan: {line}", file=sys.stderr)

    if args.add_noqa:
        return _add_noqa(report, missing, args.quiet)
    modified = False
    if args.fix or args.diff:
        from opscan.lint import fix as fixer

        outcome = fixer.apply(
            report, unsafe=args.unsafe_fixes, write=args.fix and not args.diff, relint=lint, sources=stdin_sources,
        )  # fmt: skip
        if args.diff:
            # As ruff: stdout is the patch alone (`opscan lint --diff | git apply` works); the report, which is the
            # summary line and no finding (ruff shows none with --diff), goes below to -o FILE, or without it to stderr.
            try:
                from opscan.output import write

                write(outcome.diff, None)  # a file name that is not UTF-8 must not crash it
            except OSError as exc:
                print(f"opscan: error: cannot write the diff: {exc.strerror or exc}", file=sys.stderr)
                return 2
            report = Report("lint", summary=outcome.diff_summary(), outcome=1 if outcome.diff else 0)
        elif from_stdin:  # as ruff: the fixed source on stdout; the report of what remains below, on stderr or in -o's file
            problem = _print_fixed(outcome, stdin_sources)
            args.stdin_printed = True  # or part of it: stdout failed, and will not take it again
            if problem:
                print(f"opscan: error: {problem}", file=sys.stderr)
                return 2
        modified = bool(outcome.fixed) and not args.diff  # with --diff, the fixes that would be made
        if modified:
            # Lint again: what remains is what the exit code and output report. Fixed stdin is in memory only.
            remaining = lint(outcome.sources if from_stdin else None)
            remaining.notices += outcome.notices
            if args.show_fixes:
                remaining.notices += outcome.summary_lines()
            else:
                remaining.notices.append(f"Fixed {outcome.count} error{'s' if outcome.count != 1 else ''}.")
            report = remaining
        else:
            report.notices += outcome.notices
        if not args.diff:
            outcome.withdraw_fixes(report)  # what --fix has just left alone is not "[*] fixable with --fix"
        report.errors += outcome.errors  # the other files are fixed; these stopped part of the run (exit 2)

    from opscan.output import render, withhold, write

    if modified and args.exit_non_zero_on_fix and not args.exit_zero:
        report.outcome = 1  # the exit below: the text does not close with "All checks passed!" beside it
    report.rules = RULES
    report.flat_json = True  # ruff's flat list, which editors and CI scripts already read
    report.errors.extend(missing)
    report.checked = len(paths)  # the paths that are there were linted: a report of them (opscan.output.withhold)

    # Warnings about skipped input go to stderr, as ruff's do; fix summaries stay in the text output.
    for notice in report.notices:
        if notice.startswith("warning:"):
            print(notice, file=sys.stderr)
    report.notices = [n for n in report.notices if not n.startswith("warning:")]
    if args.quiet or args.output_format != "text":
        report.notices = []
    withheld = withhold(report, args.output_file)  # only paths that cannot be linted: -o is left as it was
    # stdout holds the patch of --diff, or `opscan lint - --fix`'s fixed source: without -o FILE, the report goes to stderr.
    on_stderr = (args.diff or from_stdin and args.fix) and args.output_file in (None, "-")
    try:
        text = render(report, args.output_format, statistics=args.statistics)
        if args.quiet and args.output_format == "text" and not args.statistics:
            text = "".join(line + "\n" for line in text.splitlines() if (report.findings and ": DET" in line) or line.startswith("error: "))
        if on_stderr:
            sys.stderr.write(text)
        elif withheld is None:
            write(text, args.output_file)
    except OSError as exc:
        from opscan.output import cannot_write

        return cannot_write(exc, args.output_file)
    if not on_stderr and (args.output_format != "text" or args.output_file not in (None, "-") or args.statistics):
        for problem in report.errors:  # not part of this output: say it where a person sees it
            print(f"opscan: error: {problem.message}", file=sys.stderr)
    if withheld is not None:
        print(f"opscan: {withheld}", file=sys.stderr)
    if report.errors:
        return 2  # --exit-zero covers findings, not errors, as in ruff
    if args.exit_zero:
        return 0
    # As ruff: after --fix the code reflects what remains (pre-commit fails a hook that modified files by
    # itself; --exit-non-zero-on-fix, the outcome set above, makes that explicit); --diff is 1 when there is a patch.
    return report.exit_code()


# ---------------------------------------------------------------- --show-settings and -v


def _output_is_linted(output_file: str | None, paths: list[str], cfg, force_exclude: bool) -> str | None:
    """Why -o names a file this lint reads (a linted file, the pyproject.toml it read), or None.

    Only the file -o names is looked for: a path named on the command line is linted whatever its
    name, and a folder is walked for it (engine.discover, with the same exclusions) only when -o is
    a .py file that is there and inside it, which a report seldom is.
    """
    from opscan.output import overwrites_input

    if output_file in (None, "-") or not os.path.isfile(output_file):
        return None
    from opscan._path import Path

    named = [p for p in paths if not os.path.isdir(p) and not (force_exclude and cfg.is_excluded(Path(p)))]
    problem = overwrites_input(output_file, [*named, cfg.source])
    if problem or not output_file.endswith(".py"):
        return problem
    spellings = {os.path.realpath(output_file), os.path.abspath(output_file)}  # a link in the folder is linted too
    folders = [
        p for p in paths
        if os.path.isdir(p) and any(s.startswith(os.path.join(f, "")) for s in spellings for f in (os.path.realpath(p), os.path.abspath(p)))
    ]  # fmt: skip
    if not folders:
        return None
    from opscan.lint import engine

    files, _notices = engine.discover(folders, cfg, force_exclude)
    return overwrites_input(output_file, [str(f) for f in files])


def _existing_file(path: str | None) -> bool:
    return path not in (None, "-") and os.path.isfile(path)


def _output_was_read(output_file: str | None, read: set[str] | None) -> str | None:
    """Why -o names a file the lint read (a module a linted script imports), or None: said before anything is written."""
    if read is None or not _existing_file(output_file):
        return None
    from opscan.lint import engine
    from opscan.output import overwrites_input

    return overwrites_input(output_file, [engine.display_path(p) for p in sorted(read)], what="a file this lint read")


def _unlintable(path: str, cfg, force_exclude: bool) -> str | None:
    """Why a named path cannot be linted ("no such file or directory"), or None.

    Nothing there (a symbolic link to nothing too), a path through a file (`train.py/x.py`, `train.py/`),
    a name too long for any file, and a Jupyter notebook: its JSON parses as Python and would pass unread.
    A link in a loop is skipped with a warning instead (engine.discover), as a broken link inside a folder is.
    """
    import errno
    from stat import S_ISDIR

    try:
        st = os.stat(path)
    except OSError as exc:
        return {errno.ENOENT: "no such file or directory", errno.ENOTDIR: "not a directory", errno.ENAMETOOLONG: "file name too long"}.get(exc.errno)
    except ValueError:  # an embedded null byte: no such file can exist
        return "no such file or directory"
    if not S_ISDIR(st.st_mode) and _notebook(path, cfg, force_exclude):  # a folder so named is walked, for its .py files
        return NOT_NOTEBOOKS
    return None


NOT_NOTEBOOKS = "Jupyter notebooks are not linted"


def _notebook(path: str, cfg, force_exclude: bool) -> bool:
    """Whether `path`, named on the command line or given as stdin's name, is a Jupyter notebook to refuse: its JSON
    parses as Python and would pass unread. One that --force-exclude excludes is skipped, as any excluded file is."""
    if not path.endswith(".ipynb"):
        return False
    from opscan._path import Path

    return not (force_exclude and cfg.is_excluded(Path(path)))


def show_settings(cfg, paths: list[str], missing: list[Problem], targets, args: argparse.Namespace, stdin: str | None = None) -> int:
    """Print the resolved settings for these paths, as `ruff check --show-settings` does, and lint nothing.

    `stdin`: the path stdin would be linted as (`-`, or --stdin-filename's); stdin itself is not read.
    """
    from opscan._path import Path
    from opscan.lint import engine
    from opscan.lint.frameworks import VERSIONED
    from opscan.lint.rules import OPT_IN, lint_codes

    if stdin is not None:  # one file, which need not exist: as engine.run takes it (`-` was "skipped: no such file")
        files, notices = ([] if args.force_exclude and cfg.is_excluded(Path(stdin)) else [Path(stdin)]), []
    else:
        files, notices = engine.discover(paths, cfg, args.force_exclude) if paths else ([], [])
    for path in files:
        targets.for_file(path)
        for name in VERSIONED:  # what a rule would read for the file, were its helpers called
            targets.package(name).for_file(path)
    for line in notices + [w for w in targets.warnings if w not in notices]:
        print(line, file=sys.stderr)
    for problem in missing:
        print(f"opscan: error: {problem.message}", file=sys.stderr)

    def listed(values) -> str:
        values = [str(v) for v in values]
        return ", ".join(values) if values else "(none)"

    rows = [
        ("config file", engine.display_path(str(cfg.source)) if cfg.source else "(none: defaults)"),
        ("root", str(cfg.root)),
        ("roots", listed(engine.display_path(str(r)) for r in engine.import_roots(cfg, targets, files))),
        ("select", listed(cfg.select)),
        ("extend-select", listed(cfg.extend_select)),
        ("ignore", listed(cfg.ignore)),
        ("per-file-ignores", listed(f"{glob} = {', '.join(codes)}" for glob, codes in cfg.per_file_ignores.items())),
        ("exclude", listed(cfg.exclude)),
        ("extend-exclude", listed(cfg.extend_exclude)),
        ("rules", listed(sorted(cfg.enabled_codes(lint_codes(), OPT_IN)))),
        ("files", str(len(files)) if stdin is None else f"{len(files)} (stdin{'' if stdin == '-' else ', as ' + stdin})"),
    ]
    width = max(len(name) for name, _ in rows) + 2
    out = [f"{name.ljust(width)}{value}" for name, value in rows]

    def versions(name: str, lines: list[str]) -> None:
        out.append(f"{name.ljust(width)}{lines[0] if len(lines) == 1 else 'per project folder:'}")
        if len(lines) > 1:
            out.extend(f"  {line}" for line in lines)

    versions("torch", _torch_lines(targets))
    out += [f"{'known releases'.ljust(width)}{targets.known[0]} to {targets.known[-1]} (rules/torch.toml)"]
    for name in VERSIONED:
        versions(name, _range_lines(targets.package(name)))
    from opscan.output import write

    try:
        write("".join(line + "\n" for line in out), args.output_file)
    except OSError as exc:
        from opscan.output import cannot_write

        return cannot_write(exc, args.output_file)
    return 2 if missing else 0


def _target_lines(targets) -> list[str]:
    """What -v says of the versions lint read: torch's, then each other package's a rule asked about."""
    lines = [f"targets torch {line}" for line in _torch_lines(targets)]
    for name, found in targets.packages().items():
        lines += [f"targets {name} {line}" for line in _range_lines(found, fallback=False)]
    return lines


def _torch_lines(targets) -> list[str]:
    """One line per torch range the files target: the releases, where they came from, and for how many files."""
    return _range_lines(targets, fixed=targets.fixed)


def _range_lines(found, *, fixed=None, fallback: bool = True) -> list[str]:
    """One line per range of versions a TorchTargets or PackageVersions gave the files: the versions, where
    they came from, and for how many files; with nothing given and `fallback`, what a file here would get."""
    from opscan.lint import engine

    used = found.summary()
    if not used and fallback:  # nothing linted: what a file here would get
        used = [(fixed or found.fallback(), "", 0)]
    lines = []
    for versions, folder, count in sorted(used, key=lambda u: (u[1], str(u[0]))):
        files = f" ({count} file{'s' if count != 1 else ''})" if count else ""
        # The fallback's files are those whose project declares no version: not every file, beside the others.
        # A folder as a folder ("under ./:", "under examples/gan/:"): a bare "." read as punctuation.
        under = f"under {os.path.join(engine.display_path(folder), '')}: " if folder else "where none is declared: "
        under = under if len(used) > 1 else ""
        lines.append(f"{under}{versions}, from {versions.where}{files}")
    return lines


def _unresolved_lines(cfg, unresolved: dict, roots: list) -> list[str]:
    """The imports that ran, found no project file and name no library lint knows or this Python has;
    `roots`: the import roots the run used (engine.import_roots).

    A dotted name is a module missing from a namespace package of the project (a folder
    without `__init__.py`) that an import looked in (see EntryTrace.missing)."""
    import importlib.machinery

    from opscan.lint import engine
    from opscan.lint.context import torch_free
    from opscan.lint.distributions import DISTRIBUTIONS
    from opscan.lint.modelled import MODELS
    from opscan.lint.relevance import LIBRARIES
    from opscan.lint.target import PackageVersions, normalize_name

    known = LIBRARIES | {name.partition(".")[0] for name in MODELS}
    root = os.path.realpath(cfg.root)
    # Where `roots` is set: the config read, else the table a pyproject.toml would need.
    add = f"add that folder to `roots` in {engine.display_path(str(cfg.source))}" if cfg.source else "add that folder to `roots` under [tool.opscan] in pyproject.toml"
    lines = []
    for name, (path, loc) in sorted(unresolved.items()):
        package = name.partition(".")[0]
        if package in known or torch_free(package) or not all(part.isidentifier() for part in name.split(".")):
            continue
        try:
            spec = importlib.machinery.PathFinder.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and (spec.origin is not None or "." not in name or not _inside(spec.submodule_search_locations, root)):
            # Installed here: a library. A regular package wins over the project's namespace folder,
            # and an installed namespace portion may hold the module; the project's own folder (on
            # sys.path as the working directory) does not count.
            continue
        if "." not in name and any(PackageVersions(normalize_name(d), installed=False).declared_for(path) for d in (package, *DISTRIBUTIONS.get(package, ()))):
            continue  # a dependency the project declares (requirements, pyproject, a lock; `pyserial` for serial): a library not installed here
        if _only_optional(path, name):
            continue  # `try: import apex` / `except ImportError:`: the file expects it may be missing
        hint = _folder_holding(cfg, name, path)
        where = f"{engine.display_path(path)}:{loc.line}"
        line = f"  {name} (imported at {where})"
        if "." in name:
            namespace, _, last = name.rpartition(".")
            line += f": `{namespace}` is a folder without __init__.py that holds no `{last}`"
            line += f"; {hint} holds it; {add}" if hint else ""
        elif hint:
            line += f": {hint} holds it; {add}"
        lines.append(line)
    if lines:
        shown = ", ".join(engine.display_path(str(r)) for r in roots)
        lines.insert(0, f"imports that look like project modules but resolve to no file under the roots ({shown}) or the script's folder:")
    return lines


def _only_optional(path: str, name: str) -> bool:
    """Whether every import of the module `name` (or one below it) in the file `path` is in the body
    of a `try` that catches its ImportError (`except ImportError`, `ModuleNotFoundError`, `Exception`,
    a bare `except`): an optional dependency. False where the file cannot be read."""
    import ast

    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return False
    found = []  # whether each import of `name` is guarded
    tries = tuple(getattr(ast, kind) for kind in ("Try", "TryStar") if hasattr(ast, kind))

    def names_it(module: str | None) -> bool:
        return module is not None and (module == name or module.startswith(name + "."))

    def visit(node, guarded: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend(guarded for alias in node.names if names_it(alias.name))
        elif isinstance(node, ast.ImportFrom):
            if not node.level and names_it(node.module):
                found.append(guarded)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for child in ast.iter_child_nodes(node):  # runs later, outside the try around the def
                visit(child, False)
        elif isinstance(node, tries):
            catches = any(_catches_import_error(h.type) for h in node.handlers)
            for child in node.body:
                visit(child, guarded or catches)
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(child, guarded)
        else:
            for child in ast.iter_child_nodes(node):
                visit(child, guarded)

    visit(tree, False)
    return bool(found) and all(found)


def _catches_import_error(kind) -> bool:
    """Whether an `except` clause's type catches ImportError: it, its subclass, a base of it, or none (bare)."""
    import ast

    if kind is None:
        return True
    if isinstance(kind, ast.Tuple):
        return any(_catches_import_error(k) for k in kind.elts)
    return isinstance(kind, ast.Name) and kind.id in ("ImportError", "ModuleNotFoundError", "Exception", "BaseException")


def _inside(folders, root: str) -> bool:
    """Whether every one of `folders` is `root` or below it."""
    return all(os.path.realpath(f) == root or os.path.realpath(f).startswith(root.rstrip(os.sep) + os.sep) for f in folders or ())


def _folder_holding(cfg, package: str, importer: str, depth: int = 3) -> str | None:
    """A folder below the root, up to `depth` levels down, that holds `package/` or `package.py`
    (`a/b/` or `a/b.py` for "a.b"), other than the importing file `importer` itself (a module named
    after the library it wraps, `callbacks/torch_ort.py` importing `torch_ort`)."""
    from opscan._path import Path

    rel = package.replace(".", "/")
    itself = os.path.realpath(importer)
    pending = [(Path(cfg.root), 0)]
    while pending:
        folder, level = pending.pop(0)
        if level and ((folder / rel).is_dir() or ((folder / f"{rel}.py").is_file() and os.path.realpath(folder / f"{rel}.py") != itself)):
            from opscan.lint import engine

            return engine.display_path(str(folder))
        if level >= depth:
            continue
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".") and not cfg.is_excluded(p))
        except OSError:
            continue
        pending += [(child, level + 1) for child in children]
    return None


def _add_noqa(report, missing: list[Problem], quiet: bool) -> int:
    from opscan.lint.noqa import add_noqa

    if report.errors or missing:
        for problem in report.errors:
            print(f"opscan: error: {problem.message}", file=sys.stderr)
        for problem in missing:
            print(f"opscan: error: {problem.message}", file=sys.stderr)
    added, notices, errors = add_noqa(report)
    for notice in report.notices + notices:
        if notice.startswith("warning:"):
            print(notice, file=sys.stderr)
    for message in errors:
        print(f"opscan: error: {message}", file=sys.stderr)
    if added and not quiet:
        print(f"Added {added} noqa directive{'s' if added != 1 else ''}.", file=sys.stderr)
    return 2 if report.errors or missing or errors else 0


def _print_fixed(outcome, sources: dict[str, bytes]) -> str | None:
    """`opscan lint - --fix`: the source on stdout, fixed (as it came where nothing was); why it could not be, or None."""
    (key, original), = sources.items()
    try:
        sys.stdout.buffer.write(outcome.sources.get(key, original))
        sys.stdout.flush()
    except OSError as exc:
        return f"cannot write the fixed source: {exc.strerror or exc}"
    return None


assert set(LINT_FORMATS) <= set(FORMATS)
