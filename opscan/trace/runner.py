"""Load a target, put it on a device, run it for some steps under the given modes, and put torch back.

Every torch-side command goes through `run()`: `scan` with the catching
mode, `record` with the recording mode, `bench` with none (it times the
steps itself through `on_step`). A target is parsed first, without torch
(`parse_target`), so that a malformed one is refused before anything is
imported or printed.

    target = parse_target("torchvision:resnet18")
    outcome = run(target, device="cuda", steps=2, train=True, modes=lambda model: [Trace(roots=(model,))])
    outcome.problem   # a Problem if the target would not load or its code raised, else None

A failure of opscan's own code inside the run (a mode's set-up, a step
callback) is said to be opscan's, with its whole traceback, never the target's.

Whatever happens, the determinism and cuDNN flags, the default dtype, the
environment variables, the working directory, the RNG states, `sys.argv` and
`sys.path` are as before when `run()` returns (`Outcome.environ` keeps the
environment the target trained with).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from opscan.findings import Problem
from opscan.trace.spec import Target, TargetError, parse_target, script_target, seed_problem  # noqa: F401 - re-exported

def resolve_device(requested: str, also: str = "") -> str:
    """'auto' -> cuda if there is a GPU, else cpu; otherwise check that the device exists.

    `also` names what else the caller takes, for the message of a name that is no device.
    """
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(requested)
    except RuntimeError:
        raise TargetError(f"{requested!r} is not a device; use cuda, cuda:N, cpu or auto{also}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise TargetError(f"--device {requested} asked for, but no CUDA GPU is available")
    return str(device)


@dataclass
class Outcome:
    """How a run went. `steps` counts training steps (optimizer steps for a script)."""

    target: Target
    steps: int = 0
    stopped: bool = False  # opscan ended a script at its step limit
    notices: list[str] = field(default_factory=list)
    problem: Problem | None = None
    flags: object = None  # TorchFlags as they stood at the first step (or the end, with no step)
    environ: dict | None = None  # os.environ then: run() puts back the one from before
    benchmark_site: tuple | None = None  # (path, line) where cudnn.benchmark was last set to True, if seen


class _Stop(BaseException):
    """Raised from the optimizer step hook to end a script at its step limit.

    A BaseException, so that a script's `except Exception` does not swallow it.
    """


class OpscanFailure(BaseException):
    """opscan's own code (a mode, a step callback) raised while the target ran: opscan's failure, not the target's.

    A BaseException, like `_Stop`: it passes a script's `except Exception` and the
    runner's handlers of the target's own errors.
    """

    def __init__(self, original: BaseException, during: str):
        super().__init__(f"{during}: {type(original).__name__}: {original}")
        self.original = original
        self.during = during


def _ours(during: str, fn: Callable, *args):
    """Call opscan's own `fn` from inside the run: what it raises becomes an `OpscanFailure`, never the target's error."""
    try:
        return fn(*args)
    except (_Stop, OpscanFailure):
        raise
    except Exception as exc:
        if type(exc).__name__ == "AcceleratorError" or "CUDA error" in str(exc):
            # A kernel's failure is reported at the next synchronisation, which may be opscan's: maybe the
            # target's. torch raises AcceleratorError for it (2.8 on); the text is for older releases.
            raise
        raise OpscanFailure(exc, during) from exc


def _internal_problem(exc: OpscanFailure, target: Target) -> Problem:
    """The Problem for opscan's own failure: named as such, with the whole traceback (opscan's frames are the point)."""
    import traceback

    from opscan.trace.recordwriter import WriterError

    original = exc.original
    if isinstance(original, WriterError):  # the record's file or pipe, not opscan's code
        what = f"cannot write {original.filename}: {original.strerror}" if original.filename else str(original)
        return Problem(f"{what} {exc.during}; the run was stopped there", target.name)
    if isinstance(original, MemoryError) or type(original).__name__ == "OutOfMemoryError":
        # Not a bug: opscan's own work (fingerprint buffers, the probe's copies) needs memory beside the target's.
        return Problem(
            f"opscan ran out of memory {exc.during} while running {target.name}: its own work needs memory beside the "
            f"target's; free some (a smaller batch, fewer other processes on the device) and run it again: "
            f"{type(original).__name__}: {original}",
            target.name,
        )
    return Problem(
        f"opscan failed {exc.during} while running {target.name} (a bug in opscan, not in the target; please report it): "
        f"{type(original).__name__}: {original}",
        target.name,
        "".join(traceback.format_exception(type(original), original, original.__traceback__)),
    )


def _enter_modes(stack: contextlib.ExitStack, modes: ModeFactory, model) -> None:
    """Enter the modes `modes(model)` gives; a failure there is opscan's."""
    for mode in _ours("setting up its modes", modes, model):
        _ours("entering its modes", stack.enter_context, mode)


ModeFactory = Callable[[object], Iterable[contextlib.AbstractContextManager]]


