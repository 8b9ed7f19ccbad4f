"""The probe mode on the CPU: it reruns each op on cloned inputs and reports the ops whose bits differ.

The nondeterminism is made on purpose: tests/fixtures/probe/noisy_ops.py
registers custom ops that return different bits on every call, in forward,
in backward and in place. The rest checks that nothing deterministic is
reported, that the program sees each op run once, that random ops keep their
stream, and that the flags are as before.
"""

from __future__ import annotations

import inspect
import json
import sys

import pytest

torch = pytest.importorskip("torch")  # lint-only installs (no torch) skip this file

from torch import nn  # noqa: E402

from opscan.trace.bits import bits_equal, difference, fingerprint, int_view  # noqa: E402
from opscan.trace.probe import Probe, skip_reason  # noqa: E402
from opscan.trace.state import TorchFlags  # noqa: E402
from tests.trace.helpers import ROOT, scan  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "probe"
sys.path.insert(0, str(FIXTURES))
import noisy_model  # noqa: E402
import noisy_ops  # noqa: E402,F401 - registers torch.ops.opscan_fixture

NOISY_LINE = next(i for i, line in enumerate(inspect.getsource(noisy_model).splitlines(), 1) if "# the noisy line" in line)


def probe(fn, *, strict=False, roots=(), **kwargs):
    with Probe("t", roots=roots, strict=strict, **kwargs) as p:
        fn()
    return p


# ---------------------------------------------------------------- bits


def test_bits_are_compared_not_values():
    nan = torch.tensor([float("nan"), 0.0])
    assert not torch.equal(nan, nan.clone())  # what the probe must not rely on
    assert bits_equal(nan, nan.clone())
    assert not bits_equal(torch.tensor([0.0]), torch.tensor([-0.0]))  # equal values, other bits
    assert difference(torch.tensor([0.0, 1.0]), torch.tensor([-0.0, 1.5])) == (2, 2, 0.5)
    assert difference(torch.tensor([1.0, 2.0]), torch.tensor([1.0, float("nan")]))[2] == float("inf")
    for dtype in (torch.bool, torch.float16, torch.bfloat16, torch.complex64, torch.int64, torch.uint8):
        t = torch.ones(3, 2, dtype=dtype)
        assert int_view(t).element_size() * int_view(t).numel() == t.element_size() * t.numel()
        assert bits_equal(t, t.clone())


def test_fingerprint_sees_bits_and_places():
    x = torch.arange(6, dtype=torch.float32)
    assert int(fingerprint(x)) == int(fingerprint(x.clone()))
    assert int(fingerprint(x)) != int(fingerprint(x.flip(0)))  # same values elsewhere: an XOR hash would miss it
    y = x.clone()
    y[3] = torch.nextafter(y[3], torch.tensor(10.0))
    assert int(fingerprint(x)) != int(fingerprint(y))


def test_skip_reasons_come_from_the_schema():
    aten = torch.ops.aten
    assert skip_reason(aten.empty.memory_format) == "uninitialized output"
    assert skip_reason(aten.view.default) == "a view"
    assert skip_reason(aten._local_scalar_dense.default) == "no tensor outputs"
    assert skip_reason(aten.add_.Tensor) is None
    assert skip_reason(aten.index_add.default) is None


# ---------------------------------------------------------------- detection


def test_finds_a_silent_op_in_forward_and_backward():
    model, x = noisy_model.build()
    p = probe(lambda: model(x).sum().backward(), roots=(model,))
    by_op = {f.op: f for f in p.findings}
    assert set(by_op) == {"opscan_fixture.noisy.default", "opscan_fixture.noisy_grad.default"}
    forward, backward = by_op["opscan_fixture.noisy.default"], by_op["opscan_fixture.noisy_grad.default"]
    assert (forward.phase, backward.phase) == ("forward", "backward")
    for f in (forward, backward):
        assert f.file.endswith("noisy_model.py") and f.line == NOISY_LINE  # backward: the forward line
        assert (f.module, f.module_class) == ("head", "Head")
        assert (f.calls, f.differed) == (1, 1)
        assert f.elements == f.of == 6 and 0 < f.largest < 1e-5
        assert f.mode == "default"
    finding = forward.to_finding()
    assert finding.code == "DET101" and finding.line == NOISY_LINE
    assert finding.properties["elements_differing"] == 6 and finding.properties["max_abs_diff"] > 0


def test_counts_calls_at_one_place():
    x = torch.ones(3)

    def body():
        for _ in range(4):
            torch.ops.opscan_fixture.noisy(x)
            x.add(1)  # deterministic, at another line

    (f,) = probe(body).findings
    assert (f.op, f.calls, f.differed) == ("opscan_fixture.noisy.default", 4, 4)


def test_in_place_ops_run_once_and_are_compared_through_what_they_write():
    x = torch.zeros(4)

    def body():
        x.add_(1).mul_(3)
        torch.ops.opscan_fixture.noisy_(x)

    p = probe(body)
    assert [f.op for f in p.findings] == ["opscan_fixture.noisy_.default"]
    assert torch.all((x - 3).abs() < 1e-4), "the program must see each in-place op applied once"
    y = torch.zeros(5)
    y.index_add_(0, torch.tensor([0, 1, 1, 4]), torch.ones(4))
    z = torch.zeros(5)
    assert probe(lambda: z.index_add_(0, torch.tensor([0, 1, 1, 4]), torch.ones(4))).findings == []
    assert torch.equal(y, z)


