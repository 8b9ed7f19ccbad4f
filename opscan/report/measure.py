"""Measure one workload: does it raise in strict mode, and do its bits repeat, by default and in strict mode?

A workload is a function that runs forward and backward from scratch (a rule's
reproducer, an OpInfo sample). `measure` runs it `runs` times in strict mode
(`use_deterministic_algorithms(True)`, not warn_only) and `runs` times with
determinism off, reseeding torch before each run, under a dispatch mode that
fingerprints every aten op's results on the device (`opscan.trace.bits`) and
notes the first determinism alert. Runs are compared op by op, so a
difference is pinned to the first op whose results differ, in forward or
backward. The flags, the default dtype and the random generators are
restored afterwards.

    m = measure(lambda: run_snippet(rule.reproducer, "cuda"), device="cuda")
    m.raised        # (caller, aten op) of the alert, or None
    m.strict_bits   # "identical" / "differs" / "" (raised, or not run)
    m.default       # the same, determinism off

Five identical runs do not prove an op deterministic: a small input may leave
an atomic kernel no room to reorder. They do prove a difference.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from opscan.report import matrix
from opscan.trace.bits import fingerprint
from opscan.trace.catch import parse_alert
from opscan.trace.probe import results, skip_reason
from opscan.trace.state import RngState, TorchFlags

SEED = 0
RUNS = 5


class Recorder(TorchDispatchMode):
    """Fingerprint every op's results (outputs and what it writes to); remember the first alert and every op seen."""

    def __init__(self):
        super().__init__()
        self.names: list[str] = []
        self.meta: list[tuple] = []
        self.prints: list = []
        self.alert: tuple[str, str] | None = None
        self.seen: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        try:
            out = func(*args, **kwargs)
        except RuntimeError as exc:
            if self.alert is None:
                alert = parse_alert(exc)
                if alert is not None:
                    self.alert = (alert.caller, str(func))
            raise
        name = str(func)
        self.seen.add(name)
        if skip_reason(func) is None:
            for t in results(func, args, kwargs, out):
                if isinstance(t, torch.Tensor):
                    print_ = fingerprint(t)
                    if print_ is not None:
                        self.names.append(name)
                        self.meta.append((tuple(t.shape), str(t.dtype)))
                        self.prints.append(print_)
        return out

    def trace(self) -> list[tuple]:
        """(op, (shape, dtype), print) for every result, with one host synchronisation per device."""
        values: list = [None] * len(self.prints)
        by_device = defaultdict(list)
        for i, p in enumerate(self.prints):
            by_device[p.device].append(i)
        for indices in by_device.values():
            for i, v in zip(indices, torch.stack([self.prints[i] for i in indices]).tolist()):
                values[i] = v
        return list(zip(self.names, self.meta, values))


def first_difference(runs: list[list[tuple]]) -> tuple[str, int]:
    """The first op whose results differ between the first run and another, and how many runs differ ("" and 0 if none)."""
    first, where, count = runs[0], "", 0
    for other in runs[1:]:
        if other == first:
            continue
        count += 1
        if not where:
            if [(n, m) for n, m, _ in other] != [(n, m) for n, m, _ in first]:
                where = "(the runs ran different ops)"
            else:
                where = next(a[0] for a, b in zip(first, other) if a != b)
    return where, count


