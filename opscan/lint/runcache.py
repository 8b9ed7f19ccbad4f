"""A rerun over an unchanged tree prints what the last run printed, without linting or importing the linter.

The facts cache (opscan.lint.cache) spares parsing, but a warm run still
starts the linter: its imports alone cost several times what the interpreter
takes to start. So a plain `opscan lint` (no --fix, --diff, --add-noqa,
stdin or -o) also records, beside the facts, what it printed and its exit
code, under a key made of the command line, the working directory, the
interpreter, opscan's version and the OPSCAN_* environment, with the state
of everything the result depended on:

- every file it read: the linted files, the modules their imports reached,
  the configuration files looked for (present or not), the files that may
  declare the targeted torch (requirements, lock files, the installed
  torch's metadata), or the release of a framework whose idiom a fix uses
  (accelerate's), and opscan's own source and rules data;
- every folder whose listing mattered: the folders discovery walked, the
  folders an import was looked for in (present or not).

Each is kept as its (mtime, size, inode), or None where it did not exist.
A folder walked up for the torch requirement (or a `sys.path` folder searched
for the installed torch, or framework) is kept as the sorted names in it that start with
one of a few prefixes (see `listing`): its other entries, and its mtime, change
too often (a home folder, /tmp) to say anything about this run.
`replay` runs before argparse is imported: it stats them all again and,
only if every one is unchanged, writes the recorded output. A run in which
any of them changed less than two seconds before it started (or while it
ran) records nothing, so an edit within the file system's clock tick is
never missed. OPSCAN_RUN_CACHE=0 turns it off (the facts cache still works).
"""

from __future__ import annotations

import os
import sys

from opscan._version import __version__

FORMAT = 1
RUNS = f"runs-{__version__}-{FORMAT}"
CACHE_DIR = ".opscan_cache"  # as opscan.lint.cache.CACHE_DIR, without importing it
RACY_NS = 2_000_000_000  # changes this close to the run are not trusted to show in mtimes
# Flags after which the output is not only the report (or writes files): never replayed.
# -v and --show-settings say what they found on sys.path and in the project as they run.
_NOT_REPLAYED = frozenset({
    "--fix", "--diff", "--add-noqa", "--no-cache", "-o", "--output-file", "--stdin-filename", "-", "--help", "-h",
    "-v", "--verbose", "--show-settings",
})  # fmt: skip


def _key(argv: list[str], cwd: str) -> str:
    from opscan._hash import blake2b

    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("OPSCAN_"))
    text = repr((FORMAT, __version__, sys.version, sys.executable, cwd, argv, env))
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


def eligible(argv: list[str]) -> bool:
    """Whether `opscan lint ARGV` may be replayed from, and recorded into, the run cache (OPSCAN_RUN_CACHE=0: never)."""
    if os.environ.get("OPSCAN_RUN_CACHE") == "0":
        return False
    return not any(
        a in _NOT_REPLAYED or a.startswith(("--output-file=", "--stdin-filename=", "-o")) or (a[:1] == "-" != a[1:2] and "v" in a)
        for a in argv
    )  # `-qv`: short flags together


LISTING = "\0"  # no path holds it: marks a dep made by listing()


def listing(folder: str, prefixes: tuple[str, ...]) -> str:
    """A dep on the names in `folder` that start with one of `prefixes` once lowercased."""
    return f"{LISTING}{folder}{LISTING}{'|'.join(prefixes)}"


def _state(dep: str):
    """What a dep is now: a path's signature, or a listing's names (None where it cannot be read)."""
    if dep[:1] != LISTING:
        return signature(dep)
    _, folder, prefixes = dep.split(LISTING)
    try:
        names = os.listdir(folder)
    except (OSError, ValueError):
        return None
    wanted = tuple(prefixes.split("|"))
    return tuple(sorted(n for n in names if n.lower().startswith(wanted)))


