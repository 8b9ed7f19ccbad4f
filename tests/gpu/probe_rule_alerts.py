"""Print, for every rule's reproducer and for boundary variants, the alert strict mode actually raises.

Run on a CUDA machine: `PYTHONPATH=. python3 tests/gpu/probe_rule_alerts.py [OUT.jsonl]`.
Each line gives the case, the caller string raised (or "no alert"), the aten
overload that raised it (seen by a TorchDispatchMode), and for rules what
`raises_on` predicts for this torch. Used to pin version ranges; not a test.
"""

from __future__ import annotations

import json
import os
import re
import sys
import traceback

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from opscan.rules import load

ALERT = re.compile(r"^(.+?) does not have a deterministic implementation")

# Variants that pin the conditions in the rules (what must NOT alert, and neighbours).
VARIANTS = {
    "adaptive_avg_pool2d_output1": "nn.AdaptiveAvgPool2d(1)(torch.randn(2, 3, 8, 8, device=device, requires_grad=True)).sum().backward()",
    "adaptive_avg_pool2d_same_size": "nn.AdaptiveAvgPool2d(8)(torch.randn(2, 3, 8, 8, device=device, requires_grad=True)).sum().backward()",
    "adaptive_avg_pool1d": "nn.AdaptiveAvgPool1d(3)(torch.randn(2, 3, 8, device=device, requires_grad=True)).sum().backward()",
    "adaptive_avg_pool3d_output1": "nn.AdaptiveAvgPool3d(1)(torch.randn(1, 2, 4, 4, 4, device=device, requires_grad=True)).sum().backward()",
    "interpolate_area": "F.interpolate(torch.randn(1, 2, 8, 8, device=device, requires_grad=True), size=(3, 3), mode='area').sum().backward()",
    "adaptive_max_pool2d_output1": "nn.AdaptiveMaxPool2d(1)(torch.randn(2, 3, 8, 8, device=device, requires_grad=True)).sum().backward()",
    "adaptive_max_pool1d": "nn.AdaptiveMaxPool1d(3)(torch.randn(2, 3, 8, device=device, requires_grad=True)).sum().backward()",
    "adaptive_max_pool3d_nondivisible": "nn.AdaptiveMaxPool3d(3)(torch.randn(1, 2, 5, 5, 5, device=device, requires_grad=True)).sum().backward()",
    "max_pool2d": "nn.MaxPool2d(3, 2)(torch.randn(1, 2, 9, 9, device=device, requires_grad=True)).sum().backward()",
    "avg_pool2d": "nn.AvgPool2d(3, 2)(torch.randn(1, 2, 9, 9, device=device, requires_grad=True)).sum().backward()",
    "bilinear_direct_aten": "torch._C._nn.upsample_bilinear2d(torch.randn(1, 2, 4, 4, device=device, requires_grad=True), [8, 8], False, None).sum().backward()",
    "pad_reflect_1d": "F.pad(torch.randn(1, 2, 8, device=device, requires_grad=True), (2, 2), mode='reflect').sum().backward()",
    "pad_reflect_2d": "F.pad(torch.randn(1, 2, 6, 6, device=device, requires_grad=True), (1, 1, 1, 1), mode='reflect').sum().backward()",
    "pad_replicate_direct_aten": "torch._C._nn.replication_pad2d(torch.randn(1, 2, 6, 6, device=device, requires_grad=True), [1, 1, 1, 1]).sum().backward()",
    "grid_sample_align_corners_true": "F.grid_sample(torch.randn(1, 2, 5, 5, device=device, requires_grad=True), torch.rand(1, 3, 3, 2, device=device) * 2 - 1, align_corners=True).sum().backward()",
    "grid_sample_3d": "F.grid_sample(torch.randn(1, 2, 4, 4, 4, device=device, requires_grad=True), torch.rand(1, 2, 2, 2, 3, device=device) * 2 - 1, align_corners=False).sum().backward()",
    "grid_sample_grid_grad_only": "F.grid_sample(torch.randn(1, 2, 5, 5, device=device), (torch.rand(1, 3, 3, 2, device=device) * 2 - 1).requires_grad_(), align_corners=False).sum().backward()",
    "ctc_cudnn_conditions": (
        "T, N, C, S = 8, 2, 5, 3\n"
        "lp = torch.randn(T, N, C, device=device).log_softmax(2).detach().requires_grad_()\n"
        "tg = torch.randint(1, C, (N * S,), dtype=torch.int32)\n"
        "il = torch.full((N,), T, dtype=torch.int32)\n"
        "tl = torch.full((N,), S, dtype=torch.int32)\n"
        "F.ctc_loss(lp, tg, il, tl, blank=0).backward()"
    ),
    "embedding_bag_mean": "nn.EmbeddingBag(10, 3, mode='mean').to(device)(torch.tensor([[1, 2, 4], [4, 3, 2]], device=device)).sum().backward()",
    "embedding_bag_max_frozen": "nn.EmbeddingBag.from_pretrained(torch.randn(10, 3, device=device), mode='max')(torch.tensor([[1, 2, 4]], device=device)).sum()",
    "nll_loss_2d_input": "F.cross_entropy(torch.randn(4, 3, device=device, requires_grad=True), torch.randint(0, 3, (4,), device=device)).backward()",
    "nll_loss2d_reduction_none": "F.cross_entropy(torch.randn(2, 3, 4, 4, device=device, requires_grad=True), torch.randint(0, 3, (2, 4, 4), device=device), reduction='none').sum().backward()",
    "cross_entropy_3d_input": "F.cross_entropy(torch.randn(2, 3, 5, device=device, requires_grad=True), torch.randint(0, 3, (2, 5), device=device)).backward()",
    "histc_int": "torch.histc(torch.randint(0, 10, (100,), device=device, dtype=torch.int32), bins=10, min=0, max=10)",
    "bincount_unweighted": "torch.bincount(torch.randint(0, 5, (20,), device=device))",
    "median_no_dim": "torch.randn(4, 6, device=device, requires_grad=True).median().backward()",
    "nanmedian_dim": "torch.randn(4, 6, device=device, requires_grad=True).nanmedian(dim=1).values.sum().backward()",
    "mode_dim": "torch.randn(4, 6, device=device).mode(dim=1)",
    "put_accumulate_cpu": "torch.zeros(6).put_(torch.tensor([0, 2, 2]), torch.ones(3), accumulate=True)",
    "scatter_reduce_sum": "torch.zeros(3, device=device).scatter_reduce(0, torch.tensor([0, 1, 0, 1, 2, 2], device=device), torch.rand(6, device=device), reduce='sum')",
    "scatter_reduce_mean": "torch.zeros(3, device=device).scatter_reduce(0, torch.tensor([0, 1, 0, 1, 2, 2], device=device), torch.rand(6, device=device), reduce='mean')",
    "scatter_reduce_amax": "torch.zeros(3, device=device).scatter_reduce(0, torch.tensor([0, 1, 0, 1, 2, 2], device=device), torch.rand(6, device=device), reduce='amax')",
    "scatter_add_legacy_reduce": "torch.zeros(3, device=device).scatter_(0, torch.tensor([0, 1, 0, 1, 2, 2], device=device), torch.rand(6, device=device), reduce='add')",
    "scatter_value_multiply": "torch.ones(3, device=device).scatter_(0, torch.tensor([0, 1, 0, 1, 2, 2], device=device), 2.0, reduce='multiply')",
    "scatter_add_float": "torch.zeros(3, device=device).scatter_add_(0, torch.tensor([0, 1, 0, 1, 2, 2], device=device), torch.rand(6, device=device))",
    "index_add_float": "torch.zeros(3, 2, device=device).index_add_(0, torch.tensor([0, 1, 0, 2], device=device), torch.rand(4, 2, device=device))",
    "index_reduce_amax": "torch.zeros(3, 2, device=device).index_reduce_(0, torch.tensor([0, 1, 0, 2], device=device), torch.rand(4, 2, device=device), 'amax')",
    "cumsum_float": "torch.cumsum(torch.randn(100000, device=device, requires_grad=True), 0).sum().backward()",
    "index_put_accumulate": "torch.zeros(5, device=device).index_put_((torch.tensor([0, 1, 1], device=device),), torch.rand(3, device=device), accumulate=True)",
    "max_pool3d_return_indices_functional": "F.max_pool3d_with_indices(torch.randn(1, 2, 4, 4, 4, device=device, requires_grad=True), 2)[0].sum().backward()",
    "torchvision_roi_align_public": (
        "import torchvision\n"
        "x = torch.randn(1, 2, 8, 8, device=device, requires_grad=True)\n"
        "b = torch.tensor([[0, 0.0, 0.0, 4.0, 4.0]], device=device)\n"
        "torchvision.ops.roi_align(x, b, output_size=2).sum().backward()"
    ),
}


