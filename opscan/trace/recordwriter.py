"""The host side of a record: fingerprints resolved from the step's slot bytes, JSON lines, the file. No torch.

A recorded step ends with one device-to-host copy of the step's result slots
(opscan/trace/fingerprint.py). What remains is pure host work: combining
each tensor's reductions into its 16-hex-digit fingerprint, formatting a
JSON line per op and writing the file. On a GPU that work costs as much as
the recorded step itself, so by default it runs in a writer process beside
the training process (`ProcessWriter`), which only hands it the step's raw
data; `InlineWriter` does the same work in the calling process.

Everything a step hands over is plain data (bytes, ints, strings, tuples),
so this module imports no torch and the writer process starts in a few tens
of milliseconds. The op, site and shape texts are sent once, as table
entries, and referred to by number afterwards.

Messages to the writer, in order (pickled tuples):
    ("open", path)                       -> reply ("opened", error or None)
    ("line", text)                       a line as is (the header)
    ("step", Step)                       one step's ops and its step line
    ("finish", end line or None, commit, remove)
                                         -> reply ("done", path kept or None, bytes, error or None)
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import pickle
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from typing import ClassVar

from opscan.fsutil import is_descriptor_link, is_special_file

_M64 = (1 << 64) - 1


def fmix64(x: int) -> int:
    """MurmurHash3's 64-bit finaliser."""
    x &= _M64
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & _M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & _M64
    x ^= x >> 33
    return x


def combine(scheme: str, x: int, s: int) -> str:
    """The fingerprint, as 16 hex digits, of a tensor whose element bits xor to `x` and sum to `s` (already reduced)."""
    if scheme == "xor64":
        return f"{x & _M64:016x}"
    return f"{fmix64((x & _M64) ^ fmix64(s)):016x}"


_DTYPE_CODES: dict[str, int] = {}


def geometry_salt(shape: tuple, stride: tuple, offset: int, dtype: str) -> int:
    """G of a derived fingerprint: fmix64 folded over rank, sizes, strides, offset, and a hash of the dtype's name ("torch.float32")."""
    code = _DTYPE_CODES.get(dtype)
    if code is None:
        code = _DTYPE_CODES[dtype] = int.from_bytes(hashlib.blake2b(dtype.encode(), digest_size=8).digest(), "little")
    g = fmix64(len(shape) + 0x9E3779B97F4A7C15)
    for v in (*shape, *stride, offset, code):
        g = fmix64(g ^ (v & _M64))
    return g


class HostSlots:
    """One device's result slots as copied to the host (8 bytes each), read as each kind when first asked for.

    Slot k's low bytes through each kind (torch runs little-endian only):
    u64/i64 the whole slot, i32/f32 its low 4 bytes, i16 its low 2.
    """

    _CASTS: ClassVar[dict[str, tuple[str, int]]] = {"u64": ("Q", 1), "i64": ("q", 1), "i32": ("i", 2), "i16": ("h", 4), "f32": ("f", 2), "f64": ("d", 1)}

    def __init__(self, data: bytes):
        self.view = memoryview(data)
        self._lists: dict[str, list] = {}

    def get(self, kind: str) -> list:
        values = self._lists.get(kind)
        if values is None:
            code, step = self._CASTS[kind]
            values = self._lists[kind] = self.view.cast(code)[::step].tolist() if len(self.view) else []
        return values

    def floats(self, k: int, n: int) -> list[float]:
        return self.view.cast("f")[2 * k : 2 * k + n].tolist()


