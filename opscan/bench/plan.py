"""The order a bench runs its steps in: warm-up, timed rounds with the order rotating, profiled blocks.

One step is one slot. Every variant is warmed up first (`warmup` steps
each, so cuDNN's autotuner has tried its algorithms before anything is
timed), then `rounds` rounds in which each variant runs one timed step; the
order rotates by one each round, so every variant runs in every position
equally often and drifts in clock or temperature fall on all of them alike.
Last come the profiled blocks: per precision, each of its variants runs one
warm-up step under the profiler and `profile_steps` recorded steps.

Pure Python; `timing.Driver` walks the plan.
"""

from __future__ import annotations

from typing import NamedTuple

WARMUP, TIMED, PROFILE_WARMUP, PROFILED = "warmup", "timed", "profile-warmup", "profiled"


class Slot(NamedTuple):
    variant: int  # index into the variants list
    kind: str  # WARMUP, TIMED, PROFILE_WARMUP or PROFILED
    round: int  # the warm-up pass, timed round or profiled block this step belongs to


def rotated(n: int, by: int) -> list[int]:
    """0..n-1 starting at `by` mod n: [2, 3, 0, 1] for n=4, by=2."""
    if n <= 0:
        return []
    k = by % n
    return list(range(k, n)) + list(range(k))


def make_plan(n_variants: int, *, warmup: int, rounds: int, profile_groups=(), profile_steps: int = 0) -> list[Slot]:
    """The slots, in order. `profile_groups` lists tuples of variant indexes profiled one after another."""
    if warmup < 1:
        raise ValueError("warmup must be at least 1: the first step of a variant is never timed")
    slots = [Slot(v, WARMUP, w) for w in range(warmup) for v in rotated(n_variants, w)]
    slots += [Slot(v, TIMED, r) for r in range(rounds) for v in rotated(n_variants, r)]
    if profile_steps > 0:
        block = 0
        for group in profile_groups:
            for v in group:
                slots.append(Slot(v, PROFILE_WARMUP, block))
                slots += [Slot(v, PROFILED, block)] * profile_steps
                block += 1
    return slots
