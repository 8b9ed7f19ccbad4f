"""Save, set and restore the torch global state a scan touches.

`ProcessState` is what a run of the user's code may change in the process and
every torch-side command puts back: torch's flags, its default dtype, device and
modes (grad, anomaly detection, threads, float32 precision), the environment
variables and the working directory.

`StrictMode` turns on `torch.use_deterministic_algorithms(True)` (strict, not
warn_only) and, while it is on, keeps user code from turning it off: calls to
`torch.use_deterministic_algorithms` and `torch.set_deterministic_debug_mode`
are recorded and ignored, since a scan that obeyed them would miss ops. On
exit every flag it saved is put back, even when the traced code raised.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields

import torch


@dataclass(frozen=True)
class TorchFlags:
    """The global flags that decide determinism, as they stand."""

    deterministic: bool
    warn_only: bool
    fill_uninitialized_memory: bool | None
    cudnn_enabled: bool
    cudnn_benchmark: bool
    cudnn_deterministic: bool

    @classmethod
    def capture(cls) -> TorchFlags:
        return cls(
            deterministic=torch._C._get_deterministic_algorithms(),
            warn_only=torch._C._get_deterministic_algorithms_warn_only(),
            fill_uninitialized_memory=_get_fill(),
            cudnn_enabled=torch.backends.cudnn.enabled,
            cudnn_benchmark=torch.backends.cudnn.benchmark,
            cudnn_deterministic=torch.backends.cudnn.deterministic,
        )

    def restore(self) -> None:
        torch._C._set_deterministic_algorithms(self.deterministic, warn_only=self.warn_only)
        if self.fill_uninitialized_memory is not None:
            torch._C._set_deterministic_fill_uninitialized_memory(self.fill_uninitialized_memory)
        torch.backends.cudnn.enabled = self.cudnn_enabled
        torch.backends.cudnn.benchmark = self.cudnn_benchmark
        torch.backends.cudnn.deterministic = self.cudnn_deterministic

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# The objects with a float32 `fp32_precision` setting (torch 2.9 on), by path under torch.backends.
_FP32_SETTINGS = ("", "cuda.matmul", "cudnn", "cudnn.conv", "cudnn.rnn", "mkldnn", "mkldnn.matmul", "mkldnn.conv", "mkldnn.rnn")


def _fp32_settings() -> list:
    out = []
    for path in _FP32_SETTINGS:
        owner = torch.backends
        for part in path.split(".") if path else ():
            owner = getattr(owner, part, None)
        if owner is not None and hasattr(owner, "fp32_precision"):
            out.append(owner)
    return out


def _read(getter):
    """getter(), or None where torch refuses to say (it raises once its two TF32 APIs were mixed)."""
    try:
        return getter()
    except (RuntimeError, AttributeError):
        return None


class TorchModes:
    """torch's process-wide modes a script may set at its top level, as they stand.

    Grad mode, anomaly detection, the default device (`torch.set_default_device`),
    the intra-op thread count, and float32 matmul and convolution precision
    (TF32), and inductor's `deterministic` flag, which `torch.use_deterministic_algorithms`
    also sets (torch 2.11 and 2.14: `import torch._inductor.config as inductor_config;
    inductor_config.deterministic = mode`). TF32 has two APIs: the legacy one (`set_float32_matmul_precision`,
    `cudnn.allow_tf32`) and, from torch 2.9, a `fp32_precision` per backend. A
    setter of either changes what the other reads, and the legacy getters raise
    once the newer API was used; so `restore` puts the legacy values back first,
    then every `fp32_precision` (checked on 2.11 and 2.14 in tests/trace/test_state.py).
    """

    def __init__(self, grad: bool, anomaly: tuple, device_context, threads: int, matmul, cudnn_tf32, fp32: tuple, inductor_deterministic: bool = False):
        self.grad, self.anomaly, self.device_context, self.threads = grad, anomaly, device_context, threads
        self.matmul, self.cudnn_tf32, self.fp32 = matmul, cudnn_tf32, fp32
        self.inductor_deterministic = inductor_deterministic

    @classmethod
    def capture(cls) -> TorchModes:
        return cls(
            torch.is_grad_enabled(),
            (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
            _device_context(),
            torch.get_num_threads(),
            _read(torch.get_float32_matmul_precision),
            _read(lambda: torch.backends.cudnn.allow_tf32),
            tuple(owner.fp32_precision for owner in _fp32_settings()),
            _inductor_deterministic(),
        )

    def restore(self) -> None:
        if torch.is_grad_enabled() != self.grad:
            torch.set_grad_enabled(self.grad)
        if (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()) != self.anomaly:
            torch.autograd.set_detect_anomaly(*self.anomaly)
        if _device_context() is not self.device_context:
            # It leaves the context the run entered; with None, no default device is set, as before the run.
            torch.set_default_device(self.device_context.device if self.device_context is not None else None)
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        if self.matmul is not None and _read(torch.get_float32_matmul_precision) != self.matmul:
            torch.set_float32_matmul_precision(self.matmul)
        if self.cudnn_tf32 is not None and _read(lambda: torch.backends.cudnn.allow_tf32) != self.cudnn_tf32:
            torch.backends.cudnn.allow_tf32 = self.cudnn_tf32
        for owner, value in zip(_fp32_settings(), self.fp32):
            if owner.fp32_precision != value:
                owner.fp32_precision = value
        config = sys.modules.get(_INDUCTOR_CONFIG)
        if getattr(config, "deterministic", self.inductor_deterministic) != self.inductor_deterministic:
            config.deterministic = self.inductor_deterministic


_INDUCTOR_CONFIG = "torch._inductor.config"


def _inductor_deterministic() -> bool:
    """inductor's `deterministic` flag. Not imported to read it (a run that never loads inductor
    leaves it alone): unloaded, it is what the module would read on import."""
    config = sys.modules.get(_INDUCTOR_CONFIG)
    if config is not None and hasattr(config, "deterministic"):
        return config.deterministic
    return os.environ.get("TORCHINDUCTOR_DETERMINISTIC") == "1"


def _device_context():
    """The context `torch.set_default_device` entered, or None. Read, not asked of
    `torch.get_default_device()`, which makes a tensor on that device to name it."""
    return getattr(getattr(torch, "_GLOBAL_DEVICE_CONTEXT", None), "device_context", None)


class ProcessState:
    """Context manager: the process state a run may change, captured on entry and put back on exit.

    torch's determinism flags (TorchFlags), its default dtype and its modes
    (TorchModes), every environment variable (those the run set are removed,
    those it changed or removed get their value back) and the working directory
    (a script may os.chdir).
    """

    def __init__(self, flags: TorchFlags, dtype, environ: dict[str, str], cwd: str | None, modes: TorchModes | None = None):
        self.flags, self.dtype, self.environ, self.cwd = flags, dtype, environ, cwd
        self.modes = modes

    @classmethod
    def capture(cls) -> ProcessState:
        try:
            cwd = os.getcwd()
        except OSError:  # the folder was removed under the process: nothing to go back to
            cwd = None
        return cls(TorchFlags.capture(), torch.get_default_dtype(), dict(os.environ), cwd, TorchModes.capture())

    def restore(self) -> None:
        self.flags.restore()
        torch.set_default_dtype(self.dtype)
        if self.modes is not None:
            self.modes.restore()
        restore_environ(self.environ)
        if self.cwd is not None:
            try:
                os.chdir(self.cwd)
            except OSError:  # removed since: stay where the run left the process
                pass

    def __enter__(self) -> ProcessState:
        return self

    def __exit__(self, *exc_info) -> None:
        self.restore()


def restore_environ(saved: dict[str, str]) -> None:
    """Make os.environ `saved` again, touching only the variables that differ (each change calls putenv)."""
    for key in [k for k in os.environ if k not in saved]:
        del os.environ[key]
    for key, value in saved.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


def _get_fill() -> bool | None:
    getter = getattr(torch._C, "_get_deterministic_fill_uninitialized_memory", None)
    return getter() if getter is not None else None


def _user_site(depth: int) -> tuple[str | None, int | None]:
    """(path as shown, line) of the innermost user frame above the caller's `depth`-th frame."""
    from opscan.trace.sourcemap import display_path, user_frame

    frame = user_frame(sys._getframe(depth + 1))
    return (display_path(frame.f_code.co_filename), frame.f_lineno) if frame else (None, None)


