"""Write the golden fixtures of `opscan compare`: tests/fixtures/compare/<case>/{a.jsonl,b.jsonl,expected.txt},
and of `opscan compare --ranks`: tests/fixtures/compare_ranks/<case>/{run.rank*.jsonl,expected.txt}.

    python scripts/gen_golden_compare.py                  # every case
    python scripts/gen_golden_compare.py CASE ...         # some
    python scripts/gen_golden_compare.py --record-ranks   # record the --ranks cases again first (torchrun; needs torch)

The two-run records come from tests/compare/cases.py; the --ranks records
are real ones of tests/distributed/train_ddp.py (tests/compare/rank_cases.py),
kept as they were recorded unless --record-ranks. expected.txt is the text
output of the current compare, with its exit code on the last line. Review
the diff before committing: an expected file is a claim about what is true.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a source checkout without installing
    sys.path.insert(0, str(ROOT))

from tests.compare import rank_cases  # noqa: E402
from tests.compare.cases import CASES, FIXTURES, compare_text, write_records  # noqa: E402


def expected_text(code: int, text: str) -> str:
    return f"{text}exit code {code}\n"


def main(argv: list[str]) -> int:
    record_ranks = "--record-ranks" in argv
    argv = [a for a in argv if a != "--record-ranks"]
    names = argv or sorted(CASES) + sorted(rank_cases.CASES)
    unknown = [n for n in names if n not in CASES and n not in rank_cases.CASES]
    if unknown:
        known = sorted(CASES) + sorted(rank_cases.CASES)
        print(f"unknown case(s): {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    for name in names:
        if name in CASES:
            folder = FIXTURES / name
            write_records(name, folder)
            code, text = compare_text(folder)
        else:
            folder = rank_cases.FIXTURES / name
            if record_ranks or not rank_cases.paths(folder):
                rank_cases.record(name, folder)
            code, text = rank_cases.compare_text(folder)
        (folder / "expected.txt").write_text(expected_text(code, text), encoding="utf-8")
        print(f"wrote {folder.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
