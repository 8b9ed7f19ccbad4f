"""What the facts pass reads of star imports: a module's `__all__` in the shapes lint supports, and the
order of its own bindings against its `from m import *` statements (opscan.lint.stars)."""

from __future__ import annotations

import pytest

from opscan.lint.facts import extract
from opscan.lint.stars import UNREADABLE


def facts(source: str):
    return extract("m.py", source.encode())


@pytest.mark.parametrize(
    ("source", "exports"),
    [
        ("x = 1\n", None),
        ('__all__ = ["a", "b"]\n', ("a", "b")),
        ('__all__: list[str] = ("a",)\n', ("a",)),
        ('__all__ = ["a"]\n__all__ += ["b"]\n__all__.extend(("c",))\n__all__.append("d")\n', ("a", "b", "c", "d")),
        ('__all__ = ["a"]\ndef f():\n    __all__.append("x")\n', ("a",)),  # a function's, when called: not read
        ('__all__ = ["a"]\nfor name in __all__:\n    pass\n', UNREADABLE),  # any other use
        ('__all__ = sorted(["a"])\n', UNREADABLE),
        ('__all__ = ["a", NAME]\n', UNREADABLE),
        ('__all__ = ["a"]\n__all__ += other.__all__\n', UNREADABLE),
        ('__all__ = ["a"]\n__all__.remove("a")\n', UNREADABLE),
        ('__all__ = ["a"]\n__all__ -= ["a"]\n', UNREADABLE),
        ('if X:\n    __all__ = ["a"]\n', UNREADABLE),
        ('__all__ += ["a"]\n', UNREADABLE),  # extends nothing lint read
        ("from .names import __all__\n", UNREADABLE),
    ],
)
def test_exports(source, exports):
    got = facts(source).exports
    assert got is exports if exports in (None, UNREADABLE) else got == exports


def test_star_imports_and_binding_order():
    got = facts(
        "import os\n"
        "def early(): pass\n"
        "from a import *\n"
        "x = 1\n"
        "try:\n"
        "    from b import *\n"
        "except ImportError:\n"
        "    y = 2\n"
        "class Late: pass\n"
        "def early(): pass\n"
        "for z in range(3): pass\n"
    )
    assert got.stars == ("a", "b")
    # How many star imports come before each name's last binding: a, b may rebind os; b may rebind x.
    assert got.star_bound == {"os": 0, "x": 1, "y": 2, "Late": 2, "early": 2, "z": 2}


def test_no_star_imports_no_order():
    got = facts("import os\nx = 1\n")
    assert got.stars == () and got.star_bound == {}


def test_star_names_are_looked_up_only_where_no_scope_binds_them():
    got = facts(
        "from m import *\n"
        "seed_all(1)\n"  # bound by the star import: `$.seed_all`
        "print(2)\n"  # a builtin
        "local = 3\n"
        "local.run()\n"  # the module's own
        "def f(arg):\n"
        "    arg.run()\n"  # a parameter
        "    inner()\n"
        "    inner = 4\n"  # local wherever bound in the function
        "    later()\n"
    )
    calls = [ev.what.qualname for ev in got.body + got.functions["f"].events if ev.what.__class__.__name__ == "Call"]
    assert calls == ["$.seed_all", None, None, None, None, "$.later"]


def test_star_inside_a_function_is_not_recorded():
    # A SyntaxError when Python compiles it; the facts pass reads the tree and records nothing for it.
    assert facts("def f():\n    from m import *\n").stars == ()