def run(
    target: Target,
    *,
    device: str,
    steps: int = 1,
    train: bool = False,
    input_shape: tuple[int, ...] | None = None,
    seed: int | None = None,
    modes: ModeFactory = lambda model: (),
    on_step: Callable[[int], None] | None = None,
    workload=None,
) -> Outcome:
    """Run `target` for `steps` steps on `device` under the context managers `modes(model)` returns.

    A model target runs forward and backward `steps` times; with `train`, each
    step also takes an SGD step (so a step is an optimizer step, as in a
    script). A script runs until it ends or has taken `steps` optimizer steps.
    `modes` gets the model (None for a script) once it is on the device.
    `on_step(i)` is called after step i (0-based) has finished. With `seed`,
    torch, `random` and numpy are seeded before the target is built.
    `workload`, a `targets.Workload` already built (a test's model and
    inputs), is run instead of loading `target`, which then only names it.
    """
    import torch

    from opscan.trace import targets as loaders
    from opscan.trace.state import BenchmarkWatch, ProcessState, RngState, TorchFlags

    if seed is not None and seed_problem(seed):
        raise ValueError(f"seed {seed_problem(seed)}")
    outcome = Outcome(target)
    saved_state, saved_rng = ProcessState.capture(), RngState.capture()
    try:
        with loaders.stdout_to_stderr(), BenchmarkWatch() as watch:
            if seed is not None:
                RngState.seed_all(seed)
            def first_step() -> None:
                # What training runs with: the flags, and who set the autotuner, as the first step starts.
                if outcome.flags is None:
                    outcome.flags = TorchFlags.capture()
                    outcome.environ = dict(os.environ)
                    outcome.benchmark_site = watch.site

            try:
                if target.kind == "script":
                    _run_script(target, steps, modes, on_step, outcome, first_step)
                else:
                    _run_model(target, device, steps, train, input_shape, modes, on_step, outcome, first_step, workload)
            finally:
                first_step()
    except OpscanFailure as exc:
        outcome.problem = _internal_problem(exc, target)
    except TargetError as exc:
        outcome.problem = Problem(str(exc), target.name)
    except loaders.UserCodeError as exc:
        outcome.problem = Problem(str(exc), target.name, exc.format_traceback())
    except SystemExit as exc:
        # A model target's own sys.exit() (a script's is _run_script's): it ended opscan with the
        # target's status and no word, and the other targets of a scan went with it.
        status, said = exit_status(exc.code)
        outcome.problem = Problem(
            f"{target.name} exited with status {status} (sys.exit) instead of returning{f': {said}' if said else ''}",
            target.name,
            loaders.format_user_traceback(exc),
        )
    except Exception as exc:  # noqa: BLE001 - the model's own error, whatever it is
        outcome.problem = Problem(
            f"{target.name} raised: {type(exc).__name__}: {exc}", target.name, loaders.format_user_traceback(exc)
        )
    finally:
        saved_state.restore()
        saved_rng.restore()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
    return outcome


def exit_status(code: object) -> tuple[int, str]:
    """(the status, what is printed) of a process ended by SystemExit(code), as Python's own exit gives them.

    None is 0; an int is itself; anything else (sys.exit("bye")) is printed on stderr and exits 1, which
    was reported as "exited with status bye".
    """
    if code is None:
        return 0, ""
    if isinstance(code, int):
        return int(code), ""
    return 1, str(code)


def _run_model(target, device, steps, train, input_shape, modes, on_step, outcome, first_step, workload=None) -> None:
    import torch

    from opscan.trace import targets as loaders

    if input_shape is not None and target.kind != "zoo":
        raise TargetError(
            f"{target.name}: --input-shape applies to torchvision:, timm: and hf: targets only; "
            "a FILE.py:CALLABLE target builds its own inputs"
        )
    if workload is None:
        workload = loaders.load_target(target.spec, input_shape=input_shape)
    workload = workload.to(device)
    if train and not any(True for _ in workload.model.parameters()):
        raise TargetError(f"{target.name}: the model has no parameters to train, so there is no optimizer step to take")
    optimizer = torch.optim.SGD(workload.model.parameters(), lr=0.01, momentum=0.9) if train else None
    with contextlib.ExitStack() as stack:
        _enter_modes(stack, modes, workload.model)
        for step in range(steps):
            first_step()
            if optimizer is not None:
                optimizer.zero_grad(set_to_none=True)
            for notice in loaders.run_workload(workload):
                if notice not in outcome.notices:
                    outcome.notices.append(notice)
            if optimizer is not None:
                optimizer.step()
            outcome.steps = step + 1
            if on_step is not None:
                _ours(f"at the end of step {step}", on_step, step)


def _run_script(target, steps, modes, on_step, outcome, first_step) -> None:
    import runpy

    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    from opscan.trace import targets as loaders

    from opscan._read import file_problem

    path = target.spec
    problem = file_problem(path, "a Python script")  # a directory was "no such file"
    if problem:
        raise TargetError(problem)

    def before_step(optimizer, args, kwargs):
        first_step()

    def after_step(optimizer, args, kwargs):
        outcome.steps += 1
        if on_step is not None:
            _ours(f"at the end of step {outcome.steps - 1}", on_step, outcome.steps - 1)
        if outcome.steps >= steps:
            raise _Stop()

    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [path, *target.argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    handles = [register_optimizer_step_pre_hook(before_step), register_optimizer_step_post_hook(after_step)]
    try:
        with contextlib.ExitStack() as stack:
            _enter_modes(stack, modes, None)
            runpy.run_path(path, run_name="__main__")
    except _Stop:
        outcome.stopped = True
    except SystemExit as exc:
        status, said = exit_status(exc.code)
        if status != 0:
            raise TargetError(
                f"{path} exited with status {status} after {outcome.steps} optimizer step(s){f': {said}' if said else ''}"
            ) from None
    except Exception as exc:
        raise loaders.UserCodeError(exc, f"{path} raised") from exc
    finally:
        for handle in handles:
            handle.remove()
        sys.argv = saved_argv
        sys.path[:] = saved_path
    if outcome.stopped:
        outcome.notices.append(f"stopped after {outcome.steps} optimizer step(s)")
    else:
        outcome.notices.append(f"the script ended after {outcome.steps} optimizer step(s)")
