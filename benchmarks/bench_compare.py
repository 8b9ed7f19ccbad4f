"""What `opscan compare` costs on records the size of a resnet18 training run: 200 steps of about 600 ops.

The records are synthetic (no torch, no GPU): resnet18's modules, an op mix
per module forward, backward and in the optimizer, parameter samples of 256
float32 each, fingerprints that chain from op to op. Three pairs:

    identical   two records of the same run: every op compared, none differs
    kernel      a kernel differs at step 1's backward: every later op and parameter differs
    structure   b runs one extra op in every step's forward: each step is aligned, not matched straight

Each pair is compared end to end (`compare_records`: read, align, classify,
the Report) `--rounds` times; the median wall and CPU times are reported,
with the records' size (on a shared machine, the CPU time is the steadier figure). Usage: python benchmarks/bench_compare.py [--steps 200] [--rounds 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import statistics
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from opscan.compare import compare_records  # noqa: E402

HEADER = {
    "type": "header", "format": "opscan-record", "version": 1, "target": "torchvision:resnet18", "argv": [],
    "kind": "zoo", "seed": 0, "device": "cuda", "created": "2026-12-01T14:00:00Z", "fingerprint": "hash_tensor-xor+wsum",
    "env": {"torch": "2.14.1+cu130", "cuda": "13.0", "cudnn": 91900, "gpu": "NVIDIA H200", "deterministic": False},
}  # fmt: skip


def resnet18_modules() -> list[tuple[str, str, list[int]]]:
    """(module path, class, weight shape) in forward order."""
    mods = [("conv1", "Conv2d", [64, 3, 7, 7]), ("bn1", "BatchNorm2d", [64]), ("relu", "ReLU", []), ("maxpool", "MaxPool2d", [])]
    channels = [64, 128, 256, 512]
    for layer, c in enumerate(channels, 1):
        for block in range(2):
            prefix = f"layer{layer}.{block}"
            cin = c if block or layer == 1 else c // 2
            mods += [(f"{prefix}.conv1", "Conv2d", [c, cin, 3, 3]), (f"{prefix}.bn1", "BatchNorm2d", [c]), (f"{prefix}.relu", "ReLU", [])]
            mods += [(f"{prefix}.conv2", "Conv2d", [c, c, 3, 3]), (f"{prefix}.bn2", "BatchNorm2d", [c])]
            if block == 0 and layer > 1:
                mods += [(f"{prefix}.downsample.0", "Conv2d", [c, cin, 1, 1]), (f"{prefix}.downsample.1", "BatchNorm2d", [c])]
    mods += [("avgpool", "AdaptiveAvgPool2d", []), ("fc", "Linear", [1000, 512])]
    return mods


FORWARD = {
    "Conv2d": ["aten.convolution.default", "aten.detach.default"],
    "BatchNorm2d": ["aten._native_batch_norm_legit_functional.default", "aten.add_.Tensor", "aten.copy_.default", "aten.copy_.default"],
    "ReLU": ["aten.relu_.default", "aten.detach.default"],
    "MaxPool2d": ["aten.max_pool2d_with_indices.default"],
    "AdaptiveAvgPool2d": ["aten.mean.dim", "aten.view.default"],
    "Linear": ["aten.t.default", "aten.addmm.default"],
}
BACKWARD = {
    "Conv2d": ["aten.convolution_backward.default", "aten.add.Tensor", "aten.detach.default"],
    "BatchNorm2d": ["aten.native_batch_norm_backward.default", "aten.detach.default", "aten.add.Tensor"],
    "ReLU": ["aten.threshold_backward.default", "aten.detach.default"],
    "MaxPool2d": ["aten.max_pool2d_with_indices_backward.default"],
    "AdaptiveAvgPool2d": ["aten.expand.default", "aten.div.Scalar"],
    "Linear": ["aten.mm.default", "aten.t.default", "aten.mm.default", "aten.sum.dim_IntList", "aten.view.default"],
}


def template(extra_op: bool) -> list[tuple]:
    """One step's ops: (op, phase, module, class, line, shapes, parameter name or None)."""
    ops = [("aten._to_copy.default", "forward", None, None, 30, [[32, 3, 224, 224]], None)]
    mods = resnet18_modules()
    for n, (path, cls, shape) in enumerate(mods):
        for name in FORWARD[cls]:
            param = f"{path}.weight" if shape and name in ("aten.convolution.default", "aten.addmm.default", "aten._native_batch_norm_legit_functional.default") else None
            ops.append((name, "forward", path, cls, 100 + n, [[32, 64, 56, 56], shape or [1]], param))
        if extra_op and path == "layer2.0.conv1":
            ops.append(("aten.clone.default", "forward", path, cls, 100 + n, [[32, 128, 28, 28]], None))
    ops.append(("aten.nll_loss_forward.default", "forward", None, None, 40, [[32, 1000], [32]], None))
    for n, (path, cls, shape) in reversed(list(enumerate(mods))):
        for name in BACKWARD[cls]:
            ops.append((name, "backward", path, cls, 100 + n, [[32, 64, 56, 56], shape or [1]], None))
    params = [f"{path}.{kind}" for path, cls, shape in mods if shape for kind in (("weight", "bias") if cls != "Conv2d" else ("weight",))]
    for name in params:  # SGD with momentum and weight decay, one tensor at a time
        for line, op in enumerate(("aten.add.Tensor", "aten.mul_.Tensor", "aten.add_.Tensor", "aten.add_.Tensor", "aten.detach.default"), 50):
            ops.append((op, "optimizer", None, None, line, [[64], [64]], name))
    return ops, params


