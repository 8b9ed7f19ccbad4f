"""`opscan compare A B`: name where and why two records of a seeded run part.

Importing this module imports no torch, and neither does running it: compare reads JSON.
"""

from __future__ import annotations

import argparse

from opscan.commands.common import add_output_arguments, emit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("record_a", metavar="A", help="a record written by `opscan record` (JSON Lines)")
    parser.add_argument("record_b", metavar="B", help="the record to compare it with")
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from opscan.compare import compare_records

    return emit(compare_records(args.record_a, args.record_b), args)
