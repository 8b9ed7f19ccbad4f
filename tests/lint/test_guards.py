"""A function's guard (facts.ParamIf) decides a branch exactly as Python does when the call binds the
parameter a literal: the oracle is the function itself, compiled and run."""

from __future__ import annotations

import ast

from hypothesis import given, settings
from hypothesis import strategies as st

from opscan.lint.facts import extract
from opscan.lint.model import UNKNOWN

LITERALS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, 0.5, -1.5]), st.sampled_from(["", "train", "eval"])
)
TESTS = st.sampled_from(["x", "not x", "x is None", "x is not None", "x is True", "x == {c}", "x != {c}", "x < {c}", "x <= {c}", "x > {c}", "x >= {c}"])


def _guard_of(source: str):
    (func,) = extract("m.py", source.encode(), "").functions.values()
    (guard,) = func.guards
    return guard


@settings(max_examples=300, deadline=None)
@given(test=TESTS, const=LITERALS, value=LITERALS)
def test_a_guard_decides_as_python_runs(test, const, value):
    source = f"def f(x):\n    if {test.format(c=repr(const))}:\n        a()\n    else:\n        b()\n"
    decided = _guard_of(source).runs(value)
    namespace: dict = {}
    exec(compile(ast.parse(source.replace("a()", "return True").replace("b()", "return False")), "m.py", "exec"), namespace)
    try:
        python = namespace["f"](value)
    except TypeError:  # `None < 1`, `"a" > 0`: the `if` raises, so neither branch is known to run
        assert decided is UNKNOWN
        return
    assert decided is UNKNOWN or decided == python, (test, const, value)
    if "{c}" not in test or const.__class__ in (bool, int, float, str, type(None)):
        assert decided is not UNKNOWN, (test, const, value)  # every literal pair Python compares is decided
