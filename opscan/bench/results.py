"""What a bench measured, as plain data: the torch side fills it in, `report` turns it into tables. Pure Python."""

from __future__ import annotations

from dataclasses import dataclass, field

from opscan.bench.attribution import OpKey, OpTime
from opscan.bench.variants import Variant

OK, BLOCKED, NOT_RUN = "ok", "blocked", "not run"


@dataclass
class VariantRun:
    """One variant's timed steps, in round order (samples[r] ran in round r)."""

    variant: Variant
    samples: list[float] = field(default_factory=list)  # ms per timed step
    peaks: list[int] = field(default_factory=list)  # peak bytes allocated per timed step (GPU only)
    status: str = OK  # OK, BLOCKED (an op raises in deterministic mode) or NOT_RUN
    detail: str = ""  # for BLOCKED: the ops that raise

    @property
    def peak_bytes(self) -> int | None:
        return max(self.peaks) if self.peaks else None


@dataclass
class Profile:
    """One variant's profiled steps: time per step of each op."""

    variant: Variant
    steps: int
    ops: dict[OpKey, OpTime]


@dataclass
class Measurement:
    runs: list[VariantRun]
    profiles: dict[str, Profile] = field(default_factory=dict)  # by variant id
    device_time: bool = True  # the profiles hold GPU kernel time (else CPU op time)
    timer: str = "cuda events"

    def run(self, variant: Variant) -> VariantRun | None:
        return next((r for r in self.runs if r.variant == variant), None)
