"""The bench's statistics: medians, quantiles, spreads and paired costs, as properties."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from opscan.bench import stats

times = st.floats(min_value=0.01, max_value=1e4, allow_nan=False, allow_infinity=False)
samples = st.lists(times, min_size=1, max_size=60)


@given(samples)
def test_median_is_the_standard_librarys(xs):
    assert stats.median(xs) == pytest.approx(statistics.median(xs))


@given(samples, st.floats(0, 1))
def test_quantile_lies_between_min_and_max_and_grows_with_q(xs, q):
    value = stats.quantile(xs, q)
    assert min(xs) <= value <= max(xs)
    assert stats.quantile(xs, 0) == min(xs) and stats.quantile(xs, 1) == max(xs)
    assert stats.quantile(xs, min(q + 0.1, 1.0)) >= value - 1e-9 * max(xs)


@given(st.lists(times, min_size=2, max_size=60))
def test_quartiles_match_numpys_default_method(xs):
    # statistics.quantiles(method="inclusive") is numpy's linear method too.
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    assert stats.quantile(xs, 0.25) == pytest.approx(q1)
    assert stats.quantile(xs, 0.75) == pytest.approx(q3)


@given(samples, st.permutations(range(60)), st.floats(0.1, 100))
def test_summary_ignores_order_and_scales(xs, order, k):
    shuffled = [xs[i] for i in order if i < len(xs)]
    a, b = stats.summarize(xs), stats.summarize(shuffled)
    assert a == b
    scaled = stats.summarize([k * x for x in xs])
    assert scaled.median == pytest.approx(k * a.median)
    assert scaled.spread_pct == pytest.approx(a.spread_pct, abs=1e-6)


def test_summary_of_nothing_is_none():
    assert stats.summarize([]) is None
    assert stats.cost([], [1.0]) is None and stats.cost([1.0], []) is None


@given(samples)
def test_a_variant_costs_nothing_over_itself(xs):
    c = stats.cost(xs, xs)
    assert c.value == 0 and c.spread == 0 and c.pairs == len(xs)


@given(samples, st.floats(0.5, 3))
def test_a_uniformly_slower_variant_costs_its_factor(xs, k):
    c = stats.cost(xs, [k * x for x in xs])
    assert c.value == pytest.approx(100 * (k - 1))
    assert c.spread == pytest.approx(0, abs=1e-6)


@given(st.lists(st.tuples(times, times), min_size=1, max_size=40))
def test_slower_in_every_round_costs_more_than_zero(pairs):
    base = [a for a, _ in pairs]
    other = [a + b for a, b in pairs]
    assert stats.cost(base, other).value > 0


@given(st.lists(st.tuples(times, times, times), min_size=1, max_size=40), st.floats(0.1, 10))
def test_the_split_adds_up_and_does_not_depend_on_the_unit(rounds, k):
    bench, default, det = (list(col) for col in zip(*rounds))
    s = stats.split(bench, default, det)
    assert s.total.value == pytest.approx(s.autotuner.value + s.determinism.value, abs=1e-6 * max(1, abs(s.total.value)))
    scaled = stats.split([k * x for x in bench], [k * x for x in default], [k * x for x in det])
    for part, again in zip(s, scaled):
        assert again.value == pytest.approx(part.value, rel=1e-6, abs=1e-6)


@given(samples, samples)
def test_pairs_are_the_rounds_both_ran(a, b):
    c = stats.cost(a, b)
    assert c.pairs == min(len(a), len(b))
    assume(len(a) > 1 and len(b) > 1)
    assert math.isfinite(c.spread) and c.spread >= 0


def test_half_iqr_by_hand():
    assert stats.half_iqr([1, 2, 3, 4, 5]) == 1.0  # q1 = 2, q3 = 4
    assert stats.quantile([10, 20], 0.25) == 12.5
    with pytest.raises(ValueError):
        stats.quantile([1.0], 1.5)
    with pytest.raises(ValueError):
        stats.median([])
