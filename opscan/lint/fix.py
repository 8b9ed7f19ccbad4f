"""`opscan lint --fix` and `--diff`: apply the findings' fixes with libcst and change nothing else.

Each fix edits the concrete syntax tree, so formatting, comments, quote style,
indentation, encoding and line endings survive. All the fixes for one file go
into one rewrite. A fix can make another one possible (enabling determinism
makes DET005's fix safe), so the fixer lints the edited sources again, in
memory, and repeats until nothing changes, as ruff does. Each file is then
written once, atomically, and only if it still holds the bytes that were read.

The command imports this module only for --fix and --diff: libcst is slow to
import and plain linting does not need it.
"""

from __future__ import annotations

import ast
import bisect
import difflib
import io
import os
import re
import sys
import threading
import tokenize
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from opscan.findings import Finding, Report
from opscan.fsutil import ChangedOnDiskError, atomic_write_bytes
from opscan.lint.model import CUBLAS, VALID_CUBLAS

CUBLAS_VALUE = VALID_CUBLAS[0]
MAX_ROUNDS = 10  # fix -> re-lint rounds; ruff allows 100, two or three are enough here
MAX_DEPTH = 1000  # deeper syntax trees are left alone: libcst slows down steeply (3000 levels: seconds)
_RECURSION_LIMIT = 12_000  # ~3 frames per level for libcst, with room to spare
_STACK_BYTES = 256 * 1024 * 1024  # the worker thread's stack, for that many frames

# The order fixes are planned in within one file: edits in place first, then the
# statements that move or are inserted at the top, then the insertion after seeding.
_ACTION_ORDER = {
    "replace_cublas_value": 0,
    "benchmark_false": 1,
    "drop_warn_only": 2,
    "move_cublas_env": 3,
    "insert_cublas_env": 4,
    "enable_determinism": 5,
}
_STDLIB = frozenset(sys.stdlib_module_names)
_NEWLINE = re.compile(r"\r\n|\r|\n")


# ---------------------------------------------------------------- the outcome


@dataclass(frozen=True)
class AppliedFix:
    """One finding whose fix was applied (or, with --diff, would be)."""

    path: str  # as displayed
    code: str
    finding: Finding


@dataclass
class FixOutcome:
    """What `apply` did: the fixes applied (or, with --diff, that would be), the diff, and warnings."""

    diff: str = ""
    fixed: list[AppliedFix] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    # Fixes that were not applied because they are unsafe and --unsafe-fixes was not given.
    unsafe_available: int = 0

    @property
    def count(self) -> int:
        return len(self.fixed)

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


class CannotFix(Exception):
    """This file cannot be fixed safely; the message says why."""


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
    return f.fix is not None and (f.fix.applicability == "safe" or unsafe) and f.fix.edit.get("action") in _ACTION_ORDER


def _file_key(f: Finding) -> str:
    return os.path.realpath(f.source_path or f.path or "")


def apply(
    report: Report,
    *,
    unsafe: bool,
    write: bool,
    relint: Callable[[dict[str, bytes]], Report] | None = None,
) -> FixOutcome:
    """Apply the fixes of `report`'s findings: safe ones, and unsafe ones too with `unsafe`.

    With `relint` (a function that lints again with some files' contents
    replaced, keyed by absolute path), fix and re-lint in memory until nothing
    changes. With `write`, write each changed file once, atomically; otherwise
    only compute the diff.
    """
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
                    state = _read(key, findings[0].path or key)
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
                new_text, applied = fix_source(state.current, findings)
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

    if not unsafe:  # in what the last round saw: fixing can make an unsafe fix safe
        outcome.unsafe_available = sum(1 for f in report.findings if f.fix is not None and f.fix.applicability != "safe")
    diffs = []
    for key, state in sorted(files.items(), key=lambda kv: kv[1].display):
        if key in refused or state.current == state.text:
            continue
        if write:
            try:
                atomic_write_bytes(state.path, state.current_bytes, expect=state.original)
            except ChangedOnDiskError:
                outcome.notices.append(f"warning: not fixed: {state.display} changed on disk since it was read")
                continue
            except OSError as exc:
                outcome.notices.append(f"warning: not fixed: cannot write {state.display}: {exc.strerror or exc}")
                continue
        diffs.append(unified_diff(state.text, state.current, state.display))
        outcome.fixed.extend(AppliedFix(state.display, f.code, f) for f in state.applied)
    outcome.diff = "".join(diffs)
    return outcome


def _read(path: str, display: str) -> _File:
    try:
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
    lines = state.text.splitlines()  # as the facts pass splits them for `line_text`
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
    for m in _NEWLINE.finditer(text):
        out.append(text[start : m.end()])
        start = m.end()
    if start < len(text):
        out.append(text[start:])
    return out


# ---------------------------------------------------------------- fixing one source


