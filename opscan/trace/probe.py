"""The probe mode: run each op a second time on cloned inputs and compare the bits.

An op that gives different bits from identical inputs is nondeterministic,
whether or not it raises the determinism alert. Under `ProbeMode` every aten
op runs as usual, and its result is what the program gets; before that run
the mode clones the op's inputs (in-place ops mutate them), and after it runs
the op again on the clones and compares the two results, outputs and mutated
arguments, bit for bit (`opscan.trace.bits`). With determinism off (torch's
default) this finds the ops that accumulate with atomics; in strict mode, the
kernels that claim to be deterministic and are not.

Not probed, and counted: views (no new bits), ops with no tensor results,
ops whose results are uninitialized memory (`empty*`, `resize_`), collectives
(a second all-reduce would hang the other ranks), tensors that are sparse,
quantized, meta or a tensor subclass, and inputs larger than `max_bytes`.
Random ops are probed: the generator is put back before the rerun, so both
runs draw the same numbers, and put where the first run left it afterwards,
so the program's random stream is untouched.

`Probe` is the context manager `opscan scan --probe` runs a target under:
the mode, the source map that places each op on a user line (backward ops on
the forward line that created their node), and, in strict mode, the catching
`Trace`, whose findings (ops that raise) are reported beside the probe's.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten

from opscan.findings import Finding
from opscan.trace.bits import comparable, difference, int_view
from opscan.trace.codes import PROBE_CODE
from opscan.trace.remedy import load_rules
from opscan.trace.sourcemap import SourceMap, _get_sequence_nr, dispatch_caller, display_path
from opscan.trace.state import TorchFlags

# Clones of one op's inputs may take this much memory at most (per op, freed after it).
DEFAULT_MAX_BYTES = 1 << 30

# Ops whose results are uninitialized memory, or that change a tensor's storage.
_UNINITIALIZED = frozenset({"resize_", "resize_as_", "set_", "_resize_output_"})
_UNINITIALIZED_PREFIXES = ("empty", "new_empty", "_empty")
# Namespaces of ops with effects outside the process (collectives) or no data (profiler marks).
_NOT_RERUN = frozenset({"c10d", "_c10d_functional", "c10d_functional", "_c10d_functional_autograd", "_dtensor", "profiler"})
# Outputs that are scratch space, not results: the reserve and workspace buffers of
# cuDNN, oneDNN and MIOpen, CTC's partly filled alphas, and the RNG seed tensors
# attention returns unfilled when it draws nothing. Their bits are whatever memory
# held; what is read of them shows in the backward ops' results, which are compared. Positions in the op's returned tuple, by op name (aten's schemas
# in 2.11 and 2.14.1).
_SCRATCH = {
    "cudnn_batch_norm": (3,),
    "_cudnn_rnn": (3,),
    "miopen_rnn": (3,),
    "mkldnn_rnn_layer": (3,),
    "_ctc_loss": (1,),  # log_alpha: filled only where the targets reach (what backward reads)
    "_embedding_bag": (3,),
    "_embedding_bag_forward_only": (3,),
    "_scaled_dot_product_efficient_attention": (2, 3),
    "_efficient_attention_forward": (2, 3),
    "_scaled_dot_product_flash_attention": (6, 7, 8),
    "_scaled_dot_product_cudnn_attention": (6, 7, 8),
    "_flash_attention_forward": (2, 3, 4),
}

_REASONS: dict = {}


def _name(func) -> tuple[str, str]:
    namespace, _, name = func._schema.name.partition("::")
    return namespace, name


def _writes(func) -> tuple[tuple[int, str], ...]:
    """(position, name) of the arguments the op writes to (`Tensor(a!)` in its schema)."""
    return tuple(
        (i, a.name) for i, a in enumerate(func._schema.arguments) if a.alias_info is not None and a.alias_info.is_write
    )


def skip_reason(func) -> str | None:
    """Why an op is never probed, decided from its schema alone (and cached), or None."""
    try:
        return _REASONS[func]
    except KeyError:
        pass
    namespace, name = _name(func)
    returns = [r for r in func._schema.returns if "Tensor" in str(r.type)]
    if namespace in _NOT_RERUN:
        reason = "a collective or profiler op"
    elif name in _UNINITIALIZED or name.startswith(_UNINITIALIZED_PREFIXES):
        reason = "uninitialized output"
    elif _writes(func):
        reason = None
    elif not returns:
        reason = "no tensor outputs"
    elif all(r.alias_info is not None for r in returns):
        reason = "a view"
    else:
        reason = None
    _REASONS[func] = reason
    return reason


def _plain(t: torch.Tensor) -> bool:
    """A tensor with no __torch_dispatch__ of its own (a Tensor or a Parameter), whose bits can be read."""
    return getattr(type(t), "__torch_dispatch__", None) is torch._C._disabled_torch_dispatch_impl and comparable(t)


def _span(t: torch.Tensor) -> int:
    """Elements of storage the tensor reaches, from its offset (its strides may skip or repeat)."""
    if t.numel() == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))


def _clone(t: torch.Tensor) -> torch.Tensor:
    """A copy with the same shape, strides and overlap (an expanded input stays expanded)."""
    if t.numel() == 0 or t.is_conj() or t.is_neg():
        return t.clone()
    base = t.as_strided((_span(t),), (1,), t.storage_offset()).clone()
    return base.as_strided(t.shape, t.stride(), 0)


def _clone_all(flat: list) -> list:
    """Each tensor cloned once, so that an op given one tensor twice gets one clone twice."""
    memo: dict[int, torch.Tensor] = {}
    out = []
    for x in flat:
        if isinstance(x, torch.Tensor):
            if id(x) not in memo:
                memo[id(x)] = _clone(x)
            x = memo[id(x)]
        out.append(x)
    return out


def _generators(flat: list, tensors: list) -> list | None:
    """The generators a random op draws from: the one it is given, else each device's default."""
    explicit = [x for x in flat if isinstance(x, torch.Generator)]
    if explicit:
        return explicit
    devices = {t.device for t in tensors}
    for x in flat:
        if isinstance(x, (torch.device, str)) and str(x).split(":")[0] in ("cpu", "cuda"):
            devices.add(torch.device(x))
    if not devices:
        get_default = getattr(torch, "get_default_device", None)  # 2.3 and later
        devices = {get_default() if get_default is not None else torch.device("cpu")}
    found = []
    for device in devices:
        if device.type == "cpu":
            found.append(torch.default_generator)
        elif device.type == "cuda":
            index = device.index if device.index is not None else torch.cuda.current_device()
            found.append(torch.cuda.default_generators[index])
        else:
            return None
    return found


