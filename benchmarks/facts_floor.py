"""opscan's per-file pass alone: every file's facts, and no linking, no rules, no output.

    PYTHONPATH=. python benchmarks/facts_floor.py PATH

As benchmarks/parse_floor.py (the same files, shared among forked processes in
the same way), but each file goes through `opscan.lint.facts.extract` under the
call filter lint uses (`CallFilter.for_lint()`): decoding, the noqa scan, the
parse and the facts walk, everything lint does once per file and caches by
content. What an `opscan lint --no-cache` run costs beyond this is following
imports, running the rules and printing; bench_lint_ab.py times it beside the
parse floor, the walk floor and whole lint runs.
"""

import gc
import sys

import parse_floor  # beside this file

from opscan.lint.facts import extract
from opscan.lint.relevance import CallFilter


def facts_all(paths, calls=None):
    for path in paths:
        with open(path, "rb") as fh:
            extract(path, fh.read(), "", calls)


if __name__ == "__main__":
    gc.disable()  # as lint runs (opscan.lint.engine.run, cli.entry)
    calls = CallFilter.for_lint()
    parse_floor.main(sys.argv[1], lambda paths: facts_all(paths, calls))
