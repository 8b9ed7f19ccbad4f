"""How far apart two runs' parameters are after a step, from the `params` of the step lines."""

from __future__ import annotations

import base64
import binascii
import math
import operator
import sys
from array import array
from dataclasses import dataclass

from opscan.compare.reader import Param


@dataclass(frozen=True, slots=True)
class ParamDiff:
    """`max_diff`: max |a-b| over the sampled elements of every parameter both runs have.

    Exactly 0 where every fingerprint matches; otherwise a lower bound of the
    true maximum (only a strided sample of each tensor is recorded). None when
    no parameter could be compared (no params, or fingerprints differ and no
    samples were recorded), or nothing compared differs but some parameter is
    in one run only (two different models: 0 would say they match).
    `differ` counts those too: a parameter one run lacks is not equal.
    """

    differ: int
    max_diff: float | None
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    shared: int = 0  # parameters both runs have, by name


def _floats(sample: str | None) -> array | None:
    if not sample:
        return None
    try:
        raw = base64.b64decode(sample, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) % 4:
        return None
    values = array("f")
    values.frombytes(raw)
    if sys.byteorder == "big":
        values.byteswap()
    return values


def sample_diff(a: Param, b: Param) -> float | None:
    """max |a-b| over the two samples (as many elements as both have); inf where one is NaN and the other is not."""
    fa, fb = _floats(a.sample), _floats(b.sample)
    if fa is None or fb is None or not fa or not fb:
        return None
    diffs = list(map(operator.sub, fa, fb))
    worst = max(map(abs, diffs))
    if math.isfinite(sum(diffs)):
        return worst
    worst = 0.0  # a NaN or an inf somewhere: look element by element
    for x, y in zip(fa, fb):
        if x == y or (x != x and y != y):
            continue
        d = abs(x - y)
        worst = math.inf if d != d else max(worst, d)
    return worst


def param_diff(a: dict[str, Param], b: dict[str, Param]) -> ParamDiff:
    differ = 0
    worst: float | None = 0.0 if a and b else None
    unknown = False
    for name, pa in a.items():
        pb = b.get(name)
        if pb is None:
            continue
        if pa.fp is not None and pa.fp == pb.fp:
            continue
        differ += 1
        d = sample_diff(pa, pb)
        if d is None:
            unknown = True
        elif worst is not None:
            worst = max(worst, d)
    only_a = tuple(n for n in a if n not in b)
    only_b = tuple(n for n in b if n not in a)
    if (unknown or only_a or only_b) and worst == 0.0:
        worst = None  # fingerprints differ, or names do, and no sample shows by how much
    return ParamDiff(differ + len(only_a) + len(only_b), worst, only_a, only_b, len(a) - len(only_a))
