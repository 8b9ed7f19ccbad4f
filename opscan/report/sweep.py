"""`opscan report --sweep`: torch's own op samples, measured the way the rules' reproducers are.

The cases, in this order:

1. a few torchvision ops (roi_align, roi_pool, ps_roi_*, deform_conv2d, nms),
   with inputs large enough for atomics to reorder;
2. every OpInfo in `torch.testing._internal.common_methods_invocations.op_db`,
   its first `samples` sample inputs at one dtype (float32 where the op
   supports it on the device), forward and, where the op supports autograd
   at that dtype, backward with a fixed random cotangent;
3. every ModuleInfo in `torch.testing._internal.common_modules.module_db`,
   its first `samples` module inputs, in training mode, forward and backward.

Each sample runs once as a trial (a sample whose forward fails is recorded
and dropped; one whose backward fails runs forward only), then through
`opscan.report.measure.measure`. A case is one row: it raises if any sample
raised, its bits differ if any sample's did.

The sweep stops starting cases at its deadline, and appends each finished
case to a state file (JSON lines) as it goes: run again with the same state
file and it resumes after the last finished case. A case that was started
and never finished (the process died in it) is recorded as such and skipped.
A CUDA error that leaves the context unusable ends the sweep: resume in a new
process.

APIs used, checked in torch 2.11 and 2.14.1 (torch/testing/_internal/opinfo/core.py,
common_modules.py): OpInfo.name, .variant_test_name, .supports_autograd,
.supported_dtypes(device_type), .supported_backward_dtypes(device_type),
.sample_inputs(device, dtype, requires_grad=...), SampleInput.input/.args/
.kwargs/.output_process_fn_grad, OpInfo.__call__; ModuleInfo.name, .module_cls,
.dtypes, .module_inputs_func(module_info, device, dtype, requires_grad, training),
ModuleInput.constructor_input/.forward_input (FunctionInput .args/.kwargs).
`has_nondeterministic_output` and `gradcheck_nondet_tol` are read with getattr.
"""

from __future__ import annotations

import contextlib
import copy
import fnmatch
import itertools
import json
import logging
import os
import signal
import sys
import time
import types
import unittest
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils._pytree import tree_flatten, tree_map

from opscan.report import matrix
from opscan.report.measure import RUNS, Measurement, measure, snippet
from opscan.trace.state import TorchFlags

SAMPLES = 3
CASE_BUDGET_S = 30.0  # a case stops taking new samples after this long
STATE_VERSION = 1

# Preferred dtypes, in order, for an op that does not take float32.
_DTYPES = ("float32", "int64", "int32", "bool", "complex64", "float64", "float16", "bfloat16", "uint8", "int8")

TORCHVISION = {
    "torchvision.ops.roi_align": """
import torchvision
x = torch.randn(2, 8, 32, 32, device=device, requires_grad=True)
xy = torch.rand(256, 2, device=device) * 20
rois = torch.cat([torch.randint(0, 2, (256, 1), device=device).float(), xy, xy + 4 + torch.rand(256, 2, device=device) * 8], dim=1)
torch.ops.torchvision.roi_align(x, rois, 1.0, 7, 7, 2, False).sum().backward()
""",
    "torchvision.ops.roi_pool": """
import torchvision
x = torch.randn(2, 8, 32, 32, device=device, requires_grad=True)
xy = torch.rand(256, 2, device=device) * 20
rois = torch.cat([torch.randint(0, 2, (256, 1), device=device).float(), xy, xy + 4 + torch.rand(256, 2, device=device) * 8], dim=1)
torchvision.ops.roi_pool(x, rois, output_size=7).sum().backward()
""",
    "torchvision.ops.ps_roi_align": """
import torchvision
x = torch.randn(2, 49 * 2, 32, 32, device=device, requires_grad=True)
xy = torch.rand(256, 2, device=device) * 20
rois = torch.cat([torch.randint(0, 2, (256, 1), device=device).float(), xy, xy + 4 + torch.rand(256, 2, device=device) * 8], dim=1)
torchvision.ops.ps_roi_align(x, rois, output_size=7).sum().backward()
""",
    "torchvision.ops.ps_roi_pool": """
import torchvision
x = torch.randn(2, 49 * 2, 32, 32, device=device, requires_grad=True)
xy = torch.rand(256, 2, device=device) * 20
rois = torch.cat([torch.randint(0, 2, (256, 1), device=device).float(), xy, xy + 4 + torch.rand(256, 2, device=device) * 8], dim=1)
torchvision.ops.ps_roi_pool(x, rois, output_size=7).sum().backward()
""",
    "torchvision.ops.deform_conv2d": """
import torchvision
x = torch.randn(4, 16, 32, 32, device=device, requires_grad=True)
weight = torch.randn(16, 16, 3, 3, device=device, requires_grad=True)
offset = (torch.randn(4, 18, 30, 30, device=device) * 2).requires_grad_()
torchvision.ops.deform_conv2d(x, offset, weight).sum().backward()
""",
    "torchvision.ops.nms": """
import torchvision
xy = torch.rand(2000, 2, device=device) * 100
boxes = torch.cat([xy, xy + 10 + torch.rand(2000, 2, device=device) * 20], dim=1)
torchvision.ops.nms(boxes, torch.rand(2000, device=device), 0.5)
""",
}


