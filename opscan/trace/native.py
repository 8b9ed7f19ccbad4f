"""opscan record's native engine: the per-op work in C++ (opscan/trace/csrc/record_hook.cpp), built on first use.

The Python engine (opscan/trace/record.py, `RecordMode`) is a TorchDispatchMode:
every op reaches Python and comes back, which on an H200 host costs more than
the op's own launch (BENCHMARKS.md). The native engine does the same work in a
RecordFunction callback inside the dispatcher and fingerprints a batch of
tensors in one kernel launch. It writes the same record format, read by the
same `compare`, with three differences a reader can see:

* An op is the outermost dispatcher call: `aten.conv2d.default` where the
  Python engine sees the `aten.convolution.default` it decomposes into, and in
  backward the calls an autograd node makes. Two records compare op by op only
  when made by the same engine (the header's `env.record_engine` says which).
* Norms are accumulated in float64 (the Python engine uses float32 for float32
  and narrower tensors); fingerprints are the same bits.
* The forward line of a custom autograd.Function's backward is the op after its
  `apply`, not the `apply` line itself.

It is built with `torch.utils.cpp_extension.load` (a C++ compiler and, for
CUDA, nvcc) into OPSCAN_NATIVE_DIR, else ~/.cache/opscan/native, once per
source, torch and Python version. `load()` says why when it cannot be.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import torch

from opscan.trace.record import _RANDOM_WITHOUT_GENERATOR, STATS_WRITERS, Recorder, draw_state
from opscan.trace.recordwriter import PHASES, PackedOps, Resolver, Step
from opscan.trace.sourcemap import _INTERNAL_CODE, PHASE_BACKWARD, PHASE_FORWARD, PHASE_OPTIMIZER, Site, _get_sequence_nr, _kind

CSRC = Path(__file__).with_name("csrc")
CHUNK_ELEMENTS = 1 << 15  # record_hook.cpp kChunk: elements per block of the fingerprint kernel
assert PHASES == (PHASE_FORWARD, PHASE_BACKWARD, PHASE_OPTIMIZER)  # the engine's phase numbers
# Outermost ops that draw through an op they call (the engine records outermost ops only, and takes
# the generator's state before the op runs); an op with a Generator argument is known by its schema.
_RANDOM_COMPOSITES = frozenset(
    {
        "aten.dropout", "aten.dropout_", "aten.feature_dropout", "aten.feature_dropout_", "aten.alpha_dropout",
        "aten.alpha_dropout_", "aten.feature_alpha_dropout", "aten.feature_alpha_dropout_", "aten.rrelu", "aten.rrelu_",
        "aten.scaled_dot_product_attention",
    }
)  # fmt: skip
_loaded: dict[bool, object] = {}
_failed: dict[bool, str] = {}
_tables: list = []  # _dtype_tables' answer, once per process


def build_dir(cuda: bool) -> Path:
    """Where the extension for this source, torch, Python and CUDA choice is built."""
    digest = hashlib.sha256()
    for name in ("record_hook.cpp", "fingerprint.cu", "fingerprint.h"):
        digest.update((CSRC / name).read_bytes())
    digest.update(f"{torch.__version__}|{sys.version_info[:2]}|{cuda}".encode())
    root = os.environ.get("OPSCAN_NATIVE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "opscan", "native"
    )
    return Path(root) / f"record_{digest.hexdigest()[:16]}"


def load(cuda: bool | None = None, *, announce: bool = False):
    """The built extension, or None; `why_not()` then says why. `cuda`: with the GPU kernel (default: if CUDA works).

    `announce`: say on stderr, before a build, that one is starting (it takes tens of seconds, once).
    """
    if cuda is None:
        cuda = torch.cuda.is_available()
    if cuda in _loaded:
        return _loaded[cuda]
    if cuda in _failed:
        return None
    try:
        cpp_extension = _quiet_import_cpp_extension()
        if cuda and cpp_extension.CUDA_HOME is None:
            raise RuntimeError("no CUDA toolkit (nvcc) was found")
        folder = build_dir(cuda)
        folder.mkdir(parents=True, exist_ok=True)
        if announce and not any(folder.glob("*.so")):
            print(
                f"opscan: building the native record engine into {folder} (once per torch version, about a minute; "
                "--engine python records without it)",
                file=sys.stderr,
                flush=True,
            )
        sources = [str(CSRC / "record_hook.cpp")] + ([str(CSRC / "fingerprint.cu")] if cuda else [])
        # NDEBUG as torch itself is built: record_function.h checks, in debug builds only, state that a release torch never sets.
        flags = ["-O3", "-DNDEBUG"] + ([] if cuda else ["-DOPSCAN_NO_CUDA"])
        import contextlib
        import io

        log = io.StringIO()
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            module = cpp_extension.load(
                name=f"opscan_record_{folder.name.split('_')[1]}",
                sources=sources,
                extra_cflags=flags,
                extra_cuda_cflags=["-O3", "-DNDEBUG"],
                build_directory=str(folder),
                with_cuda=cuda,
                verbose=False,
            )
    except Exception as exc:  # noqa: BLE001 - any failure to build means the Python engine, with the reason
        _failed[cuda] = _reason(exc)
        return None
    _loaded[cuda] = module
    return module


ENGINES = ("auto", "native", "python")


def recorder_for(engine: str, device: str):
    """(`record(make_recorder=...)` for this engine, or None for the Python engine; a notice or None).

    "python": None. "native": the native engine's, ValueError if it cannot be
    built. "auto": native on a CUDA device in a single process where it builds;
    else None, with a notice saying why when the reason is not the device.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown record engine {engine!r}; choose from {', '.join(ENGINES)}")
    if engine == "python":
        return None, None
    cuda = device.startswith("cuda")
    if engine == "auto":
        if not cuda:
            return None, None  # the Python engine's cost is the device's launch cost here: nothing to win
        from opscan.trace.ranks import from_env

        info = from_env()
        if info is not None and info.world_size > 1:
            return None, "recorded with the Python engine: the native engine records one process (collectives are the Python engine's)"
    ext = load(cuda=cuda, announce=True)
    if ext is None:
        if engine == "native":
            raise ValueError(f"the native record engine could not be built: {why_not(cuda)}")
        return None, f"recorded with the Python engine: the native engine could not be built ({why_not(cuda)})"

    def make(writer, **options):
        return NativeRecorder(writer, ext=ext, **options)

    return make, None


