"""GPU tests of `opscan scan --probe`: index_add_ with many duplicate indices is silently nondeterministic by
default, takes a deterministic path in strict mode, and a strict probe of resnet50 finds nothing.

Run on the GPU machine: `python3 -m pytest tests/gpu -m gpu`.
"""

from __future__ import annotations

import inspect
import json
import os

import pytest

torch = pytest.importorskip("torch")

from opscan.trace.probe import Probe  # noqa: E402
from opscan.trace.state import TorchFlags  # noqa: E402

pytestmark = pytest.mark.gpu

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # for a torch that still checks it


def accumulate(idx, src):
    out = []
    for _ in range(4):
        out.append(torch.zeros(8, 16, device="cuda").index_add_(0, idx, src))  # the index_add_ line
    return out


LINE = next(i for i, text in enumerate(inspect.getsource(accumulate).splitlines()) if "the index_add_ line" in text)
LINE += inspect.getsourcelines(accumulate)[1]


def inputs():
    g = torch.Generator(device="cuda").manual_seed(0)
    idx = torch.randint(0, 8, (1 << 20,), device="cuda", generator=g)  # ~131k additions into each row
    return idx, torch.randn(1 << 20, 16, device="cuda", generator=g)


def test_index_add_with_duplicates_is_silent_by_default():
    idx, src = inputs()
    before = TorchFlags.capture()
    with Probe("index_add") as p:
        accumulate(idx, src)
    assert TorchFlags.capture() == before
    found = [f for f in p.findings if f.op == "aten.index_add_.default"]
    assert found, f"no silent index_add_: {p.findings}, {p.notices}"
    (f,) = found
    assert (f.phase, f.line, f.calls) == ("forward", LINE, 4) and f.file.endswith("test_probe_gpu.py")
    assert f.differed >= 1 and f.elements >= 1 and 0 < f.largest < 1e-2
    assert f.to_finding().code == "DET101"


def test_index_add_takes_the_deterministic_path_in_strict_mode():
    idx, src = inputs()
    with Probe("index_add", strict=True) as p:
        accumulate(idx, src)
    assert p.findings == [] and p.trace.findings == []


def test_strict_probe_of_resnet50_finds_nothing(capsys):
    from opscan.cli import main

    capsys.readouterr()
    rc = main(["scan", "torchvision:resnet50", "--input-shape", "4,3,224,224", "--probe", "--strict", "--device", "cuda", "--output-format", "json"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["findings"] == [], [f["message"] for f in doc["findings"]]
    assert rc == 0, err
    (notice,) = [n for n in doc["notices"] if "probe (strict mode)" in n]
    assert int(notice.split("reran ")[1].split()[0]) > 300, notice  # forward and backward were probed (405 on the CPU)