@dataclass
class Case:
    key: str
    source: str  # "opinfo", "module", "torchvision"
    op: str
    dtype: str
    samples: Callable[[], list]  # -> [(work, grad: bool)], built when the case runs
    note: str = ""


# A state file holds a line per case (about 300 bytes); a full sweep writes well under 1 MB.
MAX_STATE_BYTES = 64 * 1024 * 1024


class SweepStateError(ValueError):
    """A state file that belongs to another sweep (torch, GPU, runs) or is not one."""


# ---------------------------------------------------------------- torch's test databases


def _no_cuda_home_notice(record: logging.LogRecord) -> bool:
    """False for torch.utils.cpp_extension's "No CUDA runtime is found, using CUDA_HOME=..." (its _find_cuda_home)."""
    return not (isinstance(record.msg, str) and record.msg.startswith("No CUDA runtime is found"))


@contextlib.contextmanager
def _quiet_import():
    """Import torch's test databases without the side effects their import has.

    `common_utils` imports `expecttest` (not installed with torch: a stub
    stands in), freezes `torch.backends` flags (`disable_global_flags()`, after
    which setting `cudnn.benchmark` raises) and wraps TorchScript's
    `__call__`s for its profiler. All three are undone; the flags as well.

    `common_utils` also imports `torch.utils.cpp_extension`, which logs "No CUDA
    runtime is found, using CUDA_HOME=..." where a CUDA toolkit is installed
    but no GPU is usable: the sweep builds no extension, so that line alone is
    dropped (a filter on that logger, for the import), not torch's other logs.
    """
    saved_flags = TorchFlags.capture()
    script = (torch._C.ScriptFunction.__call__, torch._C.ScriptMethod.__call__)
    # torch.backends' own context manager puts the mutation flag back as it was on exit
    # (a module-level name in torch/backends/__init__.py since 1.x; 2.11 and 2.14.1 too).
    unfreeze = getattr(torch.backends, "__allow_nonbracketed_mutation", contextlib.nullcontext)
    stub = None
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stub = types.ModuleType("expecttest")
        stub.TestCase = unittest.TestCase
        stub.ACCEPT = False
        sys.modules["expecttest"] = stub
    cpp_extension_log = logging.getLogger("torch.utils.cpp_extension")
    cpp_extension_log.addFilter(_no_cuda_home_notice)
    try:
        with warnings.catch_warnings(), unfreeze():
            warnings.simplefilter("ignore")
            yield
    finally:
        cpp_extension_log.removeFilter(_no_cuda_home_notice)
        torch._C.ScriptFunction.__call__, torch._C.ScriptMethod.__call__ = script
        if stub is not None and sys.modules.get("expecttest") is stub:
            del sys.modules["expecttest"]
        saved_flags.restore()


def op_db():
    with _quiet_import():
        from torch.testing._internal.common_methods_invocations import op_db as ops
    return ops


def module_db():
    with _quiet_import():
        from torch.testing._internal.common_modules import module_db as modules
    return modules


# ---------------------------------------------------------------- workloads


def _fresh(tree):
    """The sample's tensors copied, so every run starts from the same inputs; leaves stay leaves."""
    return tree_map(lambda t: t.detach().clone().requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t, tree)


def _backward(out) -> None:
    """Backpropagate a fixed random cotangent (same each run) from every output that requires grad."""
    tensors = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    if not tensors:
        return
    generators: dict = {}
    grads = []
    for t in tensors:
        g = generators.get(t.device)
        if g is None:
            g = generators[t.device] = torch.Generator(device=t.device).manual_seed(1)
        grads.append(torch.randn(t.shape, dtype=t.dtype, device=t.device, generator=g))
    torch.autograd.backward(tensors, grads)


