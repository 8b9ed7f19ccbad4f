"""The variants a bench times, and the context manager that puts torch in one of them.

A variant is a precision and a mode:

    benchmark       cudnn.benchmark on, nondeterministic: the fastest setting, the baseline
    default         torch's defaults: cudnn.benchmark off, nondeterministic
    deterministic   torch.use_deterministic_algorithms(True), cudnn.benchmark off: reproducible

so that default - benchmark is the price of giving up cuDNN's autotuner and
deterministic - default the price of deterministic algorithms proper.
`torch.use_deterministic_algorithms(True)` also makes cuDNN choose among
deterministic algorithms (aten/src/ATen/native/Convolution.cpp:
`params.deterministic = ctx.deterministicCuDNN() || ctx.deterministicAlgorithms()`),
so `cudnn.deterministic` is left False in every variant.

The precision is fp32, or bf16 under `torch.autocast(device_type, dtype=torch.bfloat16)`.
This module imports torch only inside the functions that set flags.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

PRECISIONS = ("fp32", "bf16")
MODES = ("benchmark", "default", "deterministic")
_SHORT = {"benchmark": "bench", "default": "default", "deterministic": "det"}


@dataclass(frozen=True)
class Variant:
    precision: str  # "fp32" or "bf16"
    mode: str  # one of MODES

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")

    @property
    def id(self) -> str:
        """'fp32/bench', 'bf16/det': short enough for a chart label."""
        return f"{self.precision}/{_SHORT[self.mode]}"

    @property
    def benchmark(self) -> bool:
        return self.mode == "benchmark"

    @property
    def deterministic(self) -> bool:
        return self.mode == "deterministic"


def variants_for(precisions) -> list[Variant]:
    """Every mode of each precision, precision-major: fp32/bench, fp32/default, fp32/det, bf16/bench, ..."""
    return [Variant(p, m) for p in precisions for m in MODES]


def apply(variant: Variant) -> None:
    """Set the global flags of `variant` (not autocast: that is a context, see `autocast`)."""
    import torch

    torch.use_deterministic_algorithms(variant.deterministic)
    torch.backends.cudnn.benchmark = variant.benchmark
    torch.backends.cudnn.deterministic = False


def holds(variant: Variant) -> bool:
    """Are the global flags still those of `variant`? (A script may change them mid-step.)"""
    import torch

    return (
        torch.are_deterministic_algorithms_enabled() == variant.deterministic
        and torch.backends.cudnn.benchmark == variant.benchmark
        and not torch.backends.cudnn.deterministic
    )


def autocast(variant: Variant, device_type: str):
    """The autocast context of `variant`'s precision: bf16 autocast, or nothing for fp32."""
    if variant.precision == "fp32":
        return contextlib.nullcontext()
    import torch

    return torch.autocast(device_type, dtype=torch.bfloat16)


@contextlib.contextmanager
def variant_flags(variant: Variant, device_type: str):
    """Run the body in `variant`: its flags and autocast; every flag is put back on exit, also on error."""
    from opscan.trace.state import TorchFlags

    saved = TorchFlags.capture()
    try:
        apply(variant)
        with autocast(variant, device_type):
            yield
    finally:
        saved.restore()
