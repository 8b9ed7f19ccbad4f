"""Rewrite opscan/_rules_snapshot.py and opscan/_rules_index.py from rules/*.toml (the parsed data,
and what lint asks of it on every run, which lint loads fast).

    python scripts/gen_rules_snapshot.py           # rewrite them
    python scripts/gen_rules_snapshot.py --check   # exit 1 if either is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opscan.fsutil import atomic_write_bytes  # noqa: E402
from opscan.rules import INDEX, SNAPSHOT, index_text, snapshot_text  # noqa: E402


def main(argv: list[str]) -> int:
    stale = 0
    for target, text in ((SNAPSHOT, snapshot_text()), (INDEX, index_text())):
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        if "--check" in argv:
            print(f"{target} is stale: run python scripts/gen_rules_snapshot.py", file=sys.stderr)
            stale = 1
            continue
        atomic_write_bytes(target, text.encode("utf-8"))
        print(f"wrote {target}")
    return stale


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