def fix_source(text: str, findings: list[Finding]) -> tuple[str, list[Finding]]:
    """Apply the fixes of `findings` (all in this source) and return the new text and the findings fixed.

    Fixes whose target cannot be found, or that conflict with one already
    planned, are left out; the next round or run gets them. Raises CannotFix
    when the source is too deeply nested for libcst, libcst cannot round-trip
    it, or the result would not parse.
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise CannotFix("it does not parse") from None
    depth = _ast_depth(tree)
    if depth > MAX_DEPTH:
        raise CannotFix(f"nested {depth} levels deep, too deep to rewrite safely (the limit is {MAX_DEPTH})")
    return _in_deep_stack(_fix_tree, text, tree, findings)


def _fix_tree(text: str, tree: ast.Module, findings: list[Finding]) -> tuple[str, list[Finding]]:
    try:
        module = cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError, ValueError) as exc:
        raise CannotFix(f"libcst cannot parse it ({type(exc).__name__})") from None
    if module.code != text:
        raise CannotFix("libcst does not reproduce it byte for byte (unusual line endings?)")
    planner = _Planner(module, text, tree)
    applied = []
    seen = set()
    for f in sorted(findings, key=lambda f: (_ACTION_ORDER[f.fix.edit["action"]], f.line, f.col, f.code)):
        key = (f.code, f.line, f.col, f.fix.edit["action"])
        if key in seen:
            continue
        seen.add(key)
        if planner.plan(f):
            applied.append(f)
    if not applied:
        return text, []
    new_text = module.visit(_Rewriter(planner)).code
    try:
        ast.parse(new_text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise CannotFix(f"the fixed source would not parse ({exc}); please report this") from None
    return new_text, applied


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


# ---------------------------------------------------------------- planning


@dataclass
class _Moved:
    """A placeholder in the top-of-module group for a statement moved there, filled in as it is rewritten."""

    small: cst.BaseSmallStatement
    line: cst.SimpleStatementLine | None  # set when the whole line moves: its comments move with it


def _attached_comments(line: cst.SimpleStatementLine) -> list[cst.EmptyLine]:
    """The comment lines right above a statement, with no blank line between: they describe it."""
    attached: list[cst.EmptyLine] = []
    for empty in reversed(line.leading_lines):
        if empty.comment is None:
            break
        attached.insert(0, empty)
    return attached


@dataclass
class _Edits:
    """The planned edits of one file, keyed by the original nodes they apply to."""

    replace: dict[cst.CSTNode, Callable[[cst.CSTNode], cst.CSTNode]] = field(default_factory=dict)
    insert_after: dict[cst.CSTNode, list[cst.CSTNode]] = field(default_factory=dict)
    insert_before: dict[cst.CSTNode, list[cst.CSTNode]] = field(default_factory=dict)
    remove: set[cst.CSTNode] = field(default_factory=set)  # statement lines, or small statements in a line
    top: list = field(default_factory=list)  # statements (or _Moved) for the top of the module
    top_imports: list = field(default_factory=list)  # `import torch`, after the leading imports
    captured: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)  # moved small statement -> rewritten


_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_EXITS = (cst.Return, cst.Raise, cst.Break, cst.Continue)


class _Planner:
    """Finds each fix's target in the tree and records the edits; touches nothing itself."""

    def __init__(self, module: cst.Module, text: str, tree: ast.Module):
        self.module = module
        self.lines = _NEWLINE.split(text)  # as Python numbers lines
        self.quote = _first_quote(text)
        self.body = list(module.body)
        # Positions and parents are computed per top-level statement, and only for
        # those a fix looks into: libcst's position pass costs as much as parsing.
        self.pos: dict[cst.CSTNode, tuple[tuple[int, int], tuple[int, int]]] = {}
        self.parent: dict[cst.CSTNode, cst.CSTNode] = {}
        self.top_of: dict[cst.CSTNode, cst.CSTNode] = {}
        self._nodes: dict[cst.CSTNode, list] = {}  # top-level statement -> [(node, start, end)]
        self._starts = _top_level_lines(self.body, tree)
        for stmt, (first, last) in zip(self.body, self._starts, strict=True):
            self.parent[stmt] = module
            self.top_of[stmt] = stmt
            self.pos[stmt] = ((first, 0), (last, len(self.lines[last - 1]) if last <= len(self.lines) else 0))
        self.edits = _Edits()
        self.claimed: set[cst.CSTNode] = set()
        self.header_end = self._header_end()
        self.top_at = self._top_index()  # where DET002's statement goes (P)
        self.imports_end = self.top_at  # where an added `import torch` goes (Q); set when one is needed
        self._environ: str | None = None  # "os.environ" once ensured
        self._torch_import_added = False
        self._os_added = False

    # -- positions ------------------------------------------------------------

    def _ensure(self, top) -> list:
        """Positions and parents of every node in one top-level statement."""
        nodes = self._nodes.get(top)
        if nodes is not None:
            return nodes
        mini = self.module.with_changes(body=[top], header=[], footer=[])
        positions = MetadataWrapper(mini, unsafe_skip_copy=True).resolve(PositionProvider)
        decorators = getattr(top, "decorators", ())
        first = positions[decorators[0] if decorators else top].start.line
        offset = self.pos[top][0][0] - first
        nodes = []
        for node, r in positions.items():
            if node is mini or node is top:
                continue
            span = ((r.start.line + offset, r.start.column), (r.end.line + offset, r.end.column))
            self.pos[node] = span
            self.top_of[node] = top
            nodes.append((node, *span))
        top.visit(_Parents(self.parent))
        self._nodes[top] = nodes
        return nodes

    def _top_at_line(self, line: int):
        """The top-level statement whose lines hold `line`, if any."""
        i = bisect.bisect_right([first for first, _ in self._starts], line) - 1
        if i >= 0 and line <= self._starts[i][1]:
            return self.body[i]
        return None

    def _char_col(self, line: int, byte_col: int) -> int:
        """ast columns count UTF-8 bytes; libcst's count characters."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", "ignore"))

    def _span(self, f: Finding) -> tuple[tuple[int, int], tuple[int, int]]:
        start = (f.line, self._char_col(f.line, f.col - 1))
        end_line = f.end_line or f.line
        end = (end_line, self._char_col(end_line, (f.end_col or f.col) - 1))
        return start, end

    def _range(self, node) -> tuple[tuple[int, int], tuple[int, int]]:
        return self.pos[node]

    def _innermost(self, types, start, end=None):
        """The smallest node of `types` whose range holds start..end (ranges in a tree nest)."""
        end = end or start
        top = self._top_at_line(start[0])
        if top is None:
            return None
        best = (top, *self.pos[top]) if isinstance(top, types) else None
        for node, s, e in self._ensure(top):
            inside_best = best is None or (best[1] <= s and e <= best[2])
            if isinstance(node, types) and s <= start and end <= e and inside_best:
                best = (node, s, e)
        return best[0] if best else None

    def _ancestors(self, node):
        while node in self.parent:
            node = self.parent[node]
            yield node

    # -- module layout ----------------------------------------------------------

    def _header_end(self) -> int:
        """Index of the first statement after the docstring and `from __future__` imports."""
        i = 0
        if self.body and _is_docstring(self.body[0]):
            i = 1
        while i < len(self.body) and _is_future_import(self.body[i]):
            i += 1
        return i

    def _top_index(self) -> int:
        """Where the environment variable is set: before the first statement, after the
        header, that is not an import of standard-library modules. Any other import
        (torch, torchvision, lightning, a project module) may start torch."""
        for i in range(self.header_end, len(self.body)):
            if not _is_stdlib_import(self.body[i]):
                return i
        return len(self.body)

    def _imports_end(self, before: int) -> int:
        """Just after the last module-level import above statement `before`, and not above the top group."""
        end = self.header_end
        for i in range(self.header_end, before):
            if _is_import_block(self.body[i]):
                end = i + 1
        return max(end, self.top_at)

    # -- dispatch ---------------------------------------------------------------

    def plan(self, f: Finding) -> bool:
        action = f.fix.edit["action"]
        try:
            return bool(getattr(self, f"_{action}")(f))
        except _Conflict:
            return False

    def _claim(self, *nodes) -> None:
        if any(n in self.claimed for n in nodes):
            raise _Conflict
        self.claimed.update(nodes)

    # -- DET003 ----------------------------------------------------------------

    def _replace_cublas_value(self, f: Finding) -> bool:
        start, end = self._span(f)
        node = self._innermost((cst.Assign, cst.AnnAssign, cst.Call), start, end)
        if node is None:
            return False
        old = f.fix.edit.get("old")
        for key, value in _env_pairs(node):
            if _string_value(key) == CUBLAS and _string_value(value) == old:
                self._claim(value)
                self.edits.replace[value] = lambda updated, v=value: _same_quotes(v, CUBLAS_VALUE)
                return True
        return False

    # -- DET005 ----------------------------------------------------------------

    def _benchmark_false(self, f: Finding) -> bool:
        start, end = self._span(f)
        if f.fix.edit.get("keyword"):
            call = self._innermost(cst.Call, start, end)
            value = None
            for arg in call.args if call is not None else ():
                if arg.keyword is not None and arg.keyword.value == "benchmark" and _is_name(arg.value, "True"):
                    value = arg.value
        else:
            stmt = self._innermost((cst.Assign, cst.AnnAssign), start, end)
            value = stmt.value if stmt is not None and _is_name(stmt.value, "True") else None
            if isinstance(stmt, cst.Assign) and not any(_attr_name(t.target) == "benchmark" for t in stmt.targets):
                value = None
            if isinstance(stmt, cst.AnnAssign) and _attr_name(stmt.target) != "benchmark":
                value = None
        if value is None:
            return False
        self._claim(value)
        self.edits.replace[value] = lambda updated: updated.with_changes(value="False")
        return True

    # -- DET006 ----------------------------------------------------------------

    def _drop_warn_only(self, f: Finding) -> bool:
        start, end = self._span(f)
        call = self._innermost(cst.Call, start, end)
        if call is None:
            return False
        api = f.fix.edit.get("api") or ""
        positional = [a for a in call.args if a.keyword is None and not a.star]
        keyword = {a.keyword.value: a for a in call.args if a.keyword is not None}
        drop = None
        if "warn_only" in keyword and _is_name(keyword["warn_only"].value, "True"):
            drop = keyword["warn_only"]
        elif (
            api.endswith(("use_deterministic_algorithms", "enable_full_determinism"))
            and len(positional) > 1
            and _is_name(positional[1].value, "True")
        ):
            drop = positional[1]
        if drop is not None:
            index = list(call.args).index(drop)
            if _drops_comment(call, index):
                return False  # would lose a comment; leave it to the user
            self._claim(call)
            self.edits.replace[call] = lambda updated, index=index: _without_arg(updated, index)
            return True
        target = None
        if "deterministic" in keyword and _string_value(keyword["deterministic"].value) == "warn":
            value = keyword["deterministic"].value
            self._claim(value)
            self.edits.replace[value] = lambda updated: cst.Name("True")
            return True
        if "debug_mode" in keyword:
            target = keyword["debug_mode"].value
        elif api.endswith("set_deterministic_debug_mode") and positional:
            target = positional[0].value
        elif "torchtune" in api and api.endswith("set_seed") and len(positional) > 1:
            target = positional[1].value
        if target is not None and _string_value(target) == "warn":
            self._claim(target)
            self.edits.replace[target] = lambda updated, t=target: _same_quotes(t, "error")
            return True
        if isinstance(target, cst.Integer) and target.value == "1":
            self._claim(target)
            self.edits.replace[target] = lambda updated: updated.with_changes(value="2")
            return True
        return False

    # -- DET002 ----------------------------------------------------------------

    def _insert_cublas_env(self, f: Finding) -> bool:
        if self._environ is not None:
            return True  # a second finding for the same file: one statement does for both
        environ = self._ensure_os(None)
        if environ is None:
            return False
        q = self.quote
        self.edits.top.append(_statement(f"{environ}.setdefault({q}{CUBLAS}{q}, {q}{CUBLAS_VALUE}{q})"))
        return True

    def _ensure_os(self, name: str | None) -> str | None:
        """Make `os` (or the os-bound `name`) available at the top insertion point.

        Returns the expression for os.environ to use. A binding before the point
        is reused; one after it (at module level or in the `__main__` block) is
        moved up rather than duplicated; otherwise `import os` is added.
        """
        if self._environ is not None and name is None:
            return self._environ
        bindings = [b for b in _os_bindings(self.body) if (b.what in ("os", "environ") if name is None else b.name == name)]
        before = [b for b in bindings if b.index < self.top_at]
        after = [b for b in bindings if b.index >= self.top_at]
        chosen = None
        if before:
            chosen = min(before, key=lambda b: (b.what != "os", b.index))
        elif after:
            chosen = min(after, key=lambda b: (b.what != "os", b.index))
            self._move_import(chosen)
        elif name in (None, "os"):
            if not self._os_added:
                self.edits.top.append(_statement("import os"))
                self._os_added = True
            chosen = _Binding(-1, "os", "os", None, None, None)
        if chosen is None:
            return None
        environ = chosen.name if chosen.what == "environ" else f"{chosen.name}.environ"
        if name is None:
            self._environ = environ
        return environ

    def _move_import(self, b: _Binding) -> None:
        """Take one import binding out of its statement and put it in the top group."""
        self._ensure(self.body[b.index])
        line, small, alias = b.line, b.small, b.alias
        self._claim(alias)
        names = list(small.names)
        if len(names) == 1:
            if len(line.body) == 1:
                self._claim(line)
                self.edits.remove.add(line)
                self.edits.top.append(_Moved(small, line))
            else:
                self._claim(small)
                self.edits.remove.add(small)
                self.edits.top.append(_Moved(small, None))
            return
        # `import sys, os`: keep the others where they are.
        self._claim(small)
        self.edits.replace[small] = lambda updated, a=alias: _without_alias(updated, a)
        name = _module_name(alias.with_changes(comma=cst.MaybeSentinel.DEFAULT))
        if isinstance(small, cst.ImportFrom):
            self.edits.top.append(_statement(f"from {_module_name(small.module)} import {name}"))
        else:
            self.edits.top.append(_statement(f"import {name}"))

    # -- DET004 ----------------------------------------------------------------

    def _move_cublas_env(self, f: Finding) -> bool:
        start, end = self._span(f)
        small = self._innermost((cst.Assign, cst.Expr), start, end)
        if small is None or not isinstance(self.parent.get(small), cst.SimpleStatementLine):
            return False
        line = self.parent[small]
        if self.parent.get(line) is self.module and self.body.index(line) <= self.top_at:
            return False  # already at the top
        # Not out of a condition or loop: only from the module body, the `__main__`
        # block, and function bodies (the trace reached it, so the function runs).
        for anc in self._ancestors(line):
            if anc is self.module or isinstance(anc, (cst.IndentedBlock, cst.FunctionDef, cst.ClassDef)):
                continue
            if isinstance(anc, cst.If) and self.parent.get(anc) is self.module and _is_main_guard(anc.test):
                continue
            return False
        # It may use nothing but os (defined at the top too) and literals.
        roots = _free_names(small)
        if len(roots) != 1:
            return False
        (root,) = roots
        whole_line = len(line.body) == 1
        self._claim(*((line, small) if whole_line else (small,)))
        if self._ensure_os(root) is None:
            return False
        self.edits.remove.add(line if whole_line else small)
        self.edits.top.append(_Moved(small, line if whole_line else None))
        return True

    # -- DET001 ----------------------------------------------------------------

    def _enable_determinism(self, f: Finding) -> bool:
        start, end = self._span(f)
        seed_lines = set(f.fix.edit.get("seed_lines") or [f.line])
        small = self._innermost(cst.BaseSmallStatement, start, end)
        if small is not None and isinstance(self.parent.get(small), cst.SimpleStatementSuite):
            return self._enable_in_suite(f, small, seed_lines)
        stmt = self.parent.get(small) if small is not None else self._innermost(cst.BaseCompoundStatement, start, end)
        block = self.parent.get(stmt)
        if stmt is None or not isinstance(block, (cst.Module, cst.IndentedBlock)):
            return False
        siblings = list(block.body)
        last = stmt
        for sibling in siblings[siblings.index(stmt) + 1 :]:
            if self._holds_seed(sibling, seed_lines):
                last = sibling
        callee = self._determinism_callee(last)
        new = _statement(f"{callee}(True)")
        if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], _EXITS):
            self.edits.insert_before.setdefault(last, []).append(new)  # `return seed_everything(0)`
        else:
            self.edits.insert_after.setdefault(last, []).append(new)
        return True

    def _enable_in_suite(self, f: Finding, small, seed_lines) -> bool:
        """`if args.seed: torch.manual_seed(s)`: add to the same one-line suite."""
        suite = self.parent[small]
        last = small
        for other in suite.body[list(suite.body).index(small) + 1 :]:
            if self._range(other)[0][0] in seed_lines:
                last = other
        callee = self._determinism_callee(suite)
        new = cst.Expr(cst.parse_expression(f"{callee}(True)"))
        if isinstance(last, _EXITS):
            self.edits.insert_before.setdefault(last, []).append(new)
        else:
            self.edits.insert_after.setdefault(last, []).append(new)
        return True

    def _holds_seed(self, stmt, seed_lines: set[int]) -> bool:
        """Does this statement run a seeding call itself (not in a def or class it defines)?"""
        if isinstance(stmt, _SCOPES):
            return False
        (first, _), (last, _) = self._range(stmt)
        for line in seed_lines:
            if not first <= line <= last:
                continue
            text = self.lines[line - 1]
            point = (line, len(text) - len(text.lstrip()))
            node = self._innermost((cst.BaseSmallStatement, cst.BaseCompoundStatement), point)
            for anc in [node, *self._ancestors(node)] if node is not None else ():
                if anc is stmt:
                    return True
                if isinstance(anc, _SCOPES):
                    break
        return False

    def _determinism_callee(self, at) -> str:
        """How to name `torch.use_deterministic_algorithms` where `at` runs; adds `import torch` if needed.

        An import in an enclosing function, or at module level, that binds torch
        (`import torch`, `import torch as T`, `import torch.nn`,
        `from torch import use_deterministic_algorithms`) is reused. At module
        level it must come before the insertion, unless that is inside a function.
        """
        insert_line = self._range(at)[1][0]
        functions = [a for a in self._ancestors(at) if isinstance(a, cst.FunctionDef)]
        for scope in [*functions, self.module]:
            body = scope.body.body if isinstance(scope, cst.FunctionDef) else scope.body
            must_precede = scope is not self.module or not functions
            found = None
            for holder, imp in _imports_in(body):
                if must_precede and self._import_line(holder, imp) >= insert_line:
                    continue
                name = _torch_binding(imp)
                if name and (found is None or "." in name):  # prefer torch.<...> over a bare imported name
                    found = name
            if found:
                return found
        if not self._torch_import_added:
            self._torch_import_added = True
            top_level = (
                at
                if self.parent.get(at) is self.module
                else next(a for a in self._ancestors(at) if self.parent.get(a) is self.module)
            )
            self.imports_end = self._imports_end(self.body.index(top_level))
            later = [b for b in _module_imports(self.body) if isinstance(b.small, cst.Import) and _is_plain_torch(b.alias)]
            if later:  # `import torch` after the seeding, or in the __main__ block: move it up
                self._move_torch_import(later[0])
            else:
                self.edits.top_imports.append(_statement("import torch"))
        return "torch.use_deterministic_algorithms"

    def _import_line(self, holder, imp) -> int:
        """The line of an import; `holder` is the statement of the scanned body that contains it."""
        if isinstance(holder, cst.SimpleStatementLine):
            return self._range(holder)[0][0]
        self._ensure(self.top_of.get(holder, holder))
        return self._range(imp)[0][0]

    def _move_torch_import(self, b: _Binding) -> None:
        self._ensure(self.body[b.index])
        line, small = b.line, b.small
        if len(small.names) == 1 and len(line.body) == 1:
            self._claim(line)
            self.edits.remove.add(line)
            self.edits.top_imports.append(_Moved(small, line))
        else:
            self._claim(small)
            if len(small.names) == 1:
                self.edits.remove.add(small)
            else:
                self.edits.replace[small] = lambda updated, a=b.alias: _without_alias(updated, a)
            self.edits.top_imports.append(_statement("import torch"))


class _Conflict(Exception):
    """Another fix already edits this node; leave this one for the next round."""


class _Parents(cst.CSTVisitor):
    """Records each node's parent."""

    def __init__(self, parent: dict):
        super().__init__()
        self.parent = parent
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node) -> bool:
        if self.stack:
            self.parent[node] = self.stack[-1]
        self.stack.append(node)
        return True

    def on_leave(self, original_node) -> None:
        self.stack.pop()


