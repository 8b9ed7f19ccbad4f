"""Formatters shared by every command: text, json, sarif, github, markdown, html.

`render(report, fmt)` returns the whole output as one string; `write(text,
path)` puts it on stdout or atomically into a file. Every formatter reads only
the Report's shape (findings, tables, env, errors, notices), never which
command made it, so a new command needs no change here.
"""

from __future__ import annotations


from opscan._plain import Plain
from opscan._version import __version__
from opscan.findings import Finding, Report, Table

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up ~3 ms; annotations are strings here
    from typing import Callable

FORMATS = ("text", "json", "sarif", "github", "markdown", "html")
# The formats `--statistics` has, as ruff's: a count per rule is no SARIF result or GitHub annotation.
STATISTICS_FORMATS = ("text", "json")

INFO_URI = "https://github.com/opscan/opscan"


def render(report: Report, fmt: str, *, statistics: bool = False) -> str:
    """Render a report in one of FORMATS."""
    try:
        renderer = _RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown output format {fmt!r}; choose from {', '.join(FORMATS)}") from None
    if statistics:
        if fmt not in STATISTICS_FORMATS:
            raise ValueError(f"--statistics has no {fmt} format; choose from {', '.join(STATISTICS_FORMATS)}")
        return _statistics(report) if fmt == "text" else _statistics_json(report)
    return renderer(report)


def write(text: str, output_file: str | None) -> None:
    """Write a rendered report to stdout, or atomically to a file (never half a file).

    Paths that are not valid UTF-8 reach us as lone surrogates, and a terminal
    may not show every character: neither is worth a traceback.
    """
    import sys

    if output_file is None or output_file == "-":
        try:
            sys.stdout.write(text)
        except UnicodeEncodeError:  # nothing was written: the whole string is encoded first
            buffer = getattr(sys.stdout, "buffer", None)
            if buffer is None:
                raise
            sys.stdout.flush()
            buffer.write(text.encode(sys.stdout.encoding or "utf-8", "backslashreplace"))
        sys.stdout.flush()
        return
    from opscan.fsutil import atomic_write_bytes

    atomic_write_bytes(output_file, file_bytes(text))


