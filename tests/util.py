"""Small helpers shared by the test packages."""

from __future__ import annotations

import importlib.util
import os
from contextlib import contextmanager
from pathlib import Path

import pytest

# `opscan lint` runs without torch (a lint-only install); scan, record, bench and report need it.
# find_spec: knowing whether torch is there must not import it.
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="needs torch (pip install opscan[trace])")


@contextmanager
def chdir(path: Path):
    """contextlib.chdir, which Python 3.10 lacks."""
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def subprocess_env() -> dict[str, str]:
    """os.environ for an opscan the tests start: without the user's OPSCAN_* settings (their
    cache folder, say), but with the suite's own OPSCAN_IGNORE_INSTALLED_TORCH and the like for
    the frameworks (tests/conftest.py)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("OPSCAN_") or k.startswith("OPSCAN_IGNORE_INSTALLED_")}
