"""Every rule code opscan can report, across engines: for `opscan rule`, docs and SARIF.

Commands-layer code: it joins what each engine documents, and imports no torch.
"""

from __future__ import annotations

import functools

from opscan.codes import RuleInfo


@functools.lru_cache(maxsize=None)
def all_rules() -> dict[str, RuleInfo]:
    """Every documented code, in code order."""
    from opscan.compare.codes import RULES as COMPARE_RULES
    from opscan.lint.rules import RULES as LINT_RULES
    from opscan.trace.codes import RULES as TRACE_RULES

    return {info.code: info for info in sorted((*LINT_RULES, *TRACE_RULES, *COMPARE_RULES), key=lambda info: info.code)}


def rule_info(code: str) -> RuleInfo | None:
    return all_rules().get(code)
