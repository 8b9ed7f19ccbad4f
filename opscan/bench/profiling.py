"""The torch side of the attribution: a profiler block over a few steps, with each top-level call named by its line.

`SiteRanges` is a `TorchFunctionMode` that wraps each top-level torch call
(`F.conv2d`, `x.index_add_`, `torch._foreach_add_` inside an optimizer step)
in a `torch.profiler.record_function` range named by the phase, the call and
the user's source line (`attribution.range_name`). A mode's handler runs
with the mode switched off, so calls made inside a call (the linears inside
`multi_head_attention_forward`) are not wrapped again. The profiler's own
`with_stack` gives each Python function's first line, not the line of the
call, hence the ranges. They cost CPU time only, and only in profiled steps:
the kernels and their durations are those of an unwatched step.

`ProfileBlock` runs `torch.profiler.profile` with the schedule
`wait=0, warmup=1, active=N` (the first step warms the profiler up and is not
recorded) and gives `attribution.op_times` of the recorded steps. Fields and
APIs read in torch 2.11 and 2.14: `torch.profiler.profile(activities=,
schedule=)`, `.start()`, `.step()`, `.stop()`, `.events()`;
`torch.profiler.schedule(wait=, warmup=, active=, repeat=)`;
`torch.overrides.TorchFunctionMode`; `torch.profiler.record_function`.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.profiler
from torch.overrides import TorchFunctionMode
from torch.profiler import ProfilerActivity, profile, schedule

from opscan.bench.attribution import PHASE_FORWARD, PHASE_OPTIMIZER, op_times, range_name
from opscan.trace.sourcemap import display_path, is_internal
from opscan.trace.targets import OPSCAN_DIR

# Calls that are not work of their own: property reads, shape queries, and the
# entries into autograd (their ops are the backward roots, on another thread on a GPU).
_UNWRAPPED = frozenset(
    {
        "__get__", "__set__", "__repr__", "__format__", "__str__", "__len__", "__bool__", "__hash__",
        "dim", "size", "numel", "stride", "is_contiguous", "data_ptr", "element_size", "is_floating_point",
        "backward", "grad", "requires_grad_", "register_hook",
    }
)  # fmt: skip

_OPSCAN = os.path.normcase(os.path.realpath(OPSCAN_DIR)) + os.sep
_OPTIM = os.path.normcase(os.path.realpath(os.path.dirname(torch.optim.__file__))) + os.sep


def short_path(path: str) -> str:
    """A source path as shown: from site-packages on for an installed package, else as the scan shows it."""
    for marker in ("site-packages", "dist-packages"):
        _, sep, tail = path.replace("\\", "/").rpartition(f"/{marker}/")
        if sep:
            return tail
    return display_path(path) or path


_USER, _OPSCAN_CODE, _OPTIM_CODE, _OTHER = 0, 1, 2, 3
_KIND: dict[int, tuple[int, str]] = {}  # id(code) -> (kind, path as shown); id(), as hashing a code object hashes its bytecode
_KEEP: list = []  # the code objects, so that their ids are never reused


def _kind(code) -> tuple[int, str]:
    known = _KIND.get(id(code))
    if known is None:
        path = os.path.normcase(os.path.realpath(code.co_filename))
        if not is_internal(code):
            kind = _USER
        elif path.startswith(_OPSCAN):
            kind = _OPSCAN_CODE
        elif path.startswith(_OPTIM):
            kind = _OPTIM_CODE
        else:
            kind = _OTHER
        _KEEP.append(code)
        known = _KIND[id(code)] = (kind, short_path(code.co_filename) if kind == _USER else "")
    return known


def call_site(frame) -> tuple[str, str]:
    """(phase, 'file:line' of the innermost user frame) of a torch call made from `frame`.

    The phase is optimizer when the call comes from inside `torch.optim` on
    the way up, else forward. The line is '' when opscan itself made the call
    (the default loss, a model target's optimizer step). No hooks are used:
    a script's step boundary runs inside the optimizer's hook loop, where
    registering one would change the dict being iterated.
    """
    phase = PHASE_FORWARD
    while frame is not None:
        kind, shown = _kind(frame.f_code)
        if kind == _USER:
            return phase, f"{shown}:{frame.f_lineno}"
        if kind == _OPSCAN_CODE:
            return phase, ""
        if kind == _OPTIM_CODE:
            phase = PHASE_OPTIMIZER
        frame = frame.f_back
    return phase, ""


class SiteRanges(TorchFunctionMode):
    """Name each top-level torch call in the profiler by its phase, its name and the user's line."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", None) or str(func)
        if name in _UNWRAPPED:
            return func(*args, **kwargs)
        phase, where = call_site(sys._getframe(1))
        with torch.profiler.record_function(range_name(phase, name, where)):
            return func(*args, **kwargs)


class ProfileBlock:
    """One variant's profiled steps: `start()` before the first, `step()` after each, `result()` at the end."""

    def __init__(self, device_type: str, steps: int):
        self.device_type = device_type
        self.steps = steps  # recorded steps; one warm-up step runs before them
        self.seen = 0
        self._mode: SiteRanges | None = None
        self._prof = None

    @property
    def total_steps(self) -> int:
        return self.steps + 1

    def start(self) -> None:
        activities = [ProfilerActivity.CPU]
        if self.device_type == "cuda":
            activities.append(ProfilerActivity.CUDA)
        self._mode = SiteRanges()
        self._mode.__enter__()
        try:
            self._prof = profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=self.steps, repeat=1))
            self._prof.start()
        except BaseException:
            self.close()
            raise

    def step(self) -> bool:
        """After one step; True once the block's last step is done."""
        self.seen += 1
        self._prof.step()
        return self.seen >= self.total_steps

    def result(self) -> dict:
        """attribution.op_times of the recorded steps; closes the block."""
        prof, self._prof = self._prof, None
        try:
            prof.stop()
            events = prof.events()
        finally:
            self.close()
        return op_times(events, steps=self.steps, device=self.device_type == "cuda")

    def close(self) -> None:
        """Stop the profiler if it still runs and leave the mode; safe to call twice."""
        prof, self._prof = self._prof, None
        try:
            if prof is not None:
                prof.stop()
        finally:
            mode, self._mode = self._mode, None
            if mode is not None:
                mode.__exit__(None, None, None)
