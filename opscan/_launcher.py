"""The frames that launched the `opscan` command (pip's console script, `python -m`'s runpy).

They lie outside torch, opscan and the standard library, yet are never the
user's code: the tracer (opscan.trace.sourcemap) must not credit them with the
ops opscan itself runs. cli.entry notes them; nothing else writes here.
"""

from __future__ import annotations

CODES: list = []  # the code objects of those frames


def note_callers(frame) -> None:
    """Note `frame` and every frame below it on the stack as the launcher's."""
    while frame is not None:
        CODES.append(frame.f_code)
        frame = frame.f_back


def is_launcher(code) -> bool:
    """Whether `code` is a launcher frame's."""
    return any(code is c for c in CODES)