@dataclass
class Measurement:
    raised: tuple[str, str] | None = None  # (caller, aten op or "(python)")
    error: str = ""
    strict_bits: str = ""
    default: str = ""
    differs_at: str = ""
    notes: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    @property
    def strict(self) -> str:
        if self.error and self.raised is None and not self.strict_bits:
            return matrix.ERROR
        return matrix.RAISES if self.raised else (matrix.NO_ALERT if self.strict_bits else "")

    @property
    def verdict(self) -> str:
        return matrix.verdict(self.raised is not None, self.strict_bits, self.default, self.error)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _run(work: Callable[[], None], device: str, recorder: Recorder | None = None) -> Recorder:
    recorder = Recorder() if recorder is None else recorder
    torch.manual_seed(SEED)
    with recorder:
        work()
        _sync(device)
    return recorder


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0][:200] if text else ""
    if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in first.lower():
        return "out of memory"
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def measure(work: Callable[[], None], *, device: str, runs: int = RUNS, modes=("strict", "default")) -> Measurement:
    """Run `work` `runs` times in each mode; see the module docstring. Its errors are recorded, never raised."""
    m = Measurement()
    saved_flags, saved_rng = TorchFlags.capture(), RngState.capture()
    try:
        torch.backends.cudnn.benchmark = False
        if "strict" in modes:
            torch._C._set_deterministic_algorithms(True, warn_only=False)
            traces = []
            for _ in range(runs):
                recorder = Recorder()
                try:
                    _run(work, device, recorder)
                except RuntimeError as exc:
                    alert = parse_alert(exc)
                    if alert is None:
                        raise
                    # the aten op that raised, or "(python)" for an alert raised by Python code
                    m.raised = recorder.alert if recorder.alert is not None else (alert.caller, "(python)")
                    break
                m.seen |= recorder.seen
                traces.append(recorder.trace())
            if m.raised is None:
                where, count = first_difference(traces)
                m.strict_bits = matrix.DIFFERS if count else matrix.IDENTICAL
                if count:
                    m.differs_at = where
                    m.notes.append(f"strict mode: {count} of {runs - 1} reruns differ from the first")
        if "default" in modes:
            torch._C._set_deterministic_algorithms(False, warn_only=False)
            traces = [_run(work, device).trace() for _ in range(runs)]
            where, count = first_difference(traces)
            m.default = matrix.DIFFERS if count else matrix.IDENTICAL
            if count:
                m.differs_at = m.differs_at or where
                m.notes.append(f"default mode: {count} of {runs - 1} reruns differ from the first")
    except Exception as exc:  # noqa: BLE001 - a failing workload is a row, not a crash
        m.error = _error_text(exc)
    finally:
        saved_flags.restore()
        saved_rng.restore()
        with contextlib.suppress(Exception):
            _sync(device)
    return m


# ---------------------------------------------------------------- snippets (rules' reproducers and remedies)


@contextlib.contextmanager
def default_dtype(name: str):
    saved = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, name))
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


def snippet(source: str, device: str, label: str = "<snippet>") -> Callable[[], None]:
    """A workload that runs `source` with torch, nn, F and device in scope, in a fresh namespace each time."""
    code = compile(source, label, "exec")

    def work():
        exec(code, {"torch": torch, "nn": nn, "F": F, "device": device})  # noqa: S102 - our own rules data

    return work


def measure_snippet(source: str, *, device: str, dtype: str = "float32", runs: int = RUNS, modes=("strict", "default"), label="<snippet>") -> Measurement:
    try:
        work = snippet(source, device, label)
    except SyntaxError as exc:
        return Measurement(error=f"SyntaxError: {exc}")
    with default_dtype(dtype), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a reproducer's deprecation warnings are not the report's business
        return measure(work, device=device, runs=runs, modes=modes)


def probe_remedy(rule, m: Measurement, *, device: str, dtype: str, runs: int = RUNS) -> str:
    """For a rule that raised: does its remedy run in strict mode, and are its bits reproducible?"""
    if m.raised is None:
        return ""
    if not rule.remedy_reproducer.strip():
        return matrix.NO_REMEDY_PROBE
    r = measure_snippet(rule.remedy_reproducer, device=device, dtype=dtype, runs=runs, modes=("strict",), label=f"<remedy {rule.id}>")
    if r.raised:
        return f"raises: {r.raised[0]}"
    if r.error:
        return f"error: {r.error}"
    if r.strict_bits == matrix.IDENTICAL:
        return f"runs; identical in {runs} runs"
    return f"runs; differs at {r.differs_at}"