def _call(fn, inputs, grad: bool, after=lambda out: out) -> None:
    args, kwargs = _fresh(inputs)
    out = fn(*args, **kwargs)
    if grad:
        _backward(after(out))


def _trial(make_work, grad: bool) -> tuple[Callable[[], None] | None, bool, str]:
    """Run a sample once with determinism off: (work, grad) to measure, or (None, _, why not)."""
    saved = TorchFlags.capture()
    torch._C._set_deterministic_algorithms(False, warn_only=False)
    try:
        for g in ((True, False) if grad else (False,)):
            work = make_work(g)
            try:
                work()
                return work, g, ""
            except Exception as exc:  # noqa: BLE001 - an op's own limits, recorded
                error = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:160]}"
                if _broken(exc):
                    raise
        return None, False, error
    finally:
        saved.restore()


def _opinfo_cases(device: str, samples: int) -> list[Case]:
    cases = []
    for info in op_db():
        name = info.name + (f".{info.variant_test_name}" if info.variant_test_name else "")
        try:
            supported = {str(d).removeprefix("torch.") for d in info.supported_dtypes(torch.device(device).type)}
        except Exception:  # noqa: BLE001
            supported = set()
        dtype = next((d for d in _DTYPES if d in supported), None)
        if dtype is None:
            continue

        def build(info=info, dtype=dtype):
            torch_dtype = getattr(torch, dtype)
            grad = bool(info.supports_autograd) and torch_dtype in info.supported_backward_dtypes(torch.device(device).type)
            out = []
            for sample in itertools.islice(info.sample_inputs(device, torch_dtype, requires_grad=grad), samples):
                def make(g, sample=sample):
                    inputs = ((sample.input, *sample.args), sample.kwargs)
                    return lambda: _call(info, inputs, g, sample.output_process_fn_grad)

                out.append((make, grad))
            return out

        marks = []
        if getattr(info, "has_nondeterministic_output", False):
            marks.append("OpInfo: has_nondeterministic_output")
        if getattr(info, "gradcheck_nondet_tol", 0.0):
            marks.append("OpInfo: gradcheck_nondet_tol > 0 (a nondeterministic backward)")
        cases.append(Case(f"opinfo:{name}", "opinfo", name, dtype, build, "; ".join(marks)))
    return cases


def _module_cases(device: str, samples: int) -> list[Case]:
    cases = []
    for info in module_db():
        dtypes = {str(d).removeprefix("torch.") for d in getattr(info, "dtypes", ())}
        dtype = next((d for d in _DTYPES if d in dtypes), None)
        if dtype is None:
            continue

        def build(info=info, dtype=dtype):
            torch_dtype = getattr(torch, dtype)
            inputs = info.module_inputs_func(info, device=device, dtype=torch_dtype, requires_grad=True, training=True)
            out = []
            for module_input in inputs[:samples]:
                ctor, forward = module_input.constructor_input, module_input.forward_input
                if forward is None:
                    continue
                module = info.module_cls(*ctor.args, **ctor.kwargs).to(device).to(torch_dtype)
                module.train()

                def make(g, module=module, forward=forward):
                    return lambda: _call(copy.deepcopy(module), (forward.args, forward.kwargs), g)

                out.append((make, True))
            return out

        cases.append(Case(f"module:{info.name}", "module", info.name, dtype, build))
    return cases


def _torchvision_cases(device: str) -> list[Case]:
    try:
        import torchvision  # noqa: F401
    except Exception:  # noqa: BLE001
        return []
    cases = []
    for name, source in TORCHVISION.items():
        work = snippet(source.strip() + "\n", device, f"<sweep {name}>")
        cases.append(Case(f"torchvision:{name}", "torchvision", name, "float32", lambda work=work: [(lambda g: work, False)]))
    return cases


def cases(device: str, *, samples: int = SAMPLES, patterns: list[str] | None = None) -> list[Case]:
    """Every case, torchvision first (few, and the likeliest to be silent), filtered by fnmatch patterns."""
    found = _torchvision_cases(device) + _opinfo_cases(device, samples) + _module_cases(device, samples)
    seen: dict[str, int] = {}
    for case in found:  # op_db holds a few names twice
        n = seen.get(case.key, 0)
        seen[case.key] = n + 1
        if n:
            case.key = f"{case.key}#{n + 1}"
    if patterns:
        found = [c for c in found if any(fnmatch.fnmatchcase(c.op, p) or fnmatch.fnmatchcase(c.key, p) for p in patterns)]
    return found


