"""opscan._toml.loads: exactly tomllib's answer on the plain subset, None (tomllib decides) on anything else."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opscan import _toml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _agrees(text: str) -> None:
    fast = _toml.loads(text)
    try:
        expected = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        assert fast is None, text
        return
    if fast is not None:
        assert fast == expected and repr(fast) == repr(expected), text  # the same tables, in the same order


CASES = [
    "",
    "[tool.opscan]\n",
    '[tool.opscan]\nselect = ["DET001", \'DET002\',]\nignore = []\n\n[tool.opscan.lint]\nroots = ["src"]  # comment\n',
    '[tool.opscan.lint]\nx = 1\n[tool.opscan]\ny = true\n',  # a super-table after its sub-table
    "a = 1\r\nb = -0\r\nc = +12\n",
    'a = ""\nb = \'\'\nc = "it\'s"\nd = \'say "hi"\'\n',
    "a = 1#c\nb = true# c\n[t]# c\n",
    "\ttab = 'x'\t# tab\n",
    # Outside the subset, or invalid: tomllib decides.
    '[tool.opscan]\nselect = [\n  "DET001",\n]\n', 'a = """x"""\n', "a = '''x'''\n", 'a = "\\u0041"\n',
    "a.b = 1\n", '"a" = 1\n', "a = 1.5\n", "a = 1_000\n", "a = 01\n", "a = {x = 1}\n", "[[a]]\n", "[ a ]\n",
    "a = 1\na = 2\n", "[a]\n[a]\n", "[a]\nb = 1\n[a.b]\n", "[a.b]\n[a]\nb = 1\n", "a = 1 2\n", "a = truex\n", "a =\n",
    "= 1\n", "a = [,]\n", 'a = ["x" "y"]\n', "a = [1, 2]\n", "a = 'x'\rb = 1\n", "\ufeffa = 1\n", "# \x01\n", 'a = "\x7f"\n',
    "a = 1979-05-27\n", "a = inf\n", '[a]x\n', "[]\n", "a = 'x\n",
    # Multi-line arrays, inline tables and quoted keys, as pyproject.toml files have them.
    'deps = [\n    "torch>=2.4",  # why\n    # a comment line\n    "numpy",\n]\n', "a = [\n]\n", "a = [\n  1\n  ,2\n]\n",
    'authors = [{ name = "x", email = \'y\' }]\n', "a = {}\n", "a = { b = [1,\n 2] }\n", "a = { b = 1, }\n", "a = { b = 1\n}\n",
    'a = { "q" = 1, b = { c = true } }\n', "a = {b = 1, b = 2}\n", '"rules" = "x"\n\'lit\' = 1\n"" = 2\n', '"a" = 1\na = 2\n',
    "a = {}\n[a]\n", "a = {b = 1}\n[a.c]\n", "a = []\n[a]\n", "a = [\r\n  1,\r\n]\r\n", "a = [\r  1]\n", "a = [1,,2]\n",
]


@pytest.mark.parametrize("text", CASES)
def test_cases(text):
    _agrees(text)


def test_plain_files_are_read_without_tomllib():
    from pathlib import Path

    assert _toml.loads('[tool.opscan]\nselect = [\n  "ALL",\n]\n') == {"tool": {"opscan": {"select": ["ALL"]}}}
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    assert _toml.loads(text) == tomllib.loads(text)  # opscan's own
    assert _toml.loads('a = """x"""\n') is None


_keys = st.sampled_from(["a", "b", "tool", "opscan", "lint", "x-y", "k_1", "1", "a.b", '"q"', "", "é"])
_strings = st.text(alphabet=st.sampled_from(list("ab '\"\\#=[]\t\x01\x7fé")), max_size=6)
_atoms = st.one_of(
    _strings.map(lambda s: f'"{s}"'), _strings.map(lambda s: f"'{s}'"),
    st.sampled_from(["true", "false", "0", "-0", "+7", "12", "01", "1_0", "1.5", "truex", ""]),
)  # fmt: skip
_seps = st.sampled_from([", ", ",", ",\n  ", "\n, ", ", # c\n", ",,", " "])
_values = st.recursive(
    _atoms,
    lambda inner: st.one_of(
        st.builds(lambda xs, sep, tail: "[" + sep.join(xs) + tail + "]", st.lists(inner, max_size=3), _seps, st.sampled_from(["", ",", "\n", ",\n", " # c\n"])),
        st.builds(lambda kv, sep: "{" + sep.join(f"{k} = {v}" for k, v in kv) + "}", st.lists(st.tuples(_keys, inner), max_size=3), st.sampled_from([", ", ",", ",\n"])),
    ),
    max_leaves=6,
)
_spaces = st.sampled_from(["", " ", "\t", "  "])
_lines = st.one_of(
    st.builds(lambda k, s1, s2, v, c: f"{k}{s1}={s2}{v}{c}", _keys, _spaces, _spaces, _values, st.sampled_from(["", " # c", "#c", " #\x01"])),
    st.lists(_keys, min_size=1, max_size=3).map(lambda ks: "[" + ".".join(ks) + "]"),
    st.sampled_from(["", "# comment", "   ", "[[a]]", "[ a ]", "a = [", '"x",', "]"]),
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_lines, max_size=8), st.sampled_from(["\n", "\r\n"]))
def test_matches_tomllib(lines, newline):
    _agrees(newline.join(lines) + newline)


def test_parse_falls_back_to_tomllib_and_raises_its_message():
    assert _toml.parse('a = """x"""\n') == {"a": "x"}  # outside the subset: tomllib reads it
    with pytest.raises(tomllib.TOMLDecodeError) as expected:
        tomllib.loads("a = \n")
    with pytest.raises(_toml.TOMLError) as caught:
        _toml.parse("a = \n")
    assert str(caught.value) == str(expected.value)
