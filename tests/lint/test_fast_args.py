"""`opscan lint`'s flags read without argparse (opscan.commands.lint.parse_fast) are argparse's, or left to it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opscan.cli import build_parser
from opscan.commands import lint


def _argparse(argv: list[str]) -> dict | None:
    try:
        return vars(build_parser("lint").parse_args(["lint", *argv]))
    except SystemExit:
        return None


def _agrees(argv: list[str]) -> None:
    fast = lint.parse_fast(argv)
    if fast is None:
        return  # argparse reads it (or refuses it) as before
    assert vars(fast) == _argparse(argv), argv


@pytest.mark.parametrize(
    "argv",
    [
        [], ["."], ["a.py", "b.py"], ["--no-cache", "--exit-zero", "x.py"], ["--select", "DET001,DET002", "--ignore=DET009", "."],
        ["-o", "out.json", "--output-format", "json", "src"], ["-", "--stdin-filename", "train.py"], ["-o", "-", "a"],
        ["--select="], ["--torch-version", ">=2.4,<2.7"], ["-q", "-v", "--show-settings"], ["--select", "A", "--select", "B"],
    ],
)
def test_plain_spellings_are_read_as_argparse_reads_them(argv):
    fast = lint.parse_fast(argv)
    assert fast is not None and vars(fast) == _argparse(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["--no-c"], ["-qv"], ["-oout.txt"], ["--fix=1"], ["--output-format", "xml"], ["a", "-q", "b"], ["--", "a"],
        ["--select"], ["--select", "-q"], ["-h"], ["--help"], ["-1"], ["--unknown"],
    ],
)
def test_other_spellings_are_left_to_argparse(argv):
    assert lint.parse_fast(argv) is None


_tokens = st.sampled_from([
    "a.py", "b", "-", "", "--select", "DET001", "--select=DET00", "--ignore", "--extend-select=X", "--output-format",
    "json", "xml", "--output-format=sarif", "-o", "--output-file", "--output-file=o", "-q", "-v", "--quiet", "--fix",
    "--diff", "--no-cache", "--stdin-filename", "--torch-version", "2.9", "--config", "--", "-qv", "--no-c", "-x", "=",
])  # fmt: skip


@settings(max_examples=800, deadline=None)
@given(st.lists(_tokens, max_size=7))
def test_matches_argparse(argv):
    _agrees(argv)
