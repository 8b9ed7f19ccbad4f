"""Set `verified` in rules/*.toml for every rule a GPU report measured in agreement with it.

    python scripts/mark_verified.py docs/report/h100-torch-2.11.json

A rule is marked only when every row of it in the report was measured on a
CUDA device and its verdict is what the rules expect for that torch ("raises"
where the rule's range holds, no alert elsewhere). Rules the report disagrees
with are listed, and left as they are. The line is written after the rule's
`provenance`, replacing an older `verified` line.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opscan.rules import load  # noqa: E402


def main(path: str) -> int:
    doc = json.loads(Path(path).read_text())
    env = doc["env"]
    ops = next(t for t in doc["tables"] if t["name"] == "ops")["rows"]
    by_rule: dict[str, list[dict]] = {}
    for row in ops:
        if row.get("rule"):
            by_rule.setdefault(row["rule"], []).append(row)
    report = Path(path).resolve()
    shown = report.relative_to(ROOT).as_posix() if report.is_relative_to(ROOT) else report.name
    label = f"{env['date'][:10]}, {env['gpu']}, torch {env['torch']}, torchvision {env.get('torchvision')}: opscan report ({shown})"
    agreed, disagreed = [], []
    for rule in load().ops:
        rows = by_rule.get(rule.id, [])
        cuda = [r for r in rows if r["device"] == "cuda" and r["measured"] is True]
        if not cuda:
            continue
        ok = all((r["verdict"] == "raises") == (r["expected"] == "raises") and r["verdict"] != "error" for r in cuda)
        (agreed if ok else disagreed).append(rule)
    for rule in agreed:
        file = ROOT / "rules" / rule.source
        text = file.read_text()
        start = text.index(f'id = "{rule.id}"\n')
        end = text.find("\n[[op]]", start)
        end = len(text) if end < 0 else end
        block = re.sub(r'\nverified = "[^"\n]*"', "", text[start:end])
        block = re.sub(r'(\nprovenance = "(?:[^"\\\n]|\\.)*")', lambda m: m.group(1) + f'\nverified = "{label}"', block, count=1)
        file.write_text(text[:start] + block + text[end:])
    print(f"verified {len(agreed)} rules; disagreeing: {[r.id for r in disagreed] or 'none'}")
    return 1 if disagreed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
