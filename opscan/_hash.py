"""`blake2b` without importing hashlib, whose OpenSSL start-up costs lint ~20 ms."""

from __future__ import annotations

try:
    from _blake2 import blake2b  # what hashlib.blake2b is
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

__all__ = ["blake2b", "digest"]


def digest(data: str | bytes) -> str:
    """A short hex digest of text or bytes, for cache keys and snapshot checks."""
    return blake2b(data.encode() if isinstance(data, str) else data, digest_size=16).hexdigest()
