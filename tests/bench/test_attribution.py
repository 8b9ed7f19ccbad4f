"""Profiler events to time per op and line, on hand-built event trees shaped as torch.profiler's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from opscan.bench.attribution import (
    OpDelta,
    OpKey,
    OpTime,
    compare,
    explaining,
    op_times,
    parse_range_name,
    range_name,
    short_kernel,
)


class Event:
    """The FunctionEvent fields attribution reads."""

    def __init__(self, name, parent=None, *, kernels=(), cpu_us=0.0, seq=-1, thread=1, fwd_thread=0, device="CPU"):
        self.name = name
        self.cpu_parent = parent
        self.kernels = [SimpleNamespace(name=n, device=0, duration=us) for n, us in kernels]
        self.self_cpu_time_total = cpu_us
        self.sequence_nr = seq
        self.thread = thread
        self.fwd_thread = fwd_thread
        self.device_type = SimpleNamespace(name=device)


def one_step(seq: int):
    """A conv forward inside its call range, its backward on another thread, the optimizer, and stray events."""
    events = []

    def add(*args, **kwargs):
        events.append(Event(*args, **kwargs))
        return events[-1]

    step = add("ProfilerStep*", kernels=[("ProfilerStep*", 5000)], cpu_us=50)
    call = add(range_name("forward", "conv2d", "model.py:16"), step, kernels=[(range_name("forward", "conv2d", "model.py:16"), 900)])
    conv2d = add("aten::conv2d", call, cpu_us=3)
    conv = add("aten::convolution", conv2d, seq=seq, cpu_us=2)
    add("aten::cudnn_convolution", conv, kernels=[("void sm90_xmma_fprop_implicit_gemm<float>(Params)", 100)], cpu_us=20)
    root = add("autograd::engine::evaluate_function: ConvolutionBackward0", seq=seq, thread=2, fwd_thread=1, cpu_us=4)
    node = add("ConvolutionBackward0", root, seq=seq, thread=2, fwd_thread=1, cpu_us=1)
    add("aten::convolution_backward", node, thread=2, kernels=[("dgrad_kernel", 300), ("wgrad_kernel", 100)], cpu_us=30)
    orphan = add("autograd::engine::evaluate_function: AddBackward0", seq=seq + 1000, thread=2, fwd_thread=1)
    add("aten::add", orphan, thread=2, kernels=[("add_kernel", 4)])
    opt = add(range_name("optimizer", "_foreach_add_", ""), step)
    add("aten::_foreach_add_", opt, kernels=[("multi_tensor_apply_kernel", 6)], cpu_us=5)
    add("aten::zero_", kernels=[("fill_kernel", 10)], cpu_us=1)
    add("sm90_xmma_fprop_implicit_gemm", device="CUDA")  # the kernel's own device event
    return events


def test_device_time_per_op_and_line():
    events = one_step(5) + one_step(9)
    times = op_times(events, steps=2, device=True)
    assert set(times) == {
        OpKey("forward", "aten::conv2d", "model.py:16"),
        OpKey("backward", "aten::convolution_backward", "model.py:16"),  # the forward line, through sequence_nr
        OpKey("backward", "aten::add", ""),  # a node whose forward the profile did not see
        OpKey("optimizer", "aten::_foreach_add_", ""),
        OpKey("other", "aten::zero_", ""),
    }
    forward = times[OpKey("forward", "aten::conv2d", "model.py:16")]
    assert forward.ms == pytest.approx(0.1)  # 100 us per step; the range's own GPU span is not counted
    assert set(forward.kernels) == {"void sm90_xmma_fprop_implicit_gemm<float>(Params)"}
    backward = times[OpKey("backward", "aten::convolution_backward", "model.py:16")]
    assert backward.ms == pytest.approx(0.4)
    assert backward.kernels == pytest.approx({"dgrad_kernel": 0.3, "wgrad_kernel": 0.1})


def test_cpu_time_leaves_out_the_ranges_own_overhead():
    times = op_times(one_step(5), steps=1, device=False)
    conv = times[OpKey("forward", "aten::conv2d", "model.py:16")]
    assert conv.ms == pytest.approx((3 + 2 + 20) / 1000)
    assert conv.kernels == {}
    backward = times[OpKey("backward", "aten::convolution_backward", "model.py:16")]
    assert backward.ms == pytest.approx(0.030)
    assert not any(k.op.startswith("ProfilerStep") for k in times)
    # the node's own range (ConvolutionBackward0, 1 us) is below the root, not an aten op: it keeps the node's name
    assert times[OpKey("backward", "ConvolutionBackward0", "model.py:16")].ms == pytest.approx(0.001)


def test_range_names_round_trip():
    name = range_name("forward", "multi_head_attention_forward", "torchvision/models/vision_transformer.py:113")
    assert parse_range_name(name) == ("forward", "multi_head_attention_forward", "torchvision/models/vision_transformer.py:113")
    assert parse_range_name("aten::mm") is None
    assert parse_range_name(range_name("forward", "f", "a|b.py:3")) == ("forward", "f", "a|b.py:3")


def delta(op, bench, det, default=None, kernels=("k", "k")):
    key = OpKey("backward", op, "m.py:1")
    return OpDelta(key, bench, default, det, kernels[0], kernels[1], kernels[0] == kernels[1])


def test_compare_orders_by_change_and_fills_missing_ops_with_zero():
    bench = {OpKey("forward", "a", ""): OpTime(1.0, {"ka": 1.0}), OpKey("forward", "b", ""): OpTime(2.0, {"kb": 2.0})}
    det = {OpKey("forward", "a", ""): OpTime(1.1, {"ka": 1.1}), OpKey("forward", "c", ""): OpTime(0.5, {"sort": 0.5})}
    rows = compare(bench, det)
    assert [r.key.op for r in rows] == ["b", "c", "a"]
    b, c, a = rows
    assert (b.added_ms, c.added_ms) == (pytest.approx(-2.0), pytest.approx(0.5))
    assert a.same_kernels and not c.same_kernels
    assert (c.bench_kernel, c.det_kernel) == ("", "sort")
    assert a.autotuner_ms is None and a.determinism_ms is None
    with_default = compare(bench, det, {OpKey("forward", "a", ""): OpTime(1.05)})
    a = next(r for r in with_default if r.key.op == "a")
    assert a.autotuner_ms == pytest.approx(0.05) and a.determinism_ms == pytest.approx(0.05)


def test_explaining_takes_the_fewest_largest_ops():
    rows = [delta("small", 1, 1.1), delta("big", 1, 3), delta("mid", 1, 2), delta("faster", 2, 1)]
    assert [d.key.op for d in explaining(rows, 3.0)] == ["big"]  # 2 >= 2/3 of 3
    assert [d.key.op for d in explaining(rows, 4.0)] == ["big", "mid"]  # 2 < 2/3 of 4 <= 2 + 1
    assert [d.key.op for d in explaining(rows, 1.5)] == ["big"]
    assert [d.key.op for d in explaining(rows, 100.0, limit=2)] == ["big", "mid"]
    assert explaining(rows, 0.0) == [] and explaining(rows, -1.0) == []
    assert explaining([delta("faster", 2, 1)], 1.0) == []


def test_short_names():
    assert short_kernel("void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, (cudnnKernelDataType_t)2>(cudnn::T)") == (
        "cudnn::engines_precompiled::nchwToNhwcKernel"
    )
    assert short_kernel("sm90_xmma_dgrad_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32") .endswith("…")
    assert len(short_kernel("x" * 100)) == 48
