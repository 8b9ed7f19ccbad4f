"""Build the report the command asks for: the rules' reproducers here, or the rules alone, or the sweep.

Importing this module imports no torch; measuring does, once the command has
decided there is something to measure.
"""

from __future__ import annotations

import datetime
import os
import platform

from opscan.findings import Problem, Table
from opscan.report import matrix

NOTE = (
    "Runs in a mode are compared op by op, bit for bit; identical runs do not prove an op deterministic "
    "(a small input may leave an atomic kernel nothing to reorder), a difference proves it is not."
)


class ReportError(ValueError):
    """Bad input for the report (a device that is not there, a state file of another sweep): exit 2."""


class SweepInterrupted(Exception):
    """Ctrl-C (or SIGTERM) stopped the sweep: no report is made; str() says what the state file keeps."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum


def installed(distribution: str) -> str | None:
    """A distribution's installed version, read from its metadata: torch is not imported."""
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _same_release(a: str, b: str) -> bool:
    from opscan.versions import parse_version

    return parse_version(a)[:2] == parse_version(b)[:2]


def _rules_env(target: str, torch_installed: str | None) -> dict:
    from opscan._version import __version__

    return {
        "scope": matrix.SCOPE_RULES,
        "rules_torch": target,
        "torch": torch_installed,
        "cuda": None,
        "cudnn": None,
        "torchvision": installed("torchvision"),
        "device": "none",
        "gpu": None,
        "driver": None,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "opscan": __version__,
        "runs": None,
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }


def _device(requested: str) -> str:
    from opscan.trace.runner import TargetError, resolve_device

    try:
        return resolve_device(requested, also=" (or none: the rules only)")
    except TargetError as exc:
        raise ReportError(str(exc)) from None


def rules_report(*, torch_version: str | None, device: str = "auto", runs: int = 5, progress=None):
    """Every rule's ops: measured where this machine can (the installed torch, on its GPU and CPU), else from the rules."""
    from opscan.rules import NEWEST_TORCH, load

    db = load()
    torch_installed = installed("torch")
    target = torch_version or torch_installed or NEWEST_TORCH
    notices = []
    if device == "none":
        reason = "--device none"
    elif torch_installed is None:
        reason = "torch is not installed"
    elif torch_version is not None and not _same_release(torch_version, torch_installed):
        reason = f"the installed torch is {torch_installed}, not {torch_version}"
    else:
        reason = ""
        try:
            import torch  # noqa: F401
        except ImportError as exc:
            reason = f"torch does not import ({exc})"
    if reason:
        if torch_version is not None:
            from opscan.versions import TorchRange

            # As lint does: a release the rules do not cover is read as the nearest one they do, and
            # said so, rather than a table of claims about a torch no one has checked.
            known = TorchRange.from_spec(torch_version, tuple(db.releases), "--torch-version")
            if known.warning:
                notices.append(f"warning: {known.warning}")
                target = known.newest  # the one release it was mapped to
        notices.append(f"{reason}: every row is {matrix.FROM_RULES} (torch {target})")
        rows = matrix.rule_rows(db, target)
        return matrix.make_report(rows, _rules_env(target, torch_installed), title=f"Ops on torch {target}, from the rules", notices=notices, note=NOTE)

    from opscan.report import measure

    where = _device(device)
    devices = {"cpu": "cpu"}
    if where.startswith("cuda"):
        devices["cuda"] = where
    else:
        notices.append(
            "no CUDA GPU: the CPU reproducers ran here (put_, max_unpool and any other that alerts on the CPU); "
            f"every CUDA row is {matrix.FROM_RULES}"
        )
    from opscan.trace.state import ProcessState

    with ProcessState.capture():  # the reproducers' flags and dtypes, and the CUBLAS_WORKSPACE_CONFIG measure_rules sets
        rows, more = measure.measure_rules(db, devices=devices, runs=runs, progress=progress)
        env = measure.environment(where, runs=runs, scope=matrix.SCOPE_RULES)  # with the variable as it was measured
    title = f"Ops on torch {env['torch']}, {env['gpu'] or 'CPU'}"
    return matrix.make_report(rows, env, title=title, notices=notices + more, note=NOTE)


def sweep_report(*, device: str, runs: int, samples: int, patterns, state_path: str, deadline: float, progress=None):
    """The OpInfo sweep, resumed from `state_path` and stopped at `deadline` (time.monotonic())."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ReportError("opscan report --sweep needs torch; install opscan[trace]") from None
    from opscan.report import measure, sweep
    from opscan.rules import load

    where = _device(device)
    notices = [] if where.startswith("cuda") else ["no CUDA GPU: swept on the CPU, where almost every op is deterministic"]
    env = measure.environment(where, runs=runs, scope=matrix.SCOPE_SWEEP)
    from opscan.trace.state import ProcessState

    try:
        with ProcessState.capture():  # what torch's OpInfo samples change (the default dtype, flags)
            result = sweep.sweep(load(), device=where, env=env, state_path=state_path, deadline=deadline, runs=runs, samples=samples, patterns=patterns, progress=progress)
    except sweep.SweepStateError as exc:
        raise ReportError(str(exc)) from None
    if patterns and result.total == 0:  # a typo in --ops: "complete: 0 cases" would read as a clean sweep
        raise ReportError(f"--ops {','.join(patterns)} matches no op of the sweep on {where}")
    if result.signal:
        # As every command at Ctrl-C: exit 130 (143 at SIGTERM) and no report, -o left as it was; the cases done are
        # in the state file, and the same command resumes after them.
        raise SweepInterrupted(
            f"{len(result.rows)} of {result.total} cases done, kept in {state_path}; run the same command again to resume "
            "(no report was written)",
            result.signal,
        )
    if result.complete:
        status = f"complete: {result.total} cases"
    else:
        status = (
            f"partial: {len(result.rows)} of {result.total} cases, stopped by {result.stopped or 'the time limit'}; "
            f"run the same command again to resume from {state_path}"
        )
    header = {"sweep": status, "sweep_cases": result.total, "sweep_done": len(result.rows), "sweep_tried_now": result.tried_now,
              "sweep_seconds": round(result.seconds, 1), "sweep_samples": samples}  # fmt: skip
    errors = [Problem(f"a CUDA error ended the sweep at {result.broken}; run the same command again to resume after it")] if result.broken else []
    if not result.complete:
        notices.insert(0, f"sweep {status}")
    report = matrix.make_report(
        result.rows, {**header, **env}, title=f"Ops swept on torch {env['torch']}, {env['gpu'] or 'CPU'}", notices=notices, errors=errors, note=NOTE
    )
    report.tables.insert(1, Table("notable", "Worth a look: unknown alerts, documented alerts that did not fire, silent ops",
                                  matrix.COLUMNS, [tuple(r[k] for k in matrix.KEYS) for r in sweep.notable(result.rows)]))  # fmt: skip
    return report
