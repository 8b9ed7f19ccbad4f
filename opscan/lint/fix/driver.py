"""The fixer's driver: apply the findings' fixes file by file, re-lint, write atomically, diff.

Each fix edits the concrete syntax tree, so formatting, comments, quote style,
indentation, encoding and line endings survive. All the fixes for one file go
into one rewrite. A fix can make another one possible (enabling determinism
makes DET005's fix safe), so the fixer lints the edited sources again, in
memory, and repeats until nothing changes, as ruff does. Each file is then
written once, atomically, and only if it still holds the bytes that were read.
"""

from __future__ import annotations

import ast
import difflib
import io
import os
import sys
import threading
import tokenize
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from opscan.findings import Finding, Problem, Report
from opscan.fsutil import ChangedOnDiskError, atomic_write_bytes
from opscan.lint.facts import source_lines
from opscan.lint.fix.planner import NEWLINE, CannotFix, Planner
from opscan.lint.fix.rewriter import Rewriter
from opscan.lint.model import Edit

MAX_ROUNDS = 10  # fix -> re-lint rounds; ruff allows 100, two or three are enough here
MAX_DEPTH = 1000  # deeper syntax trees are left alone: libcst slows down steeply (3000 levels: seconds)
_RECURSION_LIMIT = 12_000  # ~3 frames per level for libcst, with room to spare
_STACK_BYTES = 256 * 1024 * 1024  # the worker thread's stack, for that many frames


# ---------------------------------------------------------------- the outcome


@dataclass(frozen=True)
class AppliedFix:
    """One finding whose fix was applied (or, with --diff, would be)."""

    path: str  # as displayed
    code: str
    finding: Finding


@dataclass
class FixOutcome:
    """What `apply` did: the fixes applied (or, with --diff, that would be), the diff, warnings and errors."""

    diff: str = ""
    fixed: list[AppliedFix] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    # Files whose fixes could not be written (an I/O error, as ruff's E902): the run's errors, exit 2.
    errors: list[Problem] = field(default_factory=list)
    # Fixes that were not applied because they are unsafe and --unsafe-fixes was not given.
    unsafe_available: int = 0
    # The fixed bytes of each file changed, by real path (what `opscan lint - --fix` prints).
    sources: dict[str, bytes] = field(default_factory=dict)
    # Real paths of the files whose fixes were not applied: left alone (too deep, libcst trouble,
    # changed on disk) or not written (an I/O error).
    unapplied: set[str] = field(default_factory=set)

    @property
    def count(self) -> int:
        return len(self.fixed)

    def withdraw_fixes(self, report: Report) -> None:
        """Drop the fixes of `report`'s findings in the files whose fixes were not applied.

        After --fix, `[*]`, "N fixable with the `--fix` option", the hidden-fix hint, --statistics'
        mark and JSON's `fixable` would otherwise offer what --fix has just failed to do.
        """
        if self.unapplied:
            report.findings = [f.replace(fix=None) if f.fix is not None and _file_key(f) in self.unapplied else f for f in report.findings]

    def summary_lines(self) -> list[str]:
        """What was fixed, per file and code, as ruff's --show-fixes prints it."""
        if not self.fixed:
            return []
        from opscan.lint.rules import rule_info

        lines = ["", f"Fixed {_errors(self.count)}:"]
        by_path: dict[str, Counter] = {}
        for item in self.fixed:
            by_path.setdefault(item.path, Counter())[item.code] += 1
        for path in sorted(by_path):
            lines.append(f"- {path}:")
            for code, n in sorted(by_path[path].items()):
                info = rule_info(code)
                lines.append(f"    {n} \u00d7 {code}" + (f" ({info.name})" if info else ""))
        lines.append("")
        return lines

    def diff_summary(self) -> str:
        """The line ruff prints after --diff."""
        hint = ""
        if self.unsafe_available:
            n = self.unsafe_available
            hint = f"{n} fix{'es' if n != 1 else ''} available with `--unsafe-fixes`"
        if not self.fixed:
            return f"No errors would be fixed ({hint})." if hint else "No errors would be fixed."
        return f"Would fix {_errors(self.count)}" + (f" ({hint})." if hint else ".")


def _errors(n: int) -> str:
    return f"{n} error{'s' if n != 1 else ''}"


# ---------------------------------------------------------------- applying to a report


@dataclass
class _File:
    path: str  # real path on disk
    display: str
    original: bytes
    encoding: str
    text: str  # decoded original
    current: str  # text after the fixes so far
    current_bytes: bytes = b""  # `current`, encoded as the original was
    applied: list[Finding] = field(default_factory=list)
    last_attempt: tuple | None = None  # (findings signature, text) of the last attempt that changed nothing