def file_bytes(text: str) -> bytes:
    """A rendered report as a file holds it: UTF-8, with a file name's own bytes as the OS gave them."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace")


def check_output_path(path: str | None) -> str | None:
    """Why -o PATH cannot be written, known before any work is done, or None.

    Every command asks this first, so that one problem has one wording whichever command met it
    (lint, rule and compare said the OS's "cannot write : Is a directory" for -o '', the others
    "-o needs a file name"), and a long run is not told it only at the end (a diff, after
    recording both runs). No file name, a folder, a folder that is not there or cannot take a new
    file (the report is written beside it, then renamed), a file this user may not write.
    """
    import os

    if path in (None, "-"):
        return None
    if not path:  # -o '' (an unset shell variable): no file name at all
        return "-o needs a file name"
    if os.path.isdir(path):
        return f"{path} is a directory; give -o a file name"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        there = folder  # the nearest part of the path that exists: a file where a folder should be is not "no folder"
        while not os.path.lexists(there) and os.path.dirname(there) != there:
            there = os.path.dirname(there)
        if os.path.lexists(there) and not os.path.isdir(there):
            return f"cannot write {path}: {there} is not a folder"
        return f"cannot write {path}: no folder {folder}"
    if os.path.isfile(path) and not os.access(path, os.W_OK):  # as the shell's `>` and ruff refuse it
        return f"cannot write {path}: Permission denied"
    if not os.access(folder, os.W_OK):  # the report is written beside it, atomically: the folder must take a new file
        return f"cannot write {path}: the folder {folder} is not writable"
    return None


def overwrites_input(
    output_file: str | None, inputs, shown: str | None = None, what: str = "an input of this run", after: str = "",
    then: str | None = "give -o another file",
) -> str | None:
    """Why -o names a file the run reads (its script, a record, a linted file), or None.

    Refused before any work: the report would replace the input it was made from. The same file
    is the same device and inode (a link, another spelling); an -o that does not exist yet is no
    input. Only a regular file counts: -o /dev/null beside an input /dev/null replaces nothing.
    `shown`: -o as the user spelled it, where `output_file` has been made absolute. `what` the
    inputs are, and `after` the run (", so it was not written"), for the files known only as it
    goes: the modules a lint read or a run loaded. `then`: what to do, closing the message (None:
    the caller closes it, saying where the report went instead).
    """
    import os

    from opscan.fsutil import same_file

    if not output_file or output_file == "-":
        return None
    path = same_file(output_file, inputs)
    if path is None:
        return None
    same = os.path.normpath(os.path.abspath(path)) == os.path.normpath(os.path.abspath(output_file))
    message = f"-o {shown or output_file} is {what if same else f'{path}, {what}'}: the report would overwrite it{after}"
    return message if then is None else f"{message}; {then}"


def withhold(report: Report, output_file: str | None) -> str | None:
    """Whether `report` is kept out of -o FILE: the line to say on stderr instead, or None to write it.

    The one place this is decided, for every command. Bad input loses nothing: a run whose whole
    result is an error (its input missing, its target raising before any result, its records
    unreadable; exit 2 and nothing else) leaves FILE as it was, and the error goes to stderr only:
    "error: ..." written over the last good report would lose that report and say nothing that
    stderr does not. A run that stopped in part but has results for the rest (lint of a missing
    path beside others, as ruff's E902; a scan of two targets, one of which raised) writes them,
    errors included, and still exits 2. What counts as a result: Report.has_result. stdout, which
    keeps nothing, always gets the report.
    """
    if output_file in (None, "-") or report.has_result():
        return None
    return f"{output_file} not written: the run stopped before any result"


def cannot_write(exc: OSError, output_file: str | None) -> int:
    """Say on stderr why `write` failed, and give the error exit code (2).

    A stdout whose reader has gone (`opscan ... | head`) is not told anything:
    every command caught that broken pipe as a failed write and said
    "cannot write None: Broken pipe", where cli.main means it to end quietly.
    """
    import os
    import sys

    if output_file in (None, "-"):
        if isinstance(exc, BrokenPipeError):
            try:  # what is still buffered would fail again, loudly, at the interpreter's exit
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            except (OSError, ValueError):
                pass
            return 2
        output_file = "stdout"
    print(f"opscan: error: cannot write {output_file}: {exc.strerror or exc}", file=sys.stderr)
    return 2


# ---------------------------------------------------------------- shared pieces


def _location(f: Finding) -> str:
    if f.path is None:
        return ""
    return f"{f.path}:{f.line}:{f.col}: "


def _cell(value) -> str:
    """A table value as text: floats to 4 significant digits, None as blank."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_cell(v) for v in value)
    return str(value)


def _env_value(value) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return "" if value is None else str(value)


def _summary(report: Report, findings: list[Finding]) -> list[str]:
    """The closing lines, ruff's wording; a run that something stopped says so instead of passing."""
    n = len(findings)
    lines = []
    if report.errors:
        stopped = len(report.errors)
        line = f"{stopped} problem{'s' if stopped != 1 else ''} stopped part of the run"
        if n:
            line += f"; found {n} error{'s' if n != 1 else ''} in the rest"
        elif not report.summary:  # a summary (--diff's "Would fix 2 errors.") says what the rest gave
            line += "; nothing found in the rest"
        lines.append(line + ".")
    if report.summary:
        lines.append(report.summary)
    if not report.errors:
        if n:
            lines.append(f"Found {n} error{'s' if n != 1 else ''}.")
        elif not report.summary and report.exit_code() == 0:  # never beside an exit of 1 (a diff's changes)
            lines.append("All checks passed!")
    safe = sum(1 for f in findings if f.fix and f.fix.applicability == "safe")
    unsafe = sum(1 for f in findings if f.fix and f.fix.applicability != "safe")
    if safe:
        lines.append(f"[*] {safe} fixable with the `--fix` option.")
    if unsafe:
        lines.append(f"{unsafe} hidden fix{'es' if unsafe != 1 else ''} can be enabled with the `--unsafe-fixes` option.")
    return lines


# ---------------------------------------------------------------- text


def _text(report: Report) -> str:
    out = []
    if report.env:
        out.append(" ".join(f"{k}={_env_value(v)}" for k, v in report.env.items() if v is not None))
    findings = report.sorted_findings()
    for f in findings:
        mark = "[*] " if f.fix and f.fix.applicability == "safe" else ""
        out.append(f"{_location(f)}{f.code} {mark}{f.message}")
        if f.help:
            out.append(f"  help: {f.help}")
        if f.help_code:
            out.extend("    " + line if line else "" for line in f.help_code.rstrip("\n").split("\n"))
    for table in report.tables:
        out.extend(_text_table(table))
    out.extend(report.notices)
    for err in report.errors:
        out.append(f"error: {err.message}")
        if err.detail:
            out.extend("  " + line for line in err.detail.rstrip("\n").split("\n"))
    out.extend(_summary(report, findings))
    return "\n".join(out) + "\n"


def _text_table(table: Table) -> list[str]:
    from tabulate import tabulate

    lines = ["", f"{table.title}:"]
    if table.rows:
        lines.append(
            tabulate(
                [[_cell(v) for v in row] for row in table.rows],
                headers=[c.title for c in table.columns],
                tablefmt="simple",
                colalign=[c.align for c in table.columns],
                disable_numparse=True,
            )
        )
    else:
        lines.append("(none)")
    if table.note:
        lines.append(table.note)
    lines.append("")
    return lines


class Statistic(Plain):
    """One rule's line of `--statistics`, in ruff's keys: how often it fired, and whether it has a safe fix."""

    _fields = ("code", "name", "count", "fixable")
    __slots__ = _fields

    def __init__(self, code: str, name: str, count: int, fixable: bool):
        self.code = code
        self.name = name
        self.count = count
        self.fixable = fixable


def _statistic_rows(report: Report) -> list[Statistic]:
    """A count per rule, most frequent first."""
    counts: dict[str, int] = {}  # plain dicts: collections is not otherwise imported when lint starts
    fixable: set[str] = set()
    for f in report.findings:
        counts[f.code] = counts.get(f.code, 0) + 1
        if f.fix and f.fix.applicability == "safe":
            fixable.add(f.code)
    rows = []
    for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        info = report.rule(code)
        rows.append(Statistic(code, info.name if info else "", n, code in fixable))
    return rows


def _statistics(report: Report) -> str:
    lines = [f"{row.count:5d}\t{row.code}\t{'[*]' if row.fixable else '   '} {row.name}" for row in _statistic_rows(report)]
    if not lines:
        lines.append("All checks passed!")
    return "\n".join(lines) + "\n"


def _statistics_json(report: Report) -> str:
    import json

    # `[]` for a clean run, where ruff prints nothing: a reader of the json always gets json.
    rows = [{name: getattr(row, name) for name in Statistic._fields} for row in _statistic_rows(report)]
    return json.dumps(rows, indent=2) + "\n"


# ---------------------------------------------------------------- json


def _json(report: Report) -> str:
    import json

    if report.flat_json:  # ruff's contract: a bare list of findings
        return json.dumps([f.to_dict() for f in report.sorted_findings()], indent=2) + "\n"
    return json.dumps(report.to_dict(), indent=2, default=str) + "\n"


# ---------------------------------------------------------------- github


def _gh_escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def _github(report: Report) -> str:
    lines = []
    for f in report.sorted_findings():
        level = {"error": "error", "warning": "warning"}.get(f.severity, "notice")
        props = []
        if f.path:
            props += [f"file={_gh_escape(f.path, True)}", f"line={f.line}", f"col={f.col}"]
            props += [f"endLine={f.end_line or f.line}", f"endColumn={f.end_col or f.col}"]
        props.append(f"title={_gh_escape('opscan (' + f.code + ')', True)}")
        text = f.code + " " + f.message + (f"\n{f.help}" if f.help else "")
        lines.append(f"::{level} {','.join(props)}::{_gh_escape(text)}")
    for err in report.errors:
        lines.append(f"::error title=opscan::{_gh_escape(err.message)}")
    return "\n".join(lines) + ("\n" if lines else "")


# ---------------------------------------------------------------- sarif


def _fingerprints(findings: list[Finding]) -> list[str]:
    """`primaryLocationLineHash` values: stable across line shifts, distinct within a run.

    The hash covers code, path and the located line's own text (when known), so
    inserting lines above a finding keeps its fingerprint. Identical lines get an
    occurrence number, as GitHub's own `hash:N` fingerprints do; without it code
    scanning would merge their alerts into one.
    """
    import hashlib

    seen: dict[str, int] = {}
    out = []
    for f in findings:
        anchor = f.line_text or f.message
        digest = hashlib.sha256(f"{f.code}\0{f.path}\0{anchor}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
        seen[digest] = seen.get(digest, 0) + 1
        out.append(f"{digest}:{seen[digest]}")
    return out


def _sarif_uris(findings: list[Finding]) -> dict[str, str]:
    """Each finding's path as an `artifactLocation.uri`: a relative reference, percent-encoded per RFC 3986.

    SARIF requires a valid URI reference, and a path is not one: a space, `%` or `#` in it
    must be encoded, and a `:` in its first segment would read as a scheme. `/` stays the
    separator; a POSIX name that is not valid UTF-8 (surrogate-escaped) is encoded as its own
    bytes. One quote per distinct path: lint's findings share few paths.
    """
    from urllib.parse import quote  # milliseconds of imports (ipaddress...), paid only when sarif is rendered

    uris: dict[str, str] = {}
    for f in findings:
        if f.path and f.path not in uris:
            path = f.path.replace("\\", "/")
            try:
                uris[f.path] = quote(path, safe="/", errors="surrogateescape")
            except UnicodeEncodeError:  # a lone surrogate that no byte escaped (a Windows name): as the fingerprints encode it
                uris[f.path] = quote(path, safe="/", errors="surrogatepass")
    return uris


def _sarif(report: Report) -> str:
    import json

    findings = report.sorted_findings()
    uris = _sarif_uris(findings)
    codes = sorted({f.code for f in findings})
    rules = []
    index = {}
    for code in codes:
        info = report.rule(code)
        index[code] = len(rules)
        rule = {"id": code}
        if info:
            rule.update(
                {
                    "name": info.pascal_name,
                    "shortDescription": {"text": info.summary},
                    "fullDescription": {"text": info.why or info.summary},
                    "help": {"text": info.help_text, "markdown": info.help_markdown},
                    "helpUri": f"{INFO_URI}/blob/main/docs/rules.md#{code.lower()}",
                    "defaultConfiguration": {"level": _sarif_level(info.severity)},
                    "properties": {"tags": ["reproducibility"]},
                }
            )
        rules.append(rule)
    results = []
    for f, fingerprint in zip(findings, _fingerprints(findings)):
        text = f.message + (f" {f.help}" if f.help else "")
        result = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": _sarif_level(f.severity),
            "message": {"text": text},
            "partialFingerprints": {"primaryLocationLineHash": fingerprint},
        }
        if f.path:
            region = {"startLine": f.line, "startColumn": f.col}
            if f.end_line:
                region["endLine"] = f.end_line
            if f.end_col:
                region["endColumn"] = f.end_col
            result["locations"] = [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": uris[f.path]},
                        "region": region,
                    }
                }
            ]
        props = {k: v for k, v in f.properties.items() if isinstance(v, (str, int, float, bool))}
        if f.help_code:
            props["help_code"] = f.help_code
        if f.line_text is not None:
            props["line_text"] = f.line_text
        if props:
            result["properties"] = props
        results.append(result)
    run: dict = {
        "tool": {
            "driver": {
                "name": "opscan",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFO_URI,
                "rules": rules,
            }
        },
        "results": results,
    }
    if report.errors:
        # Errors are not results: SARIF's place for them is the invocation's notifications.
        run["invocations"] = [
            {
                "executionSuccessful": False,
                "toolExecutionNotifications": [{"level": "error", "message": {"text": e.message}} for e in report.errors],
            }
        ]
    doc = {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0", "runs": [run]}
    return json.dumps(doc, indent=2) + "\n"


def _sarif_level(severity: str) -> str:
    return {"error": "error", "warning": "warning"}.get(severity, "note")


# ---------------------------------------------------------------- markdown


# What markdown would read as HTML, or as an inline mark: emphasis (`*`, `_`), a link (`[`, `]`),
# GFM's strikethrough (`~`), and the backslash that escapes them. CommonMark lets any ASCII
# punctuation be backslash-escaped, so `\*` shows `*` (spec 2.4).
_MD_SPECIAL = frozenset("&<>\\*_[]~")
_MD_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", **{c: "\\" + c for c in "\\*[]~"}})


def _md_text(text: str) -> str:
    """`text` for markdown, shown as typed: outside code spans, `&`, `<` and `>` as entities, as the
    html format writes them, and markdown's own inline marks backslash-escaped.

    Markdown passes HTML tags and entities through, so a file named `x<b>&y.py` opened a bold
    tag; and `aten.__and__.Tensor` or `pkg/__init__.py` lost their underscores to bold. Inside
    a `code span` (messages quote ops and calls so) every character is shown as typed, an
    entity too, so spans are left as they are.
    """
    if not _MD_SPECIAL.intersection(text):
        return text  # most text: no regex
    import re

    out = []
    start = 0
    # A code span: a run of backticks, up to the next run of as many (CommonMark 6.1).
    for m in re.finditer(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", text, re.DOTALL):
        out.append(_md_escape(text[start : m.start()]))
        out.append(m.group())
        start = m.end()
    out.append(_md_escape(text[start:]))
    return "".join(out)


def _md_escape(text: str) -> str:
    """html.escape's entities (less quotes) and the inline marks escaped; `_` only where it could open
    or close emphasis, so `rules_torch` stays as typed and `__init__.py` becomes `\\_\\_init\\_\\_.py`."""
    text = text.translate(_MD_ESCAPES)
    if "_" not in text:
        return text
    import re

    def underscores(m: re.Match) -> str:
        # A run of `_` between two letters or digits is intraword: it never opens or closes emphasis
        # (CommonMark 6.2, unlike `*`).
        before, after = text[m.start() - 1 : m.start()], text[m.end() : m.end() + 1]
        if before.isalnum() and after.isalnum():
            return m.group()
        return m.group().replace("_", "\\_")

    return re.sub(r"_+", underscores, text)


def _md_cell(value) -> str:
    """A value in a table cell: escaped text, a `|` that would end the cell escaped too, lines joined with <br>."""
    return _md_text(_cell(value)).replace("|", "\\|").replace("\n", "<br>")


def _md_table(headers: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(_md_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return out


def _help_heading(report: Report, f: Finding) -> tuple[str, str]:
    """What heads a finding's help code: its place and code, or, with no place, its code and rule name.

    A finding without a path (compare's, at an op no line ran) was headed "DET201 (DET201)".
    The name is "" where the report documents no rule for the code.
    """
    if f.path:
        return f"{f.path}:{f.line}", f.code
    info = report.rule(f.code)
    return f.code, info.name if info else ""


def _finding_rows(findings: list[Finding]) -> tuple[list[str], list[list]]:
    """Findings as a table: the same columns for every command, help only where some finding has it."""
    headers = ["code", "where", "message"]
    with_help = any(f.help or f.help_code for f in findings)
    if with_help:
        headers.append("help")
    rows = []
    for f in findings:
        row = [f.code, f"{f.path}:{f.line}" if f.path else "", f.message]
        if with_help:
            row.append(f.help)
        rows.append(row)
    return headers, rows


def _markdown(report: Report) -> str:
    findings = report.sorted_findings()
    out = [f"# opscan {report.command}", ""]
    if report.env:
        out += _md_table(["", ""], [[k, _env_value(v)] for k, v in report.env.items()])
        out.append("")
    if findings:
        out.append("## Findings")
        out.append("")
        headers, rows = _finding_rows(findings)
        out += _md_table(headers, rows)
        out.append("")
        for f in findings:
            if f.help_code:
                where, what = _help_heading(report, f)
                head = f"**{_md_cell(where)}** ({_md_cell(what)}):" if what else f"**{_md_cell(where)}**:"
                out += [head, "", "```python", f.help_code.rstrip("\n"), "```", ""]
    for table in report.tables:
        out += [f"## {_md_text(table.title)}", ""]
        out += _md_table([c.title for c in table.columns], [list(row) for row in table.rows]) if table.rows else ["(none)"]
        if table.note:
            out += ["", _md_text(table.note)]
        out.append("")
    for notice in report.notices:
        out.append(f"> {_md_cell(notice)}")
        out.append("")
    for err in report.errors:
        out.append(f"**error:** {_md_cell(err.message)}")
        out.append("")
    out.append(_md_text(" ".join(_summary(report, findings))))
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- html

_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
    "th{background:#f4f4f4;cursor:pointer}td.r,th.r{text-align:right}"
    "pre{background:#f6f6f6;padding:6px;margin:4px 0;white-space:pre-wrap}"
    "input.filter{margin:.3em 0;padding:3px;width:20em}.note{color:#555}.error{color:#a00}"
    "svg text{font-size:11px;fill:#333}"
)

# Sort on a header click, filter on typing: a few lines, no remote assets.
_SCRIPT = """
document.querySelectorAll('table.data').forEach(function(t){
  var body=t.tBodies[0];
  t.querySelectorAll('th').forEach(function(th,i){th.onclick=function(){
    var rows=Array.from(body.rows),asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
    rows.sort(function(a,b){var x=a.cells[i].innerText,y=b.cells[i].innerText,p=parseFloat(x),q=parseFloat(y);
      var c=(!isNaN(p)&&!isNaN(q))?p-q:x.localeCompare(y);return asc?c:-c;});
    rows.forEach(function(r){body.appendChild(r);});};});
  var f=t.previousElementSibling;
  if(f&&f.classList.contains('filter')){f.oninput=function(){var q=f.value.toLowerCase();
    Array.from(body.rows).forEach(function(r){r.style.display=r.innerText.toLowerCase().indexOf(q)<0?'none':'';});};}
});
"""


def _html_table(headers: list[str], rows: list[list], aligns: list[str] | None = None) -> list[str]:
    import html

    esc = html.escape
    aligns = aligns or ["left"] * len(headers)
    cls = ['' if a == "left" else ' class="r"' for a in aligns]
    parts = ['<input class="filter" placeholder="filter rows">', '<table class="data"><thead><tr>']
    parts.append("".join(f"<th{c}>{esc(h)}</th>" for h, c in zip(headers, cls)) + "</tr></thead><tbody>")
    for row in rows:
        parts.append("<tr>" + "".join(f"<td{c}>{esc(_cell(v))}</td>" for v, c in zip(row, cls)) + "</tr>")
    parts.append("</tbody></table>")
    return parts


def _svg_chart(table: Table) -> str:
    """An inline SVG bar or line chart of one numeric column against another."""
    import html
    import math

    chart = table.chart
    xs = [_cell(v) for v in table.column(chart.x)]
    ys = []
    for v in table.column(chart.y):
        try:
            ys.append(float(v))
        except (TypeError, ValueError):
            ys.append(float("nan"))
    finite = [y for y in ys if math.isfinite(y)]
    if not finite:
        return ""

    def scale(y: float) -> float:
        if chart.log:
            return math.log10(max(y, 1e-12))
        return y

    lo = min(0.0, min(scale(y) for y in finite)) if not chart.log else min(scale(y) for y in finite)
    hi = max(scale(y) for y in finite)
    hi = hi if hi > lo else lo + 1
    width, height, left, bottom = 640, 240, 60, 40
    plot_w, plot_h = width - left - 10, height - bottom - 10
    n = len(ys)

    def py(y: float) -> float:
        return 10 + plot_h * (1 - (scale(y) - lo) / (hi - lo))

    esc = html.escape
    title = esc(f"{table.title}: {chart.y} by {chart.x}")
    parts = [f'<svg role="img" aria-label="{title}" width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">']
    parts.append(f'<line x1="{left}" y1="{10 + plot_h}" x2="{width - 10}" y2="{10 + plot_h}" stroke="#888"/>')
    parts.append(f'<line x1="{left}" y1="10" x2="{left}" y2="{10 + plot_h}" stroke="#888"/>')
    for value in (lo, hi):
        shown = 10**value if chart.log else value
        parts.append(f'<text x="{left - 4}" y="{py(shown if not chart.log else shown) + 4:.1f}" text-anchor="end">{shown:.3g}</text>')
    step = plot_w / max(n, 1)
    if chart.kind == "bar":
        for i, (x, y) in enumerate(zip(xs, ys)):
            if not math.isfinite(y):
                continue
            top, base = py(y), py(10**lo if chart.log else max(lo, 0.0))
            parts.append(
                f'<rect x="{left + i * step + step * 0.15:.1f}" y="{min(top, base):.1f}" width="{step * 0.7:.1f}" '
                f'height="{abs(base - top):.1f}" fill="#4a7bd0"><title>{esc(x)}: {y:.4g}</title></rect>'
            )
            parts.append(f'<text x="{left + i * step + step / 2:.1f}" y="{height - bottom + 14}" text-anchor="middle">{esc(x[:14])}</text>')
    else:
        points = [(left + i * step + step / 2, py(y)) for i, y in enumerate(ys) if math.isfinite(y)]
        parts.append('<polyline fill="none" stroke="#4a7bd0" stroke-width="2" points="' + " ".join(f"{a:.1f},{b:.1f}" for a, b in points) + '"/>')
        for (a, b), x, y in zip(points, [x for x, y in zip(xs, ys) if math.isfinite(y)], finite):
            parts.append(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.5" fill="#4a7bd0"><title>{esc(x)}: {y:.4g}</title></circle>')
        if n:
            parts.append(f'<text x="{left}" y="{height - bottom + 14}">{esc(xs[0])}</text>')
            parts.append(f'<text x="{width - 10}" y="{height - bottom + 14}" text-anchor="end">{esc(xs[-1])}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle">{esc(chart.x)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _html(report: Report) -> str:
    import html

    esc = html.escape
    findings = report.sorted_findings()
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>opscan {esc(report.command)}</title>",
        f"<style>{_STYLE}</style>",
        "</head><body>",
        f"<h1>opscan {esc(report.command)}</h1>",
    ]
    if report.env:
        parts.append("<table>" + "".join(f"<tr><th>{esc(str(k))}</th><td>{esc(_env_value(v))}</td></tr>" for k, v in report.env.items()) + "</table>")
    for err in report.errors:
        parts.append(f'<p class="error"><strong>error:</strong> {esc(err.message)}</p>')
    for notice in report.notices:
        parts.append(f'<p class="note">{esc(notice)}</p>')
    if findings:
        parts.append("<h2>Findings</h2>")
        headers, rows = _finding_rows(findings)
        parts += _html_table(headers, rows)
        for f in findings:
            if f.help_code:
                where, what = _help_heading(report, f)
                head = f"<strong>{esc(where)}</strong> ({esc(what)}):" if what else f"<strong>{esc(where)}</strong>:"
                parts.append(f"<p>{head}</p><pre>{esc(f.help_code)}</pre>")
    for table in report.tables:
        parts.append(f"<h2>{esc(table.title)}</h2>")
        if table.chart is not None and table.rows:
            parts.append(_svg_chart(table))
        if table.rows:
            parts += _html_table([c.title for c in table.columns], [list(r) for r in table.rows], [c.align for c in table.columns])
        else:
            parts.append("<p>(none)</p>")
        if table.note:
            parts.append(f'<p class="note">{esc(table.note)}</p>')
    parts.append(f"<p>{esc(' '.join(_summary(report, findings)))}</p>")
    parts.append(f"<script>{_SCRIPT}</script>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


_RENDERERS: dict[str, Callable[[Report], str]] = {
    "text": _text,
    "json": _json,
    "sarif": _sarif,
    "github": _github,
    "markdown": _markdown,
    "html": _html,
}