class Resolver:
    """Fingerprints and norms by handle, resolved from a step's slots; handles kept across steps on request.

    Entries, one per handle in order from the step's first handle:
        ("s", host, x0, count, s0, sum_kind, mask, n0)   staged rows: xor slots x0.., sum slots s0.. (s0 < 0: none),
                                                          norm slots n0.. (n0 < 0: no norm)
        ("d", host, k, norm_kind, sum_kind, mask, xor_only) direct reductions at slot k (norm_kind 0 none, 1 f32, 2 f64)
        ("x", base handle, shape, stride, offset, dtype)  a view: derived from the base's fingerprint
        ("v", host, k)                                   a value (a loss) in f64 slot k
        ("c", hex, norm)                                 known without the device (an empty tensor)
        ("F", blob, count)                               `count` handles the native engine resolved: per handle
                                                          17 bytes, <QdB: fingerprint, norm (NaN: none), known
    """

    def __init__(self, scheme: str):
        self.scheme = scheme
        self.hex: dict[int, str | None] = {}
        self.norm: dict[int, float | None] = {}
        self.base = 0

    def resolve(self, hosts: list[HostSlots], entries: list[tuple]) -> None:
        scheme = self.scheme
        out_hex, out_norm = self.hex, self.norm
        handle = self.base
        for entry in entries:
            kind = entry[0]
            if kind == "s":
                _, hi, x0, count, s0, sum_kind, mask, n0 = entry
                host = hosts[hi]
                x = 0
                for v in host.get("u64")[x0 : x0 + count]:
                    x ^= v
                s = sum(host.get(sum_kind)[s0 : s0 + count]) & mask if s0 >= 0 else 0
                out_hex[handle] = combine(scheme, x, s)
                if n0 >= 0:
                    out_norm[handle] = math.sqrt(sum(v * v for v in host.get("f32")[n0 : n0 + count]))
            elif kind == "d":
                _, hi, k, norm_kind, sum_kind, mask, xor_only = entry
                host = hosts[hi]
                s = 0 if xor_only else host.get(sum_kind)[k + 1] & mask
                out_hex[handle] = combine(scheme, host.get("u64")[k], s)
                if norm_kind:
                    m = k + (1 if xor_only else 2)
                    out_norm[handle] = host.get("f32" if norm_kind == 1 else "f64")[m]
            elif kind == "x":
                base = out_hex.get(entry[1])
                out_hex[handle] = None if base is None else f"{fmix64(int(base, 16) ^ geometry_salt(*entry[2:])):016x}"
            elif kind == "v":
                out_hex[handle] = None
                out_norm[handle] = hosts[entry[1]].get("f64")[entry[2]]
            elif kind == "F":
                for fp, norm, known in struct.iter_unpack("<QdB", entry[1]):
                    out_hex[handle] = f"{fp:016x}" if known else None
                    if norm == norm:  # not NaN
                        out_norm[handle] = norm
                    handle += 1
                continue
            else:
                out_hex[handle] = entry[1]
                if entry[2] is not None:
                    out_norm[handle] = entry[2]
            handle += 1
        self.base = handle

    def keep_only(self, handles) -> None:
        keep = set(handles)
        self.hex = {h: v for h, v in self.hex.items() if h in keep}
        self.norm = {h: v for h, v in self.norm.items() if h in keep}


PHASES = ("forward", "backward", "optimizer")  # opscan.trace.sourcemap's PHASE_*, by the native engine's number


class PackedOps:
    """A step's ops as the native engine hands them over: one bytes object, decoded only here.

    Per op, <iiiBHHq (op number, site number, shapes number, phase number,
    input count, output count, norm handle) then the input and output handles
    (<q each); a handle below 0 is none. `rngs`: op index -> generator state.
    Iterating gives the same tuples as `Step.ops` holds for the Python engine.
    """

    def __init__(self, blob: bytes, count: int, rngs: dict):
        self.blob, self.count, self.rngs = blob, count, rngs

    def __len__(self) -> int:
        return self.count

    def __iter__(self):
        blob, rngs, unpack = self.blob, self.rngs, struct.unpack_from
        offset = 0
        for i in range(self.count):
            oid, sid, mid, phase, nin, nout, norm = unpack("<iiiBHHq", blob, offset)
            offset += 25
            handles = unpack(f"<{nin + nout}q", blob, offset)
            offset += 8 * (nin + nout)
            ins = [h if h >= 0 else None for h in handles[:nin]]
            outs = [h if h >= 0 else None for h in handles[nin:]]
            yield oid, PHASES[phase], sid, mid, ins, outs, (norm if norm >= 0 else None), rngs.get(i)


@dataclass
class Step:
    """One step, as the training process hands it over: raw slots and entries, ops by table number.

    ops: (op number, phase, site number, shapes number, input handles, output handles, norm handle, rng dict or None)
    params: (name as JSON, fingerprint handle, block number, norm position, sample offset, sample length)
    """

    step: int
    hosts: list[bytes]
    entries: list[tuple]
    blocks: list[tuple]  # (host, first slot, float count)
    ops: list[tuple] | PackedOps
    params: list[tuple]
    loss: int | None
    keep: list[int] | None = None  # handles later steps may refer to (None: keep all)
    new_ops: dict[int, str] = field(default_factory=dict)  # number -> the op's name as JSON
    new_sites: dict[int, str] = field(default_factory=dict)  # number -> '"module":..,"module_class":..,"file":..,"line":..'
    new_metas: dict[int, str] = field(default_factory=dict)  # number -> '"shapes":..,"dtypes":..'
    new_param_handles: dict[int, str] = field(default_factory=dict)  # handle -> parameter name, for "p:NAME@FP" inputs


