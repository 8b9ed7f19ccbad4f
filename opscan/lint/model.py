"""Plain data that the lint passes exchange: locations, call records and events.

Everything here is picklable and holds no AST nodes, so a module's facts can be
cached by file content.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class _Unknown:
    """A value that cannot be known statically. A singleton that survives pickling."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __reduce__(self):
        return (_Unknown, ())

    def __repr__(self):
        return "UNKNOWN"

    def __bool__(self):
        raise TypeError("UNKNOWN has no truth value; test `is UNKNOWN` first")


UNKNOWN: Any = _Unknown()

CUBLAS = "CUBLAS_WORKSPACE_CONFIG"
VALID_CUBLAS = (":4096:8", ":16:8")  # the only values torch's check accepts, compared as strings
MISSING: Any = object()


@dataclass(frozen=True)
class Loc:
    """A source span: 1-based lines, 1-based columns, end exclusive as in ruff."""

    line: int
    col: int
    end_line: int
    end_col: int


@dataclass(frozen=True)
class CallArgs:
    """The literal arguments of one call site: positional values and keyword values.

    Values are Python literals (str, int, float, bool, None, tuples) or UNKNOWN.
    `star` is True when the call passes *args or **kwargs, so absent
    parameters are unknown rather than defaulted.
    """

    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()
    star: bool = False

    def get(self, name: str, pos: int | None = None, default: Any = None) -> Any:
        """The value passed for a parameter by keyword or position, else `default` (UNKNOWN under *args/**kwargs)."""
        for key, value in self.kwargs:
            if key == name:
                return value
        if pos is not None and pos < len(self.args):
            return self.args[pos]
        return UNKNOWN if self.star else default

    def passed(self, name: str, pos: int | None = None) -> bool:
        return any(k == name for k, _ in self.kwargs) or (pos is not None and pos < len(self.args))


@dataclass(frozen=True)
class Effect:
    """What a call does to determinism state, as a framework model reports it.

    kinds and their data:
      seed          {"libs": ("torch", "random", "numpy", ...)}
      determinism   {"mode": bool|UNKNOWN, "warn_only": bool|UNKNOWN}
      env           {"var": str, "value": str|UNKNOWN}
      cudnn         {"flag": "benchmark"|"deterministic", "value": bool|UNKNOWN}
    """

    kind: str
    data: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
