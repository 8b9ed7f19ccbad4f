"""Read a record (docs/record-format.md) one step at a time, checking its shape as it goes.

`Record(path)` opens the file and reads its header; `Record.steps()` then
yields one `Step` per finished step, so that comparing two 200-step records
holds two steps in memory, not two runs. Anything that is not a record, or
a record damaged in the middle, raises `RecordError` with a message that
names the file and the line; a record cut short (its last line half
written, or no `end` line) is read as far as it goes, and says so in
`notices` and `cut_short`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterator

FORMAT = "opscan-record"
VERSION = 1

_decoder = json.JSONDecoder()
_OPTIONAL_STR = (str, type(None))
_BARE_PARAM = re.compile(rb'"p:[^"@]*"')  # a `p:NAME` input without its fingerprint


def _parse(raw: bytes) -> Any:
    """One JSON line. raw_decode skips decode()'s whitespace matching, a tenth of compare's time."""
    text = raw.decode("utf-8")
    try:
        value, end = _decoder.raw_decode(text)
    except ValueError:
        return _decoder.decode(text)  # leading whitespace, or not JSON: the full decoder says which
    if end != len(text) and text[end:].strip():
        raise ValueError("extra data after the JSON value")
    return value

# A header is small; a longer first line is not a record (and may be a large binary file).
_HEADER_LIMIT = 1 << 20


class RecordError(Exception):
    """A file that cannot be read as a record; the message says why and names the file."""


@dataclass(frozen=True, slots=True)
class Rng:
    """A generator's state just before a random op: Philox seed and offset (CUDA), or a hash of the state (CPU)."""

    device: Any = None
    seed: Any = None
    offset: Any = None
    state: Any = None

    def describe(self) -> str:
        if self.offset is not None:
            return f"seed {self.seed}, offset {self.offset}"
        if self.state is not None:
            return f"state {self.state}"
        return "unknown state"


@dataclass(slots=True, eq=False)
class Op:
    """One op line. `ins` and `outs` hold fingerprints (None where not fingerprinted).

    A parameter input is `p:NAME@FP`; a bare `p:NAME` of the record is
    completed here with the parameter's fingerprint from the previous step
    line (left bare in step 0, where none is known).
    """

    i: int
    op: str
    phase: str
    module: str | None
    module_class: str | None
    file: str | None
    line: int | None
    shapes: tuple
    ins: tuple
    outs: tuple
    norm: float | None
    rng: Rng | None
    args: str | None
    lineno: int  # the line of the record file
    # What two runs' ops must share to be aligned: the op, its module, its input shapes (and arguments, where recorded).
    key: tuple

    @property
    def where(self) -> str:
        """The user's line, as `file:line`, or "" where unknown."""
        if not self.file:
            return ""
        return f"{self.file}:{self.line}" if self.line else self.file

    @property
    def module_label(self) -> str:
        if self.module is None:
            return "outside any module"
        return f"module `{self.module}`" if self.module else "the root module"


@dataclass(frozen=True, slots=True)
class Param:
    """A parameter after the step's optimizer update: fingerprint, norm, and a strided sample (base64 float32)."""

    fp: str | None
    norm: float | None
    sample: str | None


@dataclass(slots=True)
class Step:
    """One finished step: its ops in call order, then what its step line says."""

    step: int
    ops: list[Op]
    params: dict[str, Param]
    loss: float | None
    lineno: int


@dataclass(frozen=True, slots=True)
class Header:
    target: str | None
    argv: tuple
    kind: str | None
    seed: Any
    steps: Any
    device: str | None
    fingerprint: str
    version: int
    env: dict[str, Any]
    sources: dict[str, str] | None = None  # project file -> digest (opscan/trace/sources.py); None: an older record
    target_file: str | None = None  # the real path of the target's file; None: a model zoo's, or an older record

    def run_fields(self) -> dict[str, Any]:
        """The header's facts about the run, beside `env`, as compared and shown."""
        return {
            "target": self.target,
            "argv": " ".join(self.argv) if self.argv else None,
            "kind": self.kind,
            "seed": self.seed,
            "device": self.device,
            "steps": self.steps,
        }


@dataclass(frozen=True, slots=True)
class End:
    steps: Any
    ops: Any
    stopped: Any
    seconds: Any


