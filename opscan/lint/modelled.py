"""Every modelled API: qualified name -> model, the core APIs' and the framework helpers'.

A module of its own so that both the linker (`project`) and the call filter
(`relevance`) can read the table without importing each other. The rules ask
it, too, what the catalogue (`frameworks.HELPERS`) says about an API their
fixes edit: `helper`, `strict_for`.
"""

from __future__ import annotations

from opscan.lint import apis, frameworks
from opscan.lint.frameworks import Strict

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs lint start-up ~3 ms; annotations are strings here
    from typing import Callable

MODELS: dict[str, Callable] = {**apis.MODELS, **frameworks.MODELS}
BACKENDS = frameworks.BACKENDS  # libraries that run torch only under one backend, chosen when imported
RESETTING = frameworks.RESETTING  # packages with a helper whose older releases turn determinism off

# torch's own warn-only routes, as the catalogue gives the helpers' (frameworks.Strict).
_CORE_STRICT = {
    "torch.use_deterministic_algorithms": Strict("warn_only", 1, "drop"),
    "torch.set_deterministic_debug_mode": Strict("debug_mode", 0, "error"),
}


def helper(api: str | None) -> frameworks.Helper | None:
    """The catalogue entry of a framework helper, by any of its qualified names."""
    return frameworks.BY_NAME.get(api) if api else None


def strict_for(api: str | None) -> Strict | None:
    """How a call of `api` in warn-only mode is made strict, if its arguments can say so."""
    if api in _CORE_STRICT:
        return _CORE_STRICT[api]
    entry = helper(api)
    return entry.strict if entry is not None else None
