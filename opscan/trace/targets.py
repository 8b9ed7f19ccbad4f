"""What a scan runs: a model built by a callable or a model zoo, or an unmodified training script.

Targets:
    path/to/file.py:callable     the callable returns (model, inputs) or (model, inputs, loss_fn)
    pkg.module:callable          the same, imported from a module
    torchvision:NAME             torchvision.models.get_model(NAME, weights=None)
    timm:NAME                    timm.create_model(NAME, pretrained=False)
    hf:MODEL_TYPE[,key=value]    transformers AutoModel.from_config(AutoConfig.for_model(...)), random init
    hf:path/to/config            the same from a local config.json or folder; nothing is downloaded

`inputs` is a tensor (model(inputs)), a tuple or list (model(*inputs)) or a dict
(model(**inputs)). `loss_fn(output)` returns the scalar to backpropagate; the
default is the sum of every floating-point output that requires grad.

Errors: `TargetError` is bad input (clear message, no traceback);
`UserCodeError` wraps an exception raised by the user's own code, whose
traceback the user needs to see.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import runpy
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn


# The opscan package's folder (this file is opscan/trace/targets.py): its frames are not the user's.
OPSCAN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Defined where no torch is imported, so that a command can refuse a malformed target before importing torch.
from opscan.trace.spec import ZOOS, TargetError, module_problem, names_a_file  # noqa: E402,F401


class UserCodeError(Exception):
    """The user's code raised; `original` is its exception, `during` says what opscan was doing."""

    def __init__(self, original: BaseException, during: str):
        super().__init__(f"{during}: {type(original).__name__}: {original}")
        self.original = original
        self.during = during

    def format_traceback(self) -> str:
        return format_user_traceback(self.original)


@dataclass
class Workload:
    """A model, its example inputs and an optional loss function, ready for one forward and backward."""

    name: str | None
    model: nn.Module
    inputs: Any
    loss_fn: Callable | None = None

    def to(self, device) -> Workload:
        return replace(self, model=self.model.to(device), inputs=_map_tensors(self.inputs, lambda t: t.to(device)))


