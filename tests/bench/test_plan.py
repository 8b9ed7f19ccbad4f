"""The step plan: every variant warmed up before anything is timed, one timed step per round each, order rotating."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opscan.bench.plan import PROFILE_WARMUP, PROFILED, TIMED, WARMUP, make_plan, rotated


@given(st.integers(1, 8), st.integers(1, 4), st.integers(0, 40))
def test_warmup_first_then_one_timed_step_per_variant_per_round(n, warmup, rounds):
    plan = make_plan(n, warmup=warmup, rounds=rounds)
    kinds = [s.kind for s in plan]
    assert kinds == [WARMUP] * (n * warmup) + [TIMED] * (n * rounds)
    assert Counter(s.variant for s in plan if s.kind == WARMUP) == Counter({v: warmup for v in range(n)})
    for r in range(rounds):
        assert sorted(s.variant for s in plan if s.kind == TIMED and s.round == r) == list(range(n))


@given(st.integers(1, 8), st.integers(1, 6))
def test_each_variant_runs_in_each_position_equally_often(n, cycles):
    plan = make_plan(n, warmup=1, rounds=n * cycles)
    timed = [s for s in plan if s.kind == TIMED]
    positions = Counter((s.variant, i % n) for i, s in enumerate(timed))
    assert set(positions.values()) == {cycles}


def test_rotation():
    assert rotated(4, 2) == [2, 3, 0, 1]
    assert rotated(3, 5) == [2, 0, 1]
    assert rotated(0, 1) == []


def test_profiled_blocks_come_last_one_warm_step_each():
    plan = make_plan(6, warmup=1, rounds=2, profile_groups=[(0, 1, 2), (3, 5)], profile_steps=3)
    tail = plan[6 + 12 :]
    assert [(s.variant, s.kind) for s in tail[:4]] == [(0, PROFILE_WARMUP), (0, PROFILED), (0, PROFILED), (0, PROFILED)]
    assert [s.variant for s in tail if s.kind == PROFILE_WARMUP] == [0, 1, 2, 3, 5]
    assert len(tail) == 5 * 4
    assert make_plan(6, warmup=1, rounds=2, profile_groups=[(0, 1, 2)], profile_steps=0) == plan[:18]


def test_a_plan_needs_warm_up():
    with pytest.raises(ValueError, match="warmup"):
        make_plan(3, warmup=0, rounds=5)