def write_record(path: str, steps: int, *, diverge_at: tuple[int, int] | None, extra_op: bool) -> int:
    ops, params = template(extra_op)
    rnd = random.Random(0)
    base = {p: [rnd.uniform(-0.1, 0.1) for _ in range(256)] for p in params}
    i = 0
    with open(path, "w") as f:
        f.write(json.dumps({**HEADER, "steps": steps}) + "\n")
        drift = 0.0
        for step in range(steps):
            prev = f"{step:08x}{0:08x}"
            for k, (name, phase, module, cls, line, shapes, param) in enumerate(ops):
                # An output hashes the op and its inputs, so a difference propagates to what reads it, and only there.
                weight = f"p:{param}@{hash((param, step, drift)) & 0xFFFFFFFFFFFFFFFF:016x}" if param else f"{hash((name, module, line, step)) & 0xFFFFFFFFFFFFFFFF:016x}"
                ins = [prev, weight]
                salt = "nondeterministic" if diverge_at == (step, k) else ""
                out = prev if name == "aten.clone.default" else f"{hash((name, *ins, salt)) & 0xFFFFFFFFFFFFFFFF:016x}"
                d = {"type": "op", "step": step, "i": i, "op": name, "phase": phase, "module": module, "module_class": cls,
                     "file": "torchvision/models/resnet.py", "line": line, "shapes": shapes[: len(ins)],
                     "dtypes": ["float32"] * len(ins), "in": ins, "out": [out], "norm": 1.0 + k}  # fmt: skip
                f.write(json.dumps(d) + "\n")
                prev = out
                i += 1
            if diverge_at is not None and step >= diverge_at[0]:
                drift = drift * 1.5 + 1e-6  # the parameters part at the divergence, and drift further apart
            samples = {}
            for p in params:
                values = [v + drift for v in base[p]]
                fp = f"{hash((p, step, drift)) & 0xFFFFFFFFFFFFFFFF:016x}"
                samples[p] = {"fp": fp, "norm": 1.0, "sample": base64.b64encode(struct.pack("<256f", *values)).decode()}
            f.write(json.dumps({"type": "step", "step": step, "ops": len(ops), "params": samples, "loss": 6.9}) + "\n")
        f.write(json.dumps({"type": "end", "steps": steps, "ops": i, "stopped": False, "seconds": 1.0}) + "\n")
    return len(ops)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="write the records here and keep them")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    os.environ["PYTHONHASHSEED"] = os.environ.get("PYTHONHASHSEED", "0")
    folder = args.keep or tempfile.mkdtemp(prefix="bench_compare_")
    os.makedirs(folder, exist_ok=True)
    a = os.path.join(folder, "a.jsonl")
    per_step = write_record(a, args.steps, diverge_at=None, extra_op=False)
    pairs = {
        "identical": os.path.join(folder, "a_copy.jsonl"),
        "kernel": os.path.join(folder, "b_kernel.jsonl"),
        "structure": os.path.join(folder, "b_structure.jsonl"),
    }
    write_record(pairs["identical"], args.steps, diverge_at=None, extra_op=False)
    write_record(pairs["kernel"], args.steps, diverge_at=(1, per_step // 3), extra_op=False)
    write_record(pairs["structure"], args.steps, diverge_at=None, extra_op=True)
    results = []
    for name, b in pairs.items():
        times, cpu = [], []
        for _ in range(args.rounds):
            start, start_cpu = time.perf_counter(), time.process_time()
            report = compare_records(a, b)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        results.append(
            {
                "pair": name,
                "steps": args.steps,
                "ops_per_step": per_step,
                "mib_each": round(os.path.getsize(a) / 2**20, 1),
                "median_s": round(statistics.median(times), 3),
                "median_cpu_s": round(statistics.median(cpu), 3),
                "exit": report.exit_code(),
                "findings": [f.code for f in report.findings],
            }
        )
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for r in results:
            print(
                f"{r['pair']:10s} {r['steps']} steps x {r['ops_per_step']} ops, {r['mib_each']} MiB a record: "
                f"{r['median_s']:.2f} s wall, {r['median_cpu_s']:.2f} s CPU (medians of {args.rounds}), "
                f"exit {r['exit']}, findings {r['findings']}"
            )
    if not args.keep:
        for path in [a, *pairs.values()]:
            os.remove(path)
        os.rmdir(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
