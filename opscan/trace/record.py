"""The recording dispatch mode: every aten op of a training run, with fingerprints of what it read and wrote.

    result = record(parse_target("torchvision:resnet18"), "run.jsonl", device="cuda", steps=2, seed=0)
    result.path, result.steps, result.problem     # "run.jsonl", 2, None

`record()` runs the target through the runner with a `Recorder` as its mode
(`modes=recorder.modes`, `on_step=recorder.end_step`), then `finish()`es it.

Each op becomes one line of docs/record-format.md: the op, its phase and
step, the nn.Module and user line that ran it (for a backward op, the forward
line that created its autograd node), input shapes and dtypes, a fingerprint
of every tensor it reads and writes (opscan/trace/fingerprint.py), the 2-norm
of its first floating-point output and, for an op that draws random numbers,
the state of the generator it draws from. At the end of every optimizer step
the step's ops are written, then a step line with every parameter's
fingerprint, norm and a strided sample, and the file is flushed.

The per-op path, in order (`RecordMode.__torch_dispatch__`):
1. Where: the user frame and module (one frame walk, `sourcemap.locate`),
   or for a backward op the forward site of the running autograd node.
2. Inputs: a tensor that an earlier op returned or wrote, unchanged since
   (same object, same `_version`), takes that fingerprint's handle; only
   what is new here (the batch, the parameters at step 0, a tensor made
   outside any op) is fingerprinted.
3. The op runs.
4. Outputs: each returned tensor, then each argument written in place and not
   returned (by its schema, or batch norm's running statistics: STATS_WRITERS),
   is fingerprinted, on its device, without reading anything back.
   A view op's outputs are not (they alias a tensor already fingerprinted),
   nor are the uninitialised outputs of `empty` and friends.
5. One tuple is appended to the step's list. At the end of the step, after
   its single device-to-host copy, the step goes to the record's writer
   (opscan/trace/recordwriter.py), which makes the JSON beside training.

Global state: the recorder restores what it touches (grad mode around its
own work, the optimizer hooks, the dispatch mode stack, the flags it sets,
the environment variable `record()` sets); the runner also restores the
flags, the default dtype, the environment, the working directory and the RNG states.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import weakref
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from opscan.findings import Problem
from opscan.fsutil import same_file
from opscan.trace import collectives
from opscan.trace.fingerprint import DEFAULT_SCHEME, FLOATS, Fingerprinter
from opscan.trace.ranks import header_env
from opscan.trace.recordwriter import Step, open_writer
from opscan.trace.sourcemap import (
    NOWHERE,
    PHASE_BACKWARD,
    PHASE_FORWARD,
    SourceMap,
    _get_sequence_nr,
    display_path,
    in_backward_callback,
    locate,
)
from opscan.trace.sources import module_file, project_files, project_sources, target_file

FORMAT, VERSION = "opscan-record", 1
SAMPLE = 256  # elements per parameter sample
GC_YOUNG = 20_000  # the collector's youngest-generation threshold while recording (CPython's default: 700)

_grad_enabled = torch._C.is_grad_enabled
_set_grad_enabled = torch._C._set_grad_enabled
# Present in torch 2.11 and 2.14 (torch/csrc/autograd/python_engine.cpp); without it backward ops have no forward line.
_current_node = getattr(torch._C, "_current_autograd_node", None)

# Ops whose outputs are uninitialised memory: fingerprinting them would only fingerprint garbage.
_UNINITIALISED = frozenset(
    {"aten.empty", "aten.empty_like", "aten.empty_strided", "aten.new_empty", "aten.new_empty_strided", "aten.empty_permuted"}
)
# Ops that draw random numbers without a `Generator?` argument in their schema (they use the device's default one).
_RANDOM_WITHOUT_GENERATOR = frozenset(
    {
        "aten.native_dropout", "aten._fused_dropout", "aten.rrelu_with_noise", "aten.rrelu_with_noise_",
        "aten._scaled_dot_product_flash_attention", "aten._scaled_dot_product_efficient_attention",
        "aten._scaled_dot_product_cudnn_attention", "aten._flash_attention_forward", "aten._efficient_attention_forward",
        "aten._cudnn_rnn",
        # Factory ops whose default overloads take no generator (their `.generator` overloads do).
        "aten.rand", "aten.randn", "aten.randint", "aten.randperm", "aten.rand_like", "aten.randn_like", "aten.randint_like",
    }
)  # fmt: skip


# Ops that update batch norm's running statistics in place without saying so: their schemas read
# `Tensor? running_mean, Tensor? running_var` with no `(a!)` (native_functions.yaml, torch 2.11 and
# 2.14), and the kernels bump no version counter, so an unchanged `_version` would hand the next
# step the statistics' step-0 fingerprint. Packet -> (the flag's position: `training`, or
# `use_input_stats` for instance_norm; the positions of the statistics it then writes).
STATS_WRITERS: dict[str, tuple[int, tuple[int, ...]]] = {
    packet: (5, (3, 4))
    for packet in (
        "aten.batch_norm", "aten._batch_norm_impl_index", "aten.native_batch_norm", "aten.cudnn_batch_norm",
        "aten.miopen_batch_norm", "aten.instance_norm",
    )
}  # fmt: skip


class OpInfo:
    """What the schema says about one OpOverload, worked out once per run."""

    __slots__ = (
        "func", "oid", "name", "jname", "skip", "view", "uninitialised", "random", "tensor_pos", "tensor_kw", "mutable",
        "generator", "loss_seed", "collective", "stats_flag",
    )  # fmt: skip

    def __init__(self, func, oid: int = 0):
        self.func = func  # held: the recorder's table is keyed by id(func)
        self.oid = oid  # its number in the record's table of ops
        self.name = name = str(func)  # "aten.add.Tensor"
        self.jname = json.dumps(name)
        packet = ".".join(name.split(".")[:2])
        self.skip = name.startswith("profiler.")
        self.loss_seed = name == "aten.ones_like.default"  # autograd seeds backward() with ones_like(loss)
        self.uninitialised = packet in _UNINITIALISED
        schema = func._schema
        self.tensor_pos: list[int] = []  # positional tensor arguments the op reads
        self.tensor_kw: list[str] = []  # keyword-only tensor arguments it reads (not `out=`)
        self.mutable: list[tuple[int, str, bool]] = []  # (position, name, keyword-only) of arguments written in place
        self.generator: tuple[int, str] | None = None
        for i, arg in enumerate(schema.arguments):
            kind = str(arg.type)
            written = arg.alias_info is not None and arg.alias_info.is_write
            if written:
                self.mutable.append((i, arg.name, arg.kwarg_only))
            if "Tensor" in kind and not (written and arg.kwarg_only):
                if arg.kwarg_only:
                    self.tensor_kw.append(arg.name)
                else:
                    self.tensor_pos.append(i)
            if "Generator" in kind:
                self.generator = (i, arg.name)
        # Batch norm's running statistics, written only when its flag is set (see _written_tensors).
        self.stats_flag: tuple[int, str] | None = None
        stats = STATS_WRITERS.get(packet)
        if stats is not None and not self.mutable:
            flag, positions = stats
            self.stats_flag = (flag, schema.arguments[flag].name)
            self.mutable = [(i, schema.arguments[i].name, False) for i in positions]
        # A collective's outputs are written when its work ends: wait for it first (opscan/trace/collectives.py).
        self.collective = collectives.settler(name)
        if self.collective is not None and not self.mutable:
            self.mutable = collectives.written(name, schema)
        returns = schema.returns
        self.view = bool(returns) and not self.mutable and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)
        self.random = self.generator is not None or packet in _RANDOM_WITHOUT_GENERATOR


@dataclass
class RecordStats:
    steps: int = 0
    ops: int = 0
    unrecorded_ops: int = 0  # ops after the last step, in no step
    bytes: int = 0
    unfingerprinted: int = 0  # tensors whose fingerprint could not be taken (null in the record)
    first_failure: str | None = None
    internal_errors: int = 0  # ops whose recording failed inside opscan (the op itself ran)
    first_internal: str | None = None


class RecordMode(TorchDispatchMode):
    """Record every op to the recorder; see the module docstring for the per-op path.

    The common case is inline here (plain tensors, already seen inputs, one
    device); everything else goes to the recorder's slower helpers.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # TorchDispatchMode wraps __torch_dispatch__ in torch._disable_dynamo unless a
        # subclass opts out (torch/utils/_python_dispatch.py, 2.11 and 2.14): the wrapper
        # costs ~2 us per op and imports torch._dynamo on first use. Compiled code calls its
        # kernels directly, past any dispatch mode; the ops it still dispatches inside a compiled
        # call are recorded with Dynamo off, in __torch_dispatch__ below.
        return False

    def __init__(self, recorder: Recorder):
        super().__init__()
        self.r = recorder
        self._outside_dynamo = None  # this method, with Dynamo disabled: made when first needed

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if _is_compiling() or _dynamo_callback() is not None:
            # Inside a torch.compile'd call (its eager parts, its runtime wrappers) Dynamo's frame callback is set:
            # it took this method's frames, and record_nodes', for user code to compile (warnings about opscan's
            # own code, its recompile limit hit, seconds lost). Run the op's record with Dynamo off, as torch's
            # default wrapper would, but only here: elsewhere that wrapper costs every op ~2 us.
            outside = self._outside_dynamo
            if outside is None:
                # torch.compiler.disable(fn, recursive=True): torch/compiler/__init__.py in 2.14.1, and the same
                # signature in the pytorch/pytorch copy the search index holds (a1cd6d26, torch 2.3 era); it imports
                # torch._dynamo, which a callback being set means is imported already. Called, it sets the callback to
                # None (DisableContext(callback=None), torch/_dynamo/eval_frame.py, 2.x alike): no second trip here.
                outside = self._outside_dynamo = torch.compiler.disable(self.__torch_dispatch__, recursive=True)
            return outside(func, types, args, kwargs)
        r = self.r
        if kwargs is None:
            kwargs = _NO_KWARGS
        try:
            info = r.infos.get(id(func))  # by id: an OpOverload's own __hash__ is Python code; overloads live as long as torch
            if info is None:
                info = r.new_op(func)
            if info.skip:
                return func(*args, **kwargs)
            sm = r.sourcemap
            grad = _grad_enabled()
            node = _current_node()
            if node is None:
                try:
                    frame = _getframe(1)
                except ValueError:  # a C++ thread with no Python frame (DDP's end-of-backward callback; see dispatch_caller)
                    frame = None
                site = locate(frame)
                seq = _get_sequence_nr()
                if seq != sm.last_seq:
                    sm.record_nodes(seq, frame, site if grad else None)
                # Past the sequence check: an end-of-backward callback (DDP's copy of the reduced buckets into
                # .grad) has no node but runs inside the backward pass.
                phase = sm.phase(frame, None) if sm._stepping or in_backward_callback() else PHASE_FORWARD
            else:
                site = sm.node_site(node) or NOWHERE
                phase = PHASE_BACKWARD
            rng = r.rng_state(info, args, kwargs) if info.random else None
            if grad:
                _set_grad_enabled(False)
            try:
                # Inputs: a tensor seen before (same object, same version) reuses its handle.
                ins, shapes, dtypes = [], [], []
                track_get = r.track.get
                n = len(args)
                for pos in info.tensor_pos:
                    if pos >= n:
                        break
                    v = args[pos]
                    if type(v) in _TENSORS:
                        e = track_get(id(v))
                        ins.append(e[2] if e is not None and e[0]() is v and e[1] == v._version else r.new_input(v))
                        shapes.append(v.shape)
                        dtypes.append(v.dtype)
                    elif v is not None:
                        r.more_inputs(v, ins, shapes, dtypes)
                if info.tensor_kw:
                    for name in info.tensor_kw:
                        v = kwargs.get(name)
                        if v is not None:
                            r.more_inputs(v, ins, shapes, dtypes)
            except RuntimeError:
                ins, shapes, dtypes = r.inputs_slowly(info, args, kwargs)
            finally:
                if grad:
                    _set_grad_enabled(True)

            if r.fresh_input:
                # An input fingerprinted just now is copied before the op runs: an op may write what it
                # reads where its schema does not say so (native_batch_norm updates its running stats).
                r.fresh_input = False
                r.fpr.copy_pending()
            elif info.mutable and r.fpr.queued:  # the op writes: a queued staging copy of what it writes goes first
                r.before_write(info, args, kwargs)
        except Exception as exc:  # noqa: BLE001 - opscan's own failure must not stop the user's op: it runs unrecorded
            r.internal_error(exc)
            return func(*args, **kwargs)

        out = func(*args, **kwargs)

        try:
            if info.collective is not None:
                info.collective(out)
            if grad:
                _set_grad_enabled(False)
            try:
                if type(out) in _TENSORS and not info.mutable and not info.view and not info.uninitialised:
                    h = r.new(out, out.dtype in FLOATS)
                    outs, norm = [h], h
                else:
                    outs, norm = r.outputs(info, out, args, kwargs, ins)
                if info.loss_seed and node is None:
                    r.maybe_loss(args)
            finally:
                if grad:
                    _set_grad_enabled(True)
        except Exception as exc:  # noqa: BLE001 - as above: the op ran; its outputs go unfingerprinted
            r.internal_error(exc)
            outs, norm = [], None
        r.ops.append((info, phase, site, ins, shapes, dtypes, outs, norm, rng))
        return out