def rule_row(rule, device: str, dtype: str, m: Measurement, remedy: str, torch_version: str) -> dict:
    """A measured row for a rule's reproducer, with a note where the measurement and the rules disagree."""
    expected = rule.raises_on(torch_version, device)
    notes = list(m.notes)
    if m.error:
        notes.insert(0, m.error)
    elif m.raised is not None and not expected:
        notes.insert(0, f"raised, but the rules say no alert on torch {torch_version}")
    elif m.raised is None and expected:
        notes.insert(0, f"the rules say it raises on torch {torch_version}; it did not")
    if m.raised is not None and m.raised[0] not in rule.callers:
        notes.insert(0, f"raised {m.raised[0]!r}, which the rule does not list")
    return matrix.row(
        source="rule",
        rule=rule.id,
        op=matrix.api_label(rule),
        aten=list(rule.aten),
        device=device,
        dtype=dtype,
        phase=rule.phase,
        expected=matrix.RAISES if expected else matrix.NO_ALERT,
        strict=m.strict,
        caller=m.raised[0] if m.raised else "",
        raised_by=m.raised[1] if m.raised else "",
        default=m.default,
        strict_bits=m.strict_bits,
        differs_at=m.differs_at,
        verdict=m.verdict,
        remedy=remedy,
        measured=True,
        note="; ".join(notes),
    )


def measure_rules(db, *, devices: dict[str, str], runs: int = RUNS, progress=None) -> tuple[list[dict], list[str]]:
    """Rows for every rule: measured on the devices given, from the rules on the others.

    `devices` maps a rules device ("cpu", "cuda") to the device to run on
    ("cuda:1"). Without CUDA, the CUDA-only reproducers also run once in
    strict mode on the CPU, and any that alerts there gets a measured row:
    the rules say it should not. Returns (rows, notices).
    """
    torch_version = torch.__version__
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # torch < 2.10 checks it; read once, at first use
    rows, notices = [], []
    for i, rule in enumerate(db.ops):
        if progress is not None:
            progress(i, len(db.ops), rule.id)
        for kind in rule.devices:
            for dtype in rule.dtypes:
                if kind not in devices:
                    rows.append(matrix.rule_row(rule, kind, dtype, torch_version))
                    continue
                device = devices[kind]
                m = measure_snippet(rule.reproducer, device=device, dtype=dtype, runs=runs, label=f"<reproducer {rule.id}>")
                remedy = probe_remedy(rule, m, device=device, dtype=dtype, runs=runs)
                rows.append(rule_row(rule, kind, dtype, m, remedy, torch_version))
        if "cuda" not in devices and "cpu" in devices and "cpu" not in rule.devices:
            m = measure_snippet(rule.reproducer, device="cpu", runs=1, modes=("strict",), label=f"<reproducer {rule.id}>")
            if m.raised is not None:
                rows.append(rule_row(rule, "cpu", rule.dtypes[0], m, "", torch_version))
                notices.append(f"{rule.id} raised {m.raised[0]!r} on the CPU, where the rules say it does not")
    return rows, notices


# ---------------------------------------------------------------- where it ran


def environment(device: str, *, runs: int, scope: str) -> dict:
    """The report header: versions, GPU, driver, date."""
    import datetime
    import platform

    from opscan._version import __version__

    try:
        import torchvision

        vision = torchvision.__version__
    except Exception:  # noqa: BLE001 - absent or broken: the report says so
        vision = None
    cuda = device.startswith("cuda")
    return {
        "scope": scope,
        "rules_torch": torch.__version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "torchvision": vision,
        "device": device,
        "gpu": torch.cuda.get_device_name(torch.device(device)) if cuda else None,
        "driver": _driver() if cuda else None,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "opscan": __version__,
        "runs": runs,
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }


def _driver() -> str | None:
    """The NVIDIA driver version: from the kernel module, else nvidia-smi, else None."""
    import re
    import subprocess

    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            m = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", f.read())
        if m:
            return m.group(1)
    except OSError:
        pass
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else None
