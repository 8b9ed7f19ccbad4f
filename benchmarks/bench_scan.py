"""What a scan costs: one forward+backward under `opscan.trace()` against the same step in plain strict mode.

All variants run in one process on the same model and inputs, interleaved
(the order rotates every round), and each is timed from a synchronized start
to a synchronized end. Reported: the median step time of each variant and its
ratio to plain strict mode.

    plain   torch.use_deterministic_algorithms(True), no dispatch mode
    noop    plain + a dispatch mode that only calls the op (the floor)
    scan    opscan.trace() around the step, findings read at the end
    scan_nosites  the same, without recording forward sites for backward mapping

Usage: python benchmarks/bench_scan.py [--device cuda] [--models resnet50:32,vit_b_16:32] [--rounds 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

# Before torch initializes cuBLAS, so plain strict mode is legal on every stack.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import opscan


class NoopMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def build(name: str, batch: int, device: str, size: int):
    from torchvision import models

    torch.manual_seed(0)
    model = models.get_model(name, weights=None).to(device).train()
    x = torch.randn(batch, 3, size, size, device=device)
    return model, x


def step(model, x):
    model.zero_grad(set_to_none=True)
    model(x).sum().backward()


def timed(fn, device: str) -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start


def variants(model, x):
    def plain():
        step(model, x)

    def noop():
        with NoopMode():
            step(model, x)

    def scan():
        with opscan.trace(roots=(model,)) as t:
            step(model, x)
        _ = t.findings  # building the findings is part of the cost

    def scan_nosites():
        with opscan.trace(roots=(model,), record_backward_sites=False) as t:
            step(model, x)
        _ = t.findings

    return {"plain": plain, "noop": noop, "scan": scan, "scan_nosites": scan_nosites}


def bench(name: str, batch: int, device: str, size: int, rounds: int, warmup: int) -> dict:
    model, x = build(name, batch, device, size)
    runs = variants(model, x)
    names = list(runs)
    times = {n: [] for n in names}
    torch.use_deterministic_algorithms(True)
    try:
        for _ in range(warmup):
            for n in names:
                runs[n]()
        for r in range(rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for n in order:
                times[n].append(timed(runs[n], device))
        with opscan.trace(roots=(model,)) as t:
            step(model, x)
        findings = len(t.findings)
    finally:
        torch.use_deterministic_algorithms(False)
    medians = {n: statistics.median(v) for n, v in times.items()}
    return {
        "model": name,
        "batch": batch,
        "size": size,
        "rounds": rounds,
        "median_ms": {n: round(m * 1e3, 3) for n, m in medians.items()},
        "ratio_to_plain": {n: round(m / medians["plain"], 3) for n, m in medians.items()},
        "findings": findings,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--models", default="resnet50:32,vit_b_16:32", help="NAME:BATCH,...")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    env = {
        "torch": torch.__version__,
        "device": args.device,
        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        "date": time.strftime("%Y-%m-%d"),
    }
    print(json.dumps(env))
    results = []
    for spec in args.models.split(","):
        name, _, batch = spec.partition(":")
        result = bench(name, int(batch or 32), args.device, args.size, args.rounds, args.warmup)
        results.append(result)
        print(json.dumps(result), flush=True)
    print()
    print("| model | batch | plain ms | noop x | scan x | scan_nosites x |")
    print("|---|---|---|---|---|---|")
    for r in results:
        q = r["ratio_to_plain"]
        print(f"| {r['model']} | {r['batch']} | {r['median_ms']['plain']} | {q['noop']} | {q['scan']} | {q['scan_nosites']} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"env": env, "results": results}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