@dataclass
class Result:
    """One probed call: did the rerun differ, in how many elements, by how much."""

    differed: bool
    elements: int = 0  # elements whose bits differ, over all compared tensors
    of: int = 0  # elements compared
    largest: float = 0.0  # the largest absolute difference among them


def results(func, args, kwargs, out) -> list:
    """What an op produced, flattened: its outputs (less scratch), then the arguments it wrote to, each once."""
    scratch = _SCRATCH.get(_name(func)[1], ())
    if scratch and isinstance(out, tuple):
        out = tuple(x for i, x in enumerate(out) if i not in scratch)
    found = tree_flatten(out)[0]
    for position, name in _writes(func):
        if position < len(args):
            found.extend(tree_flatten(args[position])[0])
        elif name in kwargs:
            found.extend(tree_flatten(kwargs[name])[0])
    seen, unique = set(), []
    for x in found:
        if id(x) not in seen or not isinstance(x, torch.Tensor):
            seen.add(id(x))
            unique.append(x)
    return unique


def _pairs(func, args, kwargs, cargs, ckwargs, out, out2) -> list[tuple]:
    """(first run, rerun) tensor pairs, in the order `results` gives them."""
    first, second = results(func, args, kwargs, out), results(func, cargs, ckwargs, out2)
    if len(first) != len(second):
        return [(_OTHER_STRUCTURE, None)]  # the rerun returned another structure: that differs
    return [(a, b) for a, b in zip(first, second) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)]


_OTHER_STRUCTURE = object()


