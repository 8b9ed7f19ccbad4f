"""Plain data that the lint passes exchange: locations, call records and events.

Everything here is picklable and holds no AST nodes, so a module's facts can be
cached by file content.
"""

from __future__ import annotations

from opscan._plain import Frozen

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up ~3 ms; annotations are strings here
    from typing import Any


# Shared with the rules data (its `when` predicates), so it lives in the base layer.
from opscan._plain import UNKNOWN  # noqa: E402

CUBLAS = "CUBLAS_WORKSPACE_CONFIG"
VALID_CUBLAS = (":4096:8", ":16:8")  # the only values torch's check accepts, compared as strings
MISSING: Any = object()


class Loc(Frozen):
    """A source span: 1-based lines, 1-based columns, end exclusive as in ruff."""

    _fields = ("line", "col", "end_line", "end_col")
    __slots__ = _fields

    def __init__(self, line: int, col: int, end_line: int, end_col: int):
        self.line = line
        self.col = col
        self.end_line = end_line
        self.end_col = end_col


class CallArgs(Frozen):
    """The literal arguments of one call site: positional values and keyword values.

    Values are Python literals (str, int, float, bool, None, tuples) or UNKNOWN.
    `star` is True when the call passes *args or **kwargs, so absent
    parameters are unknown rather than defaulted.
    """

    _fields = ("args", "kwargs", "star")
    __slots__ = _fields

    def __init__(self, args: tuple[Any, ...] = (), kwargs: tuple[tuple[str, Any], ...] = (), star: bool = False):
        self.args = args
        self.kwargs = kwargs
        self.star = star

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


class Effect(Frozen):
    """What a call does to determinism state, as a framework model reports it.

    kinds and their data:
      seed          {"libs": ("torch", "random", "numpy", ...)}
      determinism   {"mode": bool|UNKNOWN, "warn_only": bool|UNKNOWN}
      env           {"var": str, "value": str|UNKNOWN}
      cudnn         {"flag": "benchmark"|"deterministic", "value": bool|UNKNOWN}
    """

    _fields = ("kind", "data")
    _compared = ("kind",)
    __slots__ = _fields

    def __init__(self, kind: str, data: dict[str, Any] | None = None):
        self.kind = kind
        self.data = {} if data is None else data
