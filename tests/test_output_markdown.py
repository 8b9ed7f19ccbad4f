"""The markdown and html formatters on hand-made Reports: headings of help code, and what they escape.

Every command's report goes through the same formatter, so a Report of any command's shape
stands for all of them here; the commands' own tests cover their whole output.
"""

from __future__ import annotations

from opscan.compare import codes
from opscan.findings import Finding, Report
from opscan.output import render

HELP = "torch.manual_seed(0)\n"


def _help_headings(out: str, fmt: str) -> list[str]:
    if fmt == "markdown":
        return [line for line in out.splitlines() if line.startswith("**") and line.endswith(":")]
    return [line.split("<pre>")[0] for line in out.splitlines() if line.startswith("<p><strong>")]


def test_a_finding_without_a_path_is_headed_by_its_code_once():
    """compare's finding at an op no line of the user's ran: the heading read `**DET201** (DET201):`."""
    report = Report(
        "compare",
        [
            Finding("DET201", "drew from another state", help_code=HELP),
            Finding("DET999", "a code no rule documents", help_code=HELP),
            Finding("DET200", "gave different outputs", "models/tiny.py", 11, help_code=HELP),
        ],
        rules=codes.RULES,
    )
    assert _help_headings(render(report, "markdown"), "markdown") == [
        "**DET201** (random-stream-shift):",
        "**DET999**:",
        "**models/tiny.py:11** (DET200):",  # a place: as lint's and scan's, unchanged
    ]
    assert _help_headings(render(report, "html"), "html") == [
        "<p><strong>DET201</strong> (random-stream-shift):</p>",
        "<p><strong>DET999</strong>:</p>",
        "<p><strong>models/tiny.py:11</strong> (DET200):</p>",
    ]


def test_markdown_escapes_what_it_would_render_as_html():
    """A file named `x<b>&y.py` went into scan's markdown as it is: `<b>` opened a bold tag, `&y` an entity's start.

    Escaped as the html format escapes it, outside code spans, where markdown shows every
    character as typed (an entity too); in a table, a `|` that would end the cell as well.
    """
    from opscan.findings import Column, Problem, Table

    table = Table("ops", "Ops <in> x&y", (Column("op"), Column("file")), note="2 < 3 & `a<b`")
    table.add("`a|b<c>`", "x<b>&y.py")
    report = Report(
        "scan",
        [Finding("DET100", "runs in backward of the op at x<b>&y.py:8 and `x < y & z`", "x<b>&y.py", 8, help_code="a<b & c\n")],
        tables=[table],
        notices=["skipped <stdin> & x|y"],
        errors=[Problem("cannot load x<b>&y.py")],
    )
    lines = render(report, "markdown").splitlines()
    esc = "x&lt;b&gt;&amp;y.py"
    assert f"| DET100 | {esc}:8 | runs in backward of the op at {esc}:8 and `x < y & z` |  |" in lines
    assert f"**{esc}:8** (DET100):" in lines
    assert "a<b & c" in lines  # fenced code: shown as typed
    assert "## Ops &lt;in&gt; x&amp;y" in lines and "2 &lt; 3 &amp; `a<b`" in lines
    assert f"| `a\\|b<c>` | {esc} |" in lines  # GFM reads `\|` in a cell's code span as `|`
    assert "> skipped &lt;stdin&gt; &amp; x\\|y" in lines
    assert f"**error:** cannot load {esc}" in lines
    # A backtick without its pair opens no span; a span is closed only by a run of as many.
    md = render(Report("scan", [Finding("DET100", "a ` <b> `` <i> `` & ```<u>```", "p.py")]), "markdown")
    assert "| DET100 | p.py:1 | a ` &lt;b&gt; `` <i> `` &amp; ```<u>``` |" in md.splitlines()


def test_markdown_shows_underscores_stars_and_brackets_as_typed():
    """`aten.__and__.Tensor` and `pkg/__init__.py` lost their underscores to bold in scan's markdown.

    Outside code spans, markdown's inline marks are backslash-escaped (CommonMark 2.4): `\\_`
    shows `_`. Inside a span they are shown as typed already, and left alone; so is an
    intraword `_` (`rules_torch`), which never opens emphasis.
    """
    report = Report(
        "scan",
        [Finding("DET100", "aten.__and__.Tensor [x] at `a.__and__(b)`; *args ~y~ C:\\d rules_torch _x", "pkg/__init__.py", 3)],
    )
    lines = render(report, "markdown").splitlines()
    assert (
        "| DET100 | pkg/\\_\\_init\\_\\_.py:3 | aten.\\_\\_and\\_\\_.Tensor \\[x\\] at `a.__and__(b)`; \\*args \\~y\\~ C:\\\\d rules_torch \\_x |"
        in lines
    )
