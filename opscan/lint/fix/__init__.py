"""`opscan lint --fix` and `--diff`: apply the findings' fixes with libcst and change nothing else.

- `driver`: the apply loop over files and re-lint rounds, atomic writes, the diff;
- `planner`: one file's tree, the questions an edit asks of it, the edits planned;
- `rewriter`: applies a file's planned edits in one pass;
- `nodes`: small questions and builders on libcst nodes.

Each rule's edit lives beside the rule (`opscan.lint.rules.det001.EnableDeterminism`,
...) and plans itself through the planner: the fixer calls `edit.plan(planner, finding)`.

The command imports this package only for --fix and --diff: libcst is slow to
import and plain linting does not need it.
"""

from opscan.lint.fix.driver import AppliedFix, FixOutcome, apply, unified_diff

__all__ = ["AppliedFix", "FixOutcome", "apply", "unified_diff"]