def _allowed(f: Finding, unsafe: bool) -> bool:
    return f.fix is not None and (f.fix.applicability == "safe" or unsafe) and isinstance(f.fix.edit, Edit)


def _file_key(f: Finding) -> str:
    return os.path.realpath(f.source_path or f.path or "")


def apply(
    report: Report,
    *,
    unsafe: bool,
    write: bool,
    relint: Callable[[dict[str, bytes]], Report] | None = None,
    sources: dict[str, bytes] | None = None,
) -> FixOutcome:
    """Apply the fixes of `report`'s findings: safe ones, and unsafe ones too with `unsafe`.

    With `relint` (a function that lints again with some files' contents
    replaced, keyed by absolute path), fix and re-lint in memory until nothing
    changes. With `write`, write each changed file once, atomically; otherwise
    only compute the diff. `sources` holds contents, by real path, that are not
    on disk (stdin): they are fixed in memory and never written.
    """
    sources = sources or {}
    outcome = FixOutcome()
    files: dict[str, _File] = {}
    refused: set[str] = set()  # files never to touch: unreadable, changed, DET000, libcst trouble

    for _ in range(MAX_ROUNDS):
        refused |= {_file_key(f) for f in report.findings if f.code == "DET000"}
        groups: dict[str, list[Finding]] = {}
        for f in report.findings:
            if _allowed(f, unsafe) and _file_key(f) not in refused:
                groups.setdefault(_file_key(f), []).append(f)
        changed = False
        for key, findings in sorted(groups.items()):
            state = files.get(key)
            if state is None:
                try:
                    state = _read(key, findings[0].path or key, sources.get(key))
                    _check_unchanged(state, findings)
                except CannotFix as exc:
                    outcome.notices.append(f"warning: not fixed: {findings[0].path}: {exc}")
                    refused.add(key)
                    continue
                files[key] = state
            signature = tuple(sorted((f.code, f.line, f.col, f.fix.applicability) for f in findings))
            if state.last_attempt == (signature, state.current):
                continue  # same findings on the same text: nothing new to do
            try:
                new_text, applied = fix_source(state.current, findings, first_party=_project_modules(state.path))
                new_bytes = _encode(new_text, state.encoding)
            except CannotFix as exc:
                outcome.notices.append(f"warning: not fixed: {state.display}: {exc}")
                refused.add(key)
                state.current = state.text
                state.applied = []
                continue
            if new_text == state.current:
                state.last_attempt = (signature, state.current)
                continue
            state.current, state.current_bytes = new_text, new_bytes
            state.applied.extend(applied)
            changed = True
        if not changed or relint is None:
            break
        report = relint({k: s.current_bytes for k, s in files.items() if s.current != s.text and k not in refused})

    if not unsafe:  # in what the last round saw: fixing can make an unsafe fix safe; not in a file left alone
        outcome.unsafe_available = sum(
            1 for f in report.findings if f.fix is not None and f.fix.applicability != "safe" and _file_key(f) not in refused
        )
    diffs = []
    for key, state in sorted(files.items(), key=lambda kv: kv[1].display):
        if key in refused or state.current == state.text:
            continue
        outcome.sources[key] = state.current_bytes
        if write and key not in sources:
            try:
                atomic_write_bytes(state.path, state.current_bytes, expect=state.original)
            except ChangedOnDiskError:
                outcome.notices.append(f"warning: not fixed: {state.display} changed on disk since it was read")
                outcome.unapplied.add(key)
                continue
            except OSError as exc:
                outcome.errors.append(Problem(f"cannot write {state.display}: {exc.strerror or exc}; its fixes were not applied", state.display))
                outcome.unapplied.add(key)
                continue
        diffs.append(unified_diff(state.text, state.current, state.display))
        outcome.fixed.extend(AppliedFix(state.display, f.code, f) for f in state.applied)
    outcome.diff = "".join(diffs)
    outcome.unapplied |= refused
    return outcome


def _read(path: str, display: str, data: bytes | None = None) -> _File:
    try:
        if data is None:
            with open(path, "rb") as fh:
                data = fh.read()
    except OSError as exc:
        raise CannotFix(f"cannot read file: {exc.strerror or exc}") from None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        raise CannotFix(f"cannot decode file: {exc}") from None
    return _File(path, display, data, encoding, text, text)


def _encode(text: str, encoding: str) -> bytes:
    try:
        return text.encode(encoding)  # "utf-8-sig" puts the BOM back
    except (UnicodeEncodeError, LookupError) as exc:  # pragma: no cover - fixes insert ASCII only
        raise CannotFix(f"cannot encode the fixed file as {encoding}: {exc}") from None


def _check_unchanged(state: _File, findings: list[Finding]) -> None:
    """Refuse a file whose lines no longer match what lint saw: positions would be wrong."""
    lines = source_lines(state.text)  # as the facts pass splits them for `line_text`
    for f in findings:
        seen = f.line_text
        if seen is None:
            continue
        now = lines[f.line - 1].strip() if 0 < f.line <= len(lines) else ""
        if now != seen:
            raise CannotFix("changed on disk since it was read")


