"""`opscan diff`: record a run twice, then compare the two records (opscan.compare) into one Report.

By default each record is made by a fresh `python -m opscan record` process,
with the same interpreter and flags, one after the other, so that causes that
live in a process show: the string hash seed (set iteration order), cuDNN's
autotuning, handles and caches created on first use. `same_process=True`
records both in this process (faster; it sees only what differs within one).

    report = diff(parse_target("torchvision:resnet18"), steps=2, device="cuda")
    first_divergence(report)   # {"op": ..., "module": ..., "file": ..., "line": ..., "step": ..., "phase": ..., "cause": ...} or None

`check_workload` does the same for a model and inputs already built (the
`assert_reproducible` fixture), always in this process.

A feature: it builds on the trace engine (in-process records) and on
`opscan.compare`; importing it imports no torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from opscan.findings import Problem, Report

RECORDS = ("a.jsonl", "b.jsonl")
FIRST_DIVERGENCE_KEYS = ("op", "module", "file", "line", "step", "phase", "cause")


def record_argv(target, path: str, *, steps: int, device: str | None, seed: int | None, deterministic: bool,
                benchmark: bool | None, input_shape, fingerprint: str) -> list[str]:  # fmt: skip
    """The `opscan record` command line that records `target` into `path` with these settings."""
    argv = ["record", "--steps", str(steps), "-o", path, "--fingerprint", fingerprint]
    if device:
        argv += ["--device", device]
    if seed is not None:
        argv += ["--seed", str(seed)]
    if deterministic:
        argv.append("--deterministic")
    if benchmark is not None:
        argv.append("--benchmark" if benchmark else "--no-benchmark")
    if input_shape:
        argv += ["--input-shape", ",".join(str(d) for d in input_shape)]
    if target.kind == "script":
        argv += ["--run", target.spec, *target.argv]  # --run takes the rest of the line: last
    else:
        argv.insert(1, target.spec)
    return argv


def _child_env() -> dict[str, str]:
    """This environment, with this opscan first on the path, so the child records with the same code."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


def _record_in_child(argv: list[str], label: str) -> Problem | None:
    proc = subprocess.run(
        [sys.executable, "-m", "opscan", *argv], env=_child_env(), capture_output=True, text=True, check=False
    )
    if proc.returncode == 0:
        return None
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    reasons = [line.removeprefix("opscan: error: ") for line in lines if line.startswith("opscan: error: ")]
    reason = reasons[-1] if reasons else (lines[-1] if lines else f"exit status {proc.returncode}")
    return Problem(f"recording run {label} failed: {reason}", detail="\n".join(lines[-40:]))


def _record_here(target, path: str, label: str, **settings) -> Problem | None:
    from opscan.trace.record import record

    try:
        result = record(target, path, **settings)
    except OSError as exc:
        return Problem(f"recording run {label} failed: cannot write {path}: {exc.strerror or exc}")
    if result.problem is not None:
        return Problem(f"recording run {label} failed: {result.problem.message}", result.problem.target, result.problem.detail)
    return None


def _compare(paths: list[str]) -> Report:
    try:
        from opscan.compare import compare_records
    except ImportError as exc:
        return Report("diff", errors=[Problem(f"opscan diff needs opscan.compare, which would not import: {exc}")])
    return compare_records(*paths)


def _as_diff(report: Report, notices: list[str], env: dict) -> Report:
    """compare's report under the diff command's name, with what diff adds."""
    return Report(
        "diff",
        report.findings,
        tables=report.tables,
        env={**report.env, **env},
        errors=report.errors,
        notices=notices + report.notices,
        rules=report.rules,
    )