# ---------------------------------------------------------------- rewriting


class _Rewriter(cst.CSTTransformer):
    """Applies the planned edits in one pass. Children are never removed by their own
    leave methods, so a block's original and rewritten bodies stay aligned."""

    def __init__(self, planner: _Planner):
        super().__init__()
        self.edits = edits = planner.edits
        self.top_at, self.imports_at, self.header_end = planner.top_at, planner.imports_end, planner.header_end
        moved = [m for m in [*edits.top, *edits.top_imports] if isinstance(m, _Moved)]
        self.moved = {m.small for m in moved}
        # How many leading lines of each moved line go with it (the rest stay behind).
        self.moved_lines = {m.line: len(_attached_comments(m.line)) for m in moved if m.line is not None}
        # Only the top-level statements that hold an edit are visited; the rest stay as they are.
        targets = [*edits.replace, *edits.insert_after, *edits.insert_before, *edits.remove, *self.moved]
        self.top_level = set(planner.body)
        tops = {planner.top_of.get(t) for t in targets}
        self.touched = None if None in tops else tops  # None: visit everything

    def on_visit(self, node) -> bool:
        return self.touched is None or node not in self.top_level or node in self.touched

    def on_leave(self, original_node, updated_node):
        updated = super().on_leave(original_node, updated_node)
        replace = self.edits.replace.get(original_node)
        if replace is not None:
            updated = replace(updated)
        if original_node in self.moved:
            self.edits.captured[original_node] = updated
        return updated

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if not any(s in self.edits.remove for s in original_node.body):
            return updated_node
        kept = [u for o, u in zip(original_node.body, updated_node.body, strict=True) if o not in self.edits.remove]
        if not kept:
            return updated_node  # the whole line goes; the block drops it
        kept[-1] = kept[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(body=kept)

    def leave_SimpleStatementSuite(self, original_node, updated_node):
        body = []
        for o, u in zip(original_node.body, updated_node.body, strict=True):
            body.extend(self.edits.insert_before.get(o, []))
            body.append(u)
            body.extend(self.edits.insert_after.get(o, []))
        if len(body) == len(updated_node.body):
            return updated_node
        old_last = updated_node.body[-1]
        if body[-1] is not old_last:  # an inserted statement ends the suite: it takes over the ending
            body[body.index(old_last)] = old_last.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            body[-1] = body[-1].with_changes(semicolon=old_last.semicolon)
        return updated_node.with_changes(body=body)

    def leave_IndentedBlock(self, original_node, updated_node):
        body, footer = self._rebuild(original_node.body, updated_node.body)
        if not body:
            body = [cst.SimpleStatementLine([cst.Pass()])]
        return updated_node.with_changes(body=body, footer=[*footer, *updated_node.footer])

    def leave_Module(self, original_node, updated_node):
        edits = self.edits
        top = [self._materialise(item) for item in edits.top]
        imports = [self._materialise(item) for item in edits.top_imports]
        body, footer = self._rebuild(original_node.body, updated_node.body, top, imports)
        return updated_node.with_changes(body=body, footer=[*footer, *updated_node.footer])

    def _materialise(self, item):
        if not isinstance(item, _Moved):
            return item
        small = self.edits.captured[item.small].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        if item.line is not None:
            return cst.SimpleStatementLine(
                [small], leading_lines=_attached_comments(item.line), trailing_whitespace=item.line.trailing_whitespace
            )
        return cst.SimpleStatementLine([small])

    def _rebuild(self, original, updated, top=(), imports=()):
        """The new statement list: removals, insertions, and (for the module) the top groups."""
        top_at, imports_at = self.top_at, self.imports_at
        out: list[cst.CSTNode] = []
        pending: list[cst.EmptyLine] = []  # leading lines of removed statements, for the next one
        groups: dict[int, list] = {}
        if top or imports:
            groups.setdefault(top_at, []).extend(top)
            groups.setdefault(imports_at, []).extend(imports)
        is_module = bool(top or imports)
        for i, (o, u) in enumerate(zip(original, updated, strict=True)):
            emitted = []
            group = groups.get(i, []) if is_module else []
            if group:
                u, group = self._place_group(i, original, u, group)
                emitted.extend(group)
            if self._removed(o):
                keep = len(u.leading_lines) - self.moved_lines.get(o, 0)
                pending.extend(u.leading_lines[:keep])
                out.extend(emitted)
                continue
            emitted.extend(self.edits.insert_before.get(o, []))
            emitted.append(u)
            emitted.extend(self.edits.insert_after.get(o, []))
            if pending:
                first = emitted[0]
                if any(line.comment is not None for line in pending) or not first.leading_lines:
                    emitted[0] = first.with_changes(leading_lines=[*pending, *first.leading_lines])
                pending = []
            out.extend(emitted)
        if is_module and len(original) in groups:
            out.extend(groups[len(original)])
        footer = [line for line in pending if line.comment is not None]
        return out, footer

    def _removed(self, stmt) -> bool:
        if stmt in self.edits.remove:
            return True
        return isinstance(stmt, cst.SimpleStatementLine) and all(s in self.edits.remove for s in stmt.body)

    def _place_group(self, i, original, u, group):
        """Blank lines around statements inserted at the top: after a docstring or
        `from __future__` import, the inserted group takes the blank lines that
        separated them from the next statement; after an import, it joins that import block."""
        if not (0 < i <= self.header_end):
            return u, group
        leading = list(u.leading_lines)
        blank = []
        for line in leading:
            if line.comment is not None:
                break
            blank.append(line)
        if not blank:
            return u, group
        group = [group[0].with_changes(leading_lines=[*blank, *group[0].leading_lines]), *group[1:]]
        if _is_import_block(original[i]):
            u = u.with_changes(leading_lines=leading[len(blank) :])
        return u, group


# ---------------------------------------------------------------- small helpers


def _top_level_lines(body, tree: ast.Module) -> list[tuple[int, int]]:
    """(first line, last line) of each top-level libcst statement, from the ast.

    A libcst line of `a; b` is two ast statements; a compound statement is one,
    starting at its first decorator.
    """
    spans, i = [], 0
    for stmt in body:
        count = len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
        group = tree.body[i : i + count]
        i += count
        if len(group) != count:
            raise CannotFix("libcst and ast disagree about its statements; please report this")
        first = min([group[0].lineno, *(d.lineno for d in getattr(group[0], "decorator_list", ()))])
        spans.append((first, group[-1].end_lineno))
    if i != len(tree.body):
        raise CannotFix("libcst and ast disagree about its statements; please report this")
    return spans


def _first_quote(text: str) -> str:
    """The quote character of the file's first ordinary string literal, as ruff's Stylist picks it."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.STRING:
                literal = token.string.lstrip("rRbBuUfF")
                if not literal.startswith(('"""', "'''")):
                    return literal[0]
    except (tokenize.TokenError, SyntaxError):
        pass
    return '"'


def _statement(code: str) -> cst.SimpleStatementLine:
    stmt = cst.parse_statement(code + "\n")
    assert isinstance(stmt, cst.SimpleStatementLine)
    return stmt


def _is_docstring(stmt) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _module_name(node) -> str:
    """The source text of a (dotted) name node."""
    return cst.Module([]).code_for_node(node) if node is not None else ""


def _is_future_import(stmt) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, cst.ImportFrom) and _module_name(s.module) == "__future__" and not s.relative for s in stmt.body
    )


