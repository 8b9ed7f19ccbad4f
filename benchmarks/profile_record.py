"""Where a recorded step's time goes, on the GPU: host time to enqueue, device drain, end of step, top kernels.

Diagnostic companion of bench_record.py (it measures no goal): per variant,
the host time of the step's Python (mode and ops enqueued), the wait for the
device after it, and the end of step; then torch.profiler's top kernels and
host functions for one recorded step, and the launch and device cost of the
primitives a fingerprint is built from.

Usage: python benchmarks/profile_record.py [--model resnet50] [--batch 32] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch
from bench_record import NoopMode, RecordVariant, build, trainer


def split_times(fn, rounds: int) -> tuple[float, float]:
    """Median host ms to run fn, and median ms the device needed after it returned."""
    host, drain = [], []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append((t1 - t0) * 1e3)
        drain.append((t2 - t1) * 1e3)
    return statistics.median(host), statistics.median(drain)


def primitives(lines: list[str]) -> None:
    dev = "cuda"

    def cost(label, fn, reps=200):
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        lines.append(f"{label:48s} host {1e6 * (t1 - t0) / reps:8.2f} us/call   wall {1e6 * (t2 - t0) / reps:9.2f} us/call")

    out64 = torch.zeros(4, dtype=torch.uint64, device=dev)
    slot = out64[0]
    for n in (1 << 10, 1 << 20, 1 << 25):
        x = torch.randn(n, device=dev)
        bits = x.view(torch.int32)
        cost(f"hash_tensor n={n}", lambda: torch.hash_tensor(bits, out=slot))
        cost(f"sum int32 n={n}", lambda: torch.sum(bits, dtype=torch.int32))
        cost(f"vector_norm n={n}", lambda: torch.linalg.vector_norm(x))
        buf = torch.empty(n, device=dev)
        cost(f"copy_ n={n}", lambda: buf.copy_(x))
    xs = [torch.randn(4096, device=dev) for _ in range(64)]
    ds = [torch.empty(4096, device=dev) for _ in range(64)]
    cost("_foreach_copy_ 64x4096", lambda: torch._foreach_copy_(ds, xs))
    cost("_foreach_norm 64x4096", lambda: torch._foreach_norm(xs))
    big = torch.empty(1 << 24, device=dev)
    cost("as_strided view", lambda: big.as_strided((64, 64), (64, 1), 4096))
    cost("cat 64x4096", lambda: torch.cat(xs))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", default=".")
    args = parser.parse_args(argv)
    lines: list[str] = []
    base, x = build(args.model, args.batch, "cuda", 224)

    def variant():
        model, make = trainer(base)
        return model, make(x)

    _, plain = variant()
    _, noop_step = variant()

    def noop():
        with NoopMode():
            noop_step()

    folder = tempfile.mkdtemp()
    rec = RecordVariant(*variant(), folder, "cuda")
    direct = RecordVariant(*variant(), folder, "cuda", staged=False)
    small = RecordVariant(*variant(), folder, "cuda")
    from opscan.trace.fingerprint import Fingerprinter

    small.recorder.fpr = Fingerprinter(staged=True, stage_bytes=16 << 20)  # big tensors hashed in place

    for _ in range(3):
        plain(), noop(), rec(), direct(), small()
    # Each recorded variant ends its step: a step left unended keeps its ops and queues, and times nothing real.
    variants = (("plain", plain), ("noop", noop), ("record", rec), ("direct", direct), ("stage16", small))
    for name, fn in variants:
        h, d = split_times(fn, args.rounds)
        lines.append(f"{name:24s} host {h:8.2f} ms   device drain after {d:8.2f} ms")
    # The end of step alone, after a drained device: its own host cost.
    ends, ops = [], 0
    for _ in range(args.rounds):
        with rec.recorder:
            rec.train_step()
        torch.cuda.synchronize()
        ops = len(rec.recorder.ops)
        t0 = time.perf_counter()
        rec.recorder.end_step(rec.steps)
        rec.steps += 1
        ends.append((time.perf_counter() - t0) * 1e3)
    lines.append(f"end_step after a drained device: {statistics.median(ends):.2f} ms; ops/step {ops}")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        rec()
        torch.cuda.synchronize()
    table_cuda = prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=18, max_name_column_width=60)
    table_cpu = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18, max_name_column_width=60)
    primitives(lines)
    rec.close()
    direct.close()
    small.close()
    text = "\n".join(lines)
    with open(os.path.join(args.out, "profile_record.txt"), "w", encoding="utf-8") as f:
        f.write(text + "\n\n" + table_cuda + "\n\n" + table_cpu + "\n")
    print(table_cuda[-3000:])
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
