"""Bitwise fingerprints of tensors, computed on the tensors' own device and read back once per step.

A fingerprint is a function of a tensor's element values only: the same
values give the same fingerprint whatever the memory layout, the device or
the order a kernel visits them in; a one-ulp change in one element changes it.

Scheme `xor64+sum` (the default). Each element's bit pattern is read as an
integer of its own width (1-byte elements unsigned, 2-, 4- and 8-byte ones
signed two's complement). Two exact reductions run on the device: X, the xor
of all of them sign-extended to 64 bits (`torch.hash_tensor`), and S, their
sum modulo 2**(8 * width) (modulo 2**32 for 1-byte elements), computed in
the elements' own width so that no widened copy of the tensor is made. The
fingerprint is `fmix64(X ^ fmix64(S))`, with MurmurHash3's 64-bit finaliser,
as 16 hex digits. X alone changes with any single-element change; S keeps
what xor loses (a pair of equal values cancels under xor, so every tensor
whose values all come in pairs would share X = 0). Both reductions are exact
and commutative, which is what makes the fingerprint independent of layout
and kernel, and also what it cannot see: the same values in another order.
Scheme `xor64` is X alone (one reduction fewer).

Where the work happens. A TorchDispatchMode sees about a thousand ops per
training step, and any host sync per op would serialise the GPU, so nothing
here reads a value back. Each device has one preallocated uint64 buffer of
8-byte slots; every reduction writes its 0-dim result straight into a slot
through `out=`, and `end_step()` copies the used slots to the host in one
transfer and resolves every fingerprint of the step.

On CUDA, launching two or three reductions per tensor costs more host time
than the dispatch mode itself, so floating-point tensors are *staged*
instead: a copy puts the tensor's values into a zeroed staging buffer
(rows of `ROW` elements, each tensor starting on a row of its own). The
copies are queued and made `COPY_BATCH` at a time by one `_foreach_copy_`
(the queue holds an alias of each tensor, so its memory is not reused
meanwhile, while autograd's reference counts stay as they were); an
op that is about to write to a queued tensor's storage makes the queue's
copies first (`before_write`, called by the recorder for every op whose
schema writes an argument). The copies run on the stream current when they
are made: a program that produces tensors on a side stream and records them
there should not rely on the queue (`staged=False`). When
the buffer fills, or the step ends, three reductions over all its rows at
once give each row's xor, sum and float 2-norm. The host combines a tensor's
rows (xor of xors, sum of sums, root of the sum of squared norms): the same
X and S as the direct path, because zero padding adds nothing to either.

Torch APIs used, all present in torch 2.11 and 2.14.1: `torch.hash_tensor`
(with `dim`, `out=`; aten/src/ATen/native/ReduceOps.cpp, xor_sum_stub; its
CUDA kernel dispatches on the input dtype, so there is no upcast copy),
`torch.sum(dim=, dtype=, out=)`, `torch.linalg.vector_norm(dim=, dtype=, out=)`,
`Tensor.view(dtype)`, `torch.as_strided`.
"""

from __future__ import annotations

import ctypes

import torch

from opscan.trace.recordwriter import HostSlots, Resolver, combine

SCHEMES = ("xor64+sum", "xor64")
DEFAULT_SCHEME = "xor64+sum"

_M64 = (1 << 64) - 1