def _quiet_import_cpp_extension():
    """torch.utils.cpp_extension, without the warning its import logs on a machine with no CUDA runtime."""
    import logging

    log = logging.getLogger("torch.utils.cpp_extension")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        from torch.utils import cpp_extension
    finally:
        log.setLevel(level)
    return cpp_extension


def _reason(exc: BaseException) -> str:
    """One line for a failed build: the compiler's first error where the output has one, else the last line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [line for line in lines if " error" in line.lower() or line.lower().startswith("error")]
    errors = [line for line in errors if not line.startswith("Error building extension")] or errors
    line = errors[0] if errors else (lines[-1] if lines else "")
    return f"{type(exc).__name__}: {line}"[:300]


def why_not(cuda: bool | None = None) -> str | None:
    """Why `load(cuda)` gave None (None if it has not failed)."""
    if cuda is None:
        cuda = torch.cuda.is_available()
    return _failed.get(cuda)


def _dtype_tables(ext) -> tuple[list[int], list[str]]:
    """For each ScalarType number: the geometry salt's code of the dtype's name, and the name the record prints."""
    if _tables:
        return _tables[0]
    import warnings

    codes: list[int] = []
    names: list[str] = []
    for dtype in {getattr(torch, n) for n in dir(torch) if isinstance(getattr(torch, n, None), torch.dtype)}:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "ComplexHalf support is experimental", and the like
                number = ext.scalar_type(torch.empty(0, dtype=dtype))
        except (RuntimeError, TypeError):
            continue
        while len(codes) <= number:
            codes.append(0)
            names.append("unknown")
        text = str(dtype)
        codes[number] = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        names[number] = text.removeprefix("torch.")
    _tables.append((codes, names))
    return codes, names


def fingerprint_now(ext, tensors, scheme: str = "xor64+sum") -> list[tuple[str | None, float | None]]:
    """(fingerprint, norm) of each tensor through the engine's own path (the kernel for CUDA tensors): for tests and checks."""
    codes, names = _dtype_tables(ext)
    ext.reset()
    ext.start(_kind, _INTERNAL_CODE, lambda gen, device: None, [], [], {}, codes, names, [], scheme == "xor64")
    ext.pause()
    try:
        handles = [ext.ref(t) for t in tensors]
        first, count, blob, *_ = ext.end_step([])
    finally:
        ext.reset()
    resolver = Resolver(scheme)  # the writer's reading of the step's "F" entry
    resolver.base = first
    resolver.resolve([], [("F", blob, count)])
    return [(resolver.hex.get(h), resolver.norm.get(h)) if h is not None else (None, None) for h in handles]


