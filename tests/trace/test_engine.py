"""The engine's parts: alert parsing, the sequence-number mapping it relies on, module names, remedies."""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")  # lint-only installs (no torch) skip this file

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import opscan  # noqa: E402
from opscan.trace.catch import CUBLAS_CALLER, parse_alert  # noqa: E402
from opscan.rules import adaptive_pool_remedy as shape_remedy  # noqa: E402
from opscan.trace.remedy import generic_remedy  # noqa: E402
from opscan.trace.sourcemap import SourceMap  # noqa: E402

ALERT = (
    "{caller} does not have a deterministic implementation, but you set 'torch.use_deterministic_algorithms(True)'. "
    "You can turn off determinism just for this operation, or you can use the 'warn_only=True' option, if that's "
    "acceptable for your application. You can also file an issue at https://github.com/pytorch/pytorch/issues to "
    "help us prioritize adding deterministic support for this operation."
)
CUBLAS = (
    "Deterministic behavior was enabled with either `torch.use_deterministic_algorithms(True)` or "
    "`at::Context::setDeterministicAlgorithms(true)`, but this operation is not deterministic because it uses CuBLAS "
    "and you have CUDA >= 10.2. To enable deterministic behavior in this case, you must set an environment variable "
    "before running your PyTorch application: CUBLAS_WORKSPACE_CONFIG=:4096:8 or CUBLAS_WORKSPACE_CONFIG=:16:8."
)


@pytest.mark.parametrize("caller", ["put_", "median CUDA with indices output", "_histc_cuda with floating point input"])
def test_parse_alert(caller):
    alert = parse_alert(RuntimeError(ALERT.format(caller=caller)))
    assert (alert.kind, alert.caller) == ("op", caller)


def test_parse_old_alert_and_cublas_and_others():
    old = "kthvalue CUDA does not have a deterministic implementation, but you set 'torch.use_deterministic_algorithms(True)'. You can turn off determinism just for this operation if that's acceptable."
    assert parse_alert(RuntimeError(old)).caller == "kthvalue CUDA"
    assert parse_alert(RuntimeError(CUBLAS)).caller == CUBLAS_CALLER
    assert parse_alert(RuntimeError("shape mismatch")) is None
    assert parse_alert(ValueError(ALERT.format(caller="put_"))) is None


def test_real_alert_text_parses():
    torch.use_deterministic_algorithms(True)
    try:
        with pytest.raises(RuntimeError) as info:
            torch.zeros(4).put_(torch.tensor([1]), torch.ones(1))
    finally:
        torch.use_deterministic_algorithms(False)
    assert parse_alert(info.value).caller == "put_"


