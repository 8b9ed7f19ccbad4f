"""What a lint fix changes: the typed `Fix.edit` of lint's findings.

Each rule that offers a fix defines its edit class in its own module, beside
its check, and the edit plans itself: `plan(planner, finding)` finds its target
in the file's syntax tree and records the change on the planner
(`opscan.lint.fix.planner`), or returns False where the source does not have
the shape the fix expects. libcst is imported only inside `plan`, so plain
linting, which only builds edits, never loads it.
"""

from __future__ import annotations

from opscan._plain import Frozen

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up ~3 ms; annotations are strings here
    from opscan.findings import Finding
    from opscan.lint.fix.planner import Planner


class Edit(Frozen):
    """A fix's change, planned with libcst when fixing. Subclasses are slotted value classes."""

    __slots__ = ()
    # The fixer plans a file's edits by `order`, then by position: edits in place first
    # (0-2), then statements moved or inserted at the top of the module (3-4), then the
    # insertion after seeding (5), which may add `import torch` below that top group.
    order = 0

    def plan(self, planner: Planner, finding: Finding) -> bool:
        """Record this edit on `planner` for `finding`; False where its target is not found."""
        raise NotImplementedError
