"""opscan: find why a seeded PyTorch run is not reproducible, and what it takes to make it so."""

from opscan._version import __version__

__all__ = ["__version__", "trace"]


def __getattr__(name):
    # The tracer imports torch; keep `import opscan` (and so `opscan lint`) torch-free.
    if name == "trace":
        from opscan.trace import trace

        return trace
    raise AttributeError(f"module 'opscan' has no attribute {name!r}")