def compare(pairs) -> Result:
    """Compare (first run, rerun) tensor pairs bit for bit."""
    result = Result(False)
    for a, b in pairs:
        if a is _OTHER_STRUCTURE:
            return Result(True, 1, 1, float("inf"))
        if int_view(a) is None or int_view(b) is None:
            continue
        count, of, largest = difference(a, b)
        result.of += of
        if count:
            result.differed = True
            result.elements += count
            result.largest = max(result.largest, largest)
    return result


class ProbeMode(TorchDispatchMode):
    """Run each op, then again on clones of its inputs; hand each comparison to `on_result`.

    `on_result(func, result, args, frame)` is called for each probed call, in
    the thread that ran it; `on_skip(func, reason)` for each call not probed.
    With `strict`, an op that runs while determinism is off is the catching
    mode's rerun of an op that raised: it is not probed (the alert said it all).
    With `record_nodes`, new autograd nodes are attributed to the current
    forward site, as the catching mode does (give False when one runs beside).
    """

    def __init__(self, on_result, on_skip, *, sourcemap=None, record_nodes=True, strict=False, max_bytes=DEFAULT_MAX_BYTES):
        super().__init__()
        self.on_result = on_result
        self.on_skip = on_skip
        self.sourcemap = sourcemap
        self.record_nodes = record_nodes and sourcemap is not None and sourcemap.record_nodes_enabled
        self.strict = strict
        self.max_bytes = max_bytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        if self.record_nodes:
            seq = _get_sequence_nr()
            if seq != self.sourcemap.last_seq:
                self.sourcemap.record_nodes(seq, dispatch_caller())
        reason = skip_reason(func)
        if reason is None and self.strict and not torch._C._get_deterministic_algorithms():
            reason = "rerun of an op that raised"
        flat = spec = None
        if reason is None:
            flat, spec = tree_flatten((args, kwargs))
            reason = self._input_reason([x for x in flat if isinstance(x, torch.Tensor)])
        if reason is not None:
            self.on_skip(func, reason)
            return func(*args, **kwargs)
        tensors = [x for x in flat if isinstance(x, torch.Tensor)]
        generators = _generators(flat, tensors) if torch.Tag.nondeterministic_seeded in func.tags else []
        if generators is None:
            self.on_skip(func, "a random op on a device whose generator cannot be restored")
            return func(*args, **kwargs)
        try:
            clones = _clone_all(flat)
        except RuntimeError:  # out of memory for the clones: run the op alone
            self.on_skip(func, "no memory for the clones")
            return func(*args, **kwargs)
        before = [g.get_state() for g in generators]
        out = func(*args, **kwargs)  # the program's own call: its errors are the program's
        after = [g.get_state() for g in generators]
        cargs, ckwargs = tree_unflatten(clones, spec)
        try:
            for g, state in zip(generators, before):
                g.set_state(state)
            out2 = func(*cargs, **ckwargs)
        except Exception as exc:  # noqa: BLE001 - the first run's result stands
            self.on_skip(func, f"the rerun raised {type(exc).__name__}")
            return out
        finally:
            for g, state in zip(generators, after):
                g.set_state(state)
        result = compare(_pairs(func, args, kwargs, cargs, ckwargs, out, out2))
        del clones, cargs, ckwargs, out2
        self.on_result(func, result, tensors, dispatch_caller())
        return out

    def _input_reason(self, tensors) -> str | None:
        if not all(_plain(t) for t in tensors):
            return "sparse, quantized, meta or subclass tensors"
        seen, total = set(), 0
        for t in tensors:
            if id(t) not in seen:
                seen.add(id(t))
                total += _span(t) * t.element_size()
        if total > self.max_bytes:
            return f"inputs over {self.max_bytes} bytes"
        return None


# ---------------------------------------------------------------- findings


@dataclass
class _Occurrence:
    op: str
    phase: str
    site: object
    node_name: str | None
    mapped: bool
    shapes: list
    dtypes: list
    calls: int = 0
    differed: int = 0
    elements: int = 0  # the most elements that differed in one call
    of: int = 0  # elements compared in that call
    largest: float = 0.0


