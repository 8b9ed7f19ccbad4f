"""What a record costs: one training step under `opscan record`'s mode against the same step plain, and against DebugMode.

All variants run in one process, each on its own copy of the same model
(same weights, same inputs, its own SGD), interleaved (the order rotates every
round), each step timed from a synchronized start to a synchronized end. Reported: the median step time of each variant,
its ratio to the plain step, and the record's size per step.

    plain          zero_grad, forward, sum(), backward, SGD step (momentum 0.9): a training step
    noop           plain under a dispatch mode that only calls the op (the floor of any dispatch-mode tool)
    record         plain under the record mode, then its end of step (the one device-to-host copy,
                   the JSON lines, the write): what `opscan record` adds per step, scheme xor64+sum
    record_xor     the same with scheme xor64 (one reduction fewer)
    record_direct  the same without the staging buffers (two or three reductions per tensor)
    record_inline  record with the JSON lines made and written in the training process (no writer process)
    record_native  record with the native engine (opscan/trace/native.py: a RecordFunction callback in C++ and
                   one fingerprint kernel launch per batch of tensors): what `opscan record` runs on CUDA by default
    debugmode      plain under torch.utils._debug_mode.DebugMode with log_tensor_hashes(hash_fn="hash_tensor"),
                   outputs only (its default), logs kept in memory and not printed: the most favourable
                   setting for DebugMode (skipped where this torch has no DebugMode)

Goals (issue 10): record <= 2x plain on resnet50 at batch 32; record at least 4x faster than debugmode.

Usage: python benchmarks/bench_record.py [--device cuda] [--models resnet50:32] [--rounds 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from opscan.trace.record import Recorder
from opscan.trace.recordwriter import InlineWriter, open_writer


class NoopMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def debug_mode():
    """(DebugMode, keyword arguments for its log_tensor_hashes), or None where this torch lacks them."""
    try:
        from torch.utils._debug_mode import DebugMode  # torch 2.10 and later (a package from 2.12)
    except ImportError:
        return None
    hashes = getattr(DebugMode, "log_tensor_hashes", None)
    if hashes is None:
        return None
    try:
        default = inspect.signature(hashes).parameters["hash_fn"].default
    except (KeyError, TypeError, ValueError):
        default = None
    # torch 2.11 and 2.14 take hash_fn="hash_tensor" (torch.hash_tensor, bitwise); 2.10 took a callable or None.
    return DebugMode, ({"hash_fn": "hash_tensor"} if isinstance(default, str) else {})


def build(name: str, batch: int, device: str, size: int):
    from torchvision import models

    torch.manual_seed(0)
    model = models.get_model(name, weights=None).to(device).train()
    x = torch.randn(batch, 3, size, size, device=device)
    return model, x


def trainer(model):
    """A copy of the model with its own optimizer, and its training step: each variant trains its own
    copy, so that one variant's updates never count as another's new tensors."""
    import copy

    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def make_step(x):
        def train_step():
            opt.zero_grad(set_to_none=True)
            model(x).sum().backward()
            opt.step()

        return train_step

    return model, make_step


def timed(fn, device: str) -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start


class RecordVariant:
    """One recorder kept across rounds, as in a run: each call is one recorded step and its end.

    The record goes to the writer `opscan record` uses (a writer process unless
    OPSCAN_RECORD_WRITER=inline), so the end of step timed is what a run pays.
    """

    def __init__(self, model, train_step, folder: str, device: str, inline: bool = False, native=None, **options):
        path = os.path.join(folder, f"bench-{len(os.listdir(folder))}.jsonl")
        scheme = options.get("scheme", "xor64+sum")
        self.writer = InlineWriter(path, scheme) if inline else open_writer(path, scheme)
        if native is not None:
            from opscan.trace.native import NativeRecorder

            self.recorder = NativeRecorder(self.writer, ext=native, target="bench", kind="zoo", steps=0, device=device, seed=0, **options)
        else:
            self.recorder = Recorder(self.writer, target="bench", kind="zoo", steps=0, device=device, seed=0, **options)
        self.recorder.modes(model)
        self.train_step = train_step
        self.steps = 0
        self.end_seconds: list[float] = []
        self.bytes = 0

    def __call__(self):
        with self.recorder:
            self.train_step()
        start = time.perf_counter()
        self.recorder.end_step(self.steps)
        self.end_seconds.append(time.perf_counter() - start)
        self.steps += 1

    def close(self):
        """End the writer; the record's size is known then (the writer process counts it)."""
        _, self.bytes = self.writer.finish(None, commit=False, remove=True)
        close = getattr(self.recorder, "close", None)
        if close is not None:
            close()

