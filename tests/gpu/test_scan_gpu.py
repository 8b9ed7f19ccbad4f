"""GPU tests: the scan's findings equal what strict mode raises, op by op, on torchvision models and single layers.

Run on the GPU machine: `python3 -m pytest tests -m gpu`. The oracle (oracle.py)
shares no code with opscan. Each test compares sets, so a missing or an extra
finding fails it, and so does a backward finding pinned to the wrong forward line.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")  # lint-only installs (no torch) skip this file

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import opscan  # noqa: E402
from opscan.trace.targets import Workload, run_workload, torchvision_random_init  # noqa: E402
from tests.gpu.oracle import layer_oracle, model_oracle, scan_keys  # noqa: E402

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# OPSCAN_GPU_TEST_DEVICE=cpu dry-runs this file's code on the CPU (with --noconftest); its verdicts count only on CUDA.
DEV = os.environ.get("OPSCAN_GPU_TEST_DEVICE", "cuda")


def scan(model, inputs, loss_fn=None):
    with opscan.trace(roots=(model,)) as t:
        run_workload(Workload("test", model, inputs, loss_fn))
    model.zero_grad(set_to_none=True)
    return t


# ---------------------------------------------------------------- single layers


class Wrap(nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, *xs):
        return self.layer(*xs)  # the line every layer's findings must point at


WRAP_LINE = inspect.getsourcelines(Wrap.forward)[1] + 1


class Fn(nn.Module):
    """A functional op as a layer; its findings point at the lambda's line."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


class PoolUnpool(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool, self.unpool = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)

    def forward(self, x):
        return self.unpool(*self.pool(x))


def r(*shape, grad=True):
    return torch.randn(*shape, device=DEV, requires_grad=grad)


def ctc_inputs():
    log_probs = torch.randn(12, 2, 5, device=DEV).log_softmax(2).detach().requires_grad_()
    targets = torch.randint(1, 5, (2, 4), device=DEV)
    return log_probs, targets, torch.full((2,), 12, device=DEV), torch.full((2,), 4, device=DEV)