def _call_site(depth: int) -> str:
    path, line = _user_site(depth + 1)
    return f"{path}:{line}" if path else "?"


class StrictMode:
    """Context manager: strict deterministic mode, pinned against user code, restored on exit.

    `on_override(message)` hears about each ignored attempt to change the mode.
    """

    def __init__(self, *, pin: bool = True, on_override: Callable[[str], None] | None = None):
        self.pin = pin
        self.on_override = on_override or (lambda message: None)
        self.saved: TorchFlags | None = None
        self._patched: list[tuple[object, str, object]] = []

    def __enter__(self) -> StrictMode:
        self.saved = TorchFlags.capture()
        torch._C._set_deterministic_algorithms(True, warn_only=False)
        if self.pin:
            self._patch(torch, "use_deterministic_algorithms", self._use_deterministic_algorithms)
            self._patch(torch, "set_deterministic_debug_mode", self._set_deterministic_debug_mode)
        return self

    def __exit__(self, *exc_info) -> None:
        while self._patched:
            owner, name, original = self._patched.pop()
            setattr(owner, name, original)
        if self.saved is not None:
            self.saved.restore()

    def _patch(self, owner, name: str, replacement) -> None:
        self._patched.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    def _use_deterministic_algorithms(self, mode, *, warn_only=False):
        if not (mode is True and not warn_only):
            self.on_override(
                f"{_call_site(1)} calls torch.use_deterministic_algorithms({mode!r}, warn_only={warn_only!r}); "
                "the scan kept strict mode on"
            )

    def _set_deterministic_debug_mode(self, debug_mode):
        if debug_mode not in ("error", 2):
            self.on_override(
                f"{_call_site(1)} calls torch.set_deterministic_debug_mode({debug_mode!r}); the scan kept strict mode on"
            )


