"""The step driver: one slot of the plan per training step, each step in its variant, timed with CUDA events.

The driver is a context manager the runner enters around the steps, and its
`on_step(i)` is the runner's step hook (after each training step of a model
target, after each optimizer step of a script). At each step boundary it

1. ends step i: records the end event, waits for the GPU, reads the peak
   memory of the step, leaves the step's autocast, checks that the flags are
   still the variant's, and feeds the profiler if a profiled block runs;
2. begins step i+1: sets its variant's flags, enters its autocast, starts a
   profiled block if one begins here, resets the peak-memory counter and
   records the start event.

So a timed step runs from the GPU being idle to the GPU being done with that
step's kernels: zero_grad, forward, backward and the optimizer step (for a
script, everything between two optimizer steps, data loading included). The
flags are set again at every boundary, so a script that sets them at its top
runs the timed steps as labelled; one that changes them inside a step is
reported. On exit every flag and the autocast state are as they were.

APIs read in torch 2.11 and 2.14: `torch.cuda.Event(enable_timing=True)`,
`Event.record(stream)`, `Event.elapsed_time(end)` (ms),
`torch.cuda.current_stream(device)`, `torch.cuda.synchronize(device)`,
`torch.cuda.reset_peak_memory_stats(device)`, `torch.cuda.max_memory_allocated(device)`.
"""

from __future__ import annotations

import time

import torch

from opscan.bench.plan import PROFILE_WARMUP, PROFILED, TIMED, Slot
from opscan.bench.profiling import ProfileBlock  # imported here, not at a step boundary inside an optimizer hook
from opscan.bench.results import Measurement, Profile, VariantRun
from opscan.bench.variants import Variant, apply, autocast, holds
from opscan.trace.state import TorchFlags


class CudaClock:
    """Times one step with a pair of CUDA events on the device's current stream, and reads its peak memory."""

    name = "cuda events"

    def __init__(self, device):
        self.device = torch.device(device)
        self._start = None

    def start(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)
        self._start = torch.cuda.Event(enable_timing=True)
        self._start.record(torch.cuda.current_stream(self.device))

    def stop(self) -> tuple[float, int | None]:
        end = torch.cuda.Event(enable_timing=True)
        end.record(torch.cuda.current_stream(self.device))
        torch.cuda.synchronize(self.device)  # every stream, not only the one the events are on
        return self._start.elapsed_time(end), torch.cuda.max_memory_allocated(self.device)

    def idle(self) -> None:
        torch.cuda.synchronize(self.device)


class WallClock:
    """The CPU's clock, for runs on the CPU (tests): no peak memory."""

    name = "wall clock"

    def __init__(self, device=None):
        self._start = 0.0

    def start(self) -> None:
        self._start = time.perf_counter()

    def stop(self) -> tuple[float, int | None]:
        return (time.perf_counter() - self._start) * 1000, None

    def idle(self) -> None:
        pass


class Driver:
    """Walk `plan` over `variants`, one slot per training step (see the module docstring)."""

    def __init__(self, variants: list[Variant], plan: list[Slot], *, device: str, profile_steps: int = 0):
        self.variants = variants
        self.plan = plan
        self.device_type = torch.device(device).type
        self.clock = CudaClock(device) if self.device_type == "cuda" else WallClock()
        self.profile_steps = profile_steps
        self.runs = [VariantRun(v) for v in variants]
        self.profiles: dict[str, Profile] = {}
        self.done = 0  # slots finished
        self.drifted: set[str] = set()  # variants whose flags the target changed during a measured step
        self.profile_error: str | None = None
        self._saved: TorchFlags | None = None
        self._autocast = None
        self._block = None

    # ---- the runner's side

    def __enter__(self) -> Driver:
        self._saved = TorchFlags.capture()
        if self.plan:
            self._begin(0)
        return self

    def __exit__(self, *exc_info) -> None:
        try:
            self._leave_autocast()
            if self._block is not None:
                block, self._block = self._block, None
                block.close()
        finally:
            if self._saved is not None:
                self._saved.restore()

    def on_step(self, i: int) -> None:
        """The runner's step hook: step `i` (0-based) has finished."""
        if i >= len(self.plan):
            return
        self._end(i)
        self.done = i + 1
        if i + 1 < len(self.plan):
            self._begin(i + 1)

    # ---- one step

    def _begin(self, i: int) -> None:
        slot = self.plan[i]
        variant = self.variants[slot.variant]
        apply(variant)
        self._autocast = autocast(variant, self.device_type)
        self._autocast.__enter__()
        if slot.kind == PROFILE_WARMUP and self.profile_error is None:
            self._start_block()
        if slot.kind == TIMED:
            self.clock.start()

    def _end(self, i: int) -> None:
        slot = self.plan[i]
        variant = self.variants[slot.variant]
        if slot.kind == TIMED:
            ms, peak = self.clock.stop()
            run = self.runs[slot.variant]
            run.samples.append(ms)
            if peak is not None:
                run.peaks.append(peak)
        else:
            self.clock.idle()
        self._leave_autocast()
        if slot.kind in (TIMED, PROFILED) and not holds(variant):
            self.drifted.add(variant.id)
        if self._block is not None:
            self._feed_block(variant)

    def _leave_autocast(self) -> None:
        cm, self._autocast = self._autocast, None
        if cm is not None:
            cm.__exit__(None, None, None)

    # ---- profiled blocks

    def _start_block(self) -> None:
        block = ProfileBlock(self.device_type, self.profile_steps)
        try:
            block.start()
        except Exception as exc:  # noqa: BLE001 - no profiler (no CUPTI, another profiler running): time without it
            self.profile_error = f"torch.profiler could not start: {type(exc).__name__}: {exc}"
            return
        self._block = block

    def _feed_block(self, variant: Variant) -> None:
        block = self._block
        try:
            if not block.step():
                return
            self._block = None
            self.profiles[variant.id] = Profile(variant, block.steps, block.result())
        except Exception as exc:  # noqa: BLE001 - the profile is lost, the timings are not
            self._block = None
            block.close()
            self.profile_error = f"torch.profiler failed: {type(exc).__name__}: {exc}"

    # ---- results

    def measurement(self) -> Measurement:
        return Measurement(self.runs, dict(self.profiles), device_time=self.device_type == "cuda", timer=self.clock.name)
