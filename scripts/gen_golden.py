"""Regenerate the lint golden files from the current code.

    python scripts/gen_golden.py           # rewrite every golden file that differs
    python scripts/gen_golden.py --check   # write nothing; list the stale ones and exit 1 if any

A golden file holds a fixture's findings exactly as `opscan lint` prints them
in text format, with each fix's applicability and description under it
(tests/fixtures/lint/README.md gives the format). The golden set is every
`tests/fixtures/lint/**/NAME.py` (-> `NAME.expected`), every
`tests/fixtures/lint/**/project_*/` folder (-> `project_*/expected`) and
`tests/fixtures/output/train.py` (-> `train.expected`). Each is linted
in-process exactly as `tests/lint/test_fixtures.py` lints it (the shared code
is `tests/lint/helpers.py`), so a file this writes is the file the test wants.

A golden file is a claim about what opscan reports: review the diff before
committing it. Golden files with no fixture left are listed, not deleted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a source checkout without installing
    sys.path.insert(0, str(ROOT))

from tests.lint.helpers import golden_fixtures, golden_path, golden_text, orphaned_goldens  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 and list the golden files that are stale")
    args = parser.parse_args(argv)

    stale = []
    fixtures = golden_fixtures()
    for fixture in fixtures:
        path = golden_path(fixture)
        want = golden_text(fixture)
        have = path.read_text(encoding="utf-8") if path.exists() else None
        if have == want:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(want, encoding="utf-8", newline="\n")
    orphans = orphaned_goldens()

    for path in stale:
        print(f"{'stale' if args.check else 'wrote'}: {path.relative_to(ROOT).as_posix()}")
    for path in orphans:
        print(f"orphaned (no fixture; delete it or restore its input): {path.relative_to(ROOT).as_posix()}")
    if args.check:
        if stale or orphans:
            print(f"{len(stale)} of {len(fixtures)} golden files stale; run `python scripts/gen_golden.py`", file=sys.stderr)
            return 1
        print(f"{len(fixtures)} golden files up to date")
        return 0
    print(f"{len(stale)} of {len(fixtures)} golden files rewritten")
    return 1 if orphans else 0


if __name__ == "__main__":
    sys.exit(main())
