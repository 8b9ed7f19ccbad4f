"""What determinism costs on ResNet18 and ViT-B/16: the figures of BENCHMARKS.md, measured by `opscan bench`.

Each measurement runs in a process of its own (a fresh CUDA context, cuDNN
cache and allocator), so two runs of one model also show the run-to-run
spread between processes, not only between steps. A child process writes the
full report in every format under --out; the parent prints the markdown rows
for BENCHMARKS.md last.

    python benchmarks/bench_determinism.py --out results/ [--runs 2] [--rounds 50] [--budget-s 270]
    python benchmarks/bench_determinism.py --out /tmp/dry --device cpu --models resnet18:2 --size 32 --rounds 3 --runs 1  # plumbing only

Models (torchvision, random weights, train mode, SGD with momentum):
ResNet18 at batch 128, 224x224, and ViT-B/16 at batch 32, 224x224.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = "resnet18:128,vit_b_16:32"


def one(args) -> int:
    """Child: bench one model, write its report in every format, print a one-line summary."""
    sys.path.insert(0, ROOT)
    from opscan.bench.measure import bench
    from opscan.output import render
    from opscan.trace.runner import parse_target

    shape = (args.batch, 3, args.size, args.size)
    report = bench(parse_target(f"torchvision:{args.model}"), device=args.device, rounds=args.rounds, input_shape=shape, samples=True)
    stem = os.path.join(args.out, f"{args.model}-bs{args.batch}-run{args.run}")
    with open(stem + ".json", "w", encoding="utf-8") as fh:
        fh.write(render(report, "json"))
    report.tables = [t for t in report.tables if t.name != "samples"]  # every step is in the json
    for fmt, ext in (("text", "txt"), ("markdown", "md"), ("html", "html")):
        with open(f"{stem}.{ext}", "w", encoding="utf-8") as fh:
            fh.write(render(report, fmt))
    doc = report.to_dict()
    tables = {t["name"]: t["rows"] for t in doc["tables"]}
    summary = {
        "model": args.model,
        "batch": args.batch,
        "size": args.size,
        "run": args.run,
        "env": {k: doc["env"].get(k) for k in ("gpu", "sm_clock_mhz", "max_sm_clock_mhz", "torch", "cuda", "cudnn", "date", "driver")},
        "variants": tables.get("variants", []),
        "cost": tables.get("cost", []),
        "ops": [r for r in tables.get("ops", [])],
        "verdict": doc.get("summary") or "",
        "errors": [e["message"] for e in doc["errors"]],
    }
    print("SUMMARY " + json.dumps(summary), flush=True)
    return report.exit_code()


def _fmt(value, digits=1, sign=False):
    if value is None:
        return "–"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def markdown(summaries: list[dict]) -> str:
    out = [
        "| model | batch | run | precision | fastest ms | default ms | deterministic ms | cost % | ± | autotuner pp | determinism pp | peak MiB fastest → det | explained by |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        by_id = {r["variant"]: r for r in s["variants"]}
        for cost in s["cost"]:
            p = cost["precision"]
            bench, default, det = (by_id.get(f"{p}/{m}", {}) for m in ("bench", "default", "det"))
            out.append(
                f"| {s['model']} | {s['batch']} | {s['run']} | {p} | {_fmt(bench.get('median_ms'), 2)} | {_fmt(default.get('median_ms'), 2)} "
                f"| {_fmt(det.get('median_ms'), 2)} | {_fmt(cost['cost_pct'], 1, True)} | {_fmt(cost['cost_spread_pp'])} "
                f"| {_fmt(cost['autotuner_pp'], 1, True)} | {_fmt(cost['determinism_pp'], 1, True)} "
                f"| {_fmt(bench.get('peak_mib'), 0)} → {_fmt(det.get('peak_mib'), 0)} | {cost['explained_by'] or '–'} |"
            )
    out += ["", "| model | run | precision | phase | op | where | added ms | % of step | share % | top kernel (fastest → deterministic) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        for p in ("fp32", "bf16"):
            for r in [r for r in s["ops"] if r["precision"] == p][:4]:
                kernels = (r["kernels"] or "").replace("|", "\\|")
                out.append(
                    f"| {s['model']} | {s['run']} | {p} | {r['phase']} | {r['op']} | {r['where'] or '–'} | {_fmt(r['added_ms'], 3, True)} "
                    f"| {_fmt(r['step_pct'], 2, True)} | {_fmt(r['share_pct'], 0)} | {kernels} |"
                )
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for the reports (json, txt, md, html) and summary.md")
    parser.add_argument("--runs", type=int, default=2, help="processes per model (default 2)")
    parser.add_argument("--rounds", type=int, default=50, help="timed steps per variant (default 50)")
    parser.add_argument("--budget-s", type=float, default=270, help="wall-clock seconds for all runs; a run that would not fit is skipped (default 270)")
    parser.add_argument("--models", default=MODELS, help=f"torchvision NAME:BATCH,... (default {MODELS})")
    parser.add_argument("--size", type=int, default=224, help="image side (default 224)")
    parser.add_argument("--device", default="cuda", help="cuda (cpu only to try the plumbing)")
    parser.add_argument("--one", metavar="MODEL", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--run", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.one:
        args.model = args.one
        return one(args)

    start = time.monotonic()
    summaries, log = [], []
    took: dict[str, float] = {}  # seconds the last run of each model took: the estimate for its next one
    models = [(name, int(batch)) for name, _, batch in (spec.partition(":") for spec in args.models.split(","))]
    for run in range(1, args.runs + 1):
        for model, batch in models:
            left = args.budget_s - (time.monotonic() - start)
            if left < took.get(model, 30.0) * 1.2:
                log.append(f"skipped {model} run {run}: {left:.0f} s of the {args.budget_s:.0f} s budget left")
                continue
            t0 = time.monotonic()
            cmd = [
                sys.executable, __file__, "--out", args.out, "--one", model, "--batch", str(batch), "--run", str(run),
                "--rounds", str(args.rounds), "--size", str(args.size), "--device", args.device,
            ]  # fmt: skip
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=left, check=False)
            except subprocess.TimeoutExpired:
                log.append(f"{model} run {run}: stopped at the end of the budget, after {left:.0f} s")
                continue
            took[model] = time.monotonic() - t0
            with open(os.path.join(args.out, f"{model}-bs{batch}-run{run}.stderr.txt"), "w", encoding="utf-8") as fh:
                fh.write(done.stderr)
            lines = [line for line in done.stdout.splitlines() if line.startswith("SUMMARY ")]
            if not lines:
                log.append(f"{model} run {run}: no summary (exit {done.returncode}); see its stderr file")
                continue
            summary = json.loads(lines[-1][len("SUMMARY ") :])
            summaries.append(summary)
            log.append(f"{model} run {run}: {time.monotonic() - t0:.0f} s, exit {done.returncode}; {summary['verdict']}")
    table = markdown(summaries)
    env = summaries[0]["env"] if summaries else {}
    header = ", ".join(f"{k}={v}" for k, v in env.items() if v is not None)
    with open(os.path.join(args.out, "summary.md"), "w", encoding="utf-8") as fh:
        fh.write(f"{header}\n\n{table}\n")
    with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as fh:
        json.dump(summaries, fh, indent=2)
    print("\n".join(log))
    print()
    print(header)
    print()
    print(table)
    return 0 if summaries else 1


if __name__ == "__main__":
    sys.exit(main())