def test_sequence_number_assumption_holds_on_this_torch():
    """The backward mapping relies on: when an op that creates a node reaches the dispatch mode,
    the thread's sequence counter is that node's sequence number plus one."""
    seen = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            seen.append((func, torch._C._autograd._get_sequence_nr()))
            return out

    x = torch.randn(3, 4, requires_grad=True)
    with Record():
        y = torch.nn.functional.linear(x, torch.randn(5, 4)).relu()
        z = (y * 2).sum()
    nodes = {}
    stack = [z.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node.name() in nodes or "AccumulateGrad" in node.name():
            continue
        nodes[node.name()] = node._sequence_nr()
        stack.extend(n for n, _ in node.next_functions)
    by_op = {str(func).split(".")[1]: seq for func, seq in seen}
    assert nodes["ReluBackward0"] == by_op["relu"] - 1
    assert nodes["MulBackward0"] == by_op["mul"] - 1
    assert nodes["SumBackward0"] == by_op["sum"] - 1


def test_current_autograd_node_is_visible_inside_backward_dispatch():
    names = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            node = torch._C._current_autograd_node()
            names.append(node.name() if node is not None else None)
            return func(*args, **(kwargs or {}))

    x = torch.randn(3, requires_grad=True)
    y = x.exp().sum()
    with Record():
        y.backward()
    assert "ExpBackward0" in names and "SumBackward0" in names


def test_backward_of_a_forward_outside_the_trace_is_still_found():
    x = torch.randn(6, requires_grad=True)
    y = (x * 1).put(torch.tensor([1, 2]), torch.zeros(2))  # forward alert would fire if strict; it is not here
    with opscan.trace() as t:
        y.sum().backward()
    (finding,) = t.findings
    assert finding.phase == "backward"
    assert finding.file is None and "a forward op the scan did not see" in finding.message


def test_modules_outside_roots_are_named_from_their_parents():
    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.unpool = nn.MaxUnpool1d(2)

        def forward(self, x):
            return self.unpool(x, torch.arange(0, 8, 2).expand_as(x))

    model = nn.Sequential(nn.Identity(), nn.Sequential(Inner()))
    with opscan.trace() as t:
        model(torch.randn(1, 1, 4))
    (finding,) = t.findings
    assert (finding.module, finding.module_class) == ("1.0.unpool", "MaxUnpool1d")
    assert SourceMap().name(None) is None


def test_opscan_trace_is_callable_as_module_and_function():
    import opscan.commands.scan  # noqa: F401

    with opscan.trace() as t:
        pass
    assert t.findings == []


# ---------------------------------------------------------------- remedies


def test_identity_remedy_for_adaptive_pool_on_same_size():
    r = shape_remedy("aten._adaptive_avg_pool2d_backward.default", [[2, 512, 7, 7], [2, 512, 7, 7]], "avgpool")
    assert r.code == "nn.Identity()" and "already 7x7" in r.text and "(avgpool)" in r.text


def test_avgpool_remedy_for_divisible_sizes_and_mean_for_one():
    r = shape_remedy("aten._adaptive_avg_pool2d_backward.default", [[2, 8, 7, 7], [2, 8, 14, 28]])
    assert r.code == "nn.AvgPool2d(kernel_size=(2, 4))"
    r = shape_remedy("aten.adaptive_avg_pool3d_backward.default", [[2, 8, 1, 1, 1], [2, 8, 5, 6, 7]])
    assert r.code == "x.mean(dim=(-3, -2, -1), keepdim=True)"
    assert shape_remedy("aten.adaptive_avg_pool3d_backward.default", [[2, 8, 2, 2, 2], [2, 8, 4, 4, 4]]) is None
    assert shape_remedy("aten.put.default", [[3]]) is None


@settings(deadline=None)
@given(
    out=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    factor=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    kind=st.sampled_from(["avg", "max"]),
)
def test_shape_remedies_are_exact(out, factor, kind):
    inp = (out[0] * factor[0], out[1] * factor[1])
    op = f"aten.{'_adaptive_avg_pool2d_backward' if kind == 'avg' else 'adaptive_max_pool2d_backward'}.default"
    r = shape_remedy(op, [[1, 2, *out], [1, 2, *inp]])
    x = torch.randn(1, 2, *inp)
    adaptive = (nn.AdaptiveAvgPool2d if kind == "avg" else nn.AdaptiveMaxPool2d)(out)
    replacement = eval(r.code, {"nn": nn, "x": x})
    y = replacement(x) if isinstance(replacement, nn.Module) else replacement
    torch.testing.assert_close(y, adaptive(x))


def test_rule_remedy_is_used_and_generic_otherwise(tmp_path):
    from opscan.rules import load

    (tmp_path / "ops.toml").write_text(
        textwrap.dedent(
            """
            [[op]]
            id = "max-unpool"
            title = "MaxUnpool"
            aten = ["aten::max_unpool2d"]
            callers = ["max_unpooling2d_forward_out"]
            phase = "forward"
            devices = ["cpu", "cuda"]
            torch = ">=1.8"
            remedy = "Replace MaxUnpool2d with nearest upsampling times a mask."
            remedy_code = "y = F.interpolate(x, scale_factor=2) * mask"
            """
        )
    )
    db = load(str(tmp_path))
    assert db.for_alert("other caller", "aten.max_unpool2d.default").id == "max-unpool"
    assert db.for_alert("max_unpooling2d_forward_out", "aten.x.default").id == "max-unpool"
    model = nn.Sequential(nn.MaxPool2d(2, return_indices=True))
    unpool = nn.MaxUnpool2d(2)
    with opscan.trace(rules=db) as t:
        y, idx = model(torch.randn(1, 1, 4, 4))
        unpool(y, idx).flatten().put(torch.tensor([0]), torch.ones(1))
    by_op = {f.op: f for f in t.findings}
    assert by_op["aten.max_unpool2d.default"].remedy.text == "Replace MaxUnpool2d with nearest upsampling times a mask."
    assert by_op["aten.max_unpool2d.default"].rule == "max-unpool"
    put = by_op["aten.put.default"]
    assert put.remedy.source == "generic" and "nondeterministic_allowed" in put.remedy.code
    assert "unpool(y, idx).flatten().put" in put.remedy.code


def test_generic_remedy_code_runs():
    generic = generic_remedy("put_", "forward", "y = x.put(i, v)")
    namespace = {"x": torch.zeros(3), "i": torch.tensor([1]), "v": torch.ones(1)}
    torch.use_deterministic_algorithms(True)
    try:
        exec(generic.code, namespace)  # noqa: S102 - our own generated code
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
    assert namespace["y"].tolist() == [0.0, 1.0, 0.0]


def test_an_alert_raised_with_no_python_frame_above_is_still_found(monkeypatch):
    """Ops a C++ thread runs (a collective's completion callback) have no caller frame: found, with no line."""
    import opscan.trace.catch as catch
    from opscan.trace.sourcemap import dispatch_caller

    assert dispatch_caller() is not None  # from Python, the frame that called this one's caller
    monkeypatch.setattr(catch, "dispatch_caller", lambda: None)
    x = torch.randn(1, 1, 4)
    with opscan.trace() as t:
        nn.MaxUnpool1d(2)(x, torch.arange(0, 8, 2).expand_as(x))
    (finding,) = t.findings
    assert finding.op.startswith("aten.max_unpool") and finding.file is None
