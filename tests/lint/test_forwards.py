"""Which calls pass a parameter on as it is (facts.Forward): only where the value the inner call gets is
sure to be the one the function's own call bound, so that the linker may decide the inner guards by it."""

from __future__ import annotations

import pytest

from opscan.lint.facts import extract

# A module-level function with a guard: a call of it may read what it is given (see _sift_forwards).
SEED = "import torch\n\ndef _seed(seed):\n    if seed is not None:\n        torch.manual_seed(seed)\n\n"


def _forwards(body: str, header: str = "def build(seed=None, **kwargs):", fields: tuple[str, ...] = ("slot", "param")) -> list[tuple]:
    facts = extract("m.py", (SEED + header + "\n" + body).encode(), "")
    func = next(f for name, f in facts.functions.items() if name.endswith(header.split("(")[0].split()[-1]))
    return [tuple(getattr(f, field) for field in fields) for f in func.forwards]


@pytest.mark.parametrize(
    "body, expected",
    [
        ("    _seed(seed=seed)", [("seed", "seed")]),
        ("    _seed(seed)", [(0, "seed")]),
        ("    _seed(**kwargs)", [(None, "kwargs")]),
        ("    _seed(1, **kwargs)", [(None, "kwargs")]),
    ],
)
def test_a_parameter_passed_as_it_is_is_forwarded(body, expected):
    assert _forwards(body) == expected


@pytest.mark.parametrize(
    "body",
    [
        "    seed = seed or 0\n    _seed(seed=seed)",  # bound again
        "    for seed in (0, 1):\n        _seed(seed)",  # a loop's own
        "    return [_seed(seed) for seed in (0, 1)]",  # a comprehension's own
        "    return [_seed(seed) for (i,\n                           seed) in ((0, 1),)]",  # a target over two lines
        "    kwargs.pop('seed', None)\n    _seed(**kwargs)",  # **kwargs changed
        "    _seed(*(), **kwargs)",  # another star: what **kwargs holds is not all the call passes
        "    class Inner:\n        _seed(seed)",  # a class body's call: not the function's events
        "    _seed(seed + 1)",  # not the name alone
        "    print(seed)",  # a callee lint cannot name: never entered
    ],
)
def test_a_value_that_may_differ_is_not_forwarded(body):
    assert _forwards(body) == []


def test_a_decorated_function_forwards_nothing():
    """A decorator may call the function with other arguments than its callers pass."""
    assert _forwards("    _seed(seed=seed)", "@wrap\ndef build(seed=None):") == []


def test_a_method_forwards_its_parameters_not_self():
    source = SEED + "class A:\n    def __init__(self, seed=None):\n        _seed(self)\n        _seed(seed=seed)\n"
    (forward,) = extract("m.py", source.encode(), "").functions["A.__init__"].forwards
    assert (forward.slot, forward.param, forward.pos, forward.method) == ("seed", "seed", 0, True)


@pytest.mark.parametrize(
    "header, body, expected",
    [
        # trl's trainers: `**kwargs` beside the function's own `*args`, which holds what the call passes beyond
        # the named positions (none here: `spill` 0; `self` is not counted in a method).
        ("def build(*args, **kwargs):", "    _seed(*args, **kwargs)", [(None, "kwargs", 0)]),
        ("def build(a, *args, **kwargs):", "    _seed(a, *args, **kwargs)", [(0, "a", None), (None, "kwargs", 1)]),
        ("class T:\n    def __init__(self, *args, **kwargs):", "        _seed(*args, **kwargs)", [(None, "kwargs", 0)]),
        # not the function's own `*args`, an expression of it, or `*args` bound again: nothing known passes on
        ("def build(items, **kwargs):", "    _seed(*items, **kwargs)", []),
        ("def build(*args, **kwargs):", "    _seed(*args[1:], **kwargs)", []),
        ("def build(*args, **kwargs):", "    args = args[1:]\n    _seed(*args, **kwargs)", []),
    ],
)
def test_kwargs_beside_the_functions_own_args(header, body, expected):
    assert _forwards(body, header, ("slot", "param", "spill")) == expected
