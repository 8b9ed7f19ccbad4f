"""Fingerprints: equal for equal values whatever the layout or path, different after a one-ulp change."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from opscan.trace.fingerprint import ROW, SCHEMES, Fingerprinter, reference  # noqa: E402

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]
shapes = st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple)


def make(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g, dtype=torch.float64) * 100).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -(2**31)), min(info.max, 2**31 - 1) + 1, shape, generator=g, dtype=torch.int64).to(dtype)


def fingerprints(tensors, scheme, staged):
    fpr = Fingerprinter(scheme, staged=staged, stage_bytes=ROW * 8 * 4)
    handles = [fpr.add(t, True) for t in tensors]
    fpr.end_step()
    return [fpr.hex(h) for h in handles]


def one_ulp(t: torch.Tensor, index: int) -> torch.Tensor:
    u = t.clone().reshape(-1)
    if t.dtype == torch.bool:
        u[index] = ~u[index]
    elif t.dtype.is_floating_point:
        value = u[index : index + 1]
        up = torch.nextafter(value, torch.full_like(value, float("inf")))
        u[index : index + 1] = up if not torch.isinf(up).any() else torch.nextafter(value, torch.full_like(value, float("-inf")))
    else:
        info = torch.iinfo(t.dtype)
        u[index] = u[index] + 1 if int(u[index]) < info.max else u[index] - 1
    return u.reshape(t.shape)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=shapes, dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16), scheme=st.sampled_from(SCHEMES))
def test_equal_values_give_equal_fingerprints(shape, dtype, seed, scheme):
    t = make(shape, dtype, seed)
    copies = [t, t.clone()]
    if t.dim() >= 2:
        copies.append(t.transpose(0, 1).contiguous().transpose(0, 1))  # the same values in another layout
    want = reference(t, scheme)
    for staged in (False, True):
        assert fingerprints(copies, scheme, staged) == [want] * len(copies)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=shapes.filter(lambda s: all(s) and len(s) > 0), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16),
       where=st.floats(0, 1, exclude_max=True), scheme=st.sampled_from(SCHEMES))  # fmt: skip
def test_a_one_ulp_change_changes_the_fingerprint(shape, dtype, seed, where, scheme):
    t = make(shape, dtype, seed)
    index = int(where * t.numel())
    u = one_ulp(t, index)
    assert not torch.equal(t.view(-1).view(torch.uint8) if t.dtype == torch.bool else t, u.view(-1).view(torch.uint8) if u.dtype == torch.bool else u)
    for staged in (False, True):
        a, b = fingerprints([t, u], scheme, staged)
        assert a != b and a == reference(t, scheme) and b == reference(u, scheme)


def test_pairs_cancel_under_xor_but_not_under_the_sum():
    a, b = torch.tensor([1.5, 1.5]), torch.tensor([-3.0, -3.0])
    assert reference(a, "xor64") == reference(b, "xor64")
    assert reference(a, "xor64+sum") != reference(b, "xor64+sum")


def test_zero_signs_and_nans_are_told_apart():
    values = [torch.tensor([0.0]), torch.tensor([-0.0]), torch.tensor([float("nan")]), torch.tensor([float("inf")])]
    fps = fingerprints(values, "xor64+sum", False)
    assert len(set(fps)) == len(fps)


def test_large_tensors_span_staging_rows_and_batches():
    """Tensors larger than a row, and more rows than one staging buffer holds, still match the direct path."""
    g = torch.Generator().manual_seed(0)
    tensors = [torch.randn(n, generator=g) for n in (1, ROW - 1, ROW, ROW + 1, 3 * ROW + 7, 5)] + [torch.randn(40, generator=g, dtype=torch.bfloat16)]
    for scheme in SCHEMES:
        want = [reference(t, scheme) for t in tensors]
        assert fingerprints(tensors, scheme, False) == want
        assert fingerprints(tensors, scheme, True) == want


def test_norms_and_values():
    t = torch.randn(1000, dtype=torch.float64)
    fpr = Fingerprinter(staged=False)
    h_norm, h_loss = fpr.add(t, True), fpr.add_value(torch.tensor(2.5))
    h_int = fpr.add(torch.arange(5), True)
    fpr.end_step()
    assert fpr.norm(h_norm) == pytest.approx(t.norm().item(), rel=1e-12)
    assert fpr.norm(h_loss) == 2.5 and fpr.norm(h_int) is None
