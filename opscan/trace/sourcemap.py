"""Take an aten op back to the user's source: the frame, the nn.Module, the phase.

Forward ops are easy: when the op runs, the Python stack holds the user's
frame, and the innermost `forward` frame whose `self` is an nn.Module names
the module. Backward ops run later, on an autograd thread, with no user frame
on the stack. For those we remember, at forward time, where each autograd node
was created: the autograd layer takes a node's sequence number just before it
dispatches the op below it, so when the dispatch mode sees an op and the
thread's sequence counter has moved on, the node(s) just made belong to the
current site. In backward, `torch._C._current_autograd_node()` names the node
that is running, and its `_sequence_nr()` finds the site again.

The per-op cost is one short frame walk, with a cached verdict per code
object, and only for ops that create autograd nodes. No module hooks are
installed (global hooks send every module call down torch's slow path);
modules are named from the scanned roots, or by their parents found through
the garbage collector when a finding needs the name.
"""

from __future__ import annotations

import functools
import gc
import linecache
import os
import sys
import sysconfig
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn
from torch.autograd.function import FunctionCtx

from opscan._launcher import is_launcher
from opscan.trace.sources import in_installed_package

# Both exist from torch 2.1 on; checked in 2.11 and 2.14. Without them backward
# ops are still found, only without their forward line.
_get_sequence_nr = getattr(torch._C._autograd, "_get_sequence_nr", None)
_current_autograd_node = getattr(torch._C, "_current_autograd_node", None)
# -1 outside a backward pass (torch/csrc/autograd/init.cpp; torch/utils/checkpoint.py uses it), in 2.11 and 2.14.
_graph_task_id = getattr(torch._C, "_current_graph_task_id", None)


def in_backward_callback() -> bool:
    """Is an op with no autograd node running inside a backward pass (an engine callback: DDP's finalize_backward)?"""
    return _graph_task_id is not None and _graph_task_id() != -1

PHASE_FORWARD, PHASE_BACKWARD, PHASE_OPTIMIZER = "forward", "backward", "optimizer"

# How far past the user's frame to look for the running module's forward
# (a helper function called from forward puts one frame in between).
_MODULE_LOOKAHEAD = 8


@dataclass(frozen=True)
class ModuleEntry:
    """An nn.Module as the scan names it: dotted path from its root, and class name."""

    path: str
    cls: str

    @property
    def label(self) -> str:
        return self.path or self.cls


class Site(NamedTuple):
    """Where an op came from: a user source line, and the nn.Module whose forward ran it.

    A NamedTuple, not a dataclass: one is made per forward op, and a frozen
    dataclass costs microseconds to build.
    """

    filename: str | None
    lineno: int | None
    module: object | None  # the nn.Module instance; named only when a finding needs it

    @property
    def line_text(self) -> str:
        if not self.filename or not self.lineno:
            return ""
        return linecache.getline(self.filename, self.lineno).strip()


NOWHERE = Site(None, None, None)


# ---------------------------------------------------------------- which frames are the user's


