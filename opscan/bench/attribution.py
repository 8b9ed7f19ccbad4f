"""Where the cost goes: profiler events to time per op and source line, and two profiles compared.

Input is the event tree `torch.profiler.profile().events()` gives
(`torch.autograd.profiler_util.FunctionEvent`, read in torch 2.11 and 2.14):
`name`, `device_type`, `cpu_parent`, `kernels` (each a `Kernel(name, device,
duration)`, duration in us, attached to the innermost CPU op that launched
it), `self_cpu_time_total` (us), `sequence_nr`, `thread` and `fwd_thread`.
Only those fields are read, so tests can pass plain objects.

The events are grouped by their *root*: the nearest enclosing range that
`profiling.SiteRanges` opened around a top-level torch call (its name says
the phase, the call and the user's source line), or the autograd engine's
`autograd::engine::evaluate_function: <Node>` range of a backward node. A
backward node is taken to its forward line through its sequence number: the
forward op that created it carries the same `sequence_nr` on the thread named
by the node's `fwd_thread` (torch's own `_set_backward_stacktraces` pairs
them the same way). Within a root, the op is the outermost `aten::` op
below it, so a call such as `multi_head_attention_forward` is split into
its linear, attention and view ops, each at the line that made the call.

On a GPU the time is the kernels' (CUDA) time; on the CPU, the ops' own CPU
time. Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PREFIX = "opscan.bench|"
EXPLAINED = 2 / 3  # the share of the measured cost that a few ops must reach to be said to explain it
BACKWARD_ROOT = "autograd::engine::evaluate_function: "
PHASE_FORWARD, PHASE_BACKWARD, PHASE_OPTIMIZER, PHASE_OTHER = "forward", "backward", "optimizer", "other"


def range_name(phase: str, call: str, where: str) -> str:
    """The profiler range name for a top-level torch call: 'opscan.bench|forward|conv2d|resnet.py:68'."""
    return f"{PREFIX}{phase}|{call}|{where}"


def parse_range_name(name: str) -> tuple[str, str, str] | None:
    """(phase, call, where) of a range `range_name` made, else None."""
    if not name.startswith(PREFIX):
        return None
    parts = name[len(PREFIX) :].split("|", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


@dataclass(frozen=True)
class OpKey:
    phase: str  # forward, backward, optimizer or other
    op: str  # the aten op, e.g. aten::convolution_backward
    where: str  # "file:line" of the user's call (for backward, of the forward call), or ""


@dataclass
class OpTime:
    ms: float = 0.0  # per step
    kernels: dict[str, float] = field(default_factory=dict)  # kernel name -> ms per step (GPU only)


def _is_cpu(event) -> bool:
    return getattr(getattr(event, "device_type", None), "name", "CPU") == "CPU"


def _root_info(root, forward_sites) -> tuple[str, str, str]:
    """(phase, label, where) of a root event."""
    if root.name.startswith(BACKWARD_ROOT):
        where = forward_sites.get((root.sequence_nr, root.fwd_thread), "")
        return PHASE_BACKWARD, root.name[len(BACKWARD_ROOT) :], where
    phase, call, where = parse_range_name(root.name)
    return phase, call, where


def _is_root(event) -> bool:
    return event.name.startswith(BACKWARD_ROOT) or parse_range_name(event.name) is not None


def _climb(event):
    """(root or None, outermost aten:: op on the way up, below the root)."""
    outer = None
    current = event
    while current is not None:
        if _is_root(current):
            return current, outer
        if current.name.startswith("aten::"):
            outer = current
        current = current.cpu_parent
    return None, outer


def forward_sites(events) -> dict[tuple[int, int], str]:
    """(sequence_nr, thread) of each forward op that created an autograd node -> its user line."""
    sites: dict[tuple[int, int], str] = {}
    for event in events:
        if getattr(event, "sequence_nr", -1) < 0 or not _is_cpu(event):
            continue
        root, _ = _climb(event)
        if root is None or root.name.startswith(BACKWARD_ROOT):
            continue
        parsed = parse_range_name(root.name)
        sites.setdefault((event.sequence_nr, event.thread), parsed[2] if parsed else "")
    return sites


def op_times(events, *, steps: int, device: bool) -> dict[OpKey, OpTime]:
    """Time per step of each (phase, op, line), from one profile of `steps` steps.

    `device`: count the kernels' time (GPU); otherwise each op's own CPU time.
    """
    events = list(events)
    sites = forward_sites(events)
    out: dict[OpKey, OpTime] = {}
    steps = max(steps, 1)
    for event in events:
        if not _is_cpu(event):
            continue
        if event.name.startswith("ProfilerStep"):
            continue  # the schedule's own range around each step ("ProfilerStep*" once the profiler renames it)
        if device:
            # A range's own GPU span comes back as a "kernel" of the same name: not work of its own.
            kernels = getattr(event, "kernels", ())
            parts = [(k.name, k.duration) for k in kernels if k.name != event.name and not k.name.startswith(PREFIX)]
        elif _is_root(event):
            continue  # a range's own CPU time is the range's (and the autograd engine's) overhead, not the op's
        else:
            parts = [(None, event.self_cpu_time_total)]
        if not parts or all(us <= 0 for _, us in parts):
            continue
        root, outer = _climb(event)
        if root is not None:
            phase, label, where = _root_info(root, sites)
        else:
            phase, label, where = PHASE_OTHER, event.name, ""
        key = OpKey(phase, outer.name if outer is not None else label, where)
        slot = out.setdefault(key, OpTime())
        for name, us in parts:
            ms = us / 1000 / steps
            slot.ms += ms
            if name is not None:
                slot.kernels[name] = slot.kernels.get(name, 0.0) + ms
    return out


@dataclass(frozen=True)
class OpDelta:
    """One op in the fastest (benchmark), default and deterministic profiles of a precision; ms per step."""

    key: OpKey
    bench_ms: float
    default_ms: float | None  # None where the default variant was not profiled
    det_ms: float
    bench_kernel: str
    det_kernel: str
    same_kernels: bool

    @property
    def added_ms(self) -> float:
        return self.det_ms - self.bench_ms

    @property
    def autotuner_ms(self) -> float | None:
        return None if self.default_ms is None else self.default_ms - self.bench_ms

    @property
    def determinism_ms(self) -> float | None:
        return None if self.default_ms is None else self.det_ms - self.default_ms


def short_kernel(name: str, limit: int = 48) -> str:
    """A kernel name without its return type, template arguments and parameters, cut to `limit`."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    out, depth = [], 0
    for ch in text:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    text = "".join(out).strip() or name
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _top_kernel(t: OpTime | None) -> str:
    if t is None or not t.kernels:
        return ""
    return short_kernel(max(t.kernels.items(), key=lambda kv: (kv[1], kv[0]))[0])