def test_an_op_given_one_tensor_twice_gets_one_clone_twice():
    x = torch.arange(5.0)
    assert probe(lambda: x.add_(x)).findings == []
    assert torch.equal(x, torch.arange(5.0) * 2)


def test_expanded_and_strided_inputs_keep_their_layout():
    base = torch.randn(4, 1)
    seen = []

    class Layout(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.mul.Tensor:
                seen.append(args[0].stride())
            return func(*args, **(kwargs or {}))

    with Layout():
        with Probe():
            base.expand(4, 3).mul(2)
            torch.randn(6, 6)[:, ::2].mul(2)
    assert seen == [(1, 0), (1, 0), (6, 2), (6, 2)]


# ---------------------------------------------------------------- no false positives


@pytest.mark.parametrize("strict", [False, True])
def test_a_deterministic_model_gives_nothing(strict):
    model, x = noisy_model.build_clean()
    emb = nn.Embedding(10, 3)
    lstm = nn.LSTM(3, 4, batch_first=True)

    def body():
        loss = model(x).sum()
        out, _ = lstm(emb(torch.tensor([[1, 2, 2, 5]])))
        loss = loss + out.sum() + torch.randn(3).sum()
        loss.backward()
        torch.zeros(3).scatter_add_(0, torch.tensor([0, 1, 1, 2]), torch.ones(4))
        torch.sort(torch.tensor([3.0, 1.0, 1.0, 2.0]), stable=True)

    p = probe(body, strict=strict, roots=(model,))
    assert p.findings == []
    assert p.trace is None or p.trace.findings == []
    (notice,) = p.notices
    assert notice.startswith(f"probe ({'strict' if strict else 'default'} mode): reran ")
    assert int(notice.split("reran ")[1].split()[0]) > 20


def test_random_ops_draw_the_same_numbers_and_keep_the_stream():
    def body():
        torch.nn.functional.dropout(torch.ones(100), 0.5)
        torch.randn(8)
        torch.empty(5).uniform_()
        torch.bernoulli(torch.full((20,), 0.5))
        torch.randint(0, 10, (5,), generator=gen)

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    body()
    want, want_gen = torch.rand(4), torch.rand(4, generator=gen)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    p = probe(body)
    assert p.findings == []
    assert torch.equal(torch.rand(4), want), "the probe must not move the global generator"
    assert torch.equal(torch.rand(4, generator=gen), want_gen), "nor one the op was given"


def test_uninitialized_and_oversized_are_not_rerun():
    p = probe(lambda: (torch.empty(10), torch.ones(64).add(1)), max_bytes=16)
    assert p.findings == []
    assert "uninitialized output" in p.notices[0] and "inputs over 16 bytes" in p.notices[0]


def test_strict_mode_catches_raising_ops_and_probes_the_rest():
    def body():
        torch.zeros(6).put_(torch.tensor([0, 2]), torch.ones(2))  # raises on the CPU, caught
        torch.ops.opscan_fixture.noisy(torch.ones(2))

    p = probe(body, strict=True)
    assert [f.op for f in p.trace.findings] == ["aten.put_.default"]
    assert [(f.op, f.mode) for f in p.findings] == [("opscan_fixture.noisy.default", "strict")]
    assert "rerun of an op that raised" in p.notices[0]


# ---------------------------------------------------------------- state


@pytest.mark.parametrize("strict", [False, True])
def test_flags_are_restored(strict):
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = True
    try:
        before = TorchFlags.capture()
        with pytest.raises(ValueError):
            with Probe(strict=strict):
                assert torch.are_deterministic_algorithms_enabled() is strict
                assert not torch.is_deterministic_algorithms_warn_only_enabled()
                torch.ones(2).add(1)
                raise ValueError("the body's own error")
        assert TorchFlags.capture() == before
        assert torch._C._len_torch_dispatch_stack() == 0, "the mode is popped"
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.benchmark = False


# ---------------------------------------------------------------- the command


def test_scan_probe_json(capsys):
    rc, out, err = scan(capsys, "noisy_model.py:build", "--probe", "--device", "cpu", "--output-format", "json", cwd=FIXTURES)
    assert rc == 1, err
    doc = json.loads(out)
    findings = doc["findings"]
    assert {f["code"] for f in findings} == {"DET101"}
    assert {(f["op"], f["phase"], f["file"], f["line"], f["module"]) for f in findings} == {
        ("opscan_fixture.noisy.default", "forward", "noisy_model.py", NOISY_LINE, "head"),
        ("opscan_fixture.noisy_grad.default", "backward", "noisy_model.py", NOISY_LINE, "head"),
    }
    for f in findings:
        assert f["mode"] == "default" and f["calls"] == f["differed"] == 1 and f["elements_differing"] == 6
    assert any("probe (default mode)" in n for n in doc["notices"])


def test_scan_probe_clean_target_exits_zero(capsys):
    rc, out, err = scan(capsys, "noisy_model.py:build_clean", "--probe", "--strict", "--device", "cpu", cwd=FIXTURES)
    assert rc == 0, err
    assert "probe (strict mode)" in out


def test_strict_needs_probe(capsys):
    rc, out, err = scan(capsys, "noisy_model.py:build", "--strict", cwd=FIXTURES)
    assert rc == 2 and "--strict goes with --probe" in err and "Traceback" not in err
