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