def _imported_modules(small) -> list[str]:
    if isinstance(small, cst.Import):
        return [_module_name(a.name) for a in small.names]
    if isinstance(small, cst.ImportFrom):
        return ["." if small.relative else _module_name(small.module)]
    return []


def _is_stdlib_import(stmt) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if not isinstance(small, (cst.Import, cst.ImportFrom)):
            return False
        if any(m.split(".")[0] not in _STDLIB for m in _imported_modules(small)):
            return False
    return True


def _is_import_block(stmt) -> bool:
    """Imports only: an import line, or a try/if whose statements are all imports (or pass)."""
    if isinstance(stmt, cst.SimpleStatementLine):
        return all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)
    if isinstance(stmt, (cst.Try, cst.If)):
        inner: list = []
        _collect_statements(stmt, inner)
        return bool(inner) and all(
            isinstance(s, cst.SimpleStatementLine)
            and all(isinstance(x, (cst.Import, cst.ImportFrom, cst.Pass)) or _is_none_assign(x) for x in s.body)
            for s in inner
        )
    return False


def _is_none_assign(small) -> bool:
    """`torch = None` in an `except ImportError:` branch."""
    return isinstance(small, cst.Assign) and _is_name(small.value, "None")


def _collect_statements(node, out: list) -> None:
    """The statements in a compound statement's blocks, opening nested if/try blocks too."""
    for child in node.children:
        if isinstance(child, cst.SimpleStatementLine) or (
            isinstance(child, cst.BaseCompoundStatement) and not isinstance(child, (cst.If, cst.Try))
        ):
            out.append(child)
        else:
            _collect_statements(child, out)


