"""`opscan lint --add-noqa`: a `# noqa: CODE` comment on each line that has a finding, as ruff's --add-noqa.

A line that already has a `# noqa: ...` comment gets the new codes merged into
it (sorted, once each); any other comment stays and the directive goes after
it. Everything else in the file is kept byte for byte: encoding, BOM, line
endings, trailing text. A line whose end lies inside a string, or that goes on
with a backslash, cannot take a comment: it is skipped with a warning. Each file
is written once, atomically, and only if it still holds the bytes that were read.
"""

from __future__ import annotations

import io
import re
import tokenize

from opscan.findings import Report
from opscan.fsutil import ChangedOnDiskError, atomic_write_bytes
from opscan.lint.rules.det010 import NOQA

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)?")  # a line and its ending, split where Python splits lines


def add_noqa(report: Report) -> tuple[int, list[str], list[str]]:
    """Add the directives for `report`'s findings to their files.

    (directives added or extended, warnings for lines left alone, errors for files left alone).
    """
    wanted: dict[str, dict[int, set[str]]] = {}
    shown: dict[str, str] = {}
    for f in report.findings:
        if f.code == "DET000":  # a file lint could not read: nothing to anchor a comment to
            continue
        path = f.source_path or f.path
        wanted.setdefault(path, {}).setdefault(f.line, set()).add(f.code)
        shown.setdefault(path, f.path)
    added, notices, errors = 0, [], []
    for path in sorted(wanted, key=lambda p: shown[p]):
        try:
            count, skipped = _add_to_file(path, wanted[path])
        except (OSError, ChangedOnDiskError, SyntaxError, UnicodeError, LookupError) as exc:
            reason = "changed on disk since it was read" if isinstance(exc, ChangedOnDiskError) else getattr(exc, "strerror", None) or exc
            errors.append(f"no noqa added to {shown[path]}: {reason}")  # the edit asked for was not made
            continue
        added += count
        notices += [f"warning: no noqa added at {shown[path]}:{line}: the line ends inside a string or goes on with a backslash" for line in skipped]
    return added, notices, errors


def with_noqa(text: str, lines: dict[int, set[str]]) -> tuple[str, int, list[int]]:
    """`text` with the directives added: (new text, directives added or extended, lines skipped)."""
    rows = _LINE.findall(text)
    if rows and rows[-1] == "":
        rows.pop()
    open_ended = _lines_that_take_a_comment(text)
    count, skipped = 0, []
    for number in sorted(lines):
        if not 0 < number <= len(rows):
            continue
        row = rows[number - 1]
        body = row.rstrip("\r\n")
        ending = row[len(body) :]
        if number not in open_ended:
            skipped.append(number)
            continue
        codes = lines[number]
        m = re.search(NOQA, body, re.I)
        comment = open_ended[number]
        if m is not None and (comment is None or m.start() < comment):
            skipped.append(number)  # `# noqa` inside a string: lint would read that one, not ours
            continue
        if m is not None and m.group("codes") is None:
            continue  # a bare `# noqa` already covers every code
        if m is not None:
            have = re.split(r"[\s,]+", m.group("codes").strip())
            merged = sorted(set(have) | codes)
            if set(merged) == set(have):
                continue
            body = body[: m.start("codes")] + ", ".join(merged) + body[m.end("codes") :]
        else:
            body = body.rstrip() + "  # noqa: " + ", ".join(sorted(codes))
        rows[number - 1] = body + ending
        count += 1
    return "".join(rows), count, skipped


def _add_to_file(path: str, lines: dict[int, set[str]]) -> tuple[int, list[int]]:
    with open(path, "rb") as fh:
        original = fh.read()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(original).readline)
    text = original.decode(encoding)
    new_text, count, skipped = with_noqa(text, lines)
    if count:
        atomic_write_bytes(path, new_text.encode(encoding), expect=original)  # "utf-8-sig" puts the BOM back
    return count, skipped


def _lines_that_take_a_comment(text: str) -> dict[int, int | None]:
    """Lines at whose end a `#` comment may go (they end with a NEWLINE or NL token, or hold a
    comment already), each with the column where its comment starts, if it has one."""
    rows: dict[int, int | None] = {}
    # Python 3.12+ tokenizes inside f-strings (PEP 701): a line that ends within a multi-line
    # replacement field yields an NL token there. A comment may go there on 3.12+ only; 3.10 and
    # 3.11 reject the file. Such a line ends inside a string, as 3.11's tokenize says: no comment.
    fstring_start, fstring_end = getattr(tokenize, "FSTRING_START", None), getattr(tokenize, "FSTRING_END", None)
    in_fstring = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == fstring_start:
                in_fstring += 1
            elif tok.type == fstring_end:
                in_fstring -= 1
            elif tok.type == tokenize.COMMENT:
                rows[tok.start[0]] = tok.start[1]
            elif tok.type in (tokenize.NEWLINE, tokenize.NL) and not in_fstring:
                rows.setdefault(tok.start[0], None)
    except (tokenize.TokenError, SyntaxError):  # lint read it, so this should not happen; add nothing
        return {}
    return rows