@dataclass(frozen=True)
class SilentOp:
    """An op that gave different bits from identical inputs without raising the determinism alert.

    `mode` is "default" (determinism off) or "strict"; `calls` counts the
    calls probed at this place, `differed` those whose rerun differed;
    `elements` of `of` is the worst call's count of differing elements, and
    `largest` the largest absolute difference seen.
    """

    op: str
    mode: str
    phase: str
    module: str
    module_class: str
    file: str | None
    line: int | None
    line_text: str
    calls: int
    differed: int
    elements: int
    of: int
    largest: float
    shapes: tuple
    dtypes: tuple
    target: str | None = None
    rule: str | None = None
    remedy: str = ""
    remedy_code: str = ""
    autograd_node: str | None = None
    mapped: bool = True

    @property
    def message(self) -> str:
        module = f" in {self.module} ({self.module_class})" if self.module else f" in {self.module_class}" if self.module_class else ""
        where = ""
        if self.phase == "backward":
            at = f"{self.file}:{self.line}" if self.file else "an unknown line"
            where = f" in backward of the forward op at {at}" if self.mapped else " in backward of a forward op the probe did not see"
        mode = "in strict deterministic mode " if self.mode == "strict" else ""
        return (
            f"{self.op} gave different bits from identical inputs {mode}in {self.differed} of {self.calls} "
            f"call{'s' if self.calls != 1 else ''} ({self.phase}){where}{module}, without raising the determinism alert: "
            f"{self.elements} of {self.of} elements differ, by up to {self.largest:.3g}"
        )

    def to_finding(self) -> Finding:
        properties = {
            "target": self.target or "",
            "op": self.op,
            "mode": self.mode,
            "phase": self.phase,
            "module": self.module,
            "module_class": self.module_class,
            "file": self.file,
            "line": self.line,
            "calls": self.calls,
            "differed": self.differed,
            "elements_differing": self.elements,
            "elements": self.of,
            "max_abs_diff": self.largest,
            "shapes": [list(s) for s in self.shapes],
            "dtypes": list(self.dtypes),
        }
        if self.rule is not None:
            properties["rule"] = self.rule
        if self.autograd_node:
            properties["autograd_node"] = self.autograd_node
        return Finding(
            code=PROBE_CODE,
            message=self.message,
            path=self.file,
            line=self.line or 1,
            line_text=self.line_text,
            source_path=self.file,
            help=self.remedy,
            help_code=self.remedy_code,
            properties=properties,
        )


_DEFAULT_HELP = (
    "With determinism off this op's result depends on the order its threads finish (atomics). "
    "Turn on torch.use_deterministic_algorithms(True) and probe again with `opscan scan --probe --strict` "
    "to see whether it then takes a deterministic path or raises."
)
_STRICT_HELP = (
    "Strict deterministic mode neither makes this kernel deterministic nor raises for it. Replace the op with a "
    "deterministic equivalent, or keep it on purpose; the shapes in this finding reproduce it for a PyTorch issue."
)


