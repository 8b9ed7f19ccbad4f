"""`opscan compare A B`: name where and why two records of a seeded run part.

Importing this module imports no torch, and neither does running it: compare reads JSON.
"""

from __future__ import annotations

import argparse

from opscan.commands.common import add_output_arguments, emit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("record_a", metavar="A", nargs="?", help="a record written by `opscan record` (JSON Lines)")
    parser.add_argument("record_b", metavar="B", nargs="?", help="the record to compare it with")
    parser.add_argument(
        "--ranks", nargs="+", metavar="RECORD",
        help="instead of A B: one record per data-parallel rank (run.rank*.jsonl); "
        "reports the first step and parameter where the replicas differ, and the rank that does",
    )  # fmt: skip
    add_output_arguments(parser)


STDIN = (
    "'-' is not a record: compare reads its records from files, not from standard input "
    "(/dev/stdin reads a pipe; ./- names a file called -)"
)


def run(args: argparse.Namespace) -> int:
    from opscan.commands.common import error, input_problem, output_problem

    if "-" in (args.record_a, args.record_b, *(args.ranks or ())):  # was "-: no such file"
        return error(STDIN)
    problem = output_problem(args) or input_problem(args, [args.record_a, args.record_b, *(args.ranks or [])])
    if args.ranks is not None:
        if args.record_a is not None:
            return error("give either A B or --ranks RECORD..., not both")
        if problem:
            return error(problem)
        from opscan.compare.ranks import compare_ranks

        return emit(compare_ranks(args.ranks), args)
    if args.record_b is None:
        return error("give two records A B, or --ranks RECORD... (see --help)")
    if problem:
        return error(problem)
    from opscan.compare import compare_records

    return emit(compare_records(args.record_a, args.record_b), args)
