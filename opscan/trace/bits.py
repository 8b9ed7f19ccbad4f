"""Tensors compared bit for bit, and a fingerprint of a tensor's bits computed on its device.

`torch.equal` is not a bitwise test: NaN is unequal to itself and -0.0 equals
0.0. Here every tensor is read through an integer view of the same width
(float32 as int32, bool as int8, complex64 as two int32), so two tensors are
"equal" exactly when their bits are.

    bits_equal(a, b)          # same shape, dtype and bits
    difference(a, b)          # (elements that differ, max |a - b|), for a report
    fingerprint(t)            # a 0-dim int64 tensor on t's device; equal bits give equal prints

`torch.hash_tensor` (2.9+) would do for the fingerprint, but it is an XOR of
the elements, blind to their order: a kernel that writes the same values to
other places (a sort's ties, an index among equal maxima) keeps its hash. The
fingerprint here weighs each element by its position.
"""

from __future__ import annotations

import math

import torch

_SIGNED = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_INTEGERS = (torch.int8, torch.int16, torch.int32, torch.int64)


def comparable(t: torch.Tensor) -> bool:
    """Can this tensor's bits be read (a dense tensor with data, on a real device)?"""
    return t.layout == torch.strided and not t.is_quantized and t.device.type != "meta"


def int_view(t: torch.Tensor) -> torch.Tensor | None:
    """The tensor's bits as a signed integer tensor of the same shape and width, or None if unreadable.

    A view, not a copy, except for a conjugate or negative view (its bits are
    resolved first) and complex tensors, which become (..., 2) of the real width.
    """
    if not comparable(t):
        return None
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    if t.is_complex():
        t = torch.view_as_real(t)
    if t.dtype in _INTEGERS:
        return t
    signed = _SIGNED.get(t.element_size())
    return t.view(signed) if signed is not None else None


def bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same shape, dtype and bits (False if either cannot be read)."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    ia, ib = int_view(a), int_view(b)
    if ia is None or ib is None:
        return False
    return bool(torch.equal(ia, ib))


def difference(a: torch.Tensor, b: torch.Tensor) -> tuple[int, int, float]:
    """(elements whose bits differ, elements, largest absolute difference among them).

    The difference is inf where one side is NaN or infinite and the other is
    not, 0.0 for bits that differ only in a NaN payload or the sign of zero.
    For tensors of other shapes, every element counts as different.
    """
    if a.shape != b.shape or a.dtype != b.dtype:
        return max(a.numel(), b.numel()), max(a.numel(), b.numel()), math.inf
    ia, ib = int_view(a), int_view(b)
    if ia is None or ib is None:
        return 0, a.numel(), 0.0
    differs = ia != ib
    if a.is_complex():
        differs = differs.any(dim=-1)
    count = int(differs.sum())
    if count == 0:
        return 0, a.numel(), 0.0
    if a.is_floating_point() or a.is_complex():
        wide = torch.complex128 if a.is_complex() else torch.float64
        gap = (a.to(wide) - b.to(wide)).abs()
        gap = torch.where(differs, gap, torch.zeros((), dtype=gap.dtype, device=gap.device))
        gap = torch.nan_to_num(gap, nan=math.inf, posinf=math.inf)
        # a NaN on both sides with other payloads is no numerical difference
        both_nan = torch.isnan(a) & torch.isnan(b)
        gap = torch.where(both_nan, torch.zeros((), dtype=gap.dtype, device=gap.device), gap)
        largest = float(gap.max())
    else:
        largest = float((a.to(torch.float64) - b.to(torch.float64)).abs().max())
    return count, a.numel(), largest


# Position weights per device, grown on demand: the i-th element of a flattened
# tensor is multiplied by a pseudo-random odd number below 2**32, so that
# moving values around changes the print.
_WEIGHTS: dict[torch.device, torch.Tensor] = {}


def _weights(n: int, device: torch.device) -> torch.Tensor:
    cached = _WEIGHTS.get(device)
    if cached is None or cached.numel() < n:
        size = max(n, 1024, 2 * (cached.numel() if cached is not None else 0))
        index = torch.arange(size, dtype=torch.int64, device=device)
        cached = ((index % 2147483629) * 2654435761 % 4294967291) | 1
        _WEIGHTS[device] = cached
    return cached[:n]


def fingerprint(t: torch.Tensor) -> torch.Tensor | None:
    """A 0-dim int64 tensor on t's device that changes when any bit, or the place of any value, does.

    Integer arithmetic wraps on overflow, the same way on every run, and
    integer addition is associative, so the print itself is deterministic.
    None for a tensor whose bits cannot be read. No host synchronisation.
    """
    iv = int_view(t)
    if iv is None:
        return None
    flat = iv.reshape(-1).to(torch.int64)
    if flat.numel() == 0:
        return torch.zeros((), dtype=torch.int64, device=t.device)
    return (flat * _weights(flat.numel(), flat.device)).sum() + flat.sum() * 31
