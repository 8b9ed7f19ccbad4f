"""Every modelled API: qualified name -> model, the core APIs' and the framework helpers'.

A module of its own so that both the linker (`project`) and the call filter
(`relevance`) can read the table without importing each other.
"""

from __future__ import annotations

from opscan.lint import apis, frameworks

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up ~3 ms; annotations are strings here
    from typing import Callable

MODELS: dict[str, Callable] = {**apis.MODELS, **frameworks.MODELS}
