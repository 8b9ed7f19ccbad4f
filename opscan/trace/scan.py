"""The scan: each target through the runner under the catching Trace, into one Report.

Besides each op that raises (DET100) and, with the probe, each op whose rerun
gives other bits (DET101), it judges the settings the run really
had: the cuBLAS workspace on a torch that checks it (DET102) and, for a
training script, `cudnn.benchmark` while it trained (DET105).
"""

from __future__ import annotations

from opscan.findings import Finding, Problem, Report
from opscan.trace.codes import BENCHMARK_CODE, CUBLAS_CODE, RULES

PARTIAL_SCAN = (
    "no CUDA GPU: scanned on the CPU, where only put_ and max_unpool raise the determinism alert. "
    "This is a partial scan; run it on a GPU machine for the full list."
)


def scan(targets, *, device: str, steps: int = 1, input_shape=None, probe: str | None = None, rank=None) -> Report:
    """Scan every target on `device`; a target that fails is a Problem in the report, and the others still run.

    With `probe` ("default" or "strict"), each target runs under the probe
    (opscan.trace.probe) instead: its silent ops are DET101 findings, and in
    strict mode the ops that raise are DET100 findings as in a plain scan.

    With `rank` (an opscan.trace.ranks.RankInfo: one process of a torchrun
    launch), the env also carries the world size, the backend of the process
    group the script initialised, the NCCL version and every NCCL_* variable,
    and each finding names its rank.
    """
    from opscan.trace.runner import run
    from opscan.trace.tracer import Trace, collect_env

    report = Report("scan", rules=RULES)
    flags, environ, cublas_alerted = None, None, False
    traced = 0  # targets that ran ops under the tracer: a file that is not there scanned nothing, on any device
    report.checked = 0  # targets that ran to the end: a report of them, beside the others' errors (opscan.output.withhold)
    backends: list[str] = []

    def on_step(_step: int) -> None:
        if rank is not None and not backends:
            from opscan.trace.ranks import backend

            backends.extend(filter(None, [backend()]))
    for target in targets:
        traces: list[Trace] = []
        probes = []

        def modes(model, target=target):
            roots = (model,) if model is not None else ()
            if probe is not None:
                from opscan.trace.probe import Probe

                prober = Probe(target.name, roots=roots, strict=probe == "strict")
                probes.append(prober)
                traces.extend([prober.trace] if prober.trace is not None else [])
                return [prober]
            trace = Trace(target.name, roots=roots)
            traces.append(trace)
            return [trace]

        is_script = target.kind == "script"
        outcome = run(target, device=device, steps=steps if is_script else 1, input_shape=input_shape, modes=modes, on_step=on_step)
        ran = sum(prober.ops for prober in probes) if probes else sum(trace.ops for trace in traces)
        traced += bool(ran)
        report.notices.extend(f"{target.name}: {n}" for n in outcome.notices)
        if outcome.problem is not None:
            report.errors.append(outcome.problem)
        elif (traces or probes) and not ran:
            # "All checks passed!" would say a scan found nothing where nothing was scanned. Ops that ran
            # with no optimizer step (a forward and backward alone) are still scanned: only no op at all is an error.
            what = "the script" if is_script else "the target"
            report.errors.append(Problem(f"{target.name}: {what} ran no torch op, so there was nothing to scan", target.name))
        else:
            report.checked += 1
        for trace in traces:
            found = trace.findings
            cublas_alerted = cublas_alerted or any(f.kind == "cublas" for f in found)
            report.findings.extend(f.to_finding() for f in found)
            report.notices.extend(f"{target.name}: {n}" for n in trace.notices)
            report.errors.extend(Problem(message, target.name) for message in trace.errors)
        for prober in probes:
            report.findings.extend(silent.to_finding() for silent in prober.findings)
            report.notices.extend(f"{target.name}: {n}" for n in prober.notices)
            report.errors.extend(Problem(message, target.name) for message in prober.errors)
        flags = outcome.flags or flags
        environ = outcome.environ or environ  # the run put os.environ back; the report says what training ran with
        if is_script and outcome.flags is not None and outcome.flags.cudnn_benchmark:
            report.findings.append(_benchmark_finding(target.name, outcome.benchmark_site))

    try:
        report.env = collect_env(device, flags, cublas_alerted, environ)
    except Exception as exc:  # noqa: BLE001 - a broken CUDA context must not cost the findings
        report.errors.append(Problem(f"could not read the environment: {exc}"))
    else:
        if report.env.get("cublas_enforced") and not cublas_alerted:
            report.findings.append(_cublas_finding(report.env))
    report.env["targets"] = len(targets)
    if device == "cpu" and traced:
        report.notices.insert(0, PARTIAL_SCAN)
    if rank is not None:
        from opscan.trace import ranks

        report.env.update(
            {
                "rank": rank.rank,
                "local_rank": rank.local_rank,
                "world_size": rank.world_size,
                "backend": backends[0] if backends else ranks.backend(),
                "nccl": ranks.nccl_version(),
                **ranks.nccl_env(),
            }
        )
        ranks.tag(report, rank)
    return report


def _benchmark_finding(target: str, site) -> Finding:
    path, line = site if site else (None, None)
    where = f" (set at {path}:{line})" if path else ""
    return Finding(
        code=BENCHMARK_CODE,
        message=(
            f"cudnn.benchmark was True while {target} trained{where}: cuDNN's autotuner picks kernels by timing, "
            "so two runs may use different algorithms"
        ),
        path=path,
        line=line or 1,
        help="Set torch.backends.cudnn.benchmark = False (Lightning: Trainer(benchmark=False)).",
        help_code="torch.backends.cudnn.benchmark = False",
        properties={"target": target, "cudnn_benchmark": True},
    )


def _cublas_finding(env: dict) -> Finding:
    value = env.get("cublas_workspace_config")
    shown = "unset" if value is None else repr(value)
    return Finding(
        code=CUBLAS_CODE,
        message=(
            f"torch {env.get('torch')} refuses cuBLAS in deterministic mode unless CUBLAS_WORKSPACE_CONFIG is "
            f":4096:8 or :16:8, and it is {shown} here"
        ),
        help='Set CUBLAS_WORKSPACE_CONFIG=":4096:8" before the first CUDA call (torch 2.10 and later do not need it).',
        help_code='import os\nos.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before importing torch',
        properties={"cublas_workspace_config": value},
    )