class BenchmarkWatch:
    """Context manager: remember where `torch.backends.cudnn.benchmark` was last set to True.

    `torch.backends.cudnn` is a module object whose class holds `benchmark` as
    a data descriptor; the watch wraps that descriptor's setter for the
    duration, so the assignment still happens and its user line is recorded.
    `site` is "file:line" of the last True assignment (None if it was not
    seen or was set back to False). Where the descriptor is not found (another
    torch layout), the watch records nothing and changes nothing.
    """

    def __init__(self):
        self.site: tuple[str | None, int | None] | None = None
        self._owner = None
        self._original = None

    def __enter__(self) -> BenchmarkWatch:
        owner = type(torch.backends.cudnn)
        original = owner.__dict__.get("benchmark")
        if original is None or not hasattr(original, "__set__") or not hasattr(original, "__get__"):
            return self
        watch = self

        class _Watched:
            def __get__(self, obj, objtype=None):
                return original.__get__(obj, objtype)

            def __set__(self, obj, value):
                original.__set__(obj, value)
                watch.site = _user_site(1) if value else None

        self._owner, self._original = owner, original
        setattr(owner, "benchmark", _Watched())
        return self

    def __exit__(self, *exc_info) -> None:
        if self._owner is not None:
            setattr(self._owner, "benchmark", self._original)
            self._owner = self._original = None


class RngState:
    """The random generators' states: torch's (CPU and every initialised CUDA device), `random`'s and numpy's."""

    def __init__(self, cpu, cuda, python, numpy):
        self.cpu, self.cuda, self.python, self.numpy = cpu, cuda, python, numpy

    @classmethod
    def capture(cls) -> RngState:
        import random

        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
        numpy = sys.modules.get("numpy")
        return cls(torch.get_rng_state(), cuda, random.getstate(), numpy.random.get_state() if numpy else None)

    def restore(self) -> None:
        import random

        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)
        random.setstate(self.python)
        numpy = sys.modules.get("numpy")
        if numpy is not None and self.numpy is not None:
            numpy.random.set_state(self.numpy)

    @staticmethod
    def seed_all(seed: int) -> None:
        """Seed torch (every device), `random` and numpy (if installed), as a training script would."""
        import random

        torch.manual_seed(seed)
        random.seed(seed)
        try:
            import numpy
        except ImportError:
            return
        numpy.random.seed(seed % 2**32)
