"""One module per lint rule; each module's docstring is the rule's documentation.

A rule module defines `RULE` (its RuleInfo, parsed from the docstring) and
`check(ctx)`, which reports findings on a Context. DET000 is reported by the
engine itself, for files it cannot analyse.
"""

from opscan.lint.rules import det001, det002, det003, det004, det005, det006, det007, det008, det009

CHECKS = (det001, det002, det003, det004, det005, det006, det007, det008, det009)
