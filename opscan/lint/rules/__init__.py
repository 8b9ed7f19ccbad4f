"""One module per lint rule; each module's docstring is the rule's documentation.

A rule module defines `RULE` (its RuleInfo, parsed from the docstring) and
`check(ctx)`, which reports findings on a Context. DET000 is reported by the
engine itself, for files it cannot analyse.
"""

from opscan.lint.rules import det000, det001, det002, det003, det004, det005, det006, det007, det008, det009, det010, det011

CHECKS = (det001, det002, det003, det004, det005, det006, det007, det008, det009, det011)

# Every code lint can report, DET000 first, with its documentation. The engine reports
# DET000 (files it cannot analyse) and DET010 (noqa comments a whole run did not need) itself.
RULES = (det000.RULE, *(check.RULE for check in CHECKS), det010.RULE)
# Codes the default selection leaves out: a selection must name them, as ruff's RUF100.
OPT_IN = frozenset({det010.RULE.code})
_BY_CODE = {info.code: info for info in RULES}


def lint_codes() -> list[str]:
    """The codes `--select` and `--ignore` choose from."""
    return [info.code for info in RULES]


def rule_info(code: str):
    """The RuleInfo of a lint code, or None."""
    return _BY_CODE.get(code)
