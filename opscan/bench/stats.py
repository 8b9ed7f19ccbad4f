"""The statistics of a bench: medians, spreads and paired costs. Pure Python.

A variant's step time is the median of its timed steps; its spread is half
the interquartile range, as a percentage of the median. A cost compares two
variants by the ratio of their medians; its spread is half the interquartile
range of the per-round costs, each round's pair having run side by side.

Costs of one precision are split in points of the fastest step (benchmark
on), so that they add up exactly:

    total        (det - bench) / bench
    autotuner    (default - bench) / bench     giving up cudnn.benchmark
    determinism  (det - default) / bench       deterministic algorithms proper
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


def median(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("median of no values")
    s = sorted(xs)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2


def quantile(xs: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (numpy's default, R's type 7)."""
    if not xs:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], not {q}")
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def half_iqr(xs: Sequence[float]) -> float:
    """Half the interquartile range: the ± of the middle half of the values."""
    return (quantile(xs, 0.75) - quantile(xs, 0.25)) / 2


class Summary(NamedTuple):
    n: int
    median: float
    spread_pct: float  # half the interquartile range, in % of the median


def summarize(samples: Sequence[float]) -> Summary | None:
    if not samples:
        return None
    m = median(samples)
    return Summary(len(samples), m, 100 * half_iqr(samples) / m if m > 0 else 0.0)


class Cost(NamedTuple):
    value: float  # % or points of the reference step
    spread: float  # half the IQR of the per-round values, same unit
    pairs: int  # rounds in which all the variants involved ran


def paired_points(ref: Sequence[float], a: Sequence[float], b: Sequence[float]) -> list[float]:
    """Per round r: (b[r] - a[r]) / ref[r] * 100, over the rounds that all three ran (and ref[r] > 0)."""
    return [100 * (y - x) / r for r, x, y in zip(ref, a, b) if r > 0]


def points(ref: Sequence[float], a: Sequence[float], b: Sequence[float]) -> Cost | None:
    """(median(b) - median(a)) / median(ref), in points, with the spread of the paired rounds."""
    if not ref or not a or not b:
        return None
    m = median(ref)
    if m <= 0:
        return None
    per_round = paired_points(ref, a, b)
    spread = half_iqr(per_round) if per_round else 0.0
    return Cost(100 * (median(b) - median(a)) / m, spread, len(per_round))


def cost(base: Sequence[float], other: Sequence[float]) -> Cost | None:
    """What `other` costs over `base`, in % of base: median(other) / median(base) - 1."""
    return points(base, base, other)


class Split(NamedTuple):
    total: Cost | None  # deterministic over benchmark
    autotuner: Cost | None  # default over benchmark
    determinism: Cost | None  # deterministic over default


def split(bench: Sequence[float], default: Sequence[float], det: Sequence[float]) -> Split:
    """One precision's cost of determinism, split into the autotuner's part and determinism's, in points of bench."""
    return Split(points(bench, bench, det), points(bench, bench, default), points(bench, default, det))