# (name, layer factory, inputs factory). Layers run on CUDA; the oracle decides what raises.
LAYERS = [
    ("adaptive_avg_pool2d_14_to_7", lambda: nn.AdaptiveAvgPool2d(7), lambda: (r(2, 4, 14, 14),)),
    ("adaptive_avg_pool2d_7_to_7", lambda: nn.AdaptiveAvgPool2d(7), lambda: (r(2, 4, 7, 7),)),
    ("adaptive_avg_pool2d_to_1", lambda: nn.AdaptiveAvgPool2d(1), lambda: (r(2, 4, 9, 9),)),
    ("adaptive_avg_pool3d", lambda: nn.AdaptiveAvgPool3d(2), lambda: (r(2, 2, 6, 6, 6),)),
    ("adaptive_max_pool2d", lambda: nn.AdaptiveMaxPool2d(3), lambda: (r(2, 4, 9, 9),)),
    ("adaptive_max_pool3d", lambda: nn.AdaptiveMaxPool3d(2), lambda: (r(2, 2, 6, 6, 6),)),
    ("avg_pool3d", lambda: nn.AvgPool3d(2), lambda: (r(2, 2, 4, 4, 4),)),
    ("max_pool3d", lambda: nn.MaxPool3d(2), lambda: (r(2, 2, 4, 4, 4),)),
    ("fractional_max_pool2d", lambda: nn.FractionalMaxPool2d(2, output_size=3), lambda: (r(2, 2, 8, 8),)),
    ("fractional_max_pool3d", lambda: nn.FractionalMaxPool3d(2, output_size=2), lambda: (r(2, 2, 6, 6, 6),)),
    ("max_unpool2d", PoolUnpool, lambda: (r(2, 2, 8, 8),)),
    ("reflection_pad1d", lambda: nn.ReflectionPad1d(2), lambda: (r(2, 3, 8),)),
    ("reflection_pad2d", lambda: nn.ReflectionPad2d(2), lambda: (r(2, 3, 8, 8),)),
    ("reflection_pad3d", lambda: nn.ReflectionPad3d(1), lambda: (r(2, 2, 4, 4, 4),)),
    ("replication_pad2d", lambda: nn.ReplicationPad2d(2), lambda: (r(2, 3, 8, 8),)),
    ("upsample_bicubic", lambda: nn.Upsample(scale_factor=2, mode="bicubic"), lambda: (r(2, 3, 8, 8),)),
    ("upsample_bilinear", lambda: nn.Upsample(scale_factor=2, mode="bilinear"), lambda: (r(2, 3, 8, 8),)),
    ("upsample_linear1d", lambda: nn.Upsample(scale_factor=2, mode="linear"), lambda: (r(2, 3, 8),)),
    ("upsample_nearest", lambda: nn.Upsample(scale_factor=2, mode="nearest"), lambda: (r(2, 3, 8, 8),)),
    ("interpolate_antialias", lambda: Fn(lambda x: F.interpolate(x, size=(5, 5), mode="bilinear", antialias=True)), lambda: (r(2, 3, 16, 16),)),
    ("grid_sample", lambda: Fn(lambda x, g: F.grid_sample(x, g, align_corners=False)), lambda: (r(2, 3, 8, 8), r(2, 4, 4, 2))),
    ("nll_loss2d", lambda: Fn(lambda x, t: F.nll_loss(x.log_softmax(1), t)), lambda: (r(2, 5, 4, 4), torch.randint(0, 5, (2, 4, 4), device=DEV))),
    ("cross_entropy_2d", lambda: nn.CrossEntropyLoss(), lambda: (r(2, 5, 4, 4), torch.randint(0, 5, (2, 4, 4), device=DEV))),
    ("ctc_loss", lambda: nn.CTCLoss(), ctc_inputs),
    ("embedding_bag_max", lambda: nn.EmbeddingBag(10, 4, mode="max").to(DEV), lambda: (torch.randint(0, 10, (3, 4), device=DEV),)),
    ("embedding", lambda: nn.Embedding(10, 4).to(DEV), lambda: (torch.randint(0, 10, (3, 4), device=DEV),)),
    ("conv2d", lambda: nn.Conv2d(3, 4, 3).to(DEV), lambda: (r(2, 3, 8, 8),)),
    ("conv_transpose2d", lambda: nn.ConvTranspose2d(3, 4, 3, stride=2).to(DEV), lambda: (r(2, 3, 8, 8),)),
    ("linear", lambda: nn.Linear(8, 4).to(DEV), lambda: (r(3, 8),)),
    ("multihead_attention", lambda: nn.MultiheadAttention(16, 2, batch_first=True), lambda: (r(2, 6, 16),) * 3),
    ("sdpa", lambda: Fn(lambda q: F.scaled_dot_product_attention(q, q, q)), lambda: (r(2, 4, 32, 64).half(),)),
    ("histc", lambda: Fn(lambda x: torch.histc(x, bins=4)), lambda: (r(100, grad=False),)),
    ("bincount_weights", lambda: Fn(lambda i, w: torch.bincount(i, w)), lambda: (torch.randint(0, 5, (20,), device=DEV), r(20, grad=False))),
    ("kthvalue", lambda: Fn(lambda x: torch.kthvalue(x, 2, dim=1).values), lambda: (r(4, 6),)),
    ("median_dim", lambda: Fn(lambda x: torch.median(x, dim=1).values), lambda: (r(4, 6),)),
    ("scatter_reduce_prod", lambda: Fn(lambda x, i: torch.zeros(4, device=DEV).scatter_reduce(0, i, x, "prod")), lambda: (r(6), torch.tensor([0, 1, 1, 2, 3, 3], device=DEV))),
    ("index_add", lambda: Fn(lambda x, i: torch.zeros(4, 3, device=DEV).index_add(0, i, x)), lambda: (r(5, 3), torch.tensor([0, 1, 1, 2, 3], device=DEV))),
    ("index_put_accumulate", lambda: Fn(lambda x, i: torch.zeros(4, device=DEV).index_put((i,), x, accumulate=True)), lambda: (r(5), torch.tensor([0, 1, 1, 2, 3], device=DEV))),
    ("cumsum", lambda: Fn(lambda x: x.cumsum(0)), lambda: (r(1000),)),
    ("put", lambda: Fn(lambda x: (x * 1).put(torch.tensor([0, 2], device=DEV), torch.ones(2, device=DEV))), lambda: (r(6),)),
]