def _is_special(path: str) -> bool:
    try:
        return is_special_file(os.stat(path))
    except OSError:
        return False


def partial_path(path: str) -> str | None:
    """Where a record at PATH is streamed before its rename: PATH.partial; None where PATH itself is written
    into (a device or pipe, /dev/stdout: see RecordFile)."""
    return None if is_descriptor_link(path) or _is_special(path) else path + ".partial"


class RecordFile:
    """The record on disk: streamed to PATH.partial, renamed to PATH once the run has finished.

    A run killed midway leaves PATH.partial: every line up to the last
    flushed step is whole (a reader drops a last line cut short).
    """

    def __init__(self, path: str):
        self.path = path
        stream = is_descriptor_link(path)
        # A symlink is followed: the rename replaces the file it names, and the link stays.
        self._final = path if stream else os.path.realpath(path)
        # A device or pipe (-o /dev/null, a FIFO) is streamed into directly: a partial
        # file beside /dev/null renamed onto it would replace the device. So is a descriptor
        # link (/dev/stdout) whatever it leads to: /dev/stdout.partial renamed onto /dev/stdout,
        # with stdout a file, replaced the machine's /dev/stdout. It is appended to, as the
        # shell's `>>` asks; its `>` has emptied it already.
        partial = partial_path(path)
        through = partial is None
        self.partial = path if through else partial
        self._file = open(self.partial, "a" if through else "w", encoding="utf-8", newline="\n")  # noqa: SIM115 - closed by commit/abandon
        self.bytes = 0
        if not through:
            self._keep_mode()

    def _keep_mode(self) -> None:
        """Give PATH.partial the permission bits of the PATH it will replace, as fsutil.atomic_write_bytes does.

        A new record gets the umask's bits (open's); an existing one keeps its own: a record made 0600
        became 0644 when rewritten, and so was its partial file for the whole run.
        """
        import stat

        try:
            st = os.stat(self._final)
        except OSError:  # none there yet (or nothing to read it by): the umask's bits
            return
        if stat.S_ISREG(st.st_mode):
            try:
                os.fchmod(self._file.fileno(), stat.S_IMODE(st.st_mode))
            except BaseException:
                self.abandon(remove=True)
                raise

    def write(self, lines: list[str]) -> None:
        if not lines:
            return
        text = "\n".join(lines) + "\n"
        self._file.write(text)
        self._file.flush()
        self.bytes += len(text)

    def commit(self) -> str:
        self._file.close()
        if self.partial != self.path:
            os.replace(self.partial, self._final)
        return self.path

    def abandon(self, *, remove: bool) -> str | None:
        """Close without renaming; remove the partial file too if asked (nothing useful in it)."""
        try:
            self._file.close()
        except OSError:  # what is still buffered cannot be written either (a full disk)
            pass
        if remove:
            if self.partial != self.path:  # never unlink a device or pipe we streamed into
                try:
                    os.unlink(self.partial)
                except OSError:
                    pass
            return None
        return self.partial