def _float(value: Any) -> float | None:
    """A JSON number as a float (an integer too large for one is infinite); None for anything else."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def _string(d: dict, key: str) -> str | None:
    value = d.get(key)
    if value is not None and type(value) is not str:
        raise ValueError(f"{key!r} is not a string")
    return value


def _fingerprints(value: Any, key: str) -> list:
    if type(value) is not list:
        raise ValueError(f"{key!r} is not a list")
    for fp in value:
        if type(fp) is not str and fp is not None:
            raise ValueError(f"{key!r} holds {type(fp).__name__}, not fingerprints")
    return value


def _shapes(value: Any) -> tuple:
    if value is None:
        return ()
    if type(value) is not list:
        raise ValueError("'shapes' is not a list")
    try:
        try:
            out = tuple(map(tuple, value))
        except TypeError:  # a null shape (a tensor not fingerprinted), or garbage
            out = tuple(None if shape is None else tuple(shape) for shape in value)
        hash(out)  # a shape is aligned on: it must be plain values (checking each dim costs compare a tenth of its time)
    except TypeError:
        raise ValueError("'shapes' holds something other than lists of integers") from None
    return out


def _rng(value: Any) -> Rng | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("'rng' is not an object")
    parts = []
    for name in ("device", "seed", "offset", "state"):
        part = value.get(name)
        if isinstance(part, (dict, list)):
            raise ValueError(f"'rng.{name}' is not a plain value")
        parts.append(part)
    return Rng(*parts)


def _describe_open_error(path: str, exc: OSError) -> str:
    if isinstance(exc, IsADirectoryError) or os.path.isdir(path):
        return f"{path} is a directory, not a record"
    if isinstance(exc, FileNotFoundError):
        return f"{path}: no such file"
    if isinstance(exc, PermissionError):
        return f"cannot read {path}: permission denied"
    return f"cannot read {path}: {exc.strerror or exc}"


class Record:
    """An open record: its header at once, its steps one by one (`steps()`), then `end` and `notices`."""

    def __init__(self, path: str):
        self.path = path
        self.notices: list[str] = []
        self.end: End | None = None
        self.cut_short = False  # no `end` line: the run was stopped or the file is incomplete
        self.partial_ops = 0  # ops after the last step line, of a step that never finished
        self.last_step: int | None = None
        if os.path.isdir(path):
            raise RecordError(f"{path} is a directory, not a record")
        try:
            self._file: BinaryIO = open(path, "rb")  # noqa: SIM115: closed by close() or at the end of steps()
        except OSError as exc:
            raise RecordError(_describe_open_error(path, exc)) from None
        try:
            self.header = self._read_header()
        except BaseException:
            self.close()
            raise
        self._lineno = 1
        self._params: dict[str, str] = {}

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Record:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ the header

    def _read_header(self) -> Header:
        try:
            raw = self._file.readline(_HEADER_LIMIT)
        except OSError as exc:
            raise RecordError(_describe_open_error(self.path, exc)) from None
        if not raw:
            raise RecordError(f"{self.path} is empty, not a record")
        if not raw.strip():
            raise RecordError(f"{self.path} is not an opscan record: its first line is blank")
        if len(raw) >= _HEADER_LIMIT and not raw.endswith(b"\n"):
            raise RecordError(f"{self.path} is not an opscan record: its first line is not a JSON header")
        try:
            d = json.loads(raw)
        except (ValueError, RecursionError):
            raise RecordError(f"{self.path} is not an opscan record: its first line is not JSON") from None
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise RecordError(f'{self.path} is not an opscan record: its first line has no "format": "{FORMAT}"')
        if d.get("type") != "header":
            raise RecordError(f'{self.path}: the first line is not the header ("type": "header")')
        version = d.get("version")
        if version != VERSION or not isinstance(version, int) or isinstance(version, bool):
            raise RecordError(
                f"{self.path} is a record of format version {version!r}; this opscan reads version {VERSION} "
                "(record and compare with the same opscan)"
            )
        fingerprint = d.get("fingerprint")
        if not isinstance(fingerprint, str) or not fingerprint:
            raise RecordError(f'{self.path}: the header does not name its "fingerprint" scheme')
        env = d.get("env")
        if env is None:
            env = {}
        if not isinstance(env, dict) or any(isinstance(v, (dict, list)) for v in env.values()):
            raise RecordError(f'{self.path}: the header\'s "env" is not an object of plain values')
        sources = d.get("sources")
        if sources is not None and (not isinstance(sources, dict) or not all(isinstance(v, str) for v in sources.values())):
            raise RecordError(f'{self.path}: the header\'s "sources" is not an object of file digests')
        argv = d.get("argv") or []
        if not isinstance(argv, list):
            argv = [argv]
        target = d.get("target")
        return Header(
            target=target if isinstance(target, str) else None if target is None else str(target),
            argv=tuple(str(a) for a in argv),
            kind=d.get("kind") if isinstance(d.get("kind"), str) else None,
            seed=d.get("seed") if not isinstance(d.get("seed"), (dict, list)) else str(d.get("seed")),
            steps=d.get("steps") if not isinstance(d.get("steps"), (dict, list)) else None,
            device=d.get("device") if isinstance(d.get("device"), str) else None,
            fingerprint=fingerprint,
            version=version,
            env=dict(env),
            sources=dict(sources) if sources is not None else None,
            target_file=d.get("target_file") if isinstance(d.get("target_file"), str) and d.get("target_file") else None,
        )

    # ------------------------------------------------------------ the body

    def _lines(self) -> Iterator[tuple[int, bytes, bool]]:
        """(line number, raw line, is it the last line) for every line after the header."""
        f = self._file
        try:
            pending = f.readline()
            lineno = self._lineno
            while pending:
                following = f.readline()
                lineno += 1
                yield lineno, pending, not following
                pending = following
        except OSError as exc:
            raise RecordError(f"cannot read {self.path}: {exc.strerror or exc}") from None

    def _damaged(self, lineno: int, why: str) -> RecordError:
        return RecordError(f"{self.path}:{lineno}: {why}; the record is damaged")

    def steps(self) -> Iterator[Step]:
        """Each finished step in order. Raises RecordError on a damaged line; closes the file at the end."""
        ops: list[Op] = []
        expected_i = 0
        try:
            for lineno, raw, last in self._lines():
                if not raw.strip():
                    continue
                try:
                    d = _parse(raw)
                except (ValueError, RecursionError):
                    if last:
                        self.notices.append(f"{self.path}: its last line ({lineno}) is cut short; dropped it")
                        break
                    raise self._damaged(lineno, "not a JSON line") from None
                if not isinstance(d, dict):
                    raise self._damaged(lineno, "not a JSON object")
                kind = d.get("type")
                if kind == "op":
                    try:
                        ops.append(self._op(d, lineno, expected_i, _BARE_PARAM.search(raw) is not None))
                    except ValueError as exc:
                        raise self._damaged(lineno, f"not a valid op line: {exc}") from None
                    expected_i += 1
                elif kind == "step":
                    try:
                        step = self._step(d, lineno, ops)
                    except ValueError as exc:
                        raise self._damaged(lineno, f"not a valid step line: {exc}") from None
                    ops = []
                    self.last_step = step.step
                    yield step
                elif kind == "end":
                    self.end = End(d.get("steps"), d.get("ops"), d.get("stopped"), d.get("seconds"))
                    break
                elif kind == "header":
                    raise self._damaged(lineno, "a second header")
                elif not isinstance(kind, str):
                    raise self._damaged(lineno, 'a line without "type"')
                # Other types are of a later version of the format: ignored, as unknown fields are.
            self.partial_ops = len(ops)
            if self.end is None:
                self.cut_short = True
        finally:
            self.close()

    def _op(self, d: dict, lineno: int, expected_i: int, bare_params: bool = True) -> Op:
        # The hot path of compare (one call per op line): plain checks, no helper per field.
        get = d.get
        name, module, phase, file, cls, args = get("op"), get("module"), get("phase"), get("file"), get("module_class"), get("args")
        if type(name) is not str:
            raise ValueError("'op' is not a string")
        if not (type(module) in _OPTIONAL_STR and type(phase) in _OPTIONAL_STR and type(file) in _OPTIONAL_STR
                and type(cls) in _OPTIONAL_STR and type(args) in _OPTIONAL_STR):  # fmt: skip
            for key in ("module", "phase", "file", "module_class", "args"):
                _string(d, key)
        ins = _fingerprints(get("in"), "in")
        outs = _fingerprints(get("out"), "out")
        if bare_params and self._params:
            ins = [self._resolve(fp) for fp in ins]
        shapes = _shapes(get("shapes"))
        i, line, norm = get("i", expected_i), get("line"), get("norm")
        return Op(
            i if type(i) is int else expected_i,
            name,
            phase or "forward",
            module,
            cls,
            file,
            line if type(line) is int else None,
            shapes,
            tuple(ins),
            tuple(outs),
            _float(norm),
            None if get("rng") is None else _rng(get("rng")),
            args,
            lineno,
            (name, module, shapes, args),
        )

    def _resolve(self, fp: str | None) -> str | None:
        """A bare `p:NAME` input takes the parameter's fingerprint after the previous step."""
        if fp is not None and fp.startswith("p:") and "@" not in fp:
            known = self._params.get(fp[2:])
            if known is not None:
                return f"{fp}@{known}"
        return fp

    def _step(self, d: dict, lineno: int, ops: list[Op]) -> Step:
        number = d.get("step")
        if type(number) is not int or number < 0:
            raise ValueError("'step' is not a step number")
        if self.last_step is not None and number <= self.last_step:
            raise ValueError(f"step {number} follows step {self.last_step}")
        if "params" not in d:
            raise ValueError("no 'params'")
        raw_params = d["params"]
        if not isinstance(raw_params, dict):  # null too: a step line always names its parameters, {} for none
            raise ValueError("'params' is not an object")
        params = {}
        for name, p in raw_params.items():
            if not isinstance(p, dict):
                raise ValueError(f"parameter {name!r} is not an object")
            params[name] = Param(
                fp=_string(p, "fp"),
                norm=_float(p.get("norm")),
                sample=_string(p, "sample"),
            )
        self._params = {name: p.fp for name, p in params.items() if p.fp is not None}
        return Step(step=number, ops=ops, params=params, loss=_float(d.get("loss")), lineno=lineno)


@dataclass(slots=True)
class Steps:
    """What `read_all` returns: a whole record in memory (for tests and small records)."""

    header: Header
    steps: list[Step] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    cut_short: bool = False


def read_all(path: str) -> Steps:
    """Read a whole record; raises RecordError."""
    record = Record(path)
    steps = list(record.steps())
    return Steps(record.header, steps, record.notices, record.cut_short)