def unified_diff(old: str, new: str, path: str) -> str:
    """A unified diff with ruff's headers; line endings are kept, so CRLF files diff as CRLF."""
    out = []
    for line in difflib.unified_diff(_lines(old), _lines(new), fromfile=path, tofile=path):
        out.append(line)
        if not line.endswith(("\n", "\r")):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)


def _lines(text: str) -> list[str]:
    """Lines with their endings, split where Python splits them (not at form feeds)."""
    out, start = [], 0
    for m in NEWLINE.finditer(text):
        out.append(text[start : m.end()])
        start = m.end()
    if start < len(text):
        out.append(text[start:])
    return out


# ---------------------------------------------------------------- fixing one source


def _project_modules(path: str) -> Callable[[str], bool]:
    """Whether a top-level module name is a file or package beside `path` (or under its `src/`): the
    project's own, for isort's sections, as ruff's default `src = [".", "src"]` finds them."""
    folder = os.path.dirname(os.path.abspath(path))
    found: dict[str, bool] = {}

    def first_party(name: str) -> bool:
        if name not in found:
            found[name] = any(
                os.path.isfile(os.path.join(base, name + ".py")) or os.path.isdir(os.path.join(base, name))
                for base in (folder, os.path.join(folder, "src"))
            )
        return found[name]

    return first_party


def fix_source(text: str, findings: list[Finding], first_party: Callable[[str], bool] | None = None) -> tuple[str, list[Finding]]:
    """Apply the fixes of `findings` (all in this source) and return the new text and the findings fixed.

    Fixes whose target cannot be found, or that conflict with one already
    planned, are left out; the next round or run gets them. Raises CannotFix
    when the source is too deeply nested for libcst, libcst cannot round-trip
    it, or the result would not parse.
    """
    try:
        tree = _parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise CannotFix("it does not parse") from None
    depth = _ast_depth(tree)
    if depth > MAX_DEPTH:
        raise CannotFix(f"nested {depth} levels deep, too deep to rewrite safely (the limit is {MAX_DEPTH})")
    return _in_deep_stack(_fix_tree, text, tree, findings, first_party)


def _fix_tree(text: str, tree: ast.Module, findings: list[Finding], first_party=None) -> tuple[str, list[Finding]]:
    try:
        module = cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError, ValueError) as exc:
        raise CannotFix(f"libcst cannot parse it ({type(exc).__name__})") from None
    if module.code != text:
        raise CannotFix("libcst does not reproduce it byte for byte (unusual line endings?)")
    planner = Planner(module, text, tree, first_party)
    applied = []
    seen = set()
    for f in sorted(findings, key=lambda f: (f.fix.edit.order, f.line, f.col, f.code)):
        key = (f.code, f.line, f.col, type(f.fix.edit))
        if key in seen:
            continue
        seen.add(key)
        if planner.plan(f):
            applied.append(f)
    if not applied:
        return text, []
    new_text = module.visit(Rewriter(planner)).code
    try:
        _parse(new_text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise CannotFix(f"the fixed source would not parse ({exc}); please report this") from None
    return new_text, applied


def _parse(text: str) -> ast.Module:
    """ast.parse, quietly: the user's invalid escapes etc. are not ours to print (3.12+ warns, as lint's own parse knows)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text)


def _ast_depth(tree: ast.AST) -> int:
    """How deeply the syntax tree nests, counted without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _in_deep_stack(fn, *args):
    """Run `fn` in a thread with a large stack and a high recursion limit.

    libcst walks the tree recursively, a few Python frames per level; the
    default limit of 1000 frames stops it at a `+` chain of a few hundred terms.
    A raised limit needs a C stack to match, which only a new thread can be given.
    """
    result: dict = {}

    def work():
        try:
            result["value"] = fn(*args)
        except RecursionError:
            result["error"] = CannotFix("too deeply nested to rewrite")
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            result["error"] = exc

    old_limit, old_size = sys.getrecursionlimit(), threading.stack_size()
    try:
        try:
            threading.stack_size(_STACK_BYTES)
            sys.setrecursionlimit(max(old_limit, _RECURSION_LIMIT))
        except (ValueError, RuntimeError):  # pragma: no cover - a platform without large thread stacks
            pass  # keep the default limit: deep files then fail cleanly with RecursionError
        worker = threading.Thread(target=work, name="opscan-fix", daemon=True)
        worker.start()
        worker.join()
    finally:
        sys.setrecursionlimit(old_limit)
        threading.stack_size(old_size)
    if "error" in result:
        raise result["error"]
    return result["value"]