def _is_main_guard(test) -> bool:
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    if not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = [test.left, test.comparisons[0].comparator]
    return any(_is_name(s, "__name__") for s in sides) and any(_string_value(s) == "__main__" for s in sides)


def _is_name(node, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name and not node.lpar


def _attr_name(node) -> str | None:
    return node.attr.value if isinstance(node, cst.Attribute) else None


def _string_value(node):
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 - an odd literal is simply not a match
            return None
        return value if isinstance(value, str) else None
    return None


def _same_quotes(node, value: str) -> cst.SimpleString:
    """A string literal holding `value`, written with the prefix and quotes of `node`."""
    first = node.left if isinstance(node, cst.ConcatenatedString) else node
    while isinstance(first, cst.ConcatenatedString):
        first = first.left
    prefix = "".join(c for c in first.prefix if c in "rRuU")
    return cst.SimpleString(f"{prefix}{first.quote}{value}{first.quote}", lpar=node.lpar, rpar=node.rpar)


def _env_pairs(node):
    """(key, value) expression pairs that set environment variables in this statement or call."""
    if isinstance(node, (cst.Assign, cst.AnnAssign)):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            if isinstance(target, cst.Subscript) and len(target.slice) == 1:
                index = target.slice[0].slice
                if isinstance(index, cst.Index):
                    yield index.value, node.value
        return
    positional = [a.value for a in node.args if a.keyword is None and not a.star]
    keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
    key = positional[0] if positional else keywords.get("key", keywords.get("name"))
    value = positional[1] if len(positional) > 1 else keywords.get("default", keywords.get("value"))
    if key is not None and value is not None:
        yield key, value  # setdefault(key, value), putenv(name, value)
    for name, value in keywords.items():  # update(CUBLAS_WORKSPACE_CONFIG=...)
        yield cst.SimpleString(repr(name)), value
    for arg in positional[:1]:  # update({...})
        if isinstance(arg, cst.Dict):
            for element in arg.elements:
                if isinstance(element, cst.DictElement):
                    yield element.key, element.value


def _without_arg(call: cst.Call, index: int) -> cst.Call:
    """The call without its `index`-th argument; the commas and the closing layout stay right."""
    args = list(call.args)
    removed = args.pop(index)
    if index == len(args) and args:  # removed the last one: the new last takes its ending
        prev = args[-1]
        if isinstance(removed.comma, cst.Comma) and isinstance(prev.comma, cst.Comma):
            comma = prev.comma.with_changes(whitespace_after=removed.comma.whitespace_after)
        else:
            comma = removed.comma
        args[-1] = prev.with_changes(comma=comma, whitespace_after_arg=removed.whitespace_after_arg)
    return call.with_changes(args=args)


def _drops_comment(call: cst.Call, index: int) -> bool:
    """Would removing this argument lose a comment?"""
    code = cst.Module([]).code_for_node
    return _comments(code(call)) != _comments(code(_without_arg(call, index)))


def _comments(code: str) -> list[str]:
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):  # pragma: no cover - code printed by libcst
        return ["?"]


