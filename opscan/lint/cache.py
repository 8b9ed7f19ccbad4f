"""A content-keyed cache of module facts, like ruff's: a repeated run over an unchanged tree reads no source twice.

The key is the file's bytes (hashed), the module's package (for relative
imports) and the opscan and facts versions. Facts do not depend on
configuration, so one cache serves every selection and target version.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

from opscan import __version__
from opscan.lint.facts import FACTS_VERSION, ModuleFacts

CACHE_DIR = ".opscan_cache"


class FactsCache:
    def __init__(self, file: Path, entries: dict[bytes, ModuleFacts]):
        self.file = file
        self.entries = entries
        self.used: set[bytes] = set()
        self.dirty = False

    @classmethod
    def open(cls, root: Path) -> FactsCache:
        override = os.environ.get("OPSCAN_CACHE_DIR")
        folder = Path(override) if override else root / CACHE_DIR
        file = folder / f"facts-{__version__}-{FACTS_VERSION}.pickle"
        entries: dict = {}
        try:
            with open(file, "rb") as fh:
                loaded = pickle.load(fh)
            if isinstance(loaded, dict):
                entries = loaded
        except Exception:  # missing, truncated or from another Python: start afresh
            entries = {}
        return cls(file, entries)

    @staticmethod
    def _key(data: bytes, package: str) -> bytes:
        return hashlib.blake2b(data + b"\0" + package.encode(), digest_size=20).digest()

    def get(self, data: bytes, package: str) -> ModuleFacts | None:
        key = self._key(data, package)
        self.used.add(key)
        return self.entries.get(key)

    def put(self, data: bytes, package: str, facts: ModuleFacts) -> None:
        key = self._key(data, package)
        self.used.add(key)
        self.entries[key] = facts
        self.dirty = True

    def save(self) -> None:
        """Write atomically; a cache that cannot be written is not an error."""
        if not self.dirty:
            return
        if len(self.entries) > 2 * len(self.used) + 2000:  # drop stale versions of edited files
            self.entries = {k: v for k, v in self.entries.items() if k in self.used}
        from opscan.fsutil import atomic_write_bytes

        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            gitignore = self.file.parent / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("# Automatically created by opscan.\n*\n")
            atomic_write_bytes(self.file, pickle.dumps(self.entries, protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:
            pass
