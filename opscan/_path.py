"""A POSIX filesystem path: the part of `pathlib.Path` that lint uses, on `os.path`.

`import pathlib` costs a cold `opscan lint` of one file ~6 ms (it imports
fnmatch with re, urllib.parse with ipaddress, ntpath), ~0.18x of the parse
floor. This type spells and orders paths as `pathlib.PosixPath` does (the
same normalisation, `str`, `parts`, `name`, `suffix`, `parent`, sort order
and file tests, on Python 3.10 to 3.13), so output built from it is the same
byte for byte. It is not a `pathlib.PurePath`: it equals only its own kind;
anything that needs pathlib converts with `pathlib.Path(os.fspath(p))`.
"""

from __future__ import annotations

import os
import stat as _stat
import sys

# pathlib orders paths by their parts: up to 3.11 the root is a part of its own
# ("/"), from 3.12 the parts are the string split at "/" (the root gives "").
_SPLIT_ORDER = sys.version_info >= (3, 12)
# Up to 3.12, resolve() without strict raises RuntimeError on a symlink loop; 3.13 does not.
_LOOP_RAISES = sys.version_info < (3, 13)
# Up to 3.12, is_file/is_dir/exists raise for errors other than these; 3.13 uses os.path's tests.
_IGNORED_ERRNOS = (2, 20, 9, 40)  # ENOENT, ENOTDIR, EBADF, ELOOP
_OS_TESTS = sys.version_info >= (3, 13)


def _any(mode: int) -> bool:
    return True


def _normalise(parts) -> str:
    """The string pathlib.PurePosixPath(*parts) gives."""
    text = ""
    for part in parts:
        part = os.fspath(part)
        if isinstance(part, bytes):
            raise TypeError(f"argument should be a str or an os.PathLike object where __fspath__ returns a str, not {type(part).__name__!r}")
        if part.startswith("/"):
            text = part
        elif part:
            text = part if not text else (text + part if text.endswith("/") else text + "/" + part)
    if not text:
        return "."
    if text.startswith("/"):
        root = "//" if text.startswith("//") and not text.startswith("///") else "/"
    else:
        root = ""
    rest = "/".join(p for p in text.split("/") if p and p != ".")
    return root + rest if (root or rest) else "."


def resolved_in(real_folder: str, name: str) -> str | None:
    """The resolved path of `name` in an already resolved folder: the two joined, by one lstat;
    None where that is not the answer (`name` is a link, or `.`/`..`): resolve the path whole then."""
    joined = os.path.join(real_folder, name)
    return None if name in ("", ".", "..") or os.path.islink(joined) else joined


