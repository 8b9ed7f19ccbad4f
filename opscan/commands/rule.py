"""`opscan rule CODE` prints a rule's documentation; `opscan rule --all` lists every rule (ruff's `rule`).

Documentation is not a check's result, so this command prints it directly
rather than as a Report; json gives the same fields for tools.
"""

from __future__ import annotations

import argparse
import json

from opscan.commands.common import EXIT_CLEAN, add_output_arguments, error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("code", nargs="?", metavar="CODE", help="a rule code, e.g. DET001")
    parser.add_argument("--all", action="store_true", help="list every rule")
    add_output_arguments(parser, formats=("text", "json"), findings=False)


def _as_dict(info) -> dict:
    return {
        "code": info.code,
        "name": info.name,
        "summary": info.summary,
        "command": info.command,
        "severity": info.severity,
        "explanation": info.help_markdown,
    }


def run(args: argparse.Namespace) -> int:
    from opscan.commands.common import output_problem
    from opscan.output import write
    from opscan.registry import all_rules

    if args.all and args.code is not None:  # as clap refuses it for ruff; "give a CODE or --all" read as if neither was given
        return error("a rule CODE and --all cannot be combined: give one (see opscan rule --help)")
    if not args.all and not args.code:
        return error("give a rule CODE or --all (see opscan rule --help)")
    problem = output_problem(args)
    if problem:
        return error(problem)
    rules = all_rules()
    if args.all:
        if args.output_format == "json":
            text = json.dumps([_as_dict(info) for info in rules.values()], indent=2) + "\n"
        else:
            from tabulate import tabulate

            rows = [(info.code, info.name, info.command, info.summary) for info in rules.values()]
            text = tabulate(rows, headers=["code", "name", "command", "summary"], tablefmt="simple") + "\n"
    else:
        info = rules.get(args.code.strip().upper())
        if info is None:
            return error(f"unknown rule {args.code!r}; `opscan rule --all` lists the rules")
        if args.output_format == "json":
            text = json.dumps(_as_dict(info), indent=2) + "\n"
        else:
            text = f"# {info.name} ({info.code})\n\nReported by `opscan {info.command}`.\n\n{info.summary}\n\n{info.help_markdown}\n"
    try:
        write(text, args.output_file)
    except OSError as exc:
        from opscan.output import cannot_write

        return cannot_write(exc, args.output_file)
    return EXIT_CLEAN