class NativeRecorder(Recorder):
    """A Recorder whose per-op work is the native engine's; the step and the record are written as the Python engine's."""

    engine = "native"

    def __init__(self, writer, *, ext, **options):
        super().__init__(writer, **options)
        self.ext = ext
        self._module_stack: list = []
        self._called_roots: dict[int, object] = {}  # modules called from outside any module
        self._module_hooks: list = []
        self._started = False

    # ---------------------------------------------------------------- entering and leaving

    def __enter__(self) -> NativeRecorder:
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        self._set_flags()
        stack = self._module_stack
        stack.clear()
        roots = self._called_roots

        def pre(module, args):
            if not stack and id(module) not in roots:
                roots[id(module)] = module  # called from outside any module: a script's model, for naming
            stack.append(module)

        def post(module, args, output):
            if stack and stack[-1] is module:
                stack.pop()

        self._module_hooks = [register_module_forward_pre_hook(pre), register_module_forward_hook(post, always_call=True)]
        ext = self.ext
        self._handles.append(register_optimizer_step_pre_hook(self._native_step_pre))
        self._handles.append(register_optimizer_step_post_hook(lambda *a: ext.stepping(-1)))
        if not self._started:
            codes, names = _dtype_tables(ext)
            params = [p for _, p in self._params()]
            randoms = sorted({".".join(n.split(".")[:2]) for n in _RANDOM_WITHOUT_GENERATOR} | _RANDOM_COMPOSITES)
            ext.reset()
            stats = {packet: [flag, *positions] for packet, (flag, positions) in STATS_WRITERS.items()}
            ext.start(_kind, _INTERNAL_CODE, draw_state, stack, randoms, stats, codes, names, params, self.fpr.xor_only)
            self._started = True
        else:
            ext.resume()
        return self

    def __exit__(self, *exc_info) -> None:
        self.ext.pause()
        for h in self._module_hooks:
            h.remove()
        self._module_hooks = []
        while self._handles:
            self._handles.pop().remove()
        self._restore_flags()

    def _native_step_pre(self, optimizer, args, kwargs) -> None:
        self.ext.stepping(1)
        first = self.optimizer is None
        self._before_optimizer_step(optimizer, args, kwargs)
        if first and self.model is None:  # a script's parameters, named just now
            self.ext.set_params([p for _, p in self._params()])

    def _script_root(self, optimizer):
        """The module a script trains: one it called whose parameters the optimizer holds (the Python engine reads its sites)."""
        from opscan.trace.sourcemap import _find_root

        wanted = {id(p) for group in optimizer.param_groups for p in group["params"]}
        for module in self._called_roots.values():
            root, _ = _find_root(module)
            if any(id(p) in wanted for p in root.parameters()):
                return root
        return None

    # ---------------------------------------------------------------- once per step

    def ref(self, t):
        return self.ext.ref(t)

    def end_step(self, step: int) -> None:
        grad = torch.is_grad_enabled()
        torch.set_grad_enabled(False)
        try:
            self._end_native_step(step)
        finally:
            torch.set_grad_enabled(grad)

    def _end_native_step(self, step: int) -> None:
        params = self._params()
        handles = [self.ext.ref(p) for _, p in params]
        blocks = self._param_blocks(params)
        hosts, _, block_list = self.fpr.end_step_raw()
        first, count, blob, ops, new_ops, new_sites, new_metas, param_handles, loss, keep = self.ext.end_step(handles)
        if not self._header_written:
            self.writer.line(self._header())
            self._header_written = True
        new_op_json = dict(new_ops)
        sites = {}
        for sid, code, line, module in new_sites:
            site = Site(code.co_filename if code is not None else None, line if code is not None else None, module)
            self._site_ids[(site.filename, site.lineno, module)] = sid
            sites[sid] = self._where(site)
        metas = {}
        for mid, shapes, dtypes in new_metas:
            metas[mid] = f'"shapes":{json.dumps(shapes)},"dtypes":{json.dumps(dtypes)}'
        rows = PackedOps(*ops)
        param_rows = self._param_rows(params, handles, blocks)
        new_param_handles = {h: params[i][0] for h, i in param_handles if i < len(params)}
        entries: list = [("F", blob, count)]  # first .. first + count - 1: the step's handles, then the loss's (None: no backward())
        seq = _get_sequence_nr()
        self.ext.forget_nodes_before(self._seq_mark)
        self._seq_mark = seq
        self.writer.step(
            Step(
                step, hosts, entries, block_list, rows, param_rows, loss, keep=list(keep),
                new_ops=new_op_json, new_sites=sites, new_metas=metas, new_param_handles=new_param_handles,
            )
        )  # fmt: skip
        self.stats.steps = step + 1
        self.stats.ops += len(rows)
        unfingerprinted, internal, first_internal, first_failure, _ = self.ext.stats()
        self.stats.unfingerprinted = unfingerprinted
        self.stats.internal_errors = internal
        self.stats.first_internal = first_internal or None
        self.stats.first_failure = first_failure or None

    def finish(self, outcome=None, *, complete: bool = True, rename: bool = True):
        try:
            # The ops after the last step are the engine's, not in self.ops: count them for record()'s notice.
            pending = self.ext.stats()[4] if self._started else 0
            path = super().finish(outcome, complete=complete, rename=rename)
            self.stats.unrecorded_ops = pending
            return path
        finally:
            self.close()

    def abandon(self) -> None:
        try:
            super().abandon()
        finally:
            self.close()

    def close(self) -> None:
        """Drop the engine's state (the extension stays loaded)."""
        if self._started:
            self._started = False
            self.ext.reset()