def compare(bench: dict[OpKey, OpTime], det: dict[OpKey, OpTime], default: dict[OpKey, OpTime] | None = None) -> list[OpDelta]:
    """Every op of either profile, the ones whose time changed most first."""
    keys = list(dict.fromkeys([*bench, *det, *(default or {})]))
    zero = OpTime()
    rows = []
    for key in keys:
        b, d = bench.get(key), det.get(key)
        rows.append(
            OpDelta(
                key=key,
                bench_ms=(b or zero).ms,
                default_ms=None if default is None else default.get(key, zero).ms,
                det_ms=(d or zero).ms,
                bench_kernel=_top_kernel(b),
                det_kernel=_top_kernel(d),
                same_kernels=set((b or zero).kernels) == set((d or zero).kernels),
            )
        )
    rows.sort(key=lambda r: (-abs(r.added_ms), r.key.phase, r.key.op, r.key.where))
    return rows


def explaining(deltas: list[OpDelta], measured_ms: float, *, fraction: float = EXPLAINED, limit: int = 5) -> list[OpDelta]:
    """The fewest ops, largest added time first, whose added time reaches `fraction` of `measured_ms` (at most `limit`).

    Empty when nothing was measured to explain (measured_ms <= 0) or no op got slower.
    """
    if measured_ms <= 0:
        return []
    chosen, total = [], 0.0
    for delta in sorted((d for d in deltas if d.added_ms > 0), key=lambda d: -d.added_ms)[:limit]:
        chosen.append(delta)
        total += delta.added_ms
        if total >= fraction * measured_ms:
            break
    return chosen