class RaisingOp(TorchDispatchMode):
    """Remember the first aten overload that raised an alert."""

    def __init__(self):
        super().__init__()
        self.op = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        try:
            return func(*args, **(kwargs or {}))
        except RuntimeError as exc:
            if self.op is None and ALERT.match(str(exc)):
                self.op = str(func)
            raise


def probe(source: str, device: str) -> dict:
    namespace = {"torch": torch, "nn": nn, "F": F, "device": device}
    mode, warn_only = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    watcher = RaisingOp()
    result = {"caller": None, "aten": None, "error": None}
    torch.use_deterministic_algorithms(True)
    try:
        with watcher:
            exec(compile(source, "<probe>", "exec"), namespace)  # noqa: S102 - our own snippets
        if device == "cuda":
            torch.cuda.synchronize()
    except RuntimeError as exc:
        m = ALERT.match(str(exc))
        if m:
            result["caller"] = m.group(1)
        else:
            result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    except Exception as exc:  # noqa: BLE001 - a probe reports everything
        result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        traceback.print_exc()
    finally:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    result["aten"] = watcher.op
    return result


def main() -> int:
    out_path = sys.argv[1] if len(sys.argv) > 1 else None
    device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        import torchvision

        tv = torchvision.__version__
    except ImportError:
        tv = None
    header = {
        "torch": torch.__version__,
        "torchvision": tv,
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if device == "cuda" else None,
    }
    print(json.dumps(header))
    rows = []
    for op in load().ops:
        dev = device if device in op.devices else "cpu"
        r = probe(op.reproducer, dev)
        r.update(case=op.id, kind="rule", device=dev, expected=op.raises_on(torch.__version__, dev),
                 caller_ok=(r["caller"] in op.callers) if r["caller"] else None)
        rows.append(r)
    for name, source in VARIANTS.items():
        dev = "cpu" if name.endswith("_cpu") else device
        r = probe(source, dev)
        r.update(case=name, kind="variant", device=dev)
        rows.append(r)
    for r in rows:
        observed = r["caller"] or ("ERROR " + r["error"] if r["error"] else "no alert")
        flag = ""
        if r["kind"] == "rule":
            ok = (r["caller"] is not None) == r["expected"] and (r["caller_ok"] is not False)
            flag = "ok " if ok and not r["error"] else "MISMATCH"
        print(f"{r['kind']:8s} {r['case']:40s} {r['device']:5s} {flag:8s} {observed}  [{r['aten']}]")
    if out_path:
        with open(out_path, "w") as f:
            f.write(json.dumps(header) + "\n")
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