def _expected_line(layer) -> int:
    """The innermost line of this file on the op's stack: a lambda's, PoolUnpool.forward's, or Wrap.forward's."""
    if isinstance(layer, Fn):
        return layer.fn.__code__.co_firstlineno
    if isinstance(layer, PoolUnpool):
        return inspect.getsourcelines(PoolUnpool.forward)[1] + 1
    return WRAP_LINE


@pytest.mark.parametrize("name, make_layer, make_inputs", LAYERS, ids=[case[0] for case in LAYERS])
def test_layer_findings_equal_strict_mode(name, make_layer, make_inputs):
    torch.manual_seed(0)
    layer = make_layer().to(DEV)
    inputs = make_inputs()
    t = scan(Wrap(layer), inputs)
    got = {(f.phase, f.caller) for f in t.findings}
    want = layer_oracle(Wrap(layer), tuple(x.detach().requires_grad_(x.requires_grad) for x in inputs))
    assert got == want
    this_file = os.path.realpath(__file__)
    for f in t.findings:
        # Backward findings point at the forward line that created the node; forward ones at the calling line.
        assert os.path.realpath(f.file) == this_file, f
        assert f.line == _expected_line(layer), (f.phase, f.line_text)
        assert f.module.startswith("layer"), f.module
        assert f.remedy.text


def test_layer_list_is_broad_and_the_oracle_is_not_vacuous():
    assert len(LAYERS) >= 20
    found = set()
    for name, make_layer, make_inputs in LAYERS:
        torch.manual_seed(0)
        found |= {(name, phase) for phase, _ in layer_oracle(Wrap(make_layer().to(DEV)), make_inputs())}
    print(f"strict mode raised for {len(found)} layer/phase pairs: {sorted(found)}")
    assert len({name for name, _ in found}) >= 10
    assert any(phase == "backward" for _, phase in found) and any(phase == "forward" for _, phase in found)


def test_identity_remedy_for_adaptive_pool_on_its_own_size():
    layer = nn.AdaptiveAvgPool2d(7).to(DEV)
    t = scan(Wrap(layer), (r(2, 4, 7, 7),))
    (finding,) = t.findings
    assert finding.phase == "backward"
    assert finding.remedy.code == "nn.Identity()" and "already 7x7" in finding.remedy.text
    assert (finding.module, finding.module_class) == ("layer", "AdaptiveAvgPool2d")


# ---------------------------------------------------------------- torchvision models

MODELS = [
    ("resnet18", (2, 3, 224, 224)),
    ("alexnet", (2, 3, 224, 224)),
    ("vgg11", (2, 3, 224, 224)),
    ("squeezenet1_1", (2, 3, 224, 224)),
    ("densenet121", (2, 3, 224, 224)),
    ("googlenet", (2, 3, 224, 224)),
    ("mobilenet_v3_small", (2, 3, 224, 224)),
    ("efficientnet_b0", (2, 3, 224, 224)),
    ("shufflenet_v2_x0_5", (2, 3, 224, 224)),
    ("regnet_y_400mf", (2, 3, 224, 224)),
    ("mnasnet0_5", (2, 3, 224, 224)),
    ("convnext_tiny", (2, 3, 224, 224)),
    ("vit_b_16", (2, 3, 224, 224)),
    ("swin_t", (2, 3, 224, 224)),
    ("fcn_resnet50", (2, 3, 224, 224)),
    ("r3d_18", (2, 3, 8, 112, 112)),
]

_MODEL_RESULTS = {}