def diff(
    target,
    *,
    steps: int = 2,
    device: str | None = None,
    seed: int | None = None,
    deterministic: bool = False,
    benchmark: bool | None = None,
    input_shape=None,
    fingerprint: str = "xor64+sum",
    same_process: bool = False,
    keep: str | None = None,
) -> Report:
    """Record `target` twice and compare. `keep` is a folder for the two records (else a temporary one, removed)."""
    if keep is not None:
        try:
            os.makedirs(keep, exist_ok=True)
        except OSError as exc:
            return Report("diff", errors=[Problem(f"cannot use --keep {keep}: {exc.strerror or exc}")])
        folder = keep
    else:
        folder = tempfile.mkdtemp(prefix="opscan-diff-")
    paths = [os.path.join(folder, name) for name in RECORDS]
    try:
        for path, label in zip(paths, "ab"):
            if same_process:
                from opscan.trace.runner import resolve_device

                problem = _record_here(
                    target, path, label, device=resolve_device(device or "auto"), steps=steps, seed=seed,
                    deterministic=deterministic, benchmark=benchmark, input_shape=input_shape, scheme=fingerprint,
                )  # fmt: skip
            else:
                argv = record_argv(
                    target, path, steps=steps, device=device, seed=seed, deterministic=deterministic,
                    benchmark=benchmark, input_shape=input_shape, fingerprint=fingerprint,
                )  # fmt: skip
                problem = _record_in_child(argv, label)
            if problem is not None:
                return Report("diff", errors=[problem])
        report = _compare(paths)
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    notices = [f"kept the records in {folder}: {RECORDS[0]}, {RECORDS[1]}"] if keep is not None else []
    env = {"processes": "one" if same_process else "two fresh", "steps": steps}
    return _as_diff(report, notices, env)


def check_workload(model, inputs, loss_fn=None, *, steps: int = 2, device: str | None = None, seed: int = 0,
                   keep: str | None = None) -> Report:  # fmt: skip
    """Train copies of `model` twice in this process from the same state and seed, record both, compare."""
    import copy

    from opscan.trace.record import record
    from opscan.trace.spec import Target
    from opscan.trace.targets import Workload

    if device is None:
        first = next(iter(model.parameters()), None)
        device = str(first.device) if first is not None else "cpu"
    folder = keep or tempfile.mkdtemp(prefix="opscan-reproducible-")
    paths = [os.path.join(folder, name) for name in RECORDS]
    target = Target("<model>", "callable")
    try:
        for path, label in zip(paths, "ab"):
            workload = Workload(None, copy.deepcopy(model), inputs, loss_fn)
            result = record(target, path, device=device, steps=steps, seed=seed, workload=workload)
            if result.problem is not None:
                return Report("diff", errors=[Problem(f"recording run {label} failed: {result.problem.message}", detail=result.problem.detail)])
        report = _compare(paths)
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    return _as_diff(report, [], {"processes": "one", "steps": steps})


def first_divergence(report: Report) -> dict | None:
    """The first divergence compare found: op, module, file, line, step, phase, cause (and what else it gives); None if none.

    Read from compare's `first_divergence` table (docs/record-format.md, "compare output"),
    else from the first finding's properties.
    """
    table = report.table("first_divergence")
    if table is not None and table.rows:
        return dict(zip([c.key for c in table.columns], table.rows[0]))
    for finding in report.findings:
        props = finding.properties
        if "op" in props:
            out = {key: props.get(key) for key in FIRST_DIVERGENCE_KEYS}
            out["file"] = out["file"] or finding.path
            out["line"] = out["line"] or finding.line
            return out
    return None


def describe(divergence: dict) -> str:
    """One line for a person: where the runs part and why."""
    where = f"{divergence.get('file')}:{divergence.get('line')}" if divergence.get("file") else "an unknown line"
    module = divergence.get("module")
    module_text = f"module {module}" if module else ("the root module" if module == "" else "outside any module")
    return (
        f"{divergence.get('op')} at step {divergence.get('step')} ({divergence.get('phase')}), {module_text}, "
        f"at {where}; cause: {divergence.get('cause')}"
    )
