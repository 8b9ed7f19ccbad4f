"""Where a step recorded by the native engine spends its time (diagnostic, no goal): host enqueue, device drain, end of step, top kernels.

Usage: python benchmarks/profile_native.py [--model resnet50] [--batch 32] [--rounds 8]
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args(argv)
    from opscan.trace import native

    ext = native.load(cuda=True)
    assert ext is not None, native.why_not(True)
    base, x = build(args.model, args.batch, "cuda", 224)
    folder = tempfile.mkdtemp()

    def variant():
        model, make = trainer(base)
        return model, make(x)

    _, plain = variant()
    _, noop_step = variant()
    nat = RecordVariant(*variant(), folder, "cuda", native=ext)

    def noop():
        with NoopMode():
            noop_step()

    def split(label, step, end=None):
        host, drain, ends = [], [], []
        for _ in range(args.rounds + 2):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            if end is not None:
                end()
            t3 = time.perf_counter()
            host.append((t1 - t0) * 1e3)
            drain.append((t2 - t1) * 1e3)
            ends.append((t3 - t2) * 1e3)
        m = statistics.median
        print(f"{label:10s} host {m(host[2:]):7.2f} ms  drain {m(drain[2:]):7.2f} ms  end of step (after drain) {m(ends[2:]):7.2f} ms", flush=True)

    steps = {"n": 0}

    def nat_step():
        with nat.recorder:
            nat.train_step()

    def nat_end():
        nat.recorder.end_step(steps["n"])
        steps["n"] += 1

    split("plain", plain)
    split("noop", noop)
    split("native", nat_step, nat_end)
    stats = nat.recorder.stats
    print(f"native: {stats.ops // max(stats.steps, 1)} ops per step", flush=True)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        nat_step()
        nat_end()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=15, max_name_column_width=60), flush=True)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=60), flush=True)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        plain()
        torch.cuda.synchronize()
    total = sum(e.self_device_time_total for e in prof.key_averages()) / 1e3
    print(f"plain step: {total:.2f} ms of kernels", flush=True)
    nat.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
