"""The tracer behind `opscan scan`, and its Python API.

    import opscan

    with opscan.trace() as t:
        loss = model(x).sum()
        loss.backward()
    for f in t.findings:          # OpFinding: op, caller, phase, module, file, line, count, remedy, ...
        print(f.op, f.file, f.line, f.remedy.text)

Importing this package does not import torch; `trace()` and `check()` do.
"""

from __future__ import annotations

__all__ = ["OpFinding", "Trace", "check", "trace"]

NEEDS_TORCH = "opscan.trace needs torch; install opscan[trace]"


def _import_tracer():
    try:
        from opscan.trace import tracer
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "torch":
            raise ModuleNotFoundError(NEEDS_TORCH, name="torch") from None
        raise
    return tracer


def trace(target: str | None = None, *, roots=(), rules=None, pin: bool = True, record_backward_sites: bool = True):
    """A context manager that runs its body in strict deterministic mode and records every op that raises.

    Each offending op is caught, recorded with its source line, module and
    phase, rerun with determinism off, and the body goes on. After the block,
    `.findings` lists them (OpFinding) and every torch flag is as before.
    See `opscan.trace.tracer.Trace` for the arguments.
    """
    return _import_tracer().Trace(target, roots=roots, rules=rules, pin=pin, record_backward_sites=record_backward_sites)


def check(model, inputs, loss_fn=None, *, device=None, rules=None):
    """Run one forward and backward of `model` on `inputs` under `trace()`; return its OpFindings.

    `inputs` is a tensor, a tuple of positional arguments or a dict of keyword
    arguments. `loss_fn(output)` makes the scalar to backpropagate; by default
    the sum of every floating-point output. With `device`, model and inputs are
    moved there first; otherwise they stay where they are. The random
    generators, torch's flags and modes are as before when it returns, so a
    test that checks its model draws the same numbers afterwards.
    """
    _import_tracer()
    from opscan.trace.state import ProcessState, RngState
    from opscan.trace.targets import Workload, run_workload

    workload = Workload(name=None, model=model, inputs=inputs, loss_fn=loss_fn)
    if device is not None:
        workload = workload.to(device)
    # The forward pass draws (dropout) and the model may set modes: as the commands' runner does.
    saved, generators = ProcessState.capture(), RngState.capture()
    try:
        with trace(roots=(model,), rules=rules) as t:
            run_workload(workload)
    finally:
        saved.restore()
        generators.restore()
    return t.findings


def __getattr__(name):
    if name in ("Trace", "OpFinding"):
        return getattr(_import_tracer(), name)
    raise AttributeError(f"module 'opscan.trace' has no attribute {name!r}")


# `opscan.trace` is both this package and the API function: once the package is
# imported, `opscan.trace` names the module, so the module itself must be callable.
import sys as _sys
import types as _types


class _CallableModule(_types.ModuleType):
    def __call__(self, *args, **kwargs):
        return trace(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