def signature(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _record_path(folder: str, key: str) -> str:
    return os.path.join(folder, RUNS, key)


def _candidates(cwd: str) -> list[str]:
    """The run folders a record for this working directory may be in: OPSCAN_CACHE_DIR, or a
    `.opscan_cache` in the working directory or a folder above (the project root holds it)."""
    override = os.environ.get("OPSCAN_CACHE_DIR")
    if override:
        return [override]
    out, folder = [], cwd
    while True:
        out.append(os.path.join(folder, CACHE_DIR))
        parent = os.path.dirname(folder)
        if parent == folder:
            return out
        folder = parent


def replay(argv: list[str]) -> int | None:
    """Print a recorded run of `opscan lint ARGV` if nothing it depended on changed; its exit code, or None."""
    if not eligible(argv):
        return None
    import marshal

    try:
        cwd = os.getcwd()
    except OSError:
        return None
    key = _key(argv, cwd)
    for folder in _candidates(cwd):
        try:
            with open(_record_path(folder, key), "rb") as fh:
                record = marshal.load(fh)
        except (OSError, EOFError, ValueError, TypeError):
            continue
        try:
            stored_key, deps, out, err, code = record
        except (TypeError, ValueError):
            return None
        if stored_key != key or any(_state(path) != sig for path, sig in deps):
            return None
        try:
            if out:
                sys.stdout.buffer.write(out)
                sys.stdout.flush()
            if err:
                sys.stderr.buffer.write(err)
                sys.stderr.flush()
        except (AttributeError, OSError):
            return None
        return code
    return None


def save(folder: str, argv: list[str], cwd: str, started_ns: int, deps: set[str], out: bytes, err: bytes, code: int) -> None:
    """Record a run; nothing when a dependency changed around it, or when the folder cannot be written."""
    import marshal
    import time

    signed = []
    for path in sorted(deps | _own_files()):
        sig = _state(path)
        if path[:1] != LISTING and sig is not None and sig[0] >= started_ns - RACY_NS:
            return  # changed just before or during the run: an mtime may not show the next change
        signed.append((path, sig))
    if time.time_ns() - started_ns < 0:  # pragma: no cover - a clock that went back
        return
    key = _key(argv, cwd)
    target = _record_path(folder, key)
    temp = f"{target}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(temp, "wb") as fh:
            marshal.dump((key, signed, out, err, code), fh)
        os.replace(temp, target)
    except OSError:
        try:
            os.unlink(temp)
        except OSError:
            pass


def _own_files() -> set[str]:
    """opscan's own source and rules data: a changed opscan must not replay an old result."""
    base = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = set()
    for sub in ("", "lint", os.path.join("lint", "rules"), os.path.join("lint", "fix"), "commands"):
        folder = os.path.join(base, sub)
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        out.add(folder)
        out.update(os.path.join(folder, n) for n in names if n.endswith((".py", ".json")))
    return out


class Tee:
    """A text stream that passes writes on and keeps their bytes, as the stream would have encoded them."""

    def __init__(self, stream):
        self.stream = stream
        self.kept: list[bytes] = []
        self.encoding = getattr(stream, "encoding", None) or "utf-8"
        self.errors = getattr(stream, "errors", None) or "strict"

    def write(self, text: str) -> int:
        n = self.stream.write(text)
        try:
            self.kept.append(text.encode(self.encoding, self.errors))
        except (UnicodeEncodeError, LookupError):
            self.kept.append(text.encode("utf-8", "backslashreplace"))
        return n

    def __getattr__(self, name):
        return getattr(self.stream, name)

    @property
    def buffer(self):  # bytes written past the text layer are kept too
        tee = self

        class _Buffer:
            def write(self, data: bytes) -> int:
                tee.kept.append(bytes(data))
                return tee.stream.buffer.write(data)

            def __getattr__(self, name):
                return getattr(tee.stream.buffer, name)

        return _Buffer()

    def bytes(self) -> bytes:
        return b"".join(self.kept)
