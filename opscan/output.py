"""Formatters shared by every command: text, json, sarif, github, markdown, html.

`render(report, fmt)` returns the whole output as one string, so a command
can write it to stdout or atomically to a file.
"""

from __future__ import annotations

from collections import Counter

from opscan import __version__
from opscan.findings import Finding, Report

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up ~3 ms; annotations are strings here
    from typing import Callable

FORMATS = ("text", "json", "sarif", "github", "markdown", "html")

INFO_URI = "https://github.com/opscan/opscan"


def render(report: Report, fmt: str, *, statistics: bool = False) -> str:
    """Render a report in one of FORMATS."""
    try:
        renderer = _RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown output format {fmt!r}; choose from {', '.join(FORMATS)}") from None
    if statistics and fmt == "text":
        return _statistics(report)
    return renderer(report)


# ---------------------------------------------------------------- text


def _location(f: Finding) -> str:
    if f.path is None:
        return ""
    return f"{f.path}:{f.line}:{f.col}: "


def _text(report: Report) -> str:
    if report.command == "lint":
        return _text_lint(report)
    return _text_table(report)


def _text_lint(report: Report) -> str:
    lines = []
    findings = report.sorted_findings()
    for f in findings:
        mark = "[*] " if f.fix and f.fix.applicability == "safe" else ""
        lines.append(f"{_location(f)}{f.code} {mark}{f.message}")
    lines.extend(report.notices)
    n = len(findings)
    if n == 0:
        lines.append("All checks passed!")
    else:
        lines.append(f"Found {n} error{'s' if n != 1 else ''}.")
        safe = sum(1 for f in findings if f.fix and f.fix.applicability == "safe")
        unsafe = sum(1 for f in findings if f.fix and f.fix.applicability != "safe")
        if safe:
            lines.append(f"[*] {safe} fixable with the `--fix` option.")
        if unsafe:
            lines.append(
                f"{unsafe} hidden fix{'es' if unsafe != 1 else ''} can be enabled with the `--unsafe-fixes` option."
            )
    return "\n".join(lines) + "\n"


_TABLE_COLUMNS = (
    ("target", "target"),
    ("op", "op"),
    ("phase", "phase"),
    ("module", "module"),
    ("where", None),
    ("count", "count"),
    ("remedy", "remedy"),
)


def _rows(report: Report) -> tuple[list[str], list[list[str]]]:
    findings = report.sorted_findings()
    keys = [(title, key) for title, key in _TABLE_COLUMNS if key is None or any(key in f.extra for f in findings)]
    if not any(key == "op" for _, key in keys):
        keys = [("code", "code"), ("where", None), ("message", "message")]
    rows = []
    for f in findings:
        row = []
        for _, key in keys:
            if key is None:
                row.append(f"{f.path}:{f.line}" if f.path else "")
            elif key == "code":
                row.append(f.code)
            elif key == "message":
                row.append(f.message)
            else:
                row.append(str(f.extra.get(key, "")))
        rows.append(row)
    return [title for title, _ in keys], rows


def _text_table(report: Report) -> str:
    from tabulate import tabulate

    out = []
    if report.env:
        out.append(" ".join(f"{k}={v}" for k, v in report.env.items() if not isinstance(v, (dict, list))))
    headers, rows = _rows(report)
    if rows:
        out.append(tabulate(rows, headers=headers, tablefmt="simple", maxcolwidths=[None] * (len(headers) - 1) + [60]))
    out.extend(report.notices)
    for err in report.errors:
        out.append(f"error: {err.get('message', err)}")
    n = len(report.findings)
    out.append(f"Found {n} finding{'s' if n != 1 else ''}." if n else "No findings.")
    return "\n".join(out) + "\n"


def _statistics(report: Report) -> str:
    from opscan.codes import rule_info

    counts = Counter(f.code for f in report.findings)
    fixable = Counter(f.code for f in report.findings if f.fix and f.fix.applicability == "safe")
    lines = []
    for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        info = rule_info(code)
        mark = "[*]" if fixable[code] else "   "
        lines.append(f"{n:5d}\t{code}\t{mark} {info.name if info else ''}")
    if not lines:
        lines.append("All checks passed!")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- json


def _json(report: Report) -> str:
    import json

    findings = [f.to_dict() for f in report.sorted_findings()]
    if report.command == "lint":
        return json.dumps(findings, indent=2) + "\n"
    return json.dumps({"findings": findings, "env": report.env, "errors": report.errors}, indent=2, default=str) + "\n"


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
        lines.append(f"::{level} {','.join(props)}::{_gh_escape(f.code + ' ' + f.message)}")
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

    seen: Counter = Counter()
    out = []
    for f in findings:
        anchor = f.extra.get("line_text") or f.message
        digest = hashlib.sha256(f"{f.code}\0{f.path}\0{anchor}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
        seen[digest] += 1
        out.append(f"{digest}:{seen[digest]}")
    return out


def _sarif(report: Report) -> str:
    import json

    from opscan.codes import rule_info

    findings = report.sorted_findings()
    codes = sorted({f.code for f in findings} | set(report.env.get("rules_run", [])))
    rules = []
    index = {}
    for code in codes:
        info = rule_info(code)
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
        result = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": _sarif_level(f.severity),
            "message": {"text": f.message},
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
                        "artifactLocation": {"uri": f.path.replace("\\", "/")},
                        "region": region,
                    }
                }
            ]
        props = {k: v for k, v in f.extra.items() if isinstance(v, (str, int, float, bool)) and not k.startswith("_")}
        if props:
            result["properties"] = props
        results.append(result)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
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
        ],
    }
    return json.dumps(doc, indent=2) + "\n"


def _sarif_level(severity: str) -> str:
    return {"error": "error", "warning": "warning"}.get(severity, "note")


# ---------------------------------------------------------------- markdown / html


def _markdown(report: Report) -> str:
    headers, rows = _rows(report)
    out = [f"# opscan {report.command}", ""]
    if report.env:
        out += ["| | |", "|---|---|"]
        out += [f"| {k} | {_md_cell(v)} |" for k, v in report.env.items()]
        out.append("")
    if rows:
        out.append("| " + " | ".join(headers) + " |")
        out.append("|" + "---|" * len(headers))
        out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    else:
        out.append("No findings.")
    for err in report.errors:
        out.append(f"\n**error:** {_md_cell(err.get('message', err))}")
    return "\n".join(out) + "\n"


def _md_cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", "<br>")


def _html(report: Report) -> str:
    headers, rows = _rows(report)
    import html

    esc = html.escape
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>opscan {esc(report.command)}</title>",
        "<style>body{font-family:sans-serif}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}</style>",
        "</head><body>",
        f"<h1>opscan {esc(report.command)}</h1>",
    ]
    if report.env:
        parts.append("<table>" + "".join(f"<tr><th>{esc(str(k))}</th><td>{esc(str(v))}</td></tr>" for k, v in report.env.items()) + "</table>")
    if rows:
        parts.append("<table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in headers) + "</tr></thead><tbody>")
        parts += ["<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in row) + "</tr>" for row in rows]
        parts.append("</tbody></table>")
    else:
        parts.append("<p>No findings.</p>")
    for err in report.errors:
        parts.append(f"<p><strong>error:</strong> {esc(str(err.get('message', err)))}</p>")
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