_NO_KWARGS: dict = {}
# Dynamo's frame-evaluation callback, None outside a compiled call: a C function of torch._C (get_eval_frame_callback
# in torch/_C/_dynamo/eval_frame.pyi, 2.11 and 2.14 alike), read without importing torch._dynamo.
# torch.compiler.is_compiling (public since torch 2.3; 2.11 and 2.14): Dynamo reads it as True while it traces a
# frame, so a trace of __torch_dispatch__ goes straight to the disabled call and touches no builtin it would warn of.
_is_compiling = torch.compiler.is_compiling
_dynamo_callback = getattr(getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None), "get_eval_frame_callback", lambda: None)
_STRIDED = torch.strided
_TENSORS = (torch.Tensor, torch.nn.Parameter)
_getframe = sys._getframe
if _current_node is None:  # no forward lines for backward ops, but still a record

    def _current_node():
        return None


if _get_sequence_nr is None:

    def _get_sequence_nr():
        return -1


class Recorder:
    """Owns one record: the mode, the fingerprints, the tracking of tensors, and writing each step.

    Used through the runner: `modes(model)` is its `modes=` factory (entering
    sets the flags asked for and pushes the mode), `end_step(i)` its
    `on_step=`; `finish(outcome)` writes the end line and renames the file.
    """

    engine = "python"  # opscan/trace/native.py's NativeRecorder: "native"

    def __init__(
        self,
        writer,
        *,
        target: str,
        kind: str,
        argv=(),
        steps: int,
        device: str,
        seed: int | None,
        scheme: str = DEFAULT_SCHEME,
        deterministic: bool = False,
        benchmark: bool | None = None,
        staged: bool | None = None,
    ):
        self.writer = writer  # recordwriter.ProcessWriter or InlineWriter: where the step's data goes
        self.target, self.kind, self.argv = target, kind, list(argv)
        # Taken now: the header's `sources` are read after the first step, and a script may chdir.
        named = target_file(target, kind)
        self._source_paths = (os.path.realpath(named) if named else None, os.path.realpath(os.getcwd()))
        self.steps_asked, self.device, self.seed = steps, device, seed
        self.deterministic, self.benchmark = deterministic, benchmark
        self.fpr = Fingerprinter(scheme, staged=staged)
        self.infos: dict = {}
        self.ops: list[tuple] = []
        self.stats = RecordStats()
        self.sourcemap = SourceMap(())
        self.track: dict[int, tuple] = {}  # id(tensor) -> (weakref, _version, handle or None)
        self.model = None
        self.optimizer = None
        self._param_ids: dict[int, str] = {}  # id(parameter) -> name
        self._new_param_handles: dict[int, str] = {}  # since the last step: fingerprint handle -> parameter name (`p:NAME@FP`)
        self._samples: dict[int, tuple] = {}
        self._uninitialised: set[int] = set()  # storages made by `empty` and not yet written (data_ptr)
        # Table numbers of what the writer has been sent the text of: sites, shapes and dtypes, ops.
        self._site_ids: dict = {}
        self._meta_ids: dict = {}
        self._new_ops: dict[int, str] = {}
        self._param_json: dict[str, str] = {}
        self._loss: int | None = None
        self._header_written = False
        self._flags = None
        self._handles: list = []
        self._saved_flags = None
        self._mode: RecordMode | None = None
        self._i = 0
        self._t0 = time.perf_counter()
        self.fresh_input = False  # an input was fingerprinted during the current op (see RecordMode)
        self._froze = False  # whether __enter__ froze the collector's objects (gc.freeze)
        self._seq_mark = -1  # the autograd sequence number at the end of the previous step

    # ---------------------------------------------------------------- entering and leaving

    def modes(self, model):
        """The runner's `modes=` factory: this recorder, for the model (None for a script)."""
        self.model = model
        if model is not None:
            self.sourcemap = SourceMap((model,))
            self._name_params(model.named_parameters())
        return [self]

    def _set_flags(self) -> None:
        """The flags asked for (--deterministic, --benchmark), saving what they were for `_restore_flags`."""
        from opscan.trace.state import TorchFlags

        self._saved_flags = TorchFlags.capture() if self.deterministic or self.benchmark is not None else None
        if self.deterministic:
            torch.use_deterministic_algorithms(True)
            torch.backends.cudnn.benchmark = False
        if self.benchmark is not None:
            torch.backends.cudnn.benchmark = self.benchmark

    def _restore_flags(self) -> None:
        saved, self._saved_flags = self._saved_flags, None
        if saved is not None:
            saved.restore()

    def __enter__(self) -> Recorder:
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        self._set_flags()
        self.sourcemap.install()
        self._handles.append(register_optimizer_step_pre_hook(self._before_optimizer_step))
        # Every object alive now (torch, the model, the user's program) moves to the collector's
        # permanent generation while recording: the per-op tuples the record makes trigger
        # collections, and each full one would walk all of them (430,000 objects with torch and
        # torchvision loaded, 0.5 s on a 2-core EPYC). Put back on exit; left alone if the program
        # froze objects itself.
        self._froze = gc.isenabled() and gc.get_freeze_count() == 0
        if self._froze:
            gc.freeze()
            # Fewer, larger young collections: most of what a step makes lives to its end anyway,
            # and each collection of the middle generation walks all of it again.
            self._gc_threshold = gc.get_threshold()
            gc.set_threshold(max(self._gc_threshold[0], GC_YOUNG), *self._gc_threshold[1:])
        self._mode = RecordMode(self)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        mode, self._mode = self._mode, None
        if mode is not None:
            mode.__exit__(*exc_info)
        while self._handles:
            self._handles.pop().remove()
        if self._froze:
            self._froze = False
            gc.set_threshold(*self._gc_threshold)
            gc.unfreeze()
        self.sourcemap.remove()
        self._restore_flags()

    def _before_optimizer_step(self, optimizer, args, kwargs) -> None:
        if self._flags is None:
            from opscan.trace.state import TorchFlags

            self._flags = TorchFlags.capture()  # what training runs with
        if self.optimizer is None:
            self.optimizer = optimizer
            if self.model is None:
                self._name_optimizer_params(optimizer)

    # ---------------------------------------------------------------- the per-op work

    def new_op(self, func) -> OpInfo:
        """The schema facts of an op seen for the first time, numbered for the writer's table."""
        info = self.infos[id(func)] = OpInfo(func, len(self.infos))
        self._new_ops[info.oid] = info.jname
        return info

    def _register(self, t, handle) -> None:
        try:
            version = t._version
        except RuntimeError:  # an inference tensor has no version counter: never reused
            return
        self.track[id(t)] = (weakref.ref(t), version, handle)

    def new(self, t, norm: bool = False):
        """Fingerprint a tensor now and remember it; None where it has no values to fingerprint."""
        if t.layout is not _STRIDED or t.is_meta:
            return None
        try:
            handle = self.fpr.add(t, norm)
        except (RuntimeError, TypeError) as exc:  # a tensor subclass or dtype the reductions refuse
            self._failed(t, exc)
            return None
        try:
            self.track[id(t)] = (weakref.ref(t), t._version, handle)
        except RuntimeError:
            pass
        if self._param_ids:
            name = self._param_ids.get(id(t))
            if name is not None:
                self._new_param_handles[handle] = name
        return handle

    def internal_error(self, exc: BaseException) -> None:
        """A failure of the recording itself: counted, the first one kept with where it happened, said at the end."""
        self.stats.internal_errors += 1
        if self.stats.first_internal is None:
            import traceback

            where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
            at = f" at {os.path.basename(where.filename)}:{where.lineno}" if where else ""
            self.stats.first_internal = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}{at}"

    def _failed(self, t, exc: BaseException) -> None:
        self.stats.unfingerprinted += 1
        if self.stats.first_failure is None:
            self.stats.first_failure = f"a {type(t).__name__} of {t.dtype} on {t.device}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"

    def new_input(self, t):
        """An input no recorded op produced: fingerprinted now, unless its memory is still uninitialised.

        `nn.Linear(...)` in a script makes its weight with `torch.empty` and wraps
        it in a Parameter (a new tensor object, made without any op) before
        `uniform_` fills it: what `uniform_` reads then is garbage, different in
        every run, and is not fingerprinted.
        """
        if self._uninitialised and t.layout is torch.strided and not t.is_meta:
            try:
                if t.untyped_storage().data_ptr() in self._uninitialised:
                    self._register(t, None)
                    return None
            except RuntimeError:
                pass
        self.fresh_input = True
        return self.new(t)

    def ref(self, t):
        """The handle of a tensor's current values: reused when an op already produced them."""
        entry = self.track.get(id(t))
        if entry is not None and entry[0]() is t:
            try:
                version = t._version
            except RuntimeError:
                version = -1
            if entry[1] == version:
                return entry[2]
        return self.new_input(t)

    def more_inputs(self, value, ins, shapes, dtypes) -> None:
        """Inputs past the common case: a tensor subclass, or a list of tensors (flattened)."""
        items = value if isinstance(value, (list, tuple)) else (value,)
        for item in items:
            if isinstance(item, torch.Tensor):
                ins.append(self.ref(item))
                shapes.append(item.shape)
                dtypes.append(item.dtype)

    def inputs_slowly(self, info: OpInfo, args, kwargs):
        """The inputs, each through `ref` (an inference tensor has no `_version` to compare)."""
        ins, shapes, dtypes = [], [], []
        n = len(args)
        for pos in info.tensor_pos:
            if pos < n and args[pos] is not None:
                self.more_inputs(args[pos], ins, shapes, dtypes)
        for name in info.tensor_kw:
            value = kwargs.get(name)
            if value is not None:
                self.more_inputs(value, ins, shapes, dtypes)
        return ins, shapes, dtypes

    def outputs(self, info: OpInfo, out, args, kwargs, ins):
        """Handles for what the op returned, then for what it wrote in place and did not return."""
        tensors = []
        if isinstance(out, torch.Tensor):
            tensors.append(out)
        elif isinstance(out, (list, tuple)):
            for item in out:
                if isinstance(item, torch.Tensor):
                    tensors.append(item)
                elif isinstance(item, (list, tuple)):
                    tensors.extend(x for x in item if isinstance(x, torch.Tensor))
        if info.mutable:
            if self._uninitialised:  # what the op writes is initialised from now on
                self._written(info, args, kwargs)
            seen = {id(t) for t in tensors}
            for t in _written_tensors(info, args, kwargs):
                if id(t) not in seen:
                    seen.add(id(t))
                    tensors.append(t)
        outs, norm = [], None
        if info.uninitialised:
            for t in tensors:
                self._register(t, None)
                outs.append(None)
                try:
                    ptr = t.untyped_storage().data_ptr()
                except RuntimeError:
                    continue
                if ptr:
                    self._uninitialised.add(ptr)
            return outs, None
        if info.view:
            base = _first_tensor(args)
            handle = ins[0] if ins else None
            for t in tensors:
                derived = self.fpr.derive(handle, t, base) if base is not None else None
                self._register(t, derived)
                outs.append(derived)
            return outs, None
        if len(tensors) > 1:  # batch norm's five, a foreach op's lists: staged by one multi-tensor copy where they can be
            return self.new_many(tensors)
        want = True
        for t in tensors:
            if want and t.dtype in FLOATS:
                handle = self.new(t, True)
                norm, want = handle, False
            else:
                handle = self.new(t)
            outs.append(handle)
        return outs, norm

    def before_write(self, info: OpInfo, args, kwargs) -> None:
        """What the op is about to write, for the fingerprinter's queue of staging copies."""
        self.fpr.before_write(list(_written_tensors(info, args, kwargs)))

    def _written(self, info: OpInfo, args, kwargs) -> None:
        for t in _written_tensors(info, args, kwargs):
            try:
                self._uninitialised.discard(t.untyped_storage().data_ptr())
            except RuntimeError:
                pass

    def new_many(self, tensors):
        """`new` for many tensors at once (a foreach op's outputs); the first floating-point one's norm too."""
        plain = [t for t in tensors if t.layout is torch.strided and not t.is_meta]
        if len(plain) != len(tensors):
            outs, norm = [self.new(t) for t in tensors], None
            return outs, norm
        first = next((i for i, t in enumerate(tensors) if t.dtype in FLOATS), None)
        try:
            handles = self.fpr.add_many(tensors, first)
        except (RuntimeError, TypeError):  # one of them is refused: each on its own, so the others still count
            return [self.new(t, i == first) for i, t in enumerate(tensors)], None
        track, names = self.track, self._param_ids
        for t, handle in zip(tensors, handles):
            try:
                track[id(t)] = (weakref.ref(t), t._version, handle)
            except RuntimeError:
                pass
            if names:
                name = names.get(id(t))
                if name is not None:
                    self._new_param_handles[handle] = name
        return handles, (handles[first] if first is not None else None)

    def rng_state(self, info: OpInfo, args, kwargs) -> dict | None:
        """The state of the generator a random op draws from, just before it draws."""
        gen = None
        if info.generator is not None:
            pos, name = info.generator
            gen = kwargs.get(name) if pos >= len(args) else args[pos]
        device = None
        if gen is None:
            device = kwargs.get("device")
            if device is None:
                for value in args:
                    if isinstance(value, torch.Tensor):
                        device = value.device
                        break
        return draw_state(gen, device)

    def maybe_loss(self, args) -> None:
        """`ones_like(loss)` from autograd's `_make_grads`: the value backward() was called on."""
        frame, depth = sys._getframe(2), 0
        while frame is not None and depth < 8:
            if frame.f_code.co_name == "_make_grads":
                loss = args[0] if args else None
                if isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.dtype in FLOATS:
                    self._loss = self.fpr.add_value(loss)
                return
            frame, depth = frame.f_back, depth + 1

    # ---------------------------------------------------------------- once per step

    def end_step(self, step: int) -> None:
        """The runner's `on_step`: fingerprint the parameters, read the device once, write the step."""
        with _disable_current_modes():
            grad = _grad_enabled()
            _set_grad_enabled(False)
            try:
                self._end_step(step)
            finally:
                _set_grad_enabled(grad)

    def _end_step(self, step: int) -> None:
        ops, self.ops = self.ops, []
        params = self._params()
        handles = [self.ref(p) for _, p in params]
        blocks = self._param_blocks(params)
        hosts, entries, block_list = self.fpr.end_step_raw()
        if not self._header_written:
            self.writer.line(self._header())
            self._header_written = True
        # Each op by table number: a site's, a shape list's and an op's text go to the writer once.
        site_ids, meta_ids = self._site_ids, self._meta_ids
        new_sites, new_metas = {}, {}
        rows = []
        for info, phase, site, ins, shapes, dtypes, outs, norm, rng in ops:
            key = (site.filename, site.lineno, site.module)
            sid = site_ids.get(key)
            if sid is None:
                sid = site_ids[key] = len(site_ids)
                new_sites[sid] = self._where(site)
            key = (*shapes, *dtypes)
            mid = meta_ids.get(key)
            if mid is None:
                mid = meta_ids[key] = len(meta_ids)
                new_metas[mid] = (
                    f'"shapes":{json.dumps([list(s) for s in shapes])},'
                    f'"dtypes":{json.dumps([str(d).removeprefix("torch.") for d in dtypes])}'
                )
            rows.append((info.oid, phase, sid, mid, ins, outs, norm, rng))
        param_rows = self._param_rows(params, handles, blocks)
        loss, self._loss = self._loss, None
        self._uninitialised.clear()  # a storage freed since may be reused by a tensor made without any op
        keep = self._prune()
        # Forward sites of nodes made before the previous step go: a backward reaches back at most
        # one step in a run that keeps a graph between steps (truncated BPTT), and the map would
        # otherwise grow by every node of every step.
        seq = _get_sequence_nr()
        self.sourcemap.forget_before(self._seq_mark)
        self._seq_mark = seq
        self.writer.step(
            Step(
                step, hosts, entries, block_list, rows, param_rows, loss, keep=keep,
                new_ops=self._new_ops, new_sites=new_sites, new_metas=new_metas, new_param_handles=self._new_param_handles,
            )
        )  # fmt: skip
        self._new_ops, self._new_param_handles = {}, {}
        self.stats.steps = step + 1
        self.stats.ops += len(ops)

    def _param_rows(self, params, handles, blocks) -> list:
        """Step.params: each parameter's name as JSON, fingerprint handle, and where its norm and sample are in its block."""
        rows: list = [None] * len(params)
        names = self._param_json
        for indexes, block, sizes in blocks.values():
            offset = len(indexes)
            for j, i in enumerate(indexes):
                name = params[i][0]
                text = names.get(name)
                if text is None:
                    text = names[name] = json.dumps(name)
                rows[i] = (text, handles[i], block, j, offset, sizes[j])
                offset += sizes[j]
        return rows

    def _where(self, site) -> str:
        entry = self.sourcemap.name(site.module) if site.module is not None else None
        module = entry.path if entry else None
        module_class = entry.cls if entry else None
        return (
            f'"module":{json.dumps(module)},"module_class":{json.dumps(module_class)},'
            f'"file":{json.dumps(display_path(site.filename))},"line":{json.dumps(site.lineno)}'
        )

    def _prune(self) -> list[int]:
        """Forget dead tensors; returns the fingerprint handles that live tensors may still be read with."""
        live = {}
        keep = []
        for key, entry in self.track.items():
            if entry[0]() is not None:
                live[key] = entry
                if entry[2] is not None:
                    keep.append(entry[2])
        self.track = live
        return keep

    # ---------------------------------------------------------------- parameters

    def _name_params(self, named) -> None:
        self._param_ids = {}
        self._param_list = []
        for name, p in named:
            if id(p) not in self._param_ids:
                self._param_ids[id(p)] = name
                self._param_list.append((name, p))

    def _name_optimizer_params(self, optimizer) -> None:
        """A script's parameters: by module path where the optimizer's params belong to a module seen, else group{g}.{k}."""
        names = {}
        root = self._script_root(optimizer)
        if root is not None:
            for name, p in root.named_parameters():
                names.setdefault(id(p), name)
        named = []
        for g, group in enumerate(optimizer.param_groups):
            for k, p in enumerate(group["params"]):
                named.append((names.get(id(p), f"group{g}.{k}"), p))
        self._name_params(named)

    def _script_root(self, optimizer):
        from opscan.trace.sourcemap import _find_root

        wanted = {id(p) for group in optimizer.param_groups for p in group["params"]}
        for key in self._site_ids:
            module = key[2]
            if module is None:
                continue
            root, _ = _find_root(module)
            if any(id(p) in wanted for p in root.parameters()):
                return root
        for op in self.ops:
            module = op[2].module
            if module is not None:
                root, _ = _find_root(module)
                if any(id(p) in wanted for p in root.parameters()):
                    return root
        return None

    def _params(self) -> list[tuple[str, torch.Tensor]]:
        return getattr(self, "_param_list", [])

    def _param_blocks(self, params) -> dict:
        """Per device: every parameter's norm, then its sample, concatenated into one block of slots."""
        by_device: dict = {}
        for index, (_, p) in enumerate(params):
            by_device.setdefault(p.device, []).append(index)
        blocks = {}
        for device, indexes in by_device.items():
            tensors = [params[i][1].detach() for i in indexes]
            norms = _norms(tensors)
            samples = [self._sample(params[i][1]) for i in indexes]  # the parameter itself: its view is kept
            blocks[device] = (indexes, self.fpr.add_block(norms + samples, device), [s.numel() for s in samples])
        return blocks

    def _sample(self, t: torch.Tensor) -> torch.Tensor:
        """Up to SAMPLE elements at stride ceil(n / SAMPLE) over the flattened tensor, as float32.

        For a contiguous float32 parameter this is a view, kept from step to step
        (the optimizer updates the parameter in place).
        """
        key = (id(t), t.data_ptr(), t.shape)
        cached = self._samples.get(id(t))
        if cached is not None and cached[0] == key:
            return cached[1]
        n = t.numel()
        flat = t.detach().reshape(-1)
        view = flat[:: -(-n // SAMPLE)] if n else flat
        if view.is_complex():
            view = view.real  # what .float() would keep, without the warning it gives the user for dropping the rest
        if view.dtype != torch.float32:
            return view.float()
        if t.is_contiguous():
            self._samples[id(t)] = (key, view)
        return view

    # ---------------------------------------------------------------- header and end

    def _header(self) -> str:
        from opscan.trace.state import TorchFlags

        flags = self._flags or TorchFlags.capture()
        header = {
            "type": "header",
            "format": FORMAT,
            "version": VERSION,
            "target": self.target,
            "argv": self.argv,
            "kind": self.kind,
            # The target as typed names one file in several spellings (../m.py:build from a subfolder): compare
            # tells one target by its file's real path. A MODULE:CALLABLE's module was imported by now.
            "target_file": self._source_paths[0] or module_file(self.target, self.kind),
            "seed": self.seed,
            "steps": self.steps_asked,
            "device": self.device,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "fingerprint": self.fpr.scheme,
            # header_env: rank, world size (opscan/trace/ranks.py); the engine, so that compare shows two that differ.
            "env": {**record_env(self.device, flags), **header_env(), "record_engine": self.engine},
            # After the first step, so that what the script imports at its top is loaded.
            "sources": project_sources(*self._source_paths),
        }
        return json.dumps(header)

    def loaded_files(self) -> list[str]:
        """The project's files the run has loaded so far (real paths): the target's, and the modules it imported."""
        return project_files(*self._source_paths)

    def finish(self, outcome=None, *, complete: bool = True, rename: bool = True) -> str | None:
        """Write the end line (only for a run that finished) and put the file in place; returns the path kept.

        Complete: PATH. Cut short: PATH.partial, or nothing when no step was
        written. `rename=False` keeps even a whole record in PATH.partial, end line
        and all (PATH is a file that must stay). Raises OSError when the record could not be written.
        """
        self.stats.unrecorded_ops = len(self.ops)
        self.ops = []
        if not self._header_written:
            with _disable_current_modes():
                self.writer.line(self._header())
            self._header_written = True
        end = None
        if complete:
            stopped = bool(getattr(outcome, "stopped", False))
            seconds = round(time.perf_counter() - self._t0, 3)
            end = json.dumps({"type": "end", "steps": self.stats.steps, "ops": self.stats.ops, "stopped": stopped, "seconds": seconds})
        path, self.stats.bytes = self.writer.finish(end, commit=complete and rename, remove=self.stats.steps == 0)
        return path

    def abandon(self) -> None:
        """After an exception: keep PATH.partial with the steps written (nothing if none), and end the writer."""
        try:
            self.writer.finish(None, commit=False, remove=self.stats.steps == 0)
        except OSError:
            pass


def _norms(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """float32 2-norms (0-dim, on the device); one multi-tensor launch where all are float32."""
    if tensors and all(t.dtype == torch.float32 for t in tensors):
        try:
            return list(torch._foreach_norm(tensors))
        except (RuntimeError, TypeError):
            pass
    zero = None
    out = []
    for t in tensors:
        if t.dtype in FLOATS or t.is_complex():
            out.append(torch.linalg.vector_norm(t, dtype=_norm_dtype(t.dtype)).float())
        else:
            # float32 explicitly: under a script's set_default_dtype(float64) the block's float32 slots would refuse it.
            zero = torch.full((), float("nan"), dtype=torch.float32, device=t.device) if zero is None else zero
            out.append(zero)
    return out


def _norm_dtype(dtype: torch.dtype) -> torch.dtype | None:
    """vector_norm's `dtype=` for a tensor of `dtype`: float32 accumulation where that is no narrowing, else its own.

    vector_norm refuses a `dtype=` narrower than the input's (float64, complex128), and a
    complex input's norm is real: those accumulate in their own precision.
    """
    return torch.float32 if dtype in (torch.float32, torch.float16, torch.bfloat16) else None


def _written_tensors(info: OpInfo, args, kwargs):
    """The tensors an op writes in place, by its schema (`info.mutable`): each one, lists flattened."""
    if info.stats_flag is not None:  # batch norm in eval mode writes nothing
        pos, name = info.stats_flag
        if not (kwargs.get(name) if pos >= len(args) else args[pos]):
            return
    for pos, name, kw_only in info.mutable:
        value = kwargs.get(name) if kw_only or pos >= len(args) else args[pos]
        for t in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(t, torch.Tensor):
                yield t


def _first_tensor(args):
    for value in args:
        if isinstance(value, torch.Tensor):
            return value
    return None


def draw_state(gen, device=None) -> dict:
    """The state `gen` draws from, or (gen None) the default generator of `device` (default: the CPU)."""
    if gen is None:
        device = torch.device(device) if device else torch.device("cpu")
        if device.type == "cuda":
            # torch.cuda.default_generators: one per device once CUDA is initialised (it is: the op runs there).
            index = device.index if device.index is not None else torch.cuda.current_device()
            gen = torch.cuda.default_generators[index]
        elif device.type == "cpu":
            gen = torch.default_generator
        else:
            return {"device": str(device)}
    try:
        return generator_state(gen)
    except (RuntimeError, AttributeError, TypeError):  # a generator of a kind this torch cannot read
        return {"device": str(getattr(gen, "device", "unknown"))}


def generator_state(gen) -> dict:
    """A generator's position: Philox seed and offset for CUDA, a hash of the state for the CPU."""
    device = gen.device
    if device.type == "cuda":
        # Generator.get_offset / initial_seed: torch/csrc/Generator.cpp (THPGenerator_getOffset), 2.11 and 2.14.
        index = device.index if device.index is not None else torch.cuda.current_device()
        return {"device": f"cuda:{index}", "seed": gen.initial_seed(), "offset": gen.get_offset()}
    import hashlib

    state = gen.get_state()  # a uint8 tensor (5056 bytes for the CPU's Mersenne Twister)
    digest = hashlib.blake2b(bytes(state.tolist()), digest_size=8).hexdigest()
    return {"device": str(device), "seed": gen.initial_seed(), "state": digest}


# ---------------------------------------------------------------- the environment


def record_env(device: str, flags=None) -> dict:
    """The header's `env`: versions, device, and every flag that decides determinism, as flat values."""
    import platform
    import warnings

    cuda = device.startswith("cuda") and torch.cuda.is_available()
    env = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "nccl": _nccl_version() if cuda else None,
        "gpu": torch.cuda.get_device_name(torch.device(device)) if cuda else None,
        "driver": _driver_version() if cuda else None,
        "python": platform.python_version(),
    }
    if flags is not None:
        env.update(
            {
                "deterministic": flags.deterministic,
                "warn_only": flags.warn_only,
                "cudnn_enabled": flags.cudnn_enabled,
                "cudnn_benchmark": flags.cudnn_benchmark,
                "cudnn_deterministic": flags.cudnn_deterministic,
            }
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading the TF32 flags warns on torch that prefers fp32_precision
        env["allow_tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
        env["allow_tf32_cudnn"] = bool(torch.backends.cudnn.allow_tf32)
        env["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    env["cublas_workspace_config"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    env["inductor_deterministic"] = _inductor_deterministic()
    env["pythonhashseed"] = os.environ.get("PYTHONHASHSEED")
    env["fill_uninitialized_memory"] = getattr(flags, "fill_uninitialized_memory", None) if flags is not None else None
    return env


def _nccl_version():
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - a build without NCCL
        return None
    return ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)


def _driver_version():
    """The NVIDIA driver's version (580.x), from the kernel module; None where it cannot be read."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    import re

    m = re.search(r"Kernel Module(?: for [\w-]+)?\s+(\d+(?:\.\d+)+)", text) or re.search(r"\s(\d{3,}\.\d+(?:\.\d+)?)\s", text)
    return m.group(1) if m else None


def _inductor_deterministic():
    """torch._inductor.config.deterministic where inductor is loaded (never imported here: it is slow), else the env var."""
    config = sys.modules.get("torch._inductor.config")
    if config is not None:
        value = getattr(config, "deterministic", None)
        if isinstance(value, (bool, int, str)) or value is None:
            return value
    return os.environ.get("TORCHINDUCTOR_DETERMINISTIC")


# ---------------------------------------------------------------- one record, start to end


@dataclass
class RecordResult:
    """How a record went. `path` is the file kept: PATH when complete, PATH.partial when cut short, None when nothing was."""

    path: str | None
    complete: bool
    steps: int = 0
    ops: int = 0
    bytes: int = 0
    seconds: float = 0.0
    stopped: bool = False
    notices: list[str] = field(default_factory=list)
    problem: object = None  # findings.Problem


def needs_cublas_config() -> bool:
    """Does this torch refuse cuBLAS in deterministic mode without CUBLAS_WORKSPACE_CONFIG? (Before 2.10 it does.)"""
    parts = torch.__version__.split("+")[0].split(".")
    try:
        return (int(parts[0]), int(parts[1])) < (2, 10)
    except (ValueError, IndexError):
        return True


def _loaded_message(path: str, loaded: str, kept: str | None) -> str:
    """The error for a record PATH that is `loaded`, a project module the run imported: not renamed over it."""
    same = os.path.normpath(os.path.abspath(path)) == loaded
    what = "" if same else f"{os.path.relpath(loaded)}, "
    where = f"the whole record is in {kept}: move it where you want it" if kept else "nothing was recorded"
    return f"-o {path} is {what}a project module the run loaded: the record was not renamed over it; {where}"


def record(
    target,
    path: str,
    *,
    device: str,
    steps: int,
    seed: int | None = None,
    deterministic: bool = False,
    benchmark: bool | None = None,
    input_shape=None,
    scheme: str = DEFAULT_SCHEME,
    staged: bool | None = None,
    workload=None,
    make_recorder=None,
    notices=(),
) -> RecordResult:
    """Record `target` for `steps` optimizer steps into `path` (streamed through PATH.partial).

    `deterministic` turns on `torch.use_deterministic_algorithms(True)` and
    turns cudnn.benchmark off (and sets CUBLAS_WORKSPACE_CONFIG=:4096:8 where
    this torch needs it and it is not set; the variable is put back after);
    `benchmark` sets cudnn.benchmark. The runner puts every flag back.
    `make_recorder(writer, **options)`: the Recorder to use (default `Recorder`,
    the Python engine; opscan/trace/native.py's `recorder_for` gives the native
    engine's). `notices` go first in the result's.
    Raises OSError if PATH.partial cannot be created; anything else that goes
    wrong is in the result's `problem`.
    """
    from opscan.trace.runner import run

    t0 = time.perf_counter()
    writer = open_writer(path, scheme)
    recorder = (make_recorder or Recorder)(
        writer, target=target.name, kind=target.kind, argv=target.argv, steps=steps, device=device, seed=seed,
        scheme=scheme, deterministic=deterministic, benchmark=benchmark, staged=staged,
    )  # fmt: skip
    saved_cublas = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    set_cublas = deterministic and needs_cublas_config() and saved_cublas not in (":4096:8", ":16:8")
    if set_cublas:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    try:
        outcome = run(
            target, device=device, steps=steps, train=True, seed=seed, input_shape=input_shape,
            modes=recorder.modes, on_step=recorder.end_step, workload=workload,
        )  # fmt: skip
    except BaseException:
        recorder.abandon()
        raise
    finally:
        if set_cublas:
            if saved_cublas is None:
                os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
            else:
                os.environ["CUBLAS_WORKSPACE_CONFIG"] = saved_cublas
    complete = outcome.problem is None
    # Known only now: the modules the run imported. PATH may be one of them (-o seeding.py beside a script that
    # imports it); the rename would replace the user's code with the record. The whole record stays in PATH.partial.
    loaded = same_file(path, recorder.loaded_files()) if complete and os.path.isfile(path) else None
    result = RecordResult(None, complete and loaded is None, stopped=outcome.stopped, notices=list(outcome.notices), problem=outcome.problem)
    result.notices[:0] = list(notices)
    result.path = recorder.finish(outcome, complete=complete, rename=loaded is None)  # OSError: the writer removed PATH.partial
    if loaded is not None:
        result.problem = Problem(_loaded_message(path, loaded, result.path), target.name)
    elif not complete and result.path:
        result.notices.append(f"the record is incomplete: {result.path} holds the first {recorder.stats.steps} step(s)")
    if recorder.stats.unfingerprinted:
        result.notices.append(
            f"{recorder.stats.unfingerprinted} tensor(s) could not be fingerprinted and are null in the record; "
            f"the first: {recorder.stats.first_failure}"
        )
    if recorder.stats.internal_errors:
        result.notices.append(
            f"{recorder.stats.internal_errors} op(s) ran but could not be recorded in full (a failure inside opscan; "
            f"please report it): the first: {recorder.stats.first_internal}"
        )
    if recorder.stats.unrecorded_ops:
        result.notices.append(f"{recorder.stats.unrecorded_ops} op(s) after the last optimizer step are in no step and were not written")
    result.steps, result.ops, result.bytes = recorder.stats.steps, recorder.stats.ops, recorder.stats.bytes
    result.seconds = time.perf_counter() - t0
    return result