def _norm(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


@functools.lru_cache(maxsize=1)
def _internal_roots() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(torch and opscan folders, standard library folders), normalised, each ending in a separator."""
    opscan_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this file is opscan/trace/sourcemap.py
    packages = {_norm(os.path.dirname(torch.__file__)), _norm(opscan_dir)}
    stdlib = {_norm(os.path.dirname(os.__file__))}
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            stdlib.add(_norm(path))
    return tuple(p + os.sep for p in packages), tuple(p + os.sep for p in stdlib)


# id(code object) -> flags: _INTERNAL_CODE if in torch/opscan/stdlib, _FORWARD_CODE if named
# "forward", _CTX_FORWARD_CODE if a forward whose first parameter is not `self` (a custom
# autograd.Function's). Keyed by id() because hashing a code object hashes its bytecode and
# constants on every lookup; _KEEP holds the code objects so their ids are never reused.
_KIND: dict[int, int] = {}
_KEEP: list = []
_INTERNAL_CODE, _FORWARD_CODE, _CTX_FORWARD_CODE = 1, 2, 4


def _classify(filename: str) -> bool:
    if filename.startswith("<"):
        # "<frozen runpy>" and friends are the interpreter's; "<string>" from exec is the user's.
        return filename.startswith("<frozen")
    packages, stdlib = _internal_roots()
    path = _norm(filename)
    if path.startswith(packages):
        return True
    if "site-packages" in path or "dist-packages" in path:
        return False  # a venv's or conda's stdlib folder holds site-packages
    return path.startswith(stdlib)


def _kind(code) -> int:
    kind = _KIND.get(id(code))
    if kind is None:
        kind = _INTERNAL_CODE if _classify(code.co_filename) or is_launcher(code) else 0
        if code.co_name == "forward":
            kind |= _FORWARD_CODE
            if code.co_argcount and code.co_varnames[0] != "self":
                kind |= _CTX_FORWARD_CODE
        _KEEP.append(code)
        _KIND[id(code)] = kind
    return kind


def is_internal(code) -> bool:
    """True for code in torch, opscan or the standard library, or the launcher that ran the opscan command."""
    return bool(_kind(code) & _INTERNAL_CODE)


def user_frame(frame):
    """The innermost frame outside torch, opscan and the standard library, or None."""
    while frame is not None:
        if not _kind(frame.f_code) & _INTERNAL_CODE:
            return frame
        frame = frame.f_back
    return None


def _first_arg(frame):
    """The value of the frame's first parameter (`self` of a method, `ctx` of a Function's forward)."""
    code = frame.f_code
    return frame.f_locals.get(code.co_varnames[0]) if code.co_argcount else None


def dispatch_caller():
    """The frame that called the op now in a dispatch mode's `__torch_dispatch__` (its caller's caller).

    None where there is none: an op run from a C++ thread with no Python frame
    above it. DDP queues its `finalize_backward` (the copy of each reduced
    bucket back into `param.grad`) as an autograd engine callback
    (torch/csrc/distributed/c10d/reducer.cpp, `queue_callback`), and a CUDA
    backward runs on the engine's own device threads
    (torch/csrc/autograd/engine.cpp, `worker_device`); there
    `sys._getframe(2)` raises ValueError. Seen as a SystemError out of
    `run_backward` on an H200 with torch 2.11 and NCCL.
    """
    try:
        return sys._getframe(2)
    except ValueError:
        return None


def locate(frame, *, through_functions: bool = False) -> Site:
    """The user's frame above `frame`, and the innermost nn.Module forward on the way or just beyond.

    With `through_functions`, the forward of a custom autograd.Function is
    passed over for the line that applied it: that line created the node.

    The scan's hot path (once per forward op that creates an autograd node):
    one dict lookup per frame, and one f_locals read for the first forward.
    """
    kinds = _KIND
    module = None
    while frame is not None:
        kind = kinds.get(id(frame.f_code))
        if kind is None:
            kind = _kind(frame.f_code)
        user = not kind & _INTERNAL_CODE
        if kind & _FORWARD_CODE:
            if module is None and not kind & _CTX_FORWARD_CODE:
                owner = _first_arg(frame)
                if isinstance(owner, nn.Module):
                    module = owner
            elif through_functions and user and kind & _CTX_FORWARD_CODE and isinstance(_first_arg(frame), FunctionCtx):
                frame = frame.f_back
                continue
        if user and not (through_functions and _applied_function(frame)):
            break
        frame = frame.f_back
    if frame is None:
        return Site(None, None, module)
    site_frame, lookahead = frame, _MODULE_LOOKAHEAD
    while module is None and frame is not None and lookahead:
        if _kind(frame.f_code) & _FORWARD_CODE:
            owner = _first_arg(frame)
            module = owner if isinstance(owner, nn.Module) else None
        frame, lookahead = frame.f_back, lookahead - 1
    return Site(site_frame.f_code.co_filename, site_frame.f_lineno, module)


def _applied_function(frame) -> bool:
    """Is this user frame called by a Python-level Function.apply (older torch)?"""
    back = frame.f_back
    return back is not None and back.f_code.co_name == "apply" and bool(_kind(back.f_code) & _INTERNAL_CODE)


def display_path(filename: str | None) -> str | None:
    """A path relative to the working directory, as lint shows it (`../models.py` from a subfolder).

    Python's own files and an installed package's (torch, site-packages) stay absolute: a chain of
    `../../` up to them would hide where they are. What the scan prints, SARIF's uri and a record's `file`.
    """
    if not filename or filename.startswith("<"):  # "<string>", "<stdin>": no file to place
        return filename
    try:
        rel = os.path.relpath(filename)
    except ValueError:  # another drive on Windows
        return filename
    if rel != os.pardir and not rel.startswith(os.pardir + os.sep):
        return rel
    return os.path.abspath(filename) if _installed(filename) else rel


def _installed(filename: str) -> bool:
    """Whether `filename` is Python's own, torch's, opscan's or an installed package's (site-packages, dist-packages)."""
    path = _norm(filename)
    if in_installed_package(path):
        return True
    packages, stdlib = _internal_roots()
    return path.startswith(packages) or path.startswith(stdlib)


def current_autograd_node():
    """The autograd node running on this thread, or None outside backward."""
    return _current_autograd_node() if _current_autograd_node is not None else None


# ---------------------------------------------------------------- ops whose backward never alerts

# Forward ops whose autograd nodes have a backward with no determinism alert in
# any torch release (none of them appears among the alert sites of
# at::Context::alertNotDeterministic, nor in rules/). Their nodes can never
# produce a backward finding, so the scan need not remember where they were
# created: they are most of a convnet's or transformer's ops, and the frame
# walk is the scan's main cost per op. An op missing here is only recorded,
# never missed; one wrongly here would give an unmapped backward finding.
_NEVER_ALERTS_IN_BACKWARD = (
    "convolution", "_convolution", "cudnn_convolution", "convolution_overrideable", "mkldnn_convolution",
    "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
    "_native_batch_norm_legit_no_training", "cudnn_batch_norm", "native_layer_norm", "native_group_norm",
    "relu", "relu_", "threshold", "gelu", "silu", "silu_", "sigmoid", "tanh", "hardtanh", "hardtanh_",
    "hardswish", "hardswish_", "hardsigmoid", "leaky_relu", "elu", "mish",
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "neg", "pow", "sqrt", "rsqrt", "exp", "log",
    "addmm", "mm", "bmm", "baddbmm", "t", "view", "_unsafe_view", "reshape", "transpose", "permute", "expand",
    "clone", "unsqueeze", "squeeze", "select", "slice", "split", "split_with_sizes", "cat", "stack", "flatten",
    "mean", "sum", "max_pool2d_with_indices", "avg_pool2d", "_softmax", "_log_softmax", "native_dropout",
)  # fmt: skip


def never_alerting_backward_ops() -> frozenset:
    """The OpOverloads of _NEVER_ALERTS_IN_BACKWARD that this torch has (names move between releases)."""
    found = set()
    for name in _NEVER_ALERTS_IN_BACKWARD:
        packet = getattr(torch.ops.aten, name, None)
        if packet is None:
            continue
        for overload in packet.overloads():
            found.add(getattr(packet, overload))
    return frozenset(found)


# ---------------------------------------------------------------- the source map


class SourceMap:
    """The forward site of each autograd node, the optimizers inside step(), and module names.

    `install()` adds global optimizer step hooks (to tell the optimizer phase);
    `remove()` takes them off. The dispatch mode calls `record_nodes(seq, frame)`
    whenever the autograd sequence counter has moved.
    """

    def __init__(self, roots=(), *, record_nodes: bool = True):
        self.node_sites: dict[int, Site] = {}
        self.last_seq = -1
        self.record_nodes_enabled = record_nodes and _get_sequence_nr is not None
        self._roots = list(roots)
        self._names: dict[int, tuple[object, ModuleEntry]] | None = None
        self._stepping: list[int] = []  # id() of optimizers inside step()
        self._handles: list = []

    # ---- hooks

    def install(self) -> None:
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        self._handles.append(register_optimizer_step_pre_hook(self._enter_step))
        self._handles.append(register_optimizer_step_post_hook(self._exit_step))
        if _get_sequence_nr is not None:
            self.last_seq = _get_sequence_nr()

    def remove(self) -> None:
        while self._handles:
            self._handles.pop().remove()
        self._stepping.clear()

    def _enter_step(self, optimizer, args, kwargs):
        self._stepping.append(id(optimizer))

    def _exit_step(self, optimizer, args, kwargs):
        if id(optimizer) in self._stepping:
            self._stepping.remove(id(optimizer))

    # ---- sites

    def record_nodes(self, seq: int, frame, site: Site | None = None) -> None:
        """Autograd nodes with sequence numbers below `seq` were just created by the op `frame` called.

        `site`, if the caller has already located the op (with grad mode on, so
        not inside a custom Function's forward), saves locating it again.
        """
        last, self.last_seq = self.last_seq, seq
        if _current_autograd_node() is not None:
            return  # an op inside backward: nodes made here belong to double backward
        if site is None:
            site = locate(frame, through_functions=True)
        sites = self.node_sites
        if seq - last == 1:
            sites.setdefault(last, site)
        else:
            # Several nodes in one go come from code between two dispatched ops
            # (e.g. a custom autograd.Function); a jump back means another thread's counter.
            start = last if 0 <= last < seq and seq - last <= 16 else seq - 1
            for n in range(start, seq):
                sites.setdefault(n, site)

    def forget_before(self, seq: int) -> None:
        """Drop the sites of autograd nodes numbered below `seq` (graphs a long run has long freed)."""
        if self.node_sites:
            self.node_sites = {n: site for n, site in self.node_sites.items() if n >= seq}

    def node_site(self, node) -> Site | None:
        """The forward site that created autograd node `node`, if the scan saw it."""
        try:
            return self.node_sites.get(node._sequence_nr())
        except (AttributeError, RuntimeError):
            return None

    def where(self, frame):
        """(phase, site, autograd node name, mapped) of the op running now, called from `frame`.

        A forward op's site is its user frame; a backward op's is the forward
        line that created its autograd node (`mapped` is False when the map
        has no entry for that node).
        """
        node = current_autograd_node()
        phase = self.phase(frame, node)
        if node is None:
            return phase, locate(frame), None, True
        site = self.node_site(node)
        return phase, (site if site is not None else NOWHERE), node.name(), site is not None

    def phase(self, frame, node) -> str:
        """forward, backward or optimizer, for an op running with this stack and autograd node."""
        if node is not None or in_backward_callback():
            return PHASE_BACKWARD
        if self._stepping:
            stepping = set(self._stepping)
            while frame is not None:
                owner = frame.f_locals.get("self")
                if owner is not None and id(owner) in stepping:
                    return PHASE_OPTIMIZER
                if not is_internal(frame.f_code):
                    break
                frame = frame.f_back
        return PHASE_FORWARD

    # ---- module names

    def name(self, module) -> ModuleEntry | None:
        """The dotted path of `module` below its root (the root itself is ""), and its class."""
        if module is None:
            return None
        if self._names is None:
            self._names = {}
            for root in self._roots:
                self._index(root, "")
        pair = self._names.get(id(module))
        if pair is None or pair[0] is not module:
            root, base = _find_root(module)
            self._index(root, base)
            pair = self._names.get(id(module))
            if pair is None or pair[0] is not module:
                pair = self._names[id(module)] = (module, ModuleEntry("", type(module).__name__))
        return pair[1]

    def _index(self, root, base: str) -> None:
        for name, sub in root.named_modules():
            pair = self._names.get(id(sub))
            if pair is None or pair[0] is not sub:
                path = f"{base}.{name}" if base and name else (base or name)
                self._names[id(sub)] = (sub, ModuleEntry(_user_path(path), type(sub).__name__))


def _user_path(path: str) -> str:
    """A module path as the user wrote the model: torch.compile's wrapper adds `_orig_mod.` in front."""
    return ".".join(part for part in path.split(".") if part != "_orig_mod")


def _find_root(module, limit: int = 32):
    """Climb from a module to its outermost parent through the garbage collector's referrers.

    Used only for modules outside the scanned roots (a `--run` script's model),
    and only when a finding names one. Returns (root, "") so the root's own
    path is empty, as for a scanned root.
    """
    current = module
    for _ in range(limit):
        parent = _parent_of(current)
        if parent is None:
            return current, ""
        current = parent
    return current, ""


def _parent_of(module):
    """The nn.Module whose `_modules` dict holds `module`, or None."""
    for holder in gc.get_referrers(module):
        if not isinstance(holder, dict):
            continue
        for ref in gc.get_referrers(holder):
            # The `_modules` dict is held by the parent itself (inline values) or by its __dict__.
            owners = [ref] if isinstance(ref, nn.Module) else gc.get_referrers(ref) if isinstance(ref, dict) else []
            for owner in owners:
                if isinstance(owner, nn.Module) and owner.__dict__.get("_modules") is holder:
                    return owner
    return None