def _map_tensors(value, fn):
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, dict):
        return type(value)((k, _map_tensors(v, fn)) for k, v in value.items())
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple
        return type(value)(*(_map_tensors(v, fn) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(v, fn) for v in value)
    return value


def _tensors(value, out=None, depth=0):
    """Every tensor in a nested output: tuples, lists, dicts, dataclasses (e.g. HF ModelOutput)."""
    out = [] if out is None else out
    if depth > 20:
        return out
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _tensors(item, out, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _tensors(item, out, depth + 1)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            _tensors(getattr(value, name, None), out, depth + 1)
    return out


def default_loss(output):
    """The sum of every floating-point output tensor that requires grad, or None if there is none."""
    parts = [t.sum() for t in _tensors(output) if t.is_floating_point() and t.requires_grad]
    if not parts:
        return None
    loss = parts[0]
    for part in parts[1:]:
        loss = loss + part.to(loss.dtype)
    return loss


def call_model(model, inputs):
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def run_workload(workload: Workload) -> list[str]:
    """One forward and backward. Returns notices (e.g. that there was nothing to backpropagate)."""
    output = call_model(workload.model, workload.inputs)
    loss = workload.loss_fn(output) if workload.loss_fn is not None else default_loss(output)
    if loss is None:
        return ["no floating-point output requires grad, so backward was not run"]
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise TargetError(f"the loss function must return a one-element tensor, got {_describe(loss)}")
    if not loss.requires_grad:
        return ["the loss does not require grad, so backward was not run"]
    loss.backward()
    return []


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return type(value).__name__


# ---------------------------------------------------------------- loading


def load_target(spec: str, *, input_shape: tuple[int, ...] | None = None) -> Workload:
    """Build the model and inputs a target names, on the CPU."""
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in ZOOS:
        if not rest:
            raise TargetError(f"{spec!r}: name a model after '{prefix}:'")
        return {"torchvision": _torchvision, "timm": _timm, "hf": _hf}[prefix](spec, rest, input_shape)
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise TargetError(
            f"{spec!r} is not a target; use FILE.py:CALLABLE, MODULE:CALLABLE, torchvision:NAME, timm:NAME or hf:NAME "
            "(or --run SCRIPT to run a training script)"
        )
    if names_a_file(where):
        module = _import_file(where)
    else:
        problem = module_problem(spec, where)  # as parse_target says it, for a caller that skipped it
        if problem:
            raise TargetError(problem)
        module = _import_module(where)
    factory = _resolve(module, name, where)
    try:
        result = factory()
    except Exception as exc:
        raise UserCodeError(exc, f"{spec} raised") from exc
    return _workload_from(spec, result)


def _import_file(path: str):
    from opscan._read import file_problem

    problem = file_problem(path, "a Python file")  # a directory was "no such file"
    if problem:
        raise TargetError(problem)
    name = "_opscan_target_" + "".join(c if c.isalnum() else "_" for c in os.path.abspath(path))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetError(f"{path}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = os.path.dirname(os.path.abspath(path))
    added = folder not in sys.path
    if added:  # so the file can import its neighbours; kept for imports done later, at run time
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise UserCodeError(exc, f"importing {path} raised") from exc
    return module


def _import_module(name: str):
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            raise TargetError(f"cannot import {name!r}: no module named {exc.name!r}") from None
        raise UserCodeError(exc, f"importing {name} raised") from exc
    except Exception as exc:
        raise UserCodeError(exc, f"importing {name} raised") from exc


def _resolve(module, dotted: str, where: str):
    obj = module
    for part in dotted.split("."):
        if not part.isidentifier():
            raise TargetError(f"{dotted!r} is not a Python name")
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(f"{where} has no attribute {dotted!r}") from None
    if not callable(obj):
        raise TargetError(f"{where}:{dotted} is not callable")
    import inspect

    try:
        needs = inspect.signature(obj)
        needs.bind()
    except ValueError:  # no signature to read (a builtin): the call will tell
        pass
    except TypeError:  # called, it raised a TypeError that named no line of the user's, said twice as "raised"
        raise TargetError(
            f"{where}:{dotted}{needs} takes arguments; a target callable is called with none "
            "and returns (model, inputs) or (model, inputs, loss_fn)"
        ) from None
    return obj


def _workload_from(spec: str, result) -> Workload:
    if not isinstance(result, (tuple, list)) or len(result) not in (2, 3):
        raise TargetError(f"{spec} returned {_describe(result)}; expected (model, inputs) or (model, inputs, loss_fn)")
    model, inputs = result[0], result[1]
    loss_fn = result[2] if len(result) == 3 else None
    if not isinstance(model, nn.Module):
        raise TargetError(f"{spec} returned {type(model).__name__} as the model; expected an nn.Module")
    if loss_fn is not None and not callable(loss_fn):
        raise TargetError(f"{spec} returned {type(loss_fn).__name__} as the loss function; expected a callable")
    return Workload(spec, model, inputs, loss_fn)


# ---------------------------------------------------------------- model zoos


def _require(package: str, spec: str):
    try:
        return importlib.import_module(package)
    except ImportError:
        raise TargetError(f"{spec}: {package} is not installed (pip install {package})") from None


def _torchvision(spec: str, name: str, input_shape):
    _require("torchvision", spec)
    from torchvision import models

    def listed(submodule) -> bool:
        try:
            return name in models.list_models(module=getattr(models, submodule))
        except (AttributeError, TypeError):
            return False

    for submodule, why in (
        ("detection", "detection models need targets"),
        ("optical_flow", "optical-flow models take two frames"),
        ("quantization", "quantized models have no backward"),
    ):
        if listed(submodule):
            raise TargetError(f"{spec}: {why}; wrap it in a FILE.py:CALLABLE target that builds inputs and a loss")
    try:
        builder = models.get_model_builder(name)
    except ValueError:
        raise TargetError(f"{spec}: torchvision has no model {name!r} (see torchvision.models.list_models())") from None
    model = builder(**torchvision_random_init(builder))
    if input_shape is None:
        if listed("video"):
            input_shape = (2, 3, 16, 112, 112)
        elif name == "inception_v3":
            input_shape = (2, 3, 299, 299)
        else:
            input_shape = (2, 3, 224, 224)
    return Workload(spec, model.train(), torch.randn(*input_shape))


def torchvision_random_init(builder) -> dict:
    """Builder arguments for random weights: also no pretrained backbone, which would be downloaded."""
    import inspect

    kwargs = {"weights": None}
    if "weights_backbone" in inspect.signature(builder).parameters:
        kwargs["weights_backbone"] = None
    return kwargs


def _timm(spec: str, name: str, input_shape):
    timm = _require("timm", spec)
    try:
        model = timm.create_model(name, pretrained=False)
    except RuntimeError as exc:
        raise TargetError(f"{spec}: {exc}") from None
    if input_shape is None:
        cfg = getattr(model, "pretrained_cfg", None) or getattr(model, "default_cfg", None) or {}
        input_shape = (2, *cfg.get("input_size", (3, 224, 224)))
    return Workload(spec, model.train(), torch.randn(*input_shape))


def _parse_value(text: str):
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _hf(spec: str, rest: str, input_shape):
    transformers = _require("transformers", spec)
    name, *items = rest.split(",")
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise TargetError(f"{spec}: {item!r} is not KEY=VALUE")
        overrides[key.strip()] = _parse_value(value.strip())
    try:
        if os.path.isdir(name) or name.endswith(".json"):
            config = transformers.AutoConfig.from_pretrained(name, local_files_only=True, **overrides)
        else:
            config = transformers.AutoConfig.for_model(name, **overrides)
    except (ValueError, OSError, TypeError) as exc:
        raise TargetError(f"{spec}: {exc}") from None
    try:
        model = transformers.AutoModel.from_config(config)
    except (ValueError, TypeError) as exc:
        raise TargetError(f"{spec}: {exc}") from None
    main = getattr(model, "main_input_name", "input_ids")
    if main == "input_ids":
        shape = input_shape or (2, 16)
        ids = torch.randint(0, int(getattr(config, "vocab_size", 1000)), shape)
        inputs = {"input_ids": ids}
        if getattr(config, "is_encoder_decoder", False):
            inputs["decoder_input_ids"] = ids.clone()
    elif main == "pixel_values":
        size = getattr(config, "image_size", 224)
        size = size if isinstance(size, (tuple, list)) else (size, size)
        shape = input_shape or (2, getattr(config, "num_channels", 3), *size)
        inputs = {"pixel_values": torch.randn(*shape)}
    elif main == "input_values":
        inputs = {"input_values": torch.randn(*(input_shape or (2, 16000)))}
    else:
        raise TargetError(f"{spec}: opscan cannot make inputs named {main!r}; wrap it in a FILE.py:CALLABLE target")
    return Workload(spec, model.train(), inputs)


# ---------------------------------------------------------------- scripts


@contextlib.contextmanager
def stdout_to_stderr():
    """Send the script's stdout, Python's and the file descriptor's, to stderr."""
    sys.stdout.flush()
    saved = fd = None
    try:
        fd, err = sys.stdout.fileno(), sys.stderr.fileno()
        saved = os.dup(fd)
        os.dup2(err, fd)
    except (AttributeError, OSError, ValueError):  # a captured stream without a descriptor
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, fd)
            os.close(saved)


# ---------------------------------------------------------------- tracebacks


def format_user_traceback(exc: BaseException) -> str:
    """The exception's traceback without opscan's and runpy's frames: what the user's code did."""
    hidden = (OPSCAN_DIR + os.sep, os.path.abspath(runpy.__file__))
    te = traceback.TracebackException.from_exception(exc)
    for part in _chain(te):
        kept = [f for f in part.stack if not os.path.abspath(f.filename).startswith(hidden) and "<frozen" not in f.filename]
        # No frame of the user's (a file that does not parse or cannot be read, failing inside the
        # import machinery): no stack at all; the exception's own lines name the file and line.
        part.stack = traceback.StackSummary.from_list(kept)
    return "".join(te.format())


def _chain(te):
    seen = set()
    while te is not None and id(te) not in seen:
        seen.add(id(te))
        yield te
        te = te.__cause__ or (None if te.__suppress_context__ else te.__context__)