def _without_alias(imp, alias):
    """`import sys, os` without `os` (found by its original node's code)."""
    code = cst.Module([]).code_for_node
    target = code(alias.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip()
    names = [a for a in imp.names if code(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip() != target]
    if len(names) == len(imp.names) or not names:  # pragma: no cover - planned from the same node
        return imp
    last = imp.names[-1]
    names[-1] = names[-1].with_changes(comma=last.comma)
    return imp.with_changes(names=names)


def _free_names(small) -> set[str]:
    """Names a statement reads that are not attributes or keyword names."""
    names: set[str] = set()

    class Collect(cst.CSTVisitor):
        def visit_Attribute(self, node):
            node.value.visit(self)
            return False

        def visit_Arg(self, node):
            node.value.visit(self)
            return False

        def visit_Name(self, node):
            names.add(node.value)

    small.visit(Collect())
    # Assignment targets like os.environ[...] are reads of `os`; plain-name targets would be writes.
    if isinstance(small, cst.Assign) and any(isinstance(t.target, cst.Name) for t in small.targets):
        names.add("<assigns a name>")
    return names


@dataclass(frozen=True)
class _Binding:
    """One module-level import that binds a name: where it is and what it binds."""

    index: int  # in the module body (the `__main__` block counts as its `if`)
    name: str  # the bound name
    what: str  # "os", "environ", "torch", ...
    line: cst.SimpleStatementLine | None
    small: cst.Import | cst.ImportFrom | None
    alias: cst.ImportAlias | None


def _module_imports(body) -> list[_Binding]:
    """Import aliases in module-level import lines and in the `__main__` block."""
    out = []
    for index, stmt in enumerate(body):
        lines = []
        if isinstance(stmt, cst.SimpleStatementLine):
            lines = [stmt]
        elif isinstance(stmt, cst.If) and _is_main_guard(stmt.test) and isinstance(stmt.body, cst.IndentedBlock):
            lines = [s for s in stmt.body.body if isinstance(s, cst.SimpleStatementLine)]
        for line in lines:
            for small in line.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                    for alias in small.names:
                        out.append(_Binding(index, "", "", line, small, alias))
    return out


def _os_bindings(body) -> list[_Binding]:
    out = []
    for b in _module_imports(body):
        small, alias = b.small, b.alias
        name = _module_name(alias.name)
        bound = _module_name(alias.asname.name) if alias.asname else None
        if isinstance(small, cst.Import):
            if name == "os" or (name.startswith("os.") and bound is None):
                out.append(_Binding(b.index, bound or "os", "os", b.line, small, alias))
        elif not small.relative and _module_name(small.module) == "os" and name == "environ":
            out.append(_Binding(b.index, bound or "environ", "environ", b.line, small, alias))
        elif not small.relative and _module_name(small.module) == "os" and name == "putenv":
            out.append(_Binding(b.index, bound or "putenv", "putenv", b.line, small, alias))
    # The top group needs os.environ; a `from os import putenv` can only serve a moved putenv call.
    return out


def _imports_in(body) -> list:
    """(statement of `body`, import) for the imports in a body, in if/try/with blocks too, not in nested defs."""
    found = []
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            found.extend((stmt, s) for s in stmt.body if isinstance(s, (cst.Import, cst.ImportFrom)))
        elif isinstance(stmt, cst.BaseCompoundStatement) and not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            inner: list = []
            _collect_statements(stmt, inner)
            found.extend((stmt, imp) for _, imp in _imports_in(inner))
    return found


def _torch_binding(imp) -> str | None:
    """What to call for `torch.use_deterministic_algorithms` given this import, if it helps."""
    if isinstance(imp, cst.Import):
        for alias in imp.names:
            name = _module_name(alias.name)
            if alias.asname is not None:
                if name == "torch":
                    return f"{_module_name(alias.asname.name)}.use_deterministic_algorithms"
            elif name == "torch" or name.startswith("torch."):
                return "torch.use_deterministic_algorithms"
    elif (
        isinstance(imp, cst.ImportFrom)
        and not imp.relative
        and _module_name(imp.module) == "torch"
        and not isinstance(imp.names, cst.ImportStar)
    ):
        for alias in imp.names:
            if _module_name(alias.name) == "use_deterministic_algorithms":
                return _module_name(alias.asname.name) if alias.asname else "use_deterministic_algorithms"
    return None


def _is_plain_torch(alias) -> bool:
    return alias.asname is None and _module_name(alias.name) == "torch"
