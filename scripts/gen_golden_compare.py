"""Write the golden fixtures of `opscan compare`: tests/fixtures/compare/<case>/{a.jsonl,b.jsonl,expected.txt}.

    python scripts/gen_golden_compare.py            # every case
    python scripts/gen_golden_compare.py CASE ...   # some

The records come from tests/compare/cases.py; expected.txt is the text
output of the current compare, with its exit code on the last line. Review
the diff before committing: an expected file is a claim about what is true.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a source checkout without installing
    sys.path.insert(0, str(ROOT))

from tests.compare.cases import CASES, FIXTURES, compare_text, write_records  # noqa: E402


def expected_text(code: int, text: str) -> str:
    return f"{text}exit code {code}\n"


def main(argv: list[str]) -> int:
    names = argv or sorted(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown case(s): {', '.join(unknown)}; known: {', '.join(sorted(CASES))}", file=sys.stderr)
        return 2
    for name in names:
        folder = FIXTURES / name
        write_records(name, folder)
        code, text = compare_text(folder)
        (folder / "expected.txt").write_text(expected_text(code, text), encoding="utf-8")
        print(f"wrote {folder.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