class Path:
    """An absolute or relative POSIX path, as pathlib spells it."""

    __slots__ = ("_str",)

    def __init__(self, *parts):
        if len(parts) == 1 and type(parts[0]) is Path:
            self._str = parts[0]._str
        else:
            self._str = _normalise(parts)

    @classmethod
    def _of(cls, text: str) -> Path:  # an already normalised string
        p = object.__new__(cls)
        p._str = text
        return p

    @classmethod
    def cwd(cls) -> Path:
        return cls(os.getcwd())

    # ---- as a string

    def __str__(self) -> str:
        return self._str

    def __fspath__(self) -> str:
        return self._str

    def as_posix(self) -> str:
        return self._str

    def __repr__(self) -> str:
        return f"PosixPath({self._str!r})"

    def __eq__(self, other) -> bool:
        if type(other) is not Path:
            return NotImplemented
        return self._str == other._str

    def __hash__(self) -> int:
        return hash(self._str)

    def _key(self) -> list[str]:
        if _SPLIT_ORDER:
            return self._str.split("/")
        return list(self.parts)

    def __lt__(self, other: Path) -> bool:
        if type(other) is not Path:
            return NotImplemented
        return self._key() < other._key()

    def __le__(self, other: Path) -> bool:
        if type(other) is not Path:
            return NotImplemented
        return self._key() <= other._key()

    def __gt__(self, other: Path) -> bool:
        if type(other) is not Path:
            return NotImplemented
        return self._key() > other._key()

    def __ge__(self, other: Path) -> bool:
        if type(other) is not Path:
            return NotImplemented
        return self._key() >= other._key()

    # ---- its parts

    def _root(self) -> str:
        s = self._str
        if s.startswith("/"):
            return "//" if s.startswith("//") and not s.startswith("///") else "/"
        return ""

    @property
    def parts(self) -> tuple[str, ...]:
        root = self._root()
        rest = self._str[len(root):]
        names = rest.split("/") if rest and rest != "." else []
        return (root, *names) if root else tuple(names)

    @property
    def name(self) -> str:
        root = self._root()
        if self._str == "." or len(self._str) == len(root):
            return ""
        return self._str.rpartition("/")[2]

    @property
    def suffix(self) -> str:
        name = self.name
        i = name.rfind(".")
        return name[i:] if 0 < i < len(name) - 1 else ""

    @property
    def stem(self) -> str:
        name = self.name
        i = name.rfind(".")
        return name[:i] if 0 < i < len(name) - 1 else name

    @property
    def parent(self) -> Path:
        root = self._root()
        if self._str == "." or len(self._str) == len(root):
            return self
        head = self._str.rpartition("/")[0]
        if len(head) < len(root):  # "/a" -> "/", "//a" -> "//"
            head = root
        return Path._of(head or ".")

    @property
    def parents(self) -> list[Path]:
        out = []
        p = self
        while True:
            q = p.parent
            if q._str == p._str:
                return out
            out.append(q)
            p = q

    def with_suffix(self, suffix: str) -> Path:
        name = self.name
        if not name:
            raise ValueError(f"{self!r} has an empty name")
        if suffix and (not suffix.startswith(".") or suffix == "." or "/" in suffix):
            raise ValueError(f"Invalid suffix {suffix!r}")
        return self.with_name(self.stem + suffix)

    def with_name(self, name: str) -> Path:
        if not self.name:
            raise ValueError(f"{self!r} has an empty name")
        if not name or "/" in name or (name == "." and _OS_TESTS):
            raise ValueError(f"Invalid name {name!r}")
        head = self._str.rpartition("/")[0] if "/" in self._str else ""
        if "/" in self._str and len(head) < len(self._root()):
            head = self._root()
        return Path._of(name if not head else (head + name if head.endswith("/") else head + "/" + name))

    def __truediv__(self, other) -> Path:
        if type(other) is str and other and "/" not in other and other != ".":  # one name: the common case
            s = self._str
            return Path._of(other if s == "." else (s + other if s.endswith("/") else s + "/" + other))
        try:
            return Path(self._str, other)
        except TypeError:
            return NotImplemented

    def __rtruediv__(self, other) -> Path:
        try:
            return Path(other, self._str)
        except TypeError:
            return NotImplemented

    def is_absolute(self) -> bool:
        return self._str.startswith("/")

    def relative_to(self, other) -> Path:
        other = other if type(other) is Path else Path(other)
        mine, theirs = self.parts, other.parts
        if mine[: len(theirs)] != theirs or (not theirs and self.is_absolute()):
            raise ValueError(f"{str(self)!r} is not in the subpath of {str(other)!r}")
        rest = mine[len(theirs):]
        return Path._of("/".join(rest)) if rest else Path._of(".")

    # ---- on the filesystem

    def absolute(self) -> Path:
        return self if self.is_absolute() else Path(os.getcwd(), self._str)

    def resolve(self, strict: bool = False) -> Path:
        try:
            text = os.path.realpath(self._str, strict=strict)
        except OSError as exc:
            if _LOOP_RAISES and exc.errno == 40:
                raise RuntimeError(f"Symlink loop from {exc.filename!r}") from None
            raise
        p = Path(text)
        if not strict and _LOOP_RAISES:
            try:
                os.stat(text)
            except OSError as exc:
                if exc.errno == 40:
                    raise RuntimeError(f"Symlink loop from {exc.filename!r}") from None
        return p

    def stat(self):
        return os.stat(self._str)

    def _test(self, test) -> bool:
        try:
            return test(os.stat(self._str).st_mode)
        except OSError as exc:
            if exc.errno not in _IGNORED_ERRNOS:
                raise
            return False
        except ValueError:  # an embedded null byte
            return False

    def is_file(self) -> bool:
        return os.path.isfile(self._str) if _OS_TESTS else self._test(_stat.S_ISREG)

    def is_dir(self) -> bool:
        return os.path.isdir(self._str) if _OS_TESTS else self._test(_stat.S_ISDIR)

    def exists(self) -> bool:
        return os.path.exists(self._str) if _OS_TESTS else self._test(_any)

    def iterdir(self):
        base = "" if self._str == "." else self._str
        for name in os.listdir(self._str):
            yield Path._of(name if not base else (base + name if base.endswith("/") else base + "/" + name))

    def read_bytes(self) -> bytes:
        with open(self._str, "rb") as fh:
            return fh.read()

    def read_text(self, encoding: str | None = None, errors: str | None = None) -> str:
        with open(self._str, encoding=encoding, errors=errors) as fh:
            return fh.read()
