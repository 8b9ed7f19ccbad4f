"""The remedy of last resort: keep one op nondeterministic on purpose, with the exact code to do so.

Rules-backed remedies (and the ones the runtime shapes make exact) come from
`OpRule.remedy_for` in `opscan.rules`; this is for an op no rule knows.
"""

from __future__ import annotations

from opscan.rules import Remedy

ALLOW_HELPER = '''\
import contextlib

import torch


@contextlib.contextmanager
def nondeterministic_allowed():
    """Run the block with determinism off, then restore the caller's setting."""
    mode = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(False)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
'''


def load_rules(errors: list[str]):
    """The bundled rules database, or None with the reason appended to `errors` (a run goes on without remedies)."""
    from opscan.rules import RulesError, load

    try:
        return load()
    except (RulesError, OSError) as exc:
        errors.append(f"cannot load the rules data: {exc}")
        return None


def generic_remedy(caller: str, phase: str, line_text: str) -> Remedy:
    """Keep this op nondeterministic on purpose, with the exact code to do so."""
    if phase == "backward":
        text = (
            f"No deterministic kernel is known for {caller}. It runs in backward, so to keep it on purpose, "
            "run the backward pass with determinism off; that turns it off for every op of that backward pass."
        )
        body = "with nondeterministic_allowed():\n    loss.backward()\n"
    else:
        statement = line_text or "y = op(x)"
        text = (
            f"No deterministic kernel is known for {caller}. To keep it on purpose, run just this line with "
            "determinism off and restore it afterwards."
        )
        body = f"with nondeterministic_allowed():\n    {statement}\n"
    return Remedy(text, f"{ALLOW_HELPER}\n\n{body}", "generic")
