"""The bench: check the deterministic variants can run, time every variant interleaved, profile, report.

1. **Preflight**, per precision: one training step of the deterministic
   variant under the scan's `Trace`. An op that raises in deterministic mode
   is recorded (its `OpFinding`, as `opscan scan` reports it) and that variant
   is marked blocked instead of being timed.
2. **Timing**: one run of the target through the runner, with the step
   `Driver` as its mode and step hook, walking the plan: warm-up, timed
   rounds, then the profiled blocks.
3. **Report**: `report.build` from the measurement, with the env read after
   the timed steps (clocks included).

Everything runs on the device the caller resolved (`runner.resolve_device`);
the runner restores torch's flags and RNG after each run.
"""

from __future__ import annotations

import contextlib
import gc

from opscan.bench.plan import make_plan
from opscan.bench.report import build
from opscan.bench.results import BLOCKED, NOT_RUN, Measurement, VariantRun
from opscan.bench.variants import PRECISIONS, Variant, variant_flags, variants_for
from opscan.findings import Problem

DEFAULT_ROUNDS, DEFAULT_WARMUP, DEFAULT_PROFILE_STEPS, DEFAULT_TOP = 30, 3, 3, 10


def _on_device(device: str):
    import torch

    dev = torch.device(device)
    return torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext()


def _blocking_ops(findings) -> str:
    ops = list(dict.fromkeys(f.op for f in findings))
    return ", ".join(ops[:3]) + (f" and {len(ops) - 3} more" if len(ops) > 3 else "")


def preflight(target, precision: str, *, device: str, input_shape, seed):
    """One deterministic step of `precision` under Trace: (OpFindings, the trace's notices, Problems)."""
    import torch

    from opscan.trace.runner import run
    from opscan.trace.tracer import Trace

    traces = []
    det = Variant(precision, "deterministic")
    device_type = torch.device(device).type

    def modes(model):
        trace = Trace(target.name, roots=(model,) if model is not None else ())
        traces.append(trace)
        return [variant_flags(det, device_type), trace]

    outcome = run(target, device=device, steps=1, train=True, input_shape=input_shape, seed=seed, modes=modes)
    findings = [f for t in traces for f in t.findings]
    notices = [n for t in traces for n in t.notices]
    problems = [Problem(message, target.name) for t in traces for message in t.errors]
    if outcome.problem is not None:
        problems.insert(0, outcome.problem)
    return findings, notices, problems


def _merge_findings(found_by_precision: dict) -> list:
    """Each OpFinding as a Finding once, with the precisions in which it raised."""
    merged: dict[tuple, object] = {}
    for precision, found in found_by_precision.items():
        for op_finding in found:
            finding = op_finding.to_finding()
            key = (finding.code, finding.path, finding.line, finding.message)
            if key in merged:
                merged[key].properties["precisions"].append(precision)
            else:
                finding.properties["precisions"] = [precision]
                merged[key] = finding
    return list(merged.values())


def _check_all(target, precisions, *, device, input_shape, seed, notices, errors):
    """Preflight every precision: (precision -> OpFindings of a blocked deterministic variant, precisions that failed)."""
    blocked: dict[str, list] = {}
    failed: set[str] = set()
    for precision in precisions:
        found, trace_notices, problems = preflight(target, precision, device=device, input_shape=input_shape, seed=seed)
        for n in trace_notices:  # e.g. the target tried to turn deterministic mode off: the check kept it on
            if f"{target.name} (deterministic check): {n}" not in notices:
                notices.append(f"{target.name} (deterministic check): {n}")
        if found and (not problems or any(f.op == "(python)" for f in found)):
            blocked[precision] = found  # (python): an alert raised outside any aten op, which also stops the step
        elif problems:
            errors += problems
            failed.add(precision)
    gc.collect()  # the checks' models (held in reference cycles by their traces) must not count in the peaks that follow
    return blocked, failed