# ---------------------------------------------------------------- one case


def _broken(exc: BaseException) -> bool:
    """Does this error leave the CUDA context unusable (an illegal access, a device-side assert)?"""
    text = str(exc)
    return type(exc).__name__ == "AcceleratorError" or "CUDA error" in text or "device-side assert" in text


class ContextBroken(RuntimeError):
    pass


class OutOfTime(Exception):
    """The deadline passed between two samples of a case: the case is dropped, to run again on resume."""


def run_case(case: Case, db, *, device: str, runs: int, torch_version: str, deadline: float = float("inf")) -> dict:
    """Measure one case's samples and fold them into one row."""
    started = time.monotonic()
    measured: list[Measurement] = []
    problems: list[str] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built = case.samples()
            for i, (make, grad) in enumerate(built):
                if time.monotonic() >= deadline:
                    raise OutOfTime
                if time.monotonic() - started > CASE_BUDGET_S:
                    problems.append(f"stopped after {i} of {len(built)} samples ({CASE_BUDGET_S:.0f} s a case)")
                    break
                work, with_grad, why = _trial(make, grad)
                if work is None:
                    problems.append(f"sample {i}: {why}")
                    continue
                if grad and not with_grad:
                    problems.append(f"sample {i}: forward only (backward failed)")
                m = measure(work, device=device, runs=runs)
                if m.error and _broken_text(m.error):
                    raise ContextBroken(m.error)
                measured.append(m)
    except (ContextBroken, OutOfTime):
        raise
    except Exception as exc:  # noqa: BLE001 - building the samples failed: that is the row
        if _broken(exc):
            raise ContextBroken(str(exc)) from None
        problems.append(f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:160]}")
    return _fold(case, measured, problems, db, device, torch_version, phase="forward+backward")


def _broken_text(text: str) -> bool:
    return "CUDA error" in text or "device-side assert" in text or text.startswith("AcceleratorError")


def _fold(case: Case, measured: list[Measurement], problems: list[str], db, device: str, torch_version: str, phase: str) -> dict:
    ok = [m for m in measured if not m.error]
    problems += [m.error for m in measured if m.error]
    raised = next((m.raised for m in ok if m.raised), None)
    strict_runs = [m for m in ok if m.strict_bits]
    strict_bits = matrix.DIFFERS if any(m.strict_bits == matrix.DIFFERS for m in strict_runs) else (matrix.IDENTICAL if strict_runs else "")
    defaults = [m.default for m in ok if m.default]
    default = matrix.DIFFERS if matrix.DIFFERS in defaults else (matrix.IDENTICAL if defaults else "")
    differs_at = next((m.differs_at for m in ok if m.strict_bits == matrix.DIFFERS), "") or next((m.differs_at for m in ok if m.differs_at), "")
    seen = set().union(*(m.seen for m in ok)) if ok else set()
    notes = []
    rule, expected = None, ""
    if raised is not None:
        rule = db.for_alert(raised[0], raised[1], torch_version=torch_version, device=device)
        if rule is None:
            notes.append("raises, and the rules do not know it")
        else:
            expected = matrix.RAISES if rule.raises_on(torch_version, device) else matrix.NO_ALERT
            if expected == matrix.NO_ALERT:
                notes.append(f"raises, but the rules ({rule.id}) say no alert on torch {torch_version}")
        if strict_bits == matrix.DIFFERS:
            notes.append("another sample differs in strict mode without raising")
    else:
        documented = [r for r in db.ops if r.raises_on(torch_version, device) and seen & set(r.aten)]
        for r in documented:
            ran = sorted(seen & set(r.aten))
            notes.append(f"ran {', '.join(ran)} without its alert ({r.id}; its conditions may exclude these samples)")
    if case.note:
        notes.append(case.note)
    notes += problems
    error = "" if ok else (problems[0] if problems else "no sample ran")
    return matrix.row(
        source=case.source,
        rule=rule.id if rule is not None else "",
        op=case.op,
        aten=[raised[1]] if raised else ([differs_at] if differs_at.startswith(("aten.", "torchvision.")) else []),
        device=device,
        dtype=case.dtype,
        phase=phase,
        expected=expected,
        strict=matrix.ERROR if error else (matrix.RAISES if raised else matrix.NO_ALERT),
        caller=raised[0] if raised else "",
        raised_by=raised[1] if raised else "",
        default=default,
        strict_bits=strict_bits,
        differs_at=differs_at,
        verdict=matrix.verdict(raised is not None, strict_bits, default, error),
        remedy="",
        measured=True,
        note="; ".join(notes),
    )