def bench(name: str, batch: int, device: str, size: int, rounds: int, warmup: int, folder: str) -> dict:
    base, x = build(name, batch, device, size)

    def variant_step():
        model, make_step = trainer(base)
        return model, make_step(x)

    _, plain = variant_step()
    _, noop_step = variant_step()

    def noop():
        with NoopMode():
            noop_step()

    records = {
        "record": RecordVariant(*variant_step(), folder, device),
        "record_xor": RecordVariant(*variant_step(), folder, device, scheme="xor64"),
        "record_direct": RecordVariant(*variant_step(), folder, device, staged=False),
        "record_inline": RecordVariant(*variant_step(), folder, device, inline=True),
    }
    native = None
    if not os.environ.get("OPSCAN_BENCH_NO_NATIVE"):
        from opscan.trace import native as native_engine

        native = native_engine.load(cuda=device.startswith("cuda"))
        if native is None:
            print(f"record_native skipped: {native_engine.why_not(device.startswith('cuda'))}", file=sys.stderr, flush=True)
    if native is not None:
        # One recording at a time per process: the native engine's state is the process's. It records
        # alone in its rounds (the variants run one after another, never nested), so that holds.
        records["record_native"] = RecordVariant(*variant_step(), folder, device, native=native)
    runs = {"plain": plain, "noop": noop, **records}
    debug = debug_mode()
    if debug is not None:
        DebugMode, kwargs = debug
        _, debug_step = variant_step()

        def debugmode():
            with DebugMode() as dm, DebugMode.log_tensor_hashes(**kwargs):
                debug_step()
            del dm

        runs["debugmode"] = debugmode
    names = list(runs)
    times = {n: [] for n in names}
    try:
        for _ in range(warmup):
            for n in names:
                runs[n]()
        for rec in records.values():
            rec.end_seconds.clear()
        for r in range(rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for n in order:
                times[n].append(timed(runs[n], device))
    finally:
        for rec in records.values():
            rec.close()
    medians = {n: statistics.median(v) for n, v in times.items()}
    main = records["record"]
    result = {
        "model": name,
        "batch": batch,
        "size": size,
        "rounds": rounds,
        "median_ms": {n: round(m * 1e3, 3) for n, m in medians.items()},
        "ratio_to_plain": {n: round(m / medians["plain"], 3) for n, m in medians.items()},
        "record_end_of_step_ms": round(statistics.median(main.end_seconds) * 1e3, 3),
        "record_ops_per_step": main.recorder.stats.ops // max(main.recorder.stats.steps, 1),
        "record_bytes_per_step": main.bytes // max(main.steps, 1),
        "debugmode": "missing in this torch" if debug is None else f"log_tensor_hashes({', '.join(f'{k}={v!r}' for k, v in debug[1].items())})",
    }
    if "debugmode" in medians:
        result["debugmode_over_record"] = round(medians["debugmode"] / medians["record"], 2)
    if "record_native" in records:
        nat = records["record_native"]
        result["record_native_end_of_step_ms"] = round(statistics.median(nat.end_seconds) * 1e3, 3)
        result["record_native_ops_per_step"] = nat.recorder.stats.ops // max(nat.recorder.stats.steps, 1)
        result["record_native_bytes_per_step"] = nat.bytes // max(nat.steps, 1)
        if "debugmode" in medians:
            result["debugmode_over_record_native"] = round(medians["debugmode"] / medians["record_native"], 2)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--models", default="resnet50:32", help="NAME:BATCH,...")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    env = {
        "torch": torch.__version__,
        "device": args.device,
        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        "python": sys.version.split()[0],
        "date": time.strftime("%Y-%m-%d"),
    }
    print(json.dumps(env), flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="opscan-bench-") as folder:
        for spec in args.models.split(","):
            name, _, batch = spec.partition(":")
            result = bench(name, int(batch or 32), args.device, args.size, args.rounds, args.warmup, folder)
            results.append(result)
            print(json.dumps(result), flush=True)
    print()
    print("| model | batch | plain ms | noop x | record x | record_xor x | record_direct x | record_inline x | debugmode x | debugmode / record | record end of step ms | record kB/step |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        q = r["ratio_to_plain"]
        print(
            f"| {r['model']} | {r['batch']} | {r['median_ms']['plain']} | {q['noop']} | {q['record']} | {q['record_xor']} | "
            f"{q['record_direct']} | {q['record_inline']} | {q.get('debugmode', '-')} | {r.get('debugmode_over_record', '-')} | "
            f"{r['record_end_of_step_ms']} | {r['record_bytes_per_step'] / 1e3:.0f} |"
        )
    if any("record_native" in r["ratio_to_plain"] for r in results):
        print()
        print("| model | batch | plain ms | record_native x | debugmode / record_native | native end of step ms | native ops/step | native kB/step |")
        print("|---|---|---|---|---|---|---|---|")
        for r in results:
            q = r["ratio_to_plain"]
            if "record_native" in q:
                print(
                    f"| {r['model']} | {r['batch']} | {r['median_ms']['plain']} | {q['record_native']} | {r.get('debugmode_over_record_native', '-')} | "
                    f"{r['record_native_end_of_step_ms']} | {r['record_native_ops_per_step']} | {r['record_native_bytes_per_step'] / 1e3:.0f} |"
                )
    for r in results:
        q = r["ratio_to_plain"]
        if "record_native" in q:
            line = f"{r['model']}:{r['batch']}: record_native {q['record_native']}x plain (goal <= 2x: {'met' if q['record_native'] <= 2.0 else 'NOT met'})"
            if "debugmode_over_record_native" in r:
                ok = r["debugmode_over_record_native"] >= 4
                line += f"; DebugMode {r['debugmode_over_record_native']}x slower than record_native (goal >= 4x: {'met' if ok else 'NOT met'})"
            print(line)
        verdict = "met" if q["record"] <= 2.0 else "NOT met"
        line = f"{r['model']}:{r['batch']}: record {q['record']}x plain (goal <= 2x: {verdict})"
        if "debugmode_over_record" in r:
            line += f"; DebugMode {r['debugmode_over_record']}x slower than record (goal >= 4x: {'met' if r['debugmode_over_record'] >= 4 else 'NOT met'})"
        else:
            line += f"; DebugMode: {r['debugmode']}"
        print(line)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"env": env, "results": results}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