@pytest.mark.parametrize("name, shape", MODELS, ids=[m[0] for m in MODELS])
def test_model_findings_equal_op_by_op_replay(name, shape):
    from torchvision import models

    torch.manual_seed(0)
    builder = models.get_model_builder(name)
    model = builder(**torchvision_random_init(builder)).to(DEV).train()
    x = torch.randn(*shape, device=DEV)
    t = scan(model, x)
    want, stats = model_oracle(model, x)
    got = scan_keys(t.findings)
    _MODEL_RESULTS[name] = sorted(got)
    print(f"{name}: {len(got)} findings, oracle replayed {stats['ops']} ops ({stats['replay_errors']} replay errors)")
    # op, caller, phase, and the user line: for backward ops the forward line anomaly mode recorded.
    assert got == want


def test_models_are_many_and_some_raise():
    assert len(MODELS) >= 10
    if len(_MODEL_RESULTS) == len(MODELS):
        print(json.dumps(_MODEL_RESULTS, indent=1, default=str))
        assert any(_MODEL_RESULTS.values()), "no model raised: the comparison would be vacuous"


@pytest.mark.parametrize("name, attribute, size", [("vgg11", "avgpool", 7), ("alexnet", "avgpool", 6)])
def test_model_backward_finding_points_at_the_forward_line(name, attribute, size):
    from torchvision import models

    model = models.get_model(name, weights=None).to(DEV).train()
    t = scan(model, torch.randn(2, 3, 224, 224, device=DEV))
    pool = [f for f in t.findings if f.module == attribute]
    assert pool, t.findings
    (finding,) = pool
    source = inspect.getsource(type(model).forward)
    assert finding.phase == "backward"
    assert finding.module_class == "AdaptiveAvgPool2d"
    assert finding.line_text == f"x = self.{attribute}(x)" and finding.line_text in source
    assert os.path.realpath(finding.file) == os.path.realpath(inspect.getsourcefile(type(model)))
    assert finding.remedy.code == "nn.Identity()" and f"already {size}x{size}" in finding.remedy.text


# ---------------------------------------------------------------- the command on the GPU


def opscan_cli(*args, cwd=ROOT, timeout=300):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "opscan", *args], cwd=cwd, env=env, check=False, capture_output=True, text=True, timeout=timeout)


def test_cli_on_the_gpu_records_the_environment():
    proc = opscan_cli("scan", "torchvision:vgg11", "--output-format", "json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    env = doc["env"]
    print(json.dumps(env))
    assert env["device"] == "cuda" and env["gpu"] and env["cudnn"]
    assert env["torch"] == torch.__version__
    if env["cublas_workspace_config"] in (":4096:8", ":16:8"):
        assert env["cublas_enforced"] is None
    else:
        assert isinstance(env["cublas_enforced"], bool)
    assert "no CUDA GPU" not in proc.stderr
    cublas = [f for f in doc["findings"] if f["caller"].startswith("CuBLAS")]
    assert bool(cublas) == bool(env["cublas_enforced"])
    assert [f["module"] for f in doc["findings"] if f not in cublas] == ["avgpool"]


def test_cli_run_script_on_the_gpu(tmp_path):
    script = tmp_path / "train_gpu.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            from torch import nn

            model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Upsample(scale_factor=2, mode="bicubic")).cuda()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(5):
                print("step", step)
                out = model(torch.randn(2, 3, 16, 16, device="cuda"))
                out.mean().backward()
                opt.step()
            """
        )
    )
    proc = opscan_cli("scan", "--output-format", "json", "--max-steps", "2", "--run", str(script), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    (finding,) = json.loads(proc.stdout)["findings"]
    assert finding["phase"] == "backward" and finding["count"] == 2
    assert finding["line_text"] == 'out = model(torch.randn(2, 3, 16, 16, device="cuda"))'
    assert finding["module"] == "1" and finding["module_class"] == "Upsample"
    assert "step 2" not in proc.stderr and "step 1" in proc.stderr


def test_timm_and_hf_targets_run():
    for target in ("timm:resnet18", "hf:bert,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128"):
        proc = opscan_cli("scan", target, "--output-format", "json")
        assert proc.returncode in (0, 1), (target, proc.stderr[-3000:])
        doc = json.loads(proc.stdout)
        assert doc["errors"] == [], target
        print(target, [(f["op"], f["phase"], f["module"]) for f in doc["findings"]])