# ---------------------------------------------------------------- the state file


def _header(env: dict, runs: int, samples: int) -> dict:
    return {"opscan_sweep": STATE_VERSION, "torch": env.get("torch"), "device": env.get("device"), "gpu": env.get("gpu"), "runs": runs, "samples": samples}


def read_state(path: str, header: dict) -> tuple[dict[str, dict], set[str], float]:
    """(rows by case key, keys started and never finished, seconds spent) from a state file, if any."""
    from opscan._read import NotReadable, read_bytes

    rows: dict[str, dict] = {}
    started: set[str] = set()
    seconds = 0.0
    try:
        data = read_bytes(path, what="a sweep state file", limit=MAX_STATE_BYTES)
    except FileNotFoundError:
        return rows, started, seconds
    except NotReadable as exc:  # a device never ends, a named pipe blocks: refused before reading
        raise SweepStateError(f"{exc}; pass another --state") from None
    except OSError as exc:
        raise SweepStateError(f"cannot read the state file {path}: {exc.strerror or exc}") from None
    lines = data.splitlines()
    records = []
    for n, line in enumerate(lines):
        try:
            records.append(json.loads(line))  # bytes: bad UTF-8 is a ValueError too
        except (ValueError, RecursionError):
            if n == 0:  # not even its header: some other file, not to be appended to (nor removed on our word)
                raise SweepStateError(f"{path} is not a sweep state file; pass another --state") from None
            if n == len(lines) - 1:
                continue  # cut short by a crash mid-write
            raise SweepStateError(f"{path}:{n + 1} is not a sweep state line; remove the file or pass another --state") from None
    if not records:
        return rows, started, seconds
    first = records[0]
    if not isinstance(first, dict) or first.get("opscan_sweep") != STATE_VERSION:
        raise SweepStateError(f"{path} is not an opscan sweep state file; pass another --state")
    mismatched = {k: (first.get(k), v) for k, v in header.items() if first.get(k) != v}
    if mismatched:
        said = ", ".join(f"{k} {a!r} there, {b!r} here" for k, (a, b) in mismatched.items())
        raise SweepStateError(f"{path} belongs to another sweep ({said}); remove it or pass another --state")
    for record in records[1:]:
        if not isinstance(record, dict):
            continue
        if "start" in record:
            started.add(record["start"])
        elif "dropped" in record:
            started.discard(record["dropped"])
        elif "row" in record and "key" in record:
            rows[record["key"]] = matrix.row(**{k: v for k, v in record["row"].items() if k in matrix.KEYS})
            seconds += float(record.get("seconds", 0.0))
    return rows, started - set(rows), seconds


