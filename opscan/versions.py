"""Torch version numbers and the range specifiers the rules data uses (">=2.1,<2.13"). Base layer."""

from __future__ import annotations

import re


class VersionError(ValueError):
    """A version or range specifier that does not parse."""


_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*(\d+(?:\.\d+)*)\s*$")


def parse_version(text: str) -> tuple[int, ...]:
    """'2.11.0+cu130' -> (2, 11, 0). Only the numeric release part counts."""
    m = re.match(r"\s*(\d+(?:\.\d+)*)", str(text))
    if not m:
        raise ValueError(f"not a version: {text!r}")
    parts = tuple(int(p) for p in m.group(1).split("."))
    return parts + (0,) * (3 - len(parts)) if len(parts) < 3 else parts


def version_in_range(version: str | tuple[int, ...], spec: str) -> bool:
    """True if `version` satisfies every comma-separated clause of `spec` (e.g. ">=2.1,<2.13")."""
    v = parse_version(version) if isinstance(version, str) else version
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        m = _CLAUSE.match(clause)
        if not m:
            raise VersionError(f"bad version clause {clause!r} in {spec!r}")
        op, bound = m.group(1), parse_version(m.group(2))
        ok = {
            ">=": v >= bound,
            "<=": v <= bound,
            ">": v > bound,
            "<": v < bound,
            "==": v[: len(m.group(2).split("."))] == bound[: len(m.group(2).split("."))],
            "!=": v[: len(m.group(2).split("."))] != bound[: len(m.group(2).split("."))],
        }[op]
        if not ok:
            return False
    return True
