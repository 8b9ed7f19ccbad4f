"""A content-keyed cache of module facts, like ruff's: a repeated run over an unchanged tree reads no source twice.

The key is the file's bytes (hashed), the module's package (for relative
imports), the call filter the facts were built under, and the opscan and
facts versions. Facts do not depend on configuration, so one cache serves
every selection and target version.

Each entry is its own small file, named by its key, in a folder per opscan and
facts version: a run reads only the entries it needs, and worker processes
add entries without passing facts back to the parent. An entry is written to a
temporary name and renamed into place; an unreadable one is rebuilt.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from opscan._version import __version__
from opscan._hash import blake2b
from opscan.lint.facts import FACTS_VERSION, ModuleFacts

CACHE_DIR = ".opscan_cache"
# Entries not used by a run are deleted once the folder holds this many more than the run used.
SPARE_ENTRIES = 2000


class FactsCache:
    def __init__(self, folder: Path):
        self.folder = folder
        self.used: set[str] = set()
        self.wrote = False

    @classmethod
    def open(cls, root: Path) -> FactsCache:
        override = os.environ.get("OPSCAN_CACHE_DIR")
        base = Path(override) if override else Path(os.fspath(root)) / CACHE_DIR  # root: Config's own path type
        return cls(base / f"facts-{__version__}-{FACTS_VERSION}")

    @staticmethod
    def _key(data: bytes, package: str, variant: str) -> str:
        return blake2b(data + b"\0" + package.encode() + b"\0" + variant.encode(), digest_size=20).hexdigest()

    def get(self, data: bytes, package: str, variant: str = "") -> ModuleFacts | None:
        """The cached facts, or None. `variant` names the call filter they were built under ("" for none)."""
        key = self._key(data, package, variant)
        self.used.add(key)
        try:
            with open(self.folder / key, "rb") as fh:
                facts = pickle.load(fh)
        except Exception:  # missing, truncated, from another Python: build afresh
            return None
        return facts if isinstance(facts, ModuleFacts) else None

    def put(self, data: bytes, package: str, facts: ModuleFacts, variant: str = "") -> None:
        """Store an entry; a cache that cannot be written is not an error."""
        key = self._key(data, package, variant)
        self.used.add(key)
        target = self.folder / key
        # Not fsutil.atomic_write_bytes: a cache entry needs no fsync (a torn one is rebuilt),
        # and a name per process lets worker processes write the same entry at once.
        temp = self.folder / f".{key}.{os.getpid()}.tmp"
        try:
            if not self.wrote:
                self._create_folder()
            # Not the source lines: the cache would hold the tree's text again. A finding reads the lines it quotes.
            lines, facts.lines = facts.lines, None
            try:
                with open(temp, "wb") as fh:
                    pickle.dump(facts, fh, protocol=pickle.HIGHEST_PROTOCOL)
            finally:
                facts.lines = lines
            os.replace(temp, target)
            self.wrote = True
        except OSError:
            try:
                os.unlink(temp)
            except OSError:
                pass

    def _create_folder(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        gitignore = self.folder.parent / ".gitignore"
        if not gitignore.exists():
            gitignore.write_text("# Automatically created by opscan.\n*\n")

    def prune(self) -> None:
        """Delete entries this run did not use, once there are many more of them than it used."""
        used = self.used
        try:
            with os.scandir(self.folder) as it:
                names = [e.name for e in it if not e.name.startswith(".")]
        except OSError:
            return
        if len(names) <= 2 * len(used) + SPARE_ENTRIES:
            return
        for name in names:
            if name not in used:
                try:
                    os.unlink(self.folder / name)
                except OSError:
                    pass