class _State:
    def __init__(self, path: str, header: dict):
        self.path = path
        self.existed = os.path.exists(path)
        self.fresh = not self.existed or os.path.getsize(path) == 0
        directory = os.path.dirname(os.path.abspath(path))
        self.made: list[str] = []  # the folders this run created for the file, deepest first
        parent = directory
        while not os.path.exists(parent) and os.path.dirname(parent) != parent:
            self.made.append(parent)
            parent = os.path.dirname(parent)
        try:
            os.makedirs(directory, exist_ok=True)
            self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        except OSError as exc:  # a read-only folder, a folder where the file should be, ...
            raise SweepStateError(f"cannot write the state file {path}: {exc.strerror or exc}") from None
        if self.fresh:
            self.write(header)

    def write(self, record: dict) -> None:
        self.file.write(json.dumps(record, default=str) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()

    def discard(self) -> None:
        """Close, for a sweep that never started: a file (and folders) this run created go; one that was there stays.

        Left behind, the new file's header (runs, samples) would refuse the next sweep as "another sweep".
        An empty file that was there goes back to empty; a file with a sweep in it was never written to.
        """
        self.file.close()
        try:
            if not self.existed:
                os.remove(self.path)
                for folder in self.made:
                    os.rmdir(folder)  # fails, and stops, at a folder something else has put a file in meanwhile
            elif self.fresh:
                os.truncate(self.path, 0)
        except OSError:
            pass


# ---------------------------------------------------------------- the sweep


@dataclass
class SweepResult:
    rows: list[dict]
    total: int
    tried_now: int
    seconds: float  # spent on cases, this run and the ones it resumed
    complete: bool
    stopped: str  # why it stopped early ("" if complete)
    broken: str = ""  # the CUDA error that ended it, if any
    signal: int = 0  # SIGINT (Ctrl-C) or SIGTERM, where one stopped it: the command exits as interrupted, with no report


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the sweep is so that it stops as at Ctrl-C."""


@contextlib.contextmanager
def _sigterm_interrupts():
    """SIGTERM (a `timeout` wrapper) ends the sweep as Ctrl-C does: what was done is kept in the state file."""

    def handler(signum, frame):
        raise _Terminated

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def sweep(db, *, device: str, env: dict, state_path: str, deadline: float, runs: int = RUNS, samples: int = SAMPLES,
          patterns: list[str] | None = None, progress=None) -> SweepResult:  # fmt: skip
    """Run every selected case not already in the state file, until `deadline` (time.monotonic())."""
    header = _header(env, runs, samples)
    done, crashed, seconds = read_state(state_path, header)
    # Opened before the cases are built (torch's OpInfo database, seconds): a state file that cannot be written is told at once.
    state = _State(state_path, header)
    try:
        selected = cases(device, samples=samples, patterns=patterns)
    except BaseException:  # a bad pattern, an OpInfo import that fails, Ctrl-C: nothing was swept, nothing is left behind
        state.discard()
        raise
    if not selected:  # --ops that match nothing: the caller says so
        state.discard()
        return SweepResult([], 0, 0, seconds, complete=True, stopped="")
    torch_version = torch.__version__
    tried, stopped, broken, running, signum = 0, "", "", None, 0
    try:
        with _sigterm_interrupts():
            for i, case in enumerate(selected):
                if case.key in done:
                    continue
                if case.key in crashed:
                    r = matrix.row(source=case.source, op=case.op, device=device, dtype=case.dtype, phase="forward+backward",
                                   strict=matrix.ERROR, verdict=matrix.V_ERROR, measured=True,
                                   note="the process died running it (skipped when the sweep resumed)")  # fmt: skip
                    state.write({"key": case.key, "row": r, "seconds": 0.0})
                    done[case.key] = r
                    continue
                if time.monotonic() >= deadline:
                    stopped = "the time limit"
                    break
                if progress is not None:
                    progress(i, len(selected), case.op)
                state.write({"start": case.key})
                running = case.key
                started = time.monotonic()
                try:
                    r = run_case(case, db, device=device, runs=runs, torch_version=torch_version, deadline=deadline)
                except OutOfTime:
                    state.write({"dropped": case.key})  # not a crash: it runs again on resume
                    stopped = "the time limit"
                    break
                except ContextBroken as exc:
                    broken = f"{case.op}: {exc}"
                    r = matrix.row(source=case.source, op=case.op, device=device, dtype=case.dtype, phase="forward+backward",
                                   strict=matrix.ERROR, verdict=matrix.V_ERROR, measured=True,
                                   note=f"a CUDA error that ends the process: {exc}")  # fmt: skip
                spent = time.monotonic() - started
                state.write({"key": case.key, "row": r, "seconds": round(spent, 3)})
                running = None
                done[case.key] = r
                seconds += spent
                tried += 1
                if broken:
                    stopped = "a CUDA error"
                    break
    except KeyboardInterrupt as exc:
        stopped = "an interrupt"
        signum = signal.SIGTERM if isinstance(exc, _Terminated) else signal.SIGINT
        if running is not None:
            state.write({"dropped": running})  # interrupted, not crashed: it runs again on resume
    finally:
        state.close()
    rows = [done[c.key] for c in selected if c.key in done]
    return SweepResult(rows, len(selected), tried, seconds, complete=len(rows) == len(selected), stopped=stopped, broken=broken, signal=int(signum))


def notable(rows: list[dict]) -> list[dict]:
    """The rows worth a look: raising ops the rules do not know, documented alerts that did not fire, silent ops."""
    out = []
    for r in rows:
        if (
            r["verdict"] in (matrix.V_SILENT, matrix.V_SWITCHES, matrix.V_NONDETERMINISTIC)
            or (r["verdict"] == matrix.V_RAISES and (not r["rule"] or r["expected"] != matrix.RAISES))
            or "without its alert" in r["note"]
        ):
            out.append(r)
    return out