# The integer view of each element width; 1-byte elements are read unsigned.
_INT_BY_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
# The dtype S is summed in, by element width, and the slot view it is written through.
_SUM_DTYPE = {1: torch.int32, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_SUM_VIEW = {1: "i32", 2: "i16", 4: "i32", 8: "i64"}
_SUM_MASK = {1: (1 << 32) - 1, 2: (1 << 16) - 1, 4: (1 << 32) - 1, 8: _M64}

# dtypes whose norm is taken (float32 accumulation, float64 for float64 tensors).
FLOATS = frozenset({torch.float32, torch.float16, torch.bfloat16, torch.float64})
_LOW = frozenset({torch.float16, torch.bfloat16})

# Only these go through the staging buffers (the bulk of a training step); others are hashed directly.
_STAGED = (torch.float32, torch.float16, torch.bfloat16)

ROW = 1 << 16  # staging row length in elements: a tensor pads to whole rows
STAGE_BYTES = 256 << 20  # staging buffer per (device, dtype); bigger tensors are hashed directly
COPY_BATCH = 64  # queued staging copies per `_foreach_copy_` launch


def reference(t: torch.Tensor, scheme: str = DEFAULT_SCHEME) -> str:
    """A tensor's fingerprint computed on the host from its bytes, without the device path (for tests and tools)."""
    flat = t.detach().resolve_conj().resolve_neg().contiguous().reshape(-1).cpu()
    if t.is_complex():
        flat = torch.view_as_real(flat).reshape(-1)
    size = flat.element_size()
    values = flat.view(_INT_BY_SIZE[size]).tolist() if flat.numel() else []
    x = s = 0
    for v in values:
        x ^= v & _M64
        s += v
    return combine(scheme, x, s & _SUM_MASK[size])


def _int_view(t: torch.Tensor) -> torch.Tensor:
    """The tensor's elements as integers of their own width (no copy where the layout allows)."""
    try:
        return t.view(_INT_BY_SIZE[t.element_size()])
    except (RuntimeError, KeyError):
        pass
    u = t.resolve_conj().resolve_neg()
    if u.is_complex():
        u = torch.view_as_real(u)
    return u.contiguous().view(_INT_BY_SIZE[u.element_size()])


class Slots:
    """One device's buffer of 8-byte result slots, written by `out=` reductions and read once per step."""

    def __init__(self, device: torch.device, capacity: int = 1 << 12):
        self.device = device
        self.used = 0
        self._alloc(capacity)

    def _alloc(self, capacity: int, keep: torch.Tensor | None = None) -> None:
        buf = torch.zeros(capacity, dtype=torch.uint64, device=self.device)
        if keep is not None and self.used:
            buf[: self.used].copy_(keep[: self.used])  # device to device: no sync
        self.buf = buf
        # Slot k through each dtype: its low bytes (torch runs little-endian only).
        self.kinds = {
            "u64": buf,
            "i64": buf.view(torch.int64),
            "i32": buf.view(torch.int32)[0::2],
            "i16": buf.view(torch.int16)[0::4],
            "f32": buf.view(torch.float32)[0::2],
            "f64": buf.view(torch.float64),
        }
        self._views: dict[str, list] = {}

    def take(self, n: int) -> int:
        """Reserve n consecutive slots; returns the first. Grows the buffer (on the device) when full."""
        k = self.used
        if k + n > self.buf.numel():
            capacity = self.buf.numel()
            while k + n > capacity:
                capacity *= 2
            self._alloc(capacity, keep=self.buf)
        self.used = k + n
        return k

    def view_list(self, kind: str) -> list:
        """0-dim views of every slot as uint64, int64, float32 or float64, made once per buffer."""
        views = self._views.get(kind)
        if views is None:
            views = self._views[kind] = list(self.kinds[kind].unbind())
        return views

    def read(self) -> torch.Tensor:
        """The used slots on the host (one copy, which waits for the device), and start over."""
        host = self.buf[: self.used].to("cpu") if self.used else torch.zeros(0, dtype=torch.uint64)
        self.used = 0
        return host


class _Stage:
    """A zeroed staging buffer of `rows` x ROW elements of one float dtype on one device."""

    def __init__(self, owner: Fingerprinter, slots: Slots, dtype: torch.dtype, capacity: int):
        self.owner = owner
        self.slots = slots
        self.dtype = dtype
        self.rows = max(1, capacity // ROW)
        self.buf = torch.zeros(self.rows * ROW, dtype=dtype, device=slots.device)
        size = self.buf.element_size()
        self.bits = self.buf.view(_INT_BY_SIZE[size]).view(self.rows, ROW)
        self.sum_dtype, self.sum_view = _SUM_DTYPE[size], _SUM_VIEW[size]
        self.values = self.buf.view(self.rows, ROW)
        self.used_rows = 0
        self.batch: list = [None]  # the batch being filled: set to (slots, first slot, rows, first norm slot) by flush()
        self.pending_dst: list = []  # staging views waiting for their copy, and the tensors to copy into them
        self.pending_src: list = []
        self._strides: dict[tuple, tuple] = {}

    def fits(self, n: int) -> bool:
        return -(-n // ROW) <= self.rows

    def put(self, t: torch.Tensor, n: int) -> tuple[list, int, int]:
        """Queue t's values for whole rows; returns (batch, first row, row count).

        The copy itself waits in `pending` and goes with the next ones in one
        `_foreach_copy_` (`copy_pending`): the owner calls that before any op
        writes to a queued tensor, and `flush` before it reduces the rows. The
        queue holds a reference to t, so its memory cannot be reused meanwhile.
        """
        if self.used_rows + -(-n // ROW) > self.rows:
            self.flush()
        dst, placed = self._place(t, n)
        pending = self.pending_dst
        pending.append(dst)
        # An alias, not t itself: it keeps the memory but not t's own reference count, which autograd
        # reads (AccumulateGrad steals a gradient no one else holds, and copies one that is held).
        self.pending_src.append(t.detach())
        if len(pending) >= COPY_BATCH:
            self.copy_pending()
        return placed

    def copy_pending(self) -> None:
        """Copy every queued tensor to its rows: one multi-tensor launch."""
        if self.pending_dst:
            _copy_all(self.pending_dst, self.pending_src)
            self.pending_dst, self.pending_src = [], []

    def put_many(self, tensors: list[torch.Tensor]) -> list[tuple[list, int, int]]:
        """`put` for many tensors: their destination views first, then one multi-tensor copy per batch."""
        placed, dsts, srcs = [], [], []
        for t in tensors:
            n = t.numel()
            if self.used_rows + -(-n // ROW) > self.rows:
                _copy_all(dsts, srcs)
                dsts, srcs = [], []
                self.flush()
            dst, where = self._place(t, n)
            dsts.append(dst)
            srcs.append(t)
            placed.append(where)
        _copy_all(dsts, srcs)
        return placed

    def _place(self, t: torch.Tensor, n: int):
        """The next free rows, as a view shaped like t, and (batch, first row, row count)."""
        row, count = self.used_rows, -(-n // ROW)
        shape = t.shape
        strides = self._strides.get(shape)
        if strides is None:
            strides = self._strides[shape] = _contiguous_strides(shape)
        self.used_rows = row + count
        return self.buf.as_strided(shape, strides, row * ROW), (self.batch, row, count)

    def flush(self) -> None:
        """Reduce every used row into slots; zero the rows for the next batch."""
        self.copy_pending()
        r = self.used_rows
        if not r:
            return
        slots, xor_only = self.slots, self.owner.xor_only
        width = 2 if xor_only else 3
        a = slots.take(width * r)
        bits = self.bits[:r]
        torch.hash_tensor(bits, dim=[1], out=slots.buf[a : a + r])
        if not xor_only:
            torch.sum(bits, dim=1, dtype=self.sum_dtype, out=slots.kinds[self.sum_view][a + r : a + 2 * r])
        n0 = a + (width - 1) * r
        norm_dtype = torch.float32 if self.dtype in _LOW else None
        torch.linalg.vector_norm(self.values[:r], dim=1, dtype=norm_dtype, out=slots.kinds["f32"][n0 : n0 + r])
        self.buf[: r * ROW].zero_()
        self.batch[0] = (slots, a, r, n0, self.sum_view)
        self.batch = [None]
        self.used_rows = 0


def _copy_all(dsts: list, srcs: list) -> None:
    """dst.copy_(src) for each pair: one multi-tensor launch (`torch._foreach_copy_`, torch 2.2 and later)."""
    if not dsts:
        return
    foreach = getattr(torch, "_foreach_copy_", None)
    if foreach is not None:
        foreach(dsts, srcs)
        return
    for dst, src in zip(dsts, srcs):
        dst.copy_(src)


def _contiguous_strides(shape) -> tuple:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


class Fingerprinter:
    """Fingerprint tensors as a run goes; `end_step()` resolves the step's fingerprints on the host.

    `add(t, norm)` returns a handle (an int, in order from 0 over the whole
    run). After `end_step()`, `hex(handle)` is the fingerprint as 16 hex
    digits and `norm(handle)` the 2-norm asked for (float32 accumulation,
    float64 for float64 tensors), for every handle of the step and for the
    handles of earlier steps still kept (`keep_only`).

    `staged`: stage floating-point tensors (see the module docstring); None
    means on CUDA devices only.
    """

    def __init__(self, scheme: str = DEFAULT_SCHEME, *, staged: bool | None = None, stage_bytes: int = STAGE_BYTES):
        if scheme not in SCHEMES:
            raise ValueError(f"unknown fingerprint scheme {scheme!r}; choose from {', '.join(SCHEMES)}")
        if not hasattr(torch, "hash_tensor"):
            raise RuntimeError(f"torch {torch.__version__} has no torch.hash_tensor; opscan record needs torch 2.10 or later")
        self.scheme = scheme
        self.xor_only = scheme == "xor64"
        self.staged = staged
        self.stage_bytes = stage_bytes
        self._slots: dict[torch.device, Slots] = {}
        self._stages: dict[tuple, _Stage | None] = {}
        self._entries: list = []  # this step's handles, from self._base
        self._blocks: list[tuple] = []  # this step's float32 blocks: (slots, first slot, length)
        self._block_values: list[list[float]] = []
        self._base = 0
        self._resolver = Resolver(scheme)  # end_step()'s, when the step is resolved in this process
        # Storages of the tensors whose staging copy is still queued (it may hold stale ones: a
        # false hit only copies early). An op must not write to one before the copy is made.
        self.queued: set[int] = set()

    # ---------------------------------------------------------------- the per-op path

    def add(self, t: torch.Tensor, norm: bool = False) -> int:
        """Fingerprint t's current values (and its norm if asked and t is floating point); returns its handle."""
        entries = self._entries
        handle = self._base + len(entries)
        n = t.numel()
        if n == 0:
            entries.append(("c", combine(self.scheme, 0, 0), 0.0 if norm else None))
            return handle
        device = t.device
        dtype = t.dtype
        stage = self._stages.get((device, dtype), False)
        if stage is False:
            stage = self._stage_for(device, dtype)
        if stage is not None and -(-n // ROW) <= stage.rows:
            batch, row, count = stage.put(t, n)
            entries.append(("s", stage, batch, row, count, norm))
            self.queued.add(t.data_ptr() - t.storage_offset() * t.element_size())  # its storage's start
            return handle
        slots = self._slots_for(device)
        bits = _int_view(t)
        want = norm and dtype in FLOATS
        width = (1 if self.xor_only else 2) + want
        k = slots.take(width)
        size = bits.element_size()
        torch.hash_tensor(bits, out=slots.view_list("u64")[k])
        if not self.xor_only:
            torch.sum(bits, dim=None, dtype=_SUM_DTYPE[size], out=slots.view_list(_SUM_VIEW[size])[k + 1])
        kind = 0
        if want:
            m = k + width - 1
            if dtype is torch.float64:
                torch.linalg.vector_norm(t, out=slots.view_list("f64")[m])
                kind = 2
            else:
                torch.linalg.vector_norm(t, dtype=torch.float32 if dtype in _LOW else None, out=slots.view_list("f32")[m])
                kind = 1
        entries.append(("d", slots, k, kind, size))
        return handle

    def add_many(self, tensors: list[torch.Tensor], norm_index: int | None = None) -> list[int]:
        """`add` for a list of tensors; those that stage together are copied by one `_foreach_copy_`.

        `norm_index`: the one tensor whose norm is wanted (None: none).
        """
        groups: dict = {}
        handles: list = [None] * len(tensors)
        for i, t in enumerate(tensors):
            n = t.numel()
            stage = self._stages.get((t.device, t.dtype), False) if n else None
            if stage is False:
                stage = self._stage_for(t.device, t.dtype)
            if stage is None or not stage.fits(n):
                handles[i] = self.add(t, i == norm_index)
                continue
            group = groups.get(id(stage))
            if group is None:
                group = groups[id(stage)] = (stage, [], [])
            group[1].append(i)
            group[2].append(t)
        for stage, indexes, items in groups.values():
            for i, placed in zip(indexes, stage.put_many(items)):
                self._entries.append(("s", stage, *placed, i == norm_index))
                handles[i] = self._base + len(self._entries) - 1
        return handles

    def before_write(self, tensors) -> None:
        """An op is about to write these tensors: make the queued copies first if one of them is queued."""
        queued = self.queued
        for t in tensors:
            try:
                hit = t.data_ptr() - t.storage_offset() * t.element_size() in queued  # its storage's start
            except (RuntimeError, AttributeError):  # no storage to read (a subclass, a meta tensor): be safe
                hit = True
            if hit:
                self.copy_pending()
                return

    def copy_pending(self) -> None:
        """Make every queued staging copy now (one launch per staging buffer with a queue)."""
        for stage in self._stages.values():
            if stage is not None and stage.pending_dst:
                stage.copy_pending()
        self.queued.clear()

    def derive(self, base: int | None, view: torch.Tensor, base_tensor: torch.Tensor) -> int | None:
        """A handle for a view of an already fingerprinted tensor, without reading its values.

        The same elements in the same layout (detach, alias) share the base's
        fingerprint; any other view gets `fmix64(FP_base ^ G)`, G a hash of the
        view's shape, strides, offset from the base and dtype: not a hash of the
        values, but equal in two runs exactly when the base's fingerprint is.
        """
        if base is None:
            return None
        shape, stride, offset = view.shape, view.stride(), view.storage_offset() - base_tensor.storage_offset()
        if offset == 0 and view.dtype == base_tensor.dtype and shape == base_tensor.shape and stride == base_tensor.stride():
            return base
        self._entries.append(("x", base, (tuple(shape), stride, offset, view.dtype)))
        return self._base + len(self._entries) - 1

    def add_value(self, t: torch.Tensor) -> int:
        """Keep a one-element tensor's value (a loss) to read with the step: `norm(handle)` gives it."""
        slots = self._slots_for(t.device)
        k = slots.take(1)
        slots.view_list("f64")[k].copy_(t.detach().reshape(()))
        self._entries.append(("v", slots, k))
        return self._base + len(self._entries) - 1

    def add_block(self, parts: list[torch.Tensor], device: torch.device) -> int:
        """Concatenate float32 tensors into slots on `device` (one launch); `block(index)` reads them after end_step()."""
        n = sum(p.numel() for p in parts)
        slots = self._slots_for(device)
        k = slots.take((n + 1) // 2)
        if n:
            torch.cat([p.reshape(-1) for p in parts], out=slots.buf.view(torch.float32)[2 * k : 2 * k + n])
        self._blocks.append((slots, k, n))
        return len(self._blocks) - 1

    def block(self, index: int) -> list[float]:
        return self._block_values[index]

    def _slots_for(self, device: torch.device) -> Slots:
        slots = self._slots.get(device)
        if slots is None:
            slots = self._slots[device] = Slots(device)
        return slots

    def _stage_for(self, device: torch.device, dtype: torch.dtype) -> _Stage | None:
        staged = self.staged if self.staged is not None else device.type == "cuda"
        stage = None
        if staged and dtype in _STAGED:
            slots = self._slots_for(device)
            stage = _Stage(self, slots, dtype, self.stage_bytes // torch.empty(0, dtype=dtype).element_size())
        self._stages[(device, dtype)] = stage
        return stage

    # ---------------------------------------------------------------- once per step

    def end_step_raw(self) -> tuple[list[bytes], list[tuple], list[tuple]]:
        """Flush the staging buffers and read every device's slots once: (slot bytes per device, entries, blocks).

        The entries and blocks are plain data for `recordwriter.Resolver`
        (which `end_step()` runs here, and a record's writer process runs beside).
        """
        for stage in self._stages.values():
            if stage is not None:
                stage.flush()
        self.queued.clear()
        index: dict[int, int] = {}
        hosts: list[bytes] = []
        for slots in self._slots.values():
            index[id(slots)] = len(hosts)
            host = slots.read()
            hosts.append(ctypes.string_at(host.data_ptr(), host.numel() * 8) if host.numel() else b"")
        xor_only = self.xor_only
        entries = []
        for entry in self._entries:
            kind = entry[0]
            if kind == "s":
                _, stage, batch, row, count, want = entry
                slots, a, r, n0, sum_view = batch[0]
                size = stage.buf.element_size()
                entries.append(
                    ("s", index[id(slots)], a + row, count, -1 if xor_only else a + r + row, sum_view, _SUM_MASK[size], n0 + row if want else -1)
                )
            elif kind == "d":
                _, slots, k, norm_kind, size = entry
                entries.append(("d", index[id(slots)], k, norm_kind, _SUM_VIEW[size], _SUM_MASK[size], xor_only))
            elif kind == "x":
                shape, stride, offset, dtype = entry[2]
                entries.append(("x", entry[1], shape, tuple(stride), offset, str(dtype)))
            elif kind == "v":
                entries.append(("v", index[id(entry[1])], entry[2]))
            else:
                entries.append(entry)
        blocks = [(index[id(slots)], k, n) for slots, k, n in self._blocks]
        self._blocks = []
        self._base += len(entries)
        self._entries = []
        return hosts, entries, blocks

    def end_step(self) -> None:
        """`end_step_raw()`, resolved here: `hex(handle)`, `norm(handle)` and `block(index)` answer after it."""
        hosts, entries, blocks = self.end_step_raw()
        views = [HostSlots(h) for h in hosts]
        self._resolver.resolve(views, entries)
        self._block_values = [views[hi].floats(k, n) for hi, k, n in blocks]

    def hex(self, handle: int | None) -> str | None:
        return None if handle is None else self._resolver.hex.get(handle)

    def norm(self, handle: int | None) -> float | None:
        return None if handle is None else self._resolver.norm.get(handle)

    def keep_only(self, handles) -> None:
        """Forget resolved handles except these (those a later step may still refer to)."""
        self._resolver.keep_only(handles)

    @property
    def pending(self) -> int:
        """Handles added since the last end_step()."""
        return len(self._entries)