def _time(target, runnable, *, device, rounds, warmup, profile_steps, input_shape, seed, notices, errors):
    """The timed run of the runnable variants, then their profiled blocks: the Driver that walked it."""
    from opscan.bench.timing import Driver
    from opscan.trace.runner import run

    groups = []
    for precision in dict.fromkeys(v.precision for v in runnable):
        members = [i for i, v in enumerate(runnable) if v.precision == precision]
        if profile_steps and any(runnable[i].deterministic for i in members):
            groups.append(tuple(members))
    plan = make_plan(len(runnable), warmup=warmup, rounds=rounds, profile_groups=groups, profile_steps=profile_steps)
    driver = Driver(runnable, plan, device=device, profile_steps=profile_steps)
    if runnable:
        outcome = run(
            target, device=device, steps=len(plan), train=True, input_shape=input_shape, seed=seed,
            modes=lambda model: [driver], on_step=driver.on_step,
        )  # fmt: skip
        notices += [f"{target.name}: {n}" for n in outcome.notices]
        if outcome.problem is not None:
            errors.append(outcome.problem)
        if driver.done < len(plan):
            notices.append(f"{target.name}: {driver.done} of the {len(plan)} planned steps ran; the tables use the steps that did")
    if driver.drifted:
        notices.append(
            f"{target.name} changed the determinism or cudnn.benchmark flags during timed steps of "
            f"{', '.join(sorted(driver.drifted))}; opscan sets them again at each step, but those steps did not run as labelled"
        )
    if driver.profile_error:
        notices.append(f"no per-op attribution: {driver.profile_error}")
    return driver


def bench(
    target,
    *,
    device: str,
    precisions=PRECISIONS,
    rounds: int = DEFAULT_ROUNDS,
    warmup: int = DEFAULT_WARMUP,
    profile_steps: int = DEFAULT_PROFILE_STEPS,
    top: int = DEFAULT_TOP,
    samples: bool = False,
    input_shape: tuple[int, ...] | None = None,
    seed: int = 0,
):
    """Measure what determinism costs on `target` (a parsed Target) and build the Report."""
    import torch

    from opscan.bench import env as bench_env
    from opscan.trace.codes import RULES
    from opscan.trace.state import ProcessState

    # Put back once measured: the CUBLAS_WORKSPACE_CONFIG set here (cuBLAS has read it by then) and what the runs changed.
    with ProcessState.capture():
        cublas_set_by = bench_env.prepare_cublas(torch.__version__, torch.cuda.is_initialized())
        variants = variants_for(precisions)
        notices: list[str] = []
        errors: list[Problem] = []
        with _on_device(device):
            blocked, failed = _check_all(target, precisions, device=device, input_shape=input_shape, seed=seed, notices=notices, errors=errors)
            runnable = [v for v in variants if v.precision not in failed and not (v.deterministic and v.precision in blocked)]
            driver = _time(
                target, runnable, device=device, rounds=rounds, warmup=warmup, profile_steps=profile_steps,
                input_shape=input_shape, seed=seed, notices=notices, errors=errors,
            )  # fmt: skip
            try:
                env = bench_env.collect(device, cublas_set_by=cublas_set_by)
            except Exception as exc:  # noqa: BLE001 - a broken CUDA context must not cost the timings
                errors.append(Problem(f"could not read the environment: {exc}"))
                env = {}

    measured = driver.measurement()
    by_variant = {r.variant: r for r in measured.runs}
    runs = []
    for v in variants:
        if v in by_variant:
            runs.append(by_variant[v])
        elif v.precision in failed:
            runs.append(VariantRun(v, status=NOT_RUN, detail=f"its first {v.precision} step failed (see the errors)"))
        else:
            runs.append(VariantRun(v, status=BLOCKED, detail=_blocking_ops(blocked[v.precision])))
    measurement = Measurement(runs, measured.profiles, device_time=measured.device_time, timer=measured.timer)
    env.update(
        {
            "target": target.name,
            "input_shape": "x".join(map(str, input_shape)) if input_shape else None,
            "rounds": rounds,
            "warmup": warmup,
            "profile_steps": profile_steps,
            "timer": measurement.timer,
        }
    )
    return build(
        measurement, env=env, findings=_merge_findings(blocked), errors=errors, notices=notices, rules=RULES, top=top, samples=samples
    )