class Probe:
    """Run code under the probe and collect the ops whose rerun gave other bits (SilentOp).

    Args:
        target: a label that each finding carries.
        roots: nn.Modules whose submodules are named by path from that root.
        strict: probe in strict deterministic mode, under the catching Trace
            (its ops that raise are in `.trace.findings`); else with determinism off.
        rules: a `opscan.rules.RuleDB` for remedies; by default the bundled one.
        max_bytes: the most memory the clones of one op's inputs may take.

    The flags are restored on exit, also when the body raised.
    """

    def __init__(self, target: str | None = None, *, roots=(), strict: bool = False, rules=None, pin: bool = True, max_bytes: int = DEFAULT_MAX_BYTES):
        from opscan.trace.tracer import Trace

        self.target = target
        self.strict = strict
        self.notices: list[str] = []
        self.errors: list[str] = []
        self.trace = Trace(target, roots=roots, rules=rules, pin=pin, record_all_sites=True) if strict else None
        self._sourcemap = self.trace.sourcemap if self.trace is not None else SourceMap(roots)
        self._rules = rules
        self._rules_loaded = rules is not None
        self._occurrences: dict[tuple, _Occurrence] = {}
        self._skipped: Counter = Counter()
        self._probed = 0
        self._lock = threading.Lock()
        self._stack: contextlib.ExitStack | None = None
        self.mode = ProbeMode(
            self._on_result, self._on_skip, sourcemap=self._sourcemap, record_nodes=not strict, strict=strict, max_bytes=max_bytes
        )

    def __enter__(self) -> Probe:
        stack = contextlib.ExitStack()
        try:
            stack.callback(TorchFlags.capture().restore)
            if self.strict:
                # The probe is entered first, so the catching mode sees each op before it:
                # an op that raises is recorded there and rerun with determinism off, which the probe skips.
                stack.enter_context(self.mode)
                stack.enter_context(self.trace)
            else:
                torch._C._set_deterministic_algorithms(False, warn_only=False)
                self._sourcemap.install()
                stack.callback(self._sourcemap.remove)
                stack.enter_context(self.mode)
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.__exit__(exc_type, exc, tb)
        self._summarise()

    # ---- recording

    def _on_skip(self, func, reason: str) -> None:
        with self._lock:
            self._skipped[reason] += 1

    def _on_result(self, func, result: Result, tensors, frame) -> None:
        phase, site, node_name, mapped = self._sourcemap.where(frame)
        key = (str(func), phase, site.filename, site.lineno, id(site.module))
        with self._lock:
            self._probed += 1
            o = self._occurrences.get(key)
            if o is None:
                o = self._occurrences[key] = _Occurrence(
                    str(func), phase, site, node_name, mapped,
                    [list(t.shape) for t in tensors], [str(t.dtype).removeprefix("torch.") for t in tensors],
                )  # fmt: skip
            o.calls += 1
            if result.differed:
                o.differed += 1
                if result.elements >= o.elements:
                    o.elements, o.of = result.elements, result.of
                o.largest = max(o.largest, result.largest)

    def _summarise(self) -> None:
        skipped = ", ".join(f"{n} {reason}" for reason, n in sorted(self._skipped.items(), key=lambda kv: (-kv[1], kv[0])))
        mode = "strict" if self.strict else "default"
        self.notices.append(
            f"probe ({mode} mode): reran {self._probed} op calls on cloned inputs"
            + (f"; not rerun: {skipped}" if skipped else "")
        )

    # ---- results

    @property
    def ops(self) -> int:
        """The op calls that ran under the probe, probed or not."""
        return self._probed + sum(self._skipped.values())

    @property
    def findings(self) -> list[SilentOp]:
        """Every op whose rerun differed at least once, in the order first seen."""
        if not self._rules_loaded:  # for the remedies, once
            self._rules_loaded, self._rules = True, load_rules(self.errors)
        return [self._silent(o, self._rules) for o in self._occurrences.values() if o.differed]

    def _silent(self, o: _Occurrence, rules) -> SilentOp:
        module = self._sourcemap.name(o.site.module)
        rule = rules.for_alert("", o.op, torch_version=torch.__version__) if rules is not None else None
        text = _STRICT_HELP if self.strict else _DEFAULT_HELP
        code = ""
        if rule is not None:
            remedy = rule.remedy_for(o.shapes, op=o.op, module_label=module.label if module else "")
            text, code = f"{text} The rules for {rule.id} suggest: {remedy.text}", remedy.code
        elif rules is not None and (known := rules.silent_for(o.op)) is not None:  # one torch does not alert for
            rule, remedy = known, known.remedy_for()
            text, code = f"{text} The rules know it ({known.id}, no alert in any mode): {remedy.text}", remedy.code
        return SilentOp(
            op=o.op,
            mode="strict" if self.strict else "default",
            phase=o.phase,
            module=module.label if module else "",
            module_class=module.cls if module else "",
            file=display_path(o.site.filename),
            line=o.site.lineno,
            line_text=o.site.line_text,
            calls=o.calls,
            differed=o.differed,
            elements=o.elements,
            of=o.of,
            largest=o.largest,
            shapes=tuple(tuple(s) for s in o.shapes),
            dtypes=tuple(o.dtypes),
            target=self.target,
            rule=rule.id if rule is not None else None,
            remedy=text,
            remedy_code=code,
            autograd_node=o.node_name,
            mapped=o.mapped,
        )
