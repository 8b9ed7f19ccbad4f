"""The strict-mode dispatch mode that catches each determinism alert and carries on.

PyTorch stops at the first op without a deterministic implementation. Under
`CatchMode`, every aten op runs as usual; when one raises the alert, the mode
hands it to `on_alert`, reruns that one op with determinism off, turns strict
mode back on and returns the op's result, so forward and backward go on and
the next offending op is found in the same run. Any other error propagates
unchanged.

The per-op path is kept short: a count, one sequence-counter read (to spot new
autograd nodes), the op call, and nothing else unless the op raised.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from opscan.trace.sourcemap import _get_sequence_nr, dispatch_caller, never_alerting_backward_ops

_grad_enabled = torch._C.is_grad_enabled

# at::Context::alertNotDeterministic, and its Python twin in torch._prims_common.
_ALERT = re.compile(
    r"^(?P<caller>.+?) does not have a deterministic implementation, but you set "
    r"'torch\.use_deterministic_algorithms\(True",
    re.MULTILINE,
)
# at::Context::alertCuBLASConfigNotDeterministic.
_CUBLAS = re.compile(r"this operation is not deterministic because it uses CuBLAS", re.IGNORECASE)
CUBLAS_CALLER = "CuBLAS (CUBLAS_WORKSPACE_CONFIG)"


@dataclass(frozen=True)
class Alert:
    """A determinism alert: `kind` is "op" or "cublas"; `caller` is the alert's caller string."""

    kind: str
    caller: str
    message: str


def parse_alert(exc: BaseException) -> Alert | None:
    """The alert a RuntimeError carries, or None if it is some other error."""
    if not isinstance(exc, RuntimeError):
        return None
    text = str(exc)
    m = _ALERT.search(text)
    if m:
        return Alert("op", m.group("caller").strip(), text)
    if _CUBLAS.search(text):
        return Alert("cublas", CUBLAS_CALLER, text)
    return None


class CatchMode(TorchDispatchMode):
    """Catch determinism alerts op by op; rerun the op with determinism off; continue.

    `on_alert(func, args, kwargs, alert, frame)` is called for each alert, in
    the thread that ran the op (an autograd thread for backward ops); `frame`
    is the Python frame that called the op. If `sourcemap` is given, new
    autograd nodes are attributed to the current forward site; with
    `every_site`, also the nodes of ops whose backward never alerts. `silent`
    and `on_silent` report the ops the rules know to be nondeterministic
    without an alert.
    """

    def __init__(self, on_alert: Callable, sourcemap=None, *, every_site: bool = False, silent=None, on_silent: Callable | None = None):
        super().__init__()
        self.on_alert = on_alert
        # id(OpOverload) -> rules entry of an op that is nondeterministic without an alert (opscan.rules.SilentOp):
        # `on_silent(func, args, kwargs, entry, frame)` after it ran. By id: an OpOverload hashes in Python.
        self._silent = silent or {}
        self.on_silent = on_silent
        self.sourcemap = sourcemap if sourcemap is not None and sourcemap.record_nodes_enabled else None
        skip = self.sourcemap is not None and not every_site
        self._skip_sites = never_alerting_backward_ops() if skip else frozenset()
        self.ops = 0  # calls seen (unlocked: backward threads may lose a count; what is read is whether any op ran)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        sourcemap = self.sourcemap
        if sourcemap is not None:
            seq = _get_sequence_nr()
            if seq != sourcemap.last_seq:
                if func in self._skip_sites and _grad_enabled():
                    # The node is this op's own, and its backward cannot alert: no site needed.
                    # (With grad off, the new node is a custom Function's whose forward runs this op.)
                    sourcemap.last_seq = seq
                else:
                    sourcemap.record_nodes(seq, dispatch_caller())
        if kwargs is None:
            kwargs = {}
        try:
            out = func(*args, **kwargs)
        except RuntimeError as exc:
            alert = parse_alert(exc)
            if alert is None:
                raise
        else:
            if self._silent:
                entry = self._silent.get(id(func))
                if entry is not None:
                    self.on_silent(func, args, kwargs, entry, dispatch_caller())
            return out
        self.on_alert(func, args, kwargs, alert, dispatch_caller())
        return rerun_nondeterministic(func, args, kwargs)


def rerun_nondeterministic(func, args, kwargs):
    """Run one op with determinism off, then put the flags back exactly."""
    mode = torch._C._get_deterministic_algorithms()
    warn_only = torch._C._get_deterministic_algorithms_warn_only()
    torch._C._set_deterministic_algorithms(False)
    try:
        return func(*args, **kwargs)
    finally:
        torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)
