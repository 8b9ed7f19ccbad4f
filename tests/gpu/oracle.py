"""An independent oracle for the GPU tests: what strict deterministic mode raises, op by op.

It shares no code with opscan. Two forms:

* `layer_oracle(module, inputs)`: run one layer forward in strict mode; if it
  raises the alert, note the caller and run the forward again with determinism
  off; then run backward in strict mode and note what it raises.
* `model_oracle(model, inputs)`: record every aten op of one forward and
  backward (with cloned inputs), then replay each op alone in strict mode and
  keep those that raise. Anomaly mode stores, on each autograd node, the stack
  that created it; that gives the forward line of each backward op without the
  sequence-number mapping opscan uses.

A site is the innermost frame outside torch and the standard library, the
rule opscan documents.
"""

from __future__ import annotations

import os
import re
import sys
import sysconfig
import traceback
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

ALERT = re.compile(r"^(.+?) does not have a deterministic implementation", re.MULTILINE)
CUBLAS = "because it uses CuBLAS"
CUBLAS_CALLER = "CuBLAS (CUBLAS_WORKSPACE_CONFIG)"

_TORCH = os.path.realpath(os.path.dirname(torch.__file__)) + os.sep
_OPSCAN = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", "opscan")) + os.sep
_SELF = os.path.realpath(__file__)
_STDLIB = tuple(
    os.path.realpath(p) + os.sep for p in {sysconfig.get_paths()["stdlib"], os.path.dirname(os.__file__)}
)


def caller_of(exc: BaseException) -> str | None:
    text = str(exc)
    m = ALERT.search(text)
    if m:
        return m.group(1).strip()
    return CUBLAS_CALLER if CUBLAS in text else None


def _is_user(filename: str) -> bool:
    if filename.startswith("<"):
        return not filename.startswith("<frozen")
    path = os.path.realpath(filename)
    if path.startswith((_TORCH, _OPSCAN)) or path == _SELF:
        return False
    if "site-packages" in path or "dist-packages" in path:
        return True
    return not path.startswith(_STDLIB)


def site_from_frames(frames) -> tuple[str, int] | None:
    """Innermost user frame of (filename, lineno) pairs listed outermost first."""
    for filename, lineno in reversed(list(frames)):
        if _is_user(filename):
            return (filename if filename.startswith("<") else os.path.realpath(filename)), lineno
    return None


_FRAME = re.compile(r'File "(?P<file>.+?)", line (?P<line>\d+)')


def site_from_formatted(stack: list[str]) -> tuple[str, int] | None:
    frames = []
    for entry in stack:
        for m in _FRAME.finditer(entry):
            frames.append((m.group("file"), int(m.group("line"))))
    return site_from_frames(frames)


class _Strict:
    def __init__(self, on: bool):
        self.on = on

    def __enter__(self):
        self.saved = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
        torch.use_deterministic_algorithms(self.on)

    def __exit__(self, *exc):
        torch.use_deterministic_algorithms(self.saved[0], warn_only=self.saved[1])


def _loss(output):
    flat = []

    def visit(v):
        if isinstance(v, torch.Tensor):
            flat.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                visit(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                visit(x)

    visit(output)
    parts = [t.sum() for t in flat if t.is_floating_point() and t.requires_grad]
    return sum(parts[1:], parts[0]) if parts else None


def _call(model, inputs):
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def layer_oracle(module, inputs) -> set[tuple[str, str]]:
    """{(phase, caller)} that strict mode raises for one layer's forward and backward."""
    found = set()
    with _Strict(True):
        try:
            out = _call(module, inputs)
        except RuntimeError as exc:
            caller = caller_of(exc)
            if caller is None:
                raise
            found.add(("forward", caller))
            with _Strict(False):
                out = _call(module, inputs)
        loss = _loss(out)
        if loss is not None:
            try:
                loss.backward()
            except RuntimeError as exc:
                caller = caller_of(exc)
                if caller is None:
                    raise
                found.add(("backward", caller))
    return found


class _Recorder(TorchDispatchMode):
    """Record each op with cloned inputs and where it came from; keep strict mode going past alerts."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        node = torch._C._current_autograd_node()
        if node is None:
            phase = "forward"
            site = site_from_frames((f.filename, f.lineno) for f in traceback.extract_stack())
        else:
            phase = "backward"
            site = site_from_formatted(node.metadata.get("traceback_", []))
        clone = lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v
        self.ops.append((func, tree_map(clone, args), tree_map(clone, kwargs), phase, site))
        try:
            return func(*args, **kwargs)
        except RuntimeError as exc:
            if caller_of(exc) is None:
                raise
            with _Strict(False):
                return func(*args, **kwargs)


def model_oracle(model, inputs) -> tuple[set[tuple], dict]:
    """{(op, caller, phase, file, line)} of every op that raises when replayed alone in strict mode."""
    recorder = _Recorder()
    with _Strict(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.autograd.set_detect_anomaly(True, check_nan=False)
        try:
            with recorder:
                loss = _loss(_call(model, inputs))
                if loss is not None:
                    loss.backward()
        finally:
            torch.autograd.set_detect_anomaly(False)
    found, stats = set(), {"ops": len(recorder.ops), "replay_errors": 0}
    with _Strict(True), torch.no_grad():
        for func, args, kwargs, phase, site in recorder.ops:
            try:
                func(*args, **kwargs)
            except RuntimeError as exc:
                caller = caller_of(exc)
                if caller is None:
                    stats["replay_errors"] += 1
                    continue
                file, line = site if site else (None, None)
                found.add((str(func), caller, phase, file, line))
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return found, stats


def scan_keys(findings) -> set[tuple]:
    """The same key for opscan's findings, with paths made absolute."""
    keys = set()
    for f in findings:
        file = os.path.realpath(f.file) if f.file else None
        keys.add((f.op, f.caller, f.phase, file, f.line))
    return keys


if __name__ == "__main__":  # pragma: no cover - a manual check
    print(layer_oracle(torch.nn.MaxUnpool1d(2), (torch.randn(1, 1, 4), torch.arange(0, 8, 2).view(1, 1, 4))), file=sys.stderr)