class Encoder:
    """Step data to JSON lines (docs/record-format.md), written to a RecordFile."""

    def __init__(self, out: RecordFile, scheme: str):
        self.out = out
        self.resolver = Resolver(scheme)
        self.ops: dict[int, str] = {}
        self.sites: dict[int, str] = {}
        self.metas: dict[int, str] = {}
        self.param_handles: dict[int, str] = {}
        self.i = 0

    def write_step(self, step: Step) -> int:
        """Write the step's op lines and step line; returns the bytes written."""
        self.ops.update(step.new_ops)
        self.sites.update(step.new_sites)
        self.metas.update(step.new_metas)
        self.param_handles.update(step.new_param_handles)
        hosts = [HostSlots(h) for h in step.hosts]
        resolver = self.resolver
        resolver.resolve(hosts, step.entries)
        blocks = [hosts[hi].floats(k, n) for hi, k, n in step.blocks]
        hexes, norms = resolver.hex, resolver.norm
        names = self.param_handles
        ops_json, sites, metas = self.ops, self.sites, self.metas
        n = step.step
        lines = []
        i = self.i
        for oid, phase, sid, mid, ins, outs, norm, rng in step.ops:
            if names:
                in_text = ",".join(_quoted(hexes.get(h)) if h not in names else f'"p:{names[h]}@{hexes.get(h)}"' for h in ins)
            else:
                in_text = ",".join([_quoted(hexes.get(h)) for h in ins])
            out_text = ",".join([_quoted(hexes.get(h)) for h in outs])
            value = norms.get(norm) if norm is not None else None
            norm_text = "null" if value is None or not math.isfinite(value) else repr(value)
            extra = f',"rng":{_json(rng)}' if rng is not None else ""
            lines.append(
                f'{{"type":"op","step":{n},"i":{i},"op":{ops_json[oid]},"phase":"{phase}",{sites[sid]},'
                f'{metas[mid]},"in":[{in_text}],"out":[{out_text}],"norm":{norm_text}{extra}}}'
            )
            i += 1
        self.i = i
        parts = []
        for name, handle, block, j, offset, count in step.params:
            floats = blocks[block]
            sample = base64.b64encode(struct.pack(f"<{count}f", *floats[offset : offset + count])).decode("ascii")
            parts.append(f'{name}:{{"fp":{_quoted(hexes.get(handle))},"norm":{_num(floats[j])},"sample":"{sample}"}}')
        loss = norms.get(step.loss) if step.loss is not None else None
        lines.append(f'{{"type":"step","step":{n},"ops":{len(step.ops)},"params":{{{",".join(parts)}}},"loss":{_num(loss)}}}')
        before = self.out.bytes
        self.out.write(lines)
        if step.keep is not None:
            resolver.keep_only(step.keep)
            kept = set(step.keep)
            self.param_handles = {h: v for h, v in self.param_handles.items() if h in kept}
        return self.out.bytes - before


def _quoted(value: str | None) -> str:
    return "null" if value is None else f'"{value}"'


def _num(value) -> str:
    if value is None or not math.isfinite(value):
        return "null"
    return repr(float(value))


_json = json.dumps


# ---------------------------------------------------------------- the two writers


class WriterError(OSError):
    """The record could not be written (the writer process's error, or the writer process is gone)."""


def _cannot_write(path: str, exc: OSError) -> WriterError:
    return WriterError(exc.errno, exc.strerror or str(exc), path)


class InlineWriter:
    """The encoder in this process: each step's lines are made and written before `step()` returns."""

    def __init__(self, path: str, scheme: str):
        self.out = RecordFile(path)  # raises OSError when PATH.partial cannot be created
        self.encoder = Encoder(self.out, scheme)

    @property
    def bytes(self) -> int:
        return self.out.bytes

    def line(self, text: str) -> None:
        try:
            self.out.write([text])
        except OSError as exc:
            raise _cannot_write(self.out.path, exc) from None

    def step(self, step: Step) -> None:
        try:
            self.encoder.write_step(step)
        except OSError as exc:  # a full disk, a reader that has gone (-o /dev/stdout | head)
            raise _cannot_write(self.out.path, exc) from None

    def finish(self, end_line: str | None, *, commit: bool, remove: bool) -> tuple[str | None, int]:
        """Write the end line if any, then rename (commit) or abandon the file; returns (path kept, bytes)."""
        try:
            if end_line is not None:
                self.out.write([end_line])
            path = self.out.commit() if commit else self.out.abandon(remove=remove)
        except OSError:  # nothing half-written stays behind
            self.out.abandon(remove=True)
            raise
        return path, self.out.bytes


