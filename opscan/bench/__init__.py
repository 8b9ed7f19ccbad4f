"""`opscan bench`: what determinism costs on a model, and which ops pay for it.

One process, one target, six variants (fp32 and bf16 autocast, each with
`cudnn.benchmark` on, torch's defaults, and deterministic mode), interleaved
step by step with the order rotating, timed with CUDA events. Then
`torch.profiler` compares the kernels of the fastest and the deterministic
step op by op.

The pure-Python half (no torch): `variants` (what a variant is), `plan` (the
order steps run in), `stats`, `attribution` (profiler events to per-op times)
and `report` (measurements to the Report). The torch half: `timing` (the
step driver), `profiling` (the profiler and the source-line ranges), `env`
and `measure`, which runs it all.

    from opscan.bench.measure import bench
    report = bench(parse_target("torchvision:resnet18"), device="cuda", input_shape=(128, 3, 224, 224))

Importing this package, or any of its pure modules, imports no torch.
"""
