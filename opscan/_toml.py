"""`tomllib.loads` for the plain TOML most `pyproject.toml` files are written in, without importing tomllib.

tomllib brings `typing`, `datetime`, `string` and its regular expressions:
about 5 ms, several times what lint spends on a small script (and lint reads
a pyproject.toml for its configuration, and another for the torch
requirement). `loads` reads the subset below and returns exactly what
`tomllib.loads` would; for anything else (multi-line strings, dotted keys,
escapes, floats, dates, arrays of tables, and every error) it returns None,
and the caller asks tomllib, which gives the answer or the error.

The subset:

- blank lines and `# comments`, also after a value and between array items;
- table headers `[a.b.c]` of bare keys (letters, digits, `_`, `-`);
- `key = value`, the key bare or quoted without escapes (`"rules" = ...`);
- values: basic strings without backslashes (`"..."`), literal strings
  (`'...'`), `true`, `false`, decimal integers, arrays of values (over
  several lines too, a trailing comma allowed) and one-line inline tables
  (`{ name = "x" }`).
"""

from __future__ import annotations

import sys

_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_END_OF_WORD = frozenset(" \t\r\n#,]}")


class _Outside(Exception):
    """The text is not in the subset (or not valid TOML): tomllib decides."""


def _control(text: str) -> bool:
    """Whether text holds a character TOML allows in no string or comment (tab excepted)."""
    return any((c < " " and c != "\t") or c == "\x7f" for c in text)


class _Reader:
    def __init__(self, text: str):
        self.text = text
        self.i = 0
        self.frozen: set[int] = set()  # ids of inline tables and arrays: no header may add to them

    def spaces(self) -> None:
        text, i = self.text, self.i
        while i < len(text) and text[i] in " \t":
            i += 1
        self.i = i

    def line_end(self) -> None:
        """Spaces, an optional comment, then a newline or the end."""
        self.spaces()
        text, i = self.text, self.i
        if i < len(text) and text[i] == "#":
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            comment = text[i:end]
            if comment.endswith("\r"):
                comment = comment[:-1]
            if _control(comment):
                raise _Outside
            i += len(comment)
        if text.startswith("\r\n", i):
            i += 2
        elif text.startswith("\n", i):
            i += 1
        elif i < len(text):
            raise _Outside
        self.i = i

    def blanks(self) -> None:
        """Spaces, comments and newlines between array items."""
        while True:
            self.spaces()
            c = self.text[self.i : self.i + 1]
            if c in ("#", "\n", "\r"):
                if self.i == len(self.text):
                    return
                start = self.i
                self.line_end()
                if self.i == start:
                    raise _Outside
            else:
                return

    def string(self) -> str:
        text, i = self.text, self.i
        quote = text[i]
        if text.startswith(quote * 3, i):
            raise _Outside  # a multi-line string
        end = text.find(quote, i + 1)
        if end < 0:
            raise _Outside
        value = text[i + 1 : end]
        if (quote == '"' and "\\" in value) or _control(value):
            raise _Outside
        self.i = end + 1
        return value

    def key(self) -> str:
        text, i = self.text, self.i
        if text[i : i + 1] in ('"', "'"):
            return self.string()
        end = i
        while end < len(text) and text[end] in _BARE:
            end += 1
        if end == i:
            raise _Outside
        self.i = end
        return text[i:end]

    def value(self):
        text, i = self.text, self.i
        c = text[i : i + 1]
        if c in ('"', "'"):
            return self.string()
        if c == "[":
            self.i += 1
            items: list = []
            while True:
                self.blanks()
                if self.text[self.i : self.i + 1] == "]":
                    self.i += 1
                    self.frozen.add(id(items))
                    return items
                items.append(self.value())
                self.blanks()
                c = self.text[self.i : self.i + 1]
                if c == ",":
                    self.i += 1
                elif c != "]":
                    raise _Outside
        if c == "{":
            self.i += 1
            table: dict = {}
            self.spaces()
            if self.text[self.i : self.i + 1] == "}":
                self.i += 1
            else:
                while True:
                    self.spaces()
                    key = self.key()
                    self.spaces()
                    if self.text[self.i : self.i + 1] != "=" or key in table:
                        raise _Outside
                    self.i += 1
                    self.spaces()
                    table[key] = self.value()
                    self.spaces()
                    c = self.text[self.i : self.i + 1]
                    self.i += 1
                    if c == "}":
                        break
                    if c != ",":
                        raise _Outside
            self.frozen.add(id(table))
            return table
        end = i
        while end < len(text) and text[end] not in _END_OF_WORD:
            end += 1
        word = text[i:end]
        self.i = end
        if word == "true":
            return True
        if word == "false":
            return False
        digits = word[1:] if word[:1] in ("+", "-") else word
        if digits.isdigit() and digits.isascii() and (digits == "0" or digits[0] != "0"):
            return int(word)
        raise _Outside

    def document(self) -> dict:
        text = self.text
        if text.startswith("\ufeff"):
            raise _Outside
        root: dict = {}
        table = root
        headers: set[tuple[str, ...]] = set()
        while self.i < len(text):
            self.spaces()
            c = text[self.i : self.i + 1]
            if c in ("", "#", "\n", "\r"):
                if c == "":
                    break
                self.line_end()
                continue
            if c == "[":
                if text.startswith("[[", self.i):
                    raise _Outside  # an array of tables
                end = text.find("]", self.i)
                if end < 0:
                    raise _Outside
                path = tuple(text[self.i + 1 : end].split("."))
                if path in headers or not all(k and all(ch in _BARE for ch in k) for k in path):
                    raise _Outside
                headers.add(path)
                table = root
                for key in path:
                    table = table.setdefault(key, {})
                    if table.__class__ is not dict or id(table) in self.frozen:
                        raise _Outside
                self.i = end + 1
            else:
                key = self.key()
                self.spaces()
                if text[self.i : self.i + 1] != "=" or key in table:
                    raise _Outside
                self.i += 1
                self.spaces()
                table[key] = self.value()
            self.line_end()
        return root


def loads(text: str) -> dict | None:
    """What `tomllib.loads(text)` returns, for text in the subset above; None for any other text."""
    try:
        return _Reader(text).document()
    except (_Outside, IndexError):
        return None


class TOMLError(ValueError):
    """Text that is not valid TOML; the message is tomllib's."""


def parse(text: str) -> dict:
    """`tomllib.loads(text)`: the subset read here, anything else by tomllib, imported only then.

    Raises TOMLError with tomllib's message.
    """
    data = loads(text)
    if data is not None:
        return data
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TOMLError(str(exc)) from None