class ProcessWriter:
    """The encoder in a writer process: `step()` only pickles the step's raw data down a pipe.

    The process imports no torch (this module only). It is started with the
    interpreter running this one and the folder this package was imported
    from, so a source checkout works as an installed package does. If the
    training process dies, the writer reads end-of-file, closes PATH.partial
    with every step it was handed, and exits.
    """

    def __init__(self, path: str, scheme: str):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        code = f"import sys; sys.path.insert(0, {root!r}); from opscan.trace.recordwriter import serve; serve()"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSTARTUP",)}
        try:
            # A session of its own: a terminal's Ctrl-C goes to the whole foreground process group,
            # and in here it printed a KeyboardInterrupt traceback and dropped the record's ending.
            # The training process decides: it ends the record, or dies and this one reads end-of-file.
            self._proc = subprocess.Popen(
                [sys.executable, "-S", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
                start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            raise WriterError(f"the record writer process could not start: {exc}") from None
        self.bytes = 0
        self._send(("open", path, scheme))
        reply = self._receive()
        if reply[1] is not None:
            self._close()
            raise OSError(reply[1])

    def line(self, text: str) -> None:
        self._send(("line", text))

    def step(self, step: Step) -> None:
        self._send(("step", step))

    def finish(self, end_line: str | None, *, commit: bool, remove: bool) -> tuple[str | None, int]:
        self._send(("finish", end_line, commit, remove))
        reply = self._receive()
        self._close()
        _, path, self.bytes, error = reply
        if error is not None:
            raise WriterError(error)
        return path, self.bytes

    def _send(self, message) -> None:
        try:
            pickler = pickle.Pickler(self._proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            # No memo: a step is thousands of small tuples, none shared or recursive, and
            # remembering each one costs more than writing a repeated string twice.
            pickler.fast = True
            pickler.dump(message)
            self._proc.stdin.flush()
        except (OSError, ValueError) as exc:  # ValueError: the pipe was closed after an earlier failure
            # Close the pipes now: left open, the pipe's buffer is flushed again when it is collected,
            # and that BrokenPipeError surfaces as an "Exception ignored" warning.
            self._close()
            raise WriterError(f"the record writer process stopped ({exc})") from None

    def _receive(self):
        try:
            return pickle.load(self._proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            code = self._proc.poll()
            raise WriterError(f"the record writer process stopped (exit code {code}): {exc or 'no reply'}") from None

    def _close(self) -> None:
        for stream in (self._proc.stdin, self._proc.stdout):
            try:
                stream.close()  # a failed flush still closes the file
            except OSError:
                pass
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __del__(self):  # a writer never finished (the recorder was dropped): end the process, keep PATH.partial
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            self._close()


def open_writer(path: str, scheme: str):
    """The writer for a new record at PATH: a writer process, or this process where one cannot start.

    OPSCAN_RECORD_WRITER=inline asks for this process. Raises OSError when
    PATH.partial cannot be created.
    """
    # /dev/stdout is a descriptor of the process that opens it: in the writer process, the
    # pipe it answers on (the record garbled its replies). This process writes it.
    if os.environ.get("OPSCAN_RECORD_WRITER") != "inline" and not is_descriptor_link(path):
        try:
            return ProcessWriter(path, scheme)
        except WriterError:
            pass
    return InlineWriter(path, scheme)


def serve(stdin=None, stdout=None) -> None:
    """The writer process's loop: an InlineWriter fed by messages until "finish" or end-of-file."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    writer = None
    error = None

    def reply(message) -> None:
        pickle.dump(message, stdout, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.flush()

    while True:
        try:
            message = pickle.load(stdin)
        except (EOFError, OSError, pickle.UnpicklingError):
            if writer is not None:  # the training process is gone: keep what was written
                writer.out.abandon(remove=False)
            return
        kind = message[0]
        if kind == "open":
            try:
                writer = InlineWriter(message[1], message[2])
            except OSError as exc:
                reply(("opened", f"{exc.strerror or exc}: {message[1]}.partial"))
                return
            reply(("opened", None))
        elif kind == "finish":
            _, end_line, commit, remove = message
            path = None
            if error is None:
                try:
                    path, _ = writer.finish(end_line, commit=commit, remove=remove)
                except OSError as exc:  # InlineWriter.finish removed PATH.partial
                    error = f"{exc.strerror or exc}: {writer.out.partial}"
            else:
                writer.out.abandon(remove=True)
            reply(("done", path, writer.bytes, error))
            return
        elif error is None:
            try:
                if kind == "line":
                    writer.line(message[1])
                else:
                    writer.step(message[1])
            except OSError as exc:  # disk full, say: stop writing, report it at the end
                error = f"{exc.strerror or exc}: {writer.out.partial}"
            except Exception as exc:  # noqa: BLE001 - a bug here: reported at the end, never a traceback on the user's terminal
                error = f"the record writer failed: {type(exc).__name__}: {exc}"
