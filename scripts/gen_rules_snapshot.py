"""Rewrite opscan/_rules_snapshot.py from rules/*.toml (the parsed data lint loads fast).

    python scripts/gen_rules_snapshot.py           # rewrite it
    python scripts/gen_rules_snapshot.py --check   # exit 1 if it is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opscan.fsutil import atomic_write_bytes  # noqa: E402
from opscan.rules import SNAPSHOT, snapshot_text  # noqa: E402


def main(argv: list[str]) -> int:
    text = snapshot_text()
    current = SNAPSHOT.read_text(encoding="utf-8") if SNAPSHOT.exists() else None
    if "--check" in argv:
        if current != text:
            print(f"{SNAPSHOT} is stale: run python scripts/gen_rules_snapshot.py", file=sys.stderr)
            return 1
        return 0
    if current != text:
        atomic_write_bytes(SNAPSHOT, text.encode("utf-8"))
        print(f"wrote {SNAPSHOT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
