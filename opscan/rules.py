"""Load the op rule database in `rules/*.toml`.

Each `[[op]]` entry describes one kernel family that has no deterministic
implementation: which user APIs lead to it and under which literal arguments,
the aten overloads and alert caller strings it raises with, the torch version
range in which it raises, where, and what to do about it. Lint (DET007), scan
and report all read this one database.
"""

from __future__ import annotations

import os

from opscan._path import Path
from opscan._plain import Frozen, memoized

# An argument whose value cannot be known statically. Lint's call records carry
# this very object (plain data, no heavy imports), so it is shared, not redefined.
from opscan._plain import UNKNOWN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The newest torch release this database has been checked against; the default target.
NEWEST_TORCH = "2.14"


class RulesError(ValueError):
    """The rules data is malformed."""

    @property
    def problem(self) -> str:
        """The message to give the user."""
        return f"the rules data is malformed: {self}"


class RulesMissing(RulesError):
    """The rules data is not there (a copy of the package without the rules/ folder beside it)."""

    @property
    def problem(self) -> str:
        return str(self)


def rules_dir() -> Path:
    """Where the data lives: bundled in the wheel, or `rules/` in a source checkout."""
    here = Path(__file__).resolve().parent
    bundled = here / "_rules"
    return bundled if bundled.is_dir() else here.parent / "rules"


# Version parsing is base-layer code (config validates torch-version with it).
from opscan.versions import VersionError, parse_version  # noqa: E402,F401
from opscan.versions import version_in_range as _version_in_range  # noqa: E402


def version_in_range(version: str | tuple[int, ...], spec: str) -> bool:
    """True if `version` satisfies every clause of `spec`; a bad clause is a RulesError (the data is malformed)."""
    try:
        return _version_in_range(version, spec)
    except VersionError as exc:
        raise RulesError(str(exc)) from None


# ---------------------------------------------------------------- conditions

# Predicate keys a `when` table may use, each with what it tests.
PREDICATES = {
    "eq": "the literal equals the value",
    "ne": "the literal differs from the value",
    "in": "the literal is one of the values",
    "not_in": "the literal is none of the values",
    "present": "the argument is (true) or is not (false) passed as something other than None",
    "len_in": "the literal is a tuple or list whose length is one of the values",
    "runtime": "decided only at run time (a shape, a dtype, a device): never decidable statically",
}


def _norm(value: Any) -> Any:
    """Tuples become lists; a sequence with an unknown element is unknown as a whole."""
    if isinstance(value, (tuple, list)):
        items = [_norm(v) for v in value]
        return UNKNOWN if any(v is UNKNOWN for v in items) else items
    return value


def _predicate(pred: dict[str, Any], value: Any) -> bool | None:
    """Evaluate one predicate table on a literal value; None when the value is unknown."""
    if "runtime" in pred:
        return None
    if "present" in pred:
        return (value is not None) == bool(pred["present"])
    value = _norm(value)
    if value is UNKNOWN:
        return None
    if "len_in" in pred:
        return isinstance(value, list) and len(value) in pred["len_in"]
    if "eq" in pred:
        return value == _norm(pred["eq"])
    if "ne" in pred:
        return value != _norm(pred["ne"])
    if "in" in pred:
        return value in [_norm(v) for v in pred["in"]]
    if "not_in" in pred:
        return value not in [_norm(v) for v in pred["not_in"]]
    raise RulesError(f"unknown predicate {pred!r}")


class Api(Frozen):
    """A user-facing way to reach an op: `torch.nn.AdaptiveAvgPool2d`, or a tensor method `.put_`."""

    _fields = ("name", "kind", "args", "keywords", "defaults", "when", "note")
    _compared = ("name", "kind", "args", "keywords", "note")
    __slots__ = _fields

    def __init__(
        self,
        name: str,
        kind: str = "function",
        args: tuple[str, ...] = (),
        keywords: tuple[str, ...] = (),
        defaults: dict[str, Any] | None = None,
        when: tuple[dict[str, Any], ...] = (),
        note: str = "",
    ):
        self.name = name
        self.kind = kind  # "function", "layer" (constructor) or "method"
        self.args = args  # positional parameter order, excluding self
        # Parameters read only when passed by keyword: keyword-only ones, and, for a
        # method whose name other libraries share, ones deliberately not bound by position.
        self.keywords = keywords
        self.defaults = {} if defaults is None else defaults
        # Alternatives, each a table of argument -> predicate; the op is reached if any alternative holds.
        self.when = when
        self.note = note

    def matches(self, bound: dict[str, Any]) -> bool | None:
        """Does a call with these bound literal arguments reach the op?

        `bound` maps parameter names to literal values, or UNKNOWN. Missing
        parameters take `defaults` (absent -> None). True, False, or None
        when it cannot be decided statically.
        """
        if not self.when:
            return True
        undecided = False
        for alternative in self.when:
            results = []
            for arg, pred in alternative.items():
                value = bound.get(arg, self.defaults.get(arg))
                results.append(_predicate(pred, value))
            if all(r is True for r in results):
                return True
            if not any(r is False for r in results):
                undecided = True
        return None if undecided else False


class Remedy(Frozen):
    """What to do about an op: prose, code, and where it came from ("shape", "rule:<id>" or "generic")."""

    _fields = ("text", "code", "source")
    __slots__ = _fields

    def __init__(self, text: str, code: str = "", source: str = ""):
        self.text = text
        self.code = code
        self.source = source


def _last_dims(shape, n: int):
    return tuple(shape[-n:]) if shape is not None and len(shape) >= n else None


def _dims_text(dims) -> str:
    return "x".join(str(d) for d in dims)


def _size_arg(dims) -> str:
    """An output size as the layer is usually written: 7, or (7, 6)."""
    return str(dims[0]) if len(set(dims)) == 1 else str(tuple(dims))


def adaptive_pool_remedy(op: str, shapes, module_label: str = "") -> Remedy | None:
    """Adaptive pooling backward, given (grad_output, self, ...) shapes: an exact deterministic equivalent, if any."""
    namespace, packet = _packet(op)
    packet = packet.lstrip("_")
    if namespace != "aten" or not packet.startswith(("adaptive_avg_pool", "adaptive_max_pool")) or not packet.endswith("_backward"):
        return None
    n = 3 if "3d" in packet else 2 if "2d" in packet else 1
    if len(shapes) < 2:
        return None
    out, inp = _last_dims(shapes[0], n), _last_dims(shapes[1], n)
    if out is None or inp is None:
        return None
    kind = "Avg" if "avg" in packet else "Max"
    layer = f"Adaptive{kind}Pool{n}d"
    where = f" ({module_label})" if module_label else ""
    if out == inp:
        return Remedy(
            f"The input is already {_dims_text(inp)}, so {layer}({_size_arg(out)}){where} returns it unchanged: "
            "replace it with nn.Identity(), which has no backward kernel to worry about.",
            "nn.Identity()",
            "shape",
        )
    if kind == "Avg" and all(d == 1 for d in out):
        dims = tuple(range(-n, 0))
        return Remedy(
            f"{layer} to size 1{where} is a mean over the last {n} dims; torch.mean has a deterministic backward.",
            f"x.mean(dim={dims}, keepdim=True)",
            "shape",
        )
    if n == 2 and all(i % o == 0 for i, o in zip(inp, out)):
        # MaxPool2d and AvgPool2d have deterministic CUDA backward kernels; the 3d ones do not.
        kernel = tuple(i // o for i, o in zip(inp, out))
        fixed = f"{kind}Pool2d"
        return Remedy(
            f"The {_dims_text(inp)} input divides evenly into {_dims_text(out)}, so {layer}{where} equals "
            f"nn.{fixed}(kernel_size={kernel}), whose backward is deterministic.",
            f"nn.{fixed}(kernel_size={kernel})",
            "shape",
        )
    return None


# `dtypes` a rule may name: the report runs the reproducer under torch.set_default_dtype, which takes these.
DTYPES = ("float32", "float64", "float16", "bfloat16")

# `remedy_by_shape` values a rule may name, each a function (op, shapes, module_label) -> Remedy | None.
SHAPE_REMEDIES = {"adaptive-pool": adaptive_pool_remedy}


class OpRule(Frozen):
    """One kernel family with no deterministic implementation, and how to live with it."""

    _fields = (
        "id", "title", "apis", "aten", "callers", "phase", "devices", "torch", "remedy", "remedy_code",
        "reproducer", "provenance", "source", "remedy_by_shape", "dtypes", "remedy_reproducer", "verified",
    )  # fmt: skip
    __slots__ = _fields

    def __init__(
        self,
        id: str,
        title: str,
        apis: tuple[Api, ...],
        aten: tuple[str, ...],
        callers: tuple[str, ...],
        phase: str,
        devices: tuple[str, ...],
        torch: str,
        remedy: str,
        remedy_code: str = "",
        reproducer: str = "",
        provenance: str = "",
        source: str = "",
        remedy_by_shape: str = "",
        dtypes: tuple[str, ...] = ("float32",),
        remedy_reproducer: str = "",
        verified: str = "",
    ):
        self.id = id
        self.title = title
        self.apis = apis
        self.aten = aten
        self.callers = callers
        self.phase = phase  # "forward" or "backward"
        self.devices = devices
        self.torch = torch  # version range in which it raises
        self.remedy = remedy
        self.remedy_code = remedy_code
        self.reproducer = reproducer
        self.provenance = provenance
        self.source = source  # the rules file it came from
        # A key of SHAPE_REMEDIES: runtime shapes can make an exact deterministic equivalent.
        self.remedy_by_shape = remedy_by_shape
        # The default dtypes the report runs the reproducer with; the first is the reproducer's own.
        self.dtypes = dtypes
        # A snippet (names as for `reproducer`) that does what `remedy` suggests, for the report to run.
        self.remedy_reproducer = remedy_reproducer
        # The last measurement that agreed with this entry: date, GPU, torch, and the report it is in.
        self.verified = verified

    def raises_on(self, torch_version: str, device: str = "cuda") -> bool:
        return device in self.devices and version_in_range(torch_version, self.torch)

    def remedy_for(self, shapes=(), *, op: str | None = None, module_label: str = "") -> Remedy:
        """What to do about this op, given the input shapes seen at run time.

        A shape-specific remedy when the shapes make one exact (an adaptive
        pool whose input already has the output size is an identity), else the
        rule's own remedy. `op` is the overload that ran (it names the pool's
        dimensionality); `module_label` names the layer in the text.
        """
        if self.remedy_by_shape and shapes:
            special = SHAPE_REMEDIES[self.remedy_by_shape](op or self.aten[0], shapes, module_label)
            if special is not None:
                return special
        return Remedy(self.remedy.strip(), (self.remedy_code or "").strip(), f"rule:{self.id}")


class EnvCheck(Frozen):
    """A check torch makes of an environment variable, in the releases `torch` names (rules/torch.toml)."""

    _fields = ("id", "title", "var", "values", "torch", "provenance")
    __slots__ = _fields

    def __init__(self, id: str, title: str, var: str, values: tuple[str, ...], torch: str, provenance: str = ""):
        self.id = id
        self.title = title
        self.var = var
        self.values = values  # the values it accepts
        self.torch = torch  # the release range in which torch makes the check
        self.provenance = provenance

    def checked_on(self, torch_version: str) -> bool:
        return version_in_range(torch_version, self.torch)


def _input_3d_not_multiple_of_output(shapes) -> bool | None:
    """A 3-D adaptive pool's backward (grad_output, input, ...), each (C, T, H, W) or (N, C, T, H, W): some
    pooled size of the input is not a multiple of the output's, so windows overlap and the CUDA kernel adds
    gradients with atomics (AdaptiveMaxPooling3d.cu's `atomic` test)."""
    if len(shapes) < 2 or len(shapes[0]) != len(shapes[1]) or len(shapes[0]) not in (4, 5):
        return None
    out, inp = shapes[0][-3:], shapes[1][-3:]
    if any(o <= 0 for o in out):
        return None
    return any(i % o != 0 for i, o in zip(inp, out))


# Named conditions a silent op's entry can take (`when` in [[silent]]): shapes -> True, False, or None (cannot tell).
SILENT_WHEN = {"input-3d-not-multiple-of-output": _input_3d_not_multiple_of_output}


class SilentOp(Frozen):
    """A kernel that is nondeterministic where `when` holds and that torch does not alert for (rules [[silent]]).

    Strict mode does not catch it: the op runs its atomic kernel with
    use_deterministic_algorithms(True) as without it.
    """

    _fields = ("id", "title", "aten", "phase", "devices", "torch", "when", "remedy", "remedy_code", "reproducer", "provenance", "source", "verified")
    __slots__ = _fields

    def __init__(
        self,
        id: str,
        title: str,
        aten: tuple[str, ...],
        phase: str,
        devices: tuple[str, ...],
        torch: str,
        when: str,
        remedy: str,
        remedy_code: str = "",
        reproducer: str = "",
        provenance: str = "",
        source: str = "",
        verified: str = "",
    ):
        self.id = id
        self.title = title
        self.aten = aten
        self.phase = phase
        self.devices = devices
        self.torch = torch  # the releases whose kernel is nondeterministic without an alert
        self.when = when  # a key of SILENT_WHEN
        self.remedy = remedy
        self.remedy_code = remedy_code
        self.reproducer = reproducer  # for the GPU tests: nondeterministic in strict mode, and no alert
        self.provenance = provenance
        self.source = source
        self.verified = verified

    def applies(self, torch_version: str, device: str, shapes) -> bool:
        """Whether this call (on `device`, with these input shapes) takes the nondeterministic kernel."""
        return device in self.devices and version_in_range(torch_version, self.torch) and SILENT_WHEN[self.when](shapes) is True

    def remedy_for(self) -> Remedy:
        return Remedy(self.remedy.strip(), (self.remedy_code or "").strip(), f"rule:{self.id}")


class RuleDB(Frozen):
    _fields = ("ops", "releases", "environment", "silent")
    __slots__ = _fields

    def __init__(
        self, ops: tuple[OpRule, ...], releases: tuple[str, ...] = (), environment: tuple[EnvCheck, ...] = (), silent: tuple[SilentOp, ...] = ()
    ):
        self.ops = ops
        self.releases = releases  # every minor release the rules know, oldest first ("1.8", ..., NEWEST_TORCH)
        self.environment = environment
        self.silent = silent  # kernels that are nondeterministic without an alert: strict mode lets them through

    def silent_for(self, op: str) -> SilentOp | None:
        """The [[silent]] entry that lists this aten overload ('aten.adaptive_max_pool3d_backward.default')."""
        for entry in self.silent:
            if op in entry.aten:
                return entry
        return None

    def env_check(self, var: str) -> EnvCheck | None:
        """The check torch makes of environment variable `var`, if the rules record one."""
        for check in self.environment:
            if check.var == var:
                return check
        return None

    def for_target(self, torch_version: str, device: str = "cuda") -> list[OpRule]:
        """The ops that raise on this torch version and device."""
        return [op for op in self.ops if op.raises_on(torch_version, device)]

    def for_alert(self, caller: str, op: str = "", *, torch_version: str | None = None, device: str | None = None) -> OpRule | None:
        """The rule for a determinism alert: the one lookup scan, report and prediction share.

        By the alert's caller string first, then by the exact aten overload,
        then by the op's name within its namespace, then by its family (the
        name without leading underscores or `_backward`, so the forward
        `torchvision.ps_roi_pool` finds the rule of `_ps_roi_pool_backward`,
        and never an aten op or another torchvision op). Where several
        rules share a string, the ones that raise on `torch_version` and
        `device` win, then file order.
        """
        for candidates in (
            [r for r in self.ops if caller and caller in r.callers],
            [r for r in self.ops if op and op in r.aten],
            [r for r in self.ops if op and any(_packet(name) == _packet(op) for name in r.aten)],
            [r for r in self.ops if op and any(_family(name) == _family(op) for name in r.aten)],
        ):
            if candidates:
                return _best(candidates, torch_version, device)
        return None

    def by_caller(self, caller: str) -> OpRule | None:
        """Find the op whose alert names this caller string."""
        return self.for_alert(caller)

    def by_aten(self, overload: str) -> OpRule | None:
        """Find the op for an aten overload ('aten.put_.default'), or failing that its packet ('aten.put_')."""
        return self.for_alert("", overload)


def _family(name: str) -> tuple[str, str]:
    namespace, packet = _packet(name)
    return namespace, packet.lstrip("_").removesuffix("_").removesuffix("_backward")


def _best(candidates: list[OpRule], torch_version: str | None, device: str | None) -> OpRule:
    if torch_version is not None or device is not None:
        for rule in candidates:
            if (device is None or device in rule.devices) and (torch_version is None or version_in_range(torch_version, rule.torch)):
                return rule
    return candidates[0]


_NAMESPACES = ("aten", "torchvision", "prims")


def _packet(name: str) -> tuple[str, str]:
    """An op's (namespace, name): 'aten.put_.default', 'aten::put_.out', 'aten.put_' give ('aten', 'put_').

    A bare 'put_' is taken as aten's. The namespace is kept so that
    'torchvision.ps_roi_pool.default' cannot match another namespace's op.
    """
    name = name.strip()
    for namespace in _NAMESPACES:
        for sep in ("::", "."):
            if name.startswith(namespace + sep):
                return namespace, name[len(namespace) + len(sep) :].split(".")[0]
    return "aten", name.split(".")[0]


def _as_tuple(value: Any) -> tuple:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


def _check_when(when: tuple, where: str) -> None:
    for alternative in when:
        if not isinstance(alternative, dict) or not alternative:
            raise RulesError(f"{where}: each `when` alternative must be a non-empty table")
        for arg, pred in alternative.items():
            if not isinstance(pred, dict) or len(pred) != 1 or next(iter(pred)) not in PREDICATES:
                raise RulesError(
                    f"{where}: predicate for {arg!r} must be one of {sorted(PREDICATES)}, got {pred!r}"
                )
            key, operand = next(iter(pred.items()))
            if key in ("in", "not_in", "len_in") and not isinstance(operand, list):
                raise RulesError(f"{where}: {key!r} for {arg!r} takes a list, got {operand!r}")


def _load_api(raw: dict[str, Any], where: str) -> Api:
    if "name" not in raw:
        raise RulesError(f"{where}: api without a name")
    kind = raw.get("kind", "function")
    if kind not in ("function", "layer", "method"):
        raise RulesError(f"{where}: api {raw['name']!r} has unknown kind {kind!r}")
    where = f"{where}, api {raw['name']!r}"
    _check_when(_as_tuple(raw.get("when")), where)
    return Api(
        name=raw["name"],
        kind=kind,
        args=_as_tuple(raw.get("args")),
        keywords=_as_tuple(raw.get("keywords")),
        defaults=dict(raw.get("defaults", {})),
        when=tuple(dict(alt) for alt in _as_tuple(raw.get("when"))),
        note=raw.get("note", ""),
    )


def _parse_toml(path: Path, data: bytes) -> dict[str, Any]:
    from opscan import _toml

    try:
        return _toml.parse(data.decode("utf-8"))
    except (UnicodeDecodeError, _toml.TOMLError) as exc:
        raise RulesError(f"{path}: {exc}") from exc


def _ops_from(path: Path, data: dict[str, Any]) -> list[OpRule]:
    ops = []
    for i, raw in enumerate(data.get("op", [])):
        where = f"{path.name}: op #{i + 1} ({raw.get('id', '?')})"
        try:
            op = OpRule(
                id=raw["id"],
                title=raw.get("title", raw["id"]),
                apis=tuple(_load_api(a, where) for a in raw.get("api", [])),
                aten=_as_tuple(raw.get("aten")),
                callers=_as_tuple(raw.get("callers")),
                phase=raw.get("phase", "forward"),
                devices=_as_tuple(raw.get("devices", ["cuda"])),
                torch=raw.get("torch", ""),
                remedy=raw["remedy"],
                remedy_code=raw.get("remedy_code", ""),
                reproducer=raw.get("reproducer", ""),
                provenance=raw.get("provenance", ""),
                source=path.name,
                remedy_by_shape=raw.get("remedy_by_shape", ""),
                dtypes=_as_tuple(raw.get("dtypes", ["float32"])),
                remedy_reproducer=raw.get("remedy_reproducer", ""),
                verified=raw.get("verified", ""),
            )
        except KeyError as exc:
            raise RulesError(f"{where}: missing key {exc}") from exc
        if op.remedy_by_shape and op.remedy_by_shape not in SHAPE_REMEDIES:
            raise RulesError(f"{where}: remedy_by_shape must be one of {sorted(SHAPE_REMEDIES)}")
        if not op.dtypes or len(set(op.dtypes)) != len(op.dtypes) or not set(op.dtypes) <= set(DTYPES):
            raise RulesError(f"{where}: dtypes must be distinct names from {', '.join(DTYPES)}")
        if not isinstance(op.verified, str):
            raise RulesError(f"{where}: verified must be a string (date, GPU, torch, report)")
        if not isinstance(op.remedy_reproducer, str):
            raise RulesError(f"{where}: remedy_reproducer must be a string of Python")
        if op.phase not in ("forward", "backward"):
            raise RulesError(f"{where}: phase must be forward or backward")
        if not op.devices or not set(op.devices) <= {"cpu", "cuda"}:
            raise RulesError(f"{where}: devices must be a non-empty subset of cpu, cuda")
        _check_range(op.torch, where)
        ops.append(op)
    return ops


def _check_range(spec: str, where: str) -> None:
    try:
        version_in_range("2.0", spec)  # validates the spec
    except RulesError as exc:
        raise RulesError(f"{where}: {exc}") from None


_RELEASE = r"^\d+\.\d+$"


def _is_release(text: str) -> bool:
    """Whether _RELEASE matches: "2.14" read with str methods (the pattern only for anything else)."""
    major, dot, minor = text.partition(".")
    if dot and major.isdigit() and major.isascii() and minor.isdigit() and minor.isascii():
        return True
    import re

    return bool(re.match(_RELEASE, text))


def _releases_from(path: Path, data: dict[str, Any]) -> tuple[str, ...] | None:
    """`[releases] known`: minor releases "X.Y", oldest first, each once; None where the file has no table."""
    table = data.get("releases")
    if table is None:
        return None
    known = table.get("known") if isinstance(table, dict) else None
    if not isinstance(known, list) or not known or not all(isinstance(r, str) and _is_release(r) for r in known):
        raise RulesError(f"{path.name}: [releases] known must be a non-empty list of releases like \"2.14\"")
    keys = [parse_version(r) for r in known]
    if keys != sorted(set(keys)):
        raise RulesError(f"{path.name}: [releases] known must list each release once, oldest first")
    return tuple(known)


def _silent_from(path: Path, data: dict[str, Any]) -> list[SilentOp]:
    found = []
    for i, raw in enumerate(data.get("silent", [])):
        where = f"{path.name}: silent #{i + 1} ({raw.get('id', '?')})"
        try:
            entry = SilentOp(
                id=raw["id"],
                title=raw.get("title", raw["id"]),
                aten=_as_tuple(raw["aten"]),
                phase=raw["phase"],
                devices=_as_tuple(raw.get("devices", ["cuda"])),
                torch=raw["torch"],
                when=raw["when"],
                remedy=raw["remedy"],
                remedy_code=raw.get("remedy_code", ""),
                reproducer=raw.get("reproducer", ""),
                provenance=raw.get("provenance", ""),
                source=path.name,
                verified=raw.get("verified", ""),
            )
        except KeyError as exc:
            raise RulesError(f"{where}: missing key {exc}") from exc
        if entry.when not in SILENT_WHEN:
            raise RulesError(f"{where}: unknown when {entry.when!r}; known: {', '.join(sorted(SILENT_WHEN))}")
        if entry.phase not in ("forward", "backward"):
            raise RulesError(f"{where}: phase must be 'forward' or 'backward', not {entry.phase!r}")
        if not entry.aten or not all(isinstance(a, str) and a.startswith("aten.") for a in entry.aten):
            raise RulesError(f"{where}: aten must list overloads such as 'aten.adaptive_max_pool3d_backward.default'")
        _check_range(entry.torch, where)
        found.append(entry)
    return found


def _environment_from(path: Path, data: dict[str, Any]) -> list[EnvCheck]:
    checks = []
    for i, raw in enumerate(data.get("environment", [])):
        where = f"{path.name}: environment #{i + 1} ({raw.get('id', '?')})"
        try:
            check = EnvCheck(
                id=raw["id"],
                title=raw.get("title", raw["id"]),
                var=raw["var"],
                values=_as_tuple(raw.get("values")),
                torch=raw["torch"],
                provenance=raw.get("provenance", ""),
            )
        except KeyError as exc:
            raise RulesError(f"{where}: missing key {exc}") from exc
        if not check.values or not all(isinstance(v, str) for v in check.values):
            raise RulesError(f"{where}: values must be a non-empty list of strings")
        _check_range(check.torch, where)
        checks.append(check)
    return checks


def load_file(path: Path) -> list[OpRule]:
    """Parse one rules file; raises RulesError with the file name on bad data."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RulesError(f"{path}: {exc}") from exc
    return _ops_from(path, _parse_toml(path, data))


# ---------------------------------------------------------------- the parsed snapshot

# Parsing the TOML files costs lint ~20 ms on every run (tomllib is pure Python), more
# than ruff's whole run on a file. The same data, parsed, is kept beside this module as
# a generated Python module (opscan/_rules_snapshot.py) together with a digest of the
# files it came from; it is used only while that digest matches, so an edited rules file
# is always read itself. A module, not JSON: its .pyc unmarshals in about a third of the
# time json takes to import (json compiles six regexes as it loads) and decode the same data.
# What lint asks of the rules on every run (RulesIndex) is generated beside it, in a module
# of its own (opscan/_rules_index.py): a script that reaches no op rule's API needs neither
# the snapshot's import (~0.5 ms) nor the ops built (~1.2 ms). The index holds the files'
# bytes it was built from, and is used only while they are the bytes on disk: comparing
# them is exact, and costs less than importing blake2 (a shared library) and hashing them.
# `python scripts/gen_rules_snapshot.py` rewrites both; a test fails while either is stale.
SNAPSHOT = Path(__file__).with_name("_rules_snapshot.py")
INDEX = Path(__file__).with_name("_rules_index.py")


def _digest(sources: list[tuple[str, bytes]]) -> str:
    from opscan._hash import blake2b

    h = blake2b(digest_size=20)
    for name, data in sources:
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def _read_sources(base: Path) -> list[tuple[str, bytes]]:
    # The files base.glob("*.toml") gives, without the regex fnmatch would compile for it.
    try:
        names = sorted(name for name in os.listdir(base) if name.endswith(".toml"))
    except OSError:  # as glob: a folder that is missing or cannot be listed holds none
        names = []
    sources = []
    for path in [base / name for name in names]:
        try:
            sources.append((path.name, path.read_bytes()))
        except OSError as exc:
            raise RulesError(f"{path}: {exc}") from exc
    return sources


def _snapshot() -> tuple[object, object] | None:
    """(digest, files) from the generated module; None where it is missing or does not load."""
    try:
        from opscan import _rules_snapshot
    except (ImportError, SyntaxError):
        return None
    return getattr(_rules_snapshot, "DIGEST", None), getattr(_rules_snapshot, "FILES", None)


def _read_snapshot(digest: str) -> dict[str, dict] | None:
    snapshot = _snapshot()
    if snapshot is None:
        return None
    found, files = snapshot
    if found != digest or not isinstance(files, dict):
        return None
    return files


def _literal(value: Any, indent: str = "") -> str:
    """`value` (what tomllib gives: dicts, lists, strings, numbers, booleans) as Python source, a
    dict's items one a line, keys sorted: the same text on every Python version (unlike pprint's)."""
    inner = indent + "    "
    if isinstance(value, dict) and value:
        items = "".join(f"{inner}{key!r}: {_literal(value[key], inner)},\n" for key in sorted(value))
        return "{\n" + items + indent + "}"
    if isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        items = "".join(f"{inner}{_literal(item, inner)},\n" for item in value)
        return "[\n" + items + indent + "]"
    if isinstance(value, list):  # of strings and numbers: on one line
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    if isinstance(value, (dict, str, int)) or (isinstance(value, float) and value - value == 0):
        return repr(value)  # an empty dict, a string, a number or a boolean (an int); no inf or nan
    raise RulesError(f"the rules data holds a value the snapshot cannot keep: {value!r}")


def snapshot_text(directory: str | None = None) -> str:
    """The snapshot module for the rules files as they are now (what gen_rules_snapshot.py writes)."""
    base = Path(directory) if directory else rules_dir()
    sources = _read_sources(base)
    files = {name: _parse_toml(base / name, data) for name, data in sources}
    return (
        '"""The parsed rules/*.toml, for opscan.rules.load. Generated by scripts/gen_rules_snapshot.py: do not edit."""\n\n'
        f"DIGEST = {_digest(sources)!r}\n\n"
        f"FILES = {_literal(files)}\n"
    )


def index_text(directory: str | None = None) -> str:
    """The index module for the rules files as they are now (what gen_rules_snapshot.py writes beside
    the snapshot). Built from the database itself, so malformed data is refused here (a RulesError),
    as load() would refuse it: an index exists only for data that loads."""
    base = Path(directory) if directory else rules_dir()
    sources = _read_sources(base)
    files = {name: _parse_toml(base / name, data) for name, data in sources}
    index = RulesIndex.of(_database(base, sources, files, directory is None))

    def strings(values) -> str:
        return "(\n" + "".join(f"    {v!r},\n" for v in values) + ")" if values else "()"

    def file(name: str, data: bytes) -> str:  # a bytes literal a line, so that an edit shows as one
        lines = "".join(f"        {line!r}\n" for line in data.splitlines(keepends=True)) or "        b''\n"
        return f"    ({name!r}, (\n{lines}    )),\n"

    return (
        '"""What lint asks of rules/*.toml on every run, for opscan.rules.index. Generated by\n'
        'scripts/gen_rules_snapshot.py: do not edit."""\n\n'
        f"RELEASES = {strings(index.releases)}\n\n"
        f"FUNCTIONS = {strings(sorted(index.functions))}\n\n"
        f"METHODS = {strings(sorted(index.methods))}\n\n"
        f"ENVIRONMENT = {strings(index.environment)}\n\n"
        "# The files it was built from (name, bytes), sorted by name: it holds while they are unchanged.\n"
        f"SOURCES = (\n{''.join(file(name, data) for name, data in sources)})\n"
    )


class RulesIndex(Frozen):
    """What lint needs of the rules before any call reaches an op rule: the known releases, every
    op rule's API names (of any torch version or device), and the torch range of each environment check."""

    _fields = ("releases", "functions", "methods", "environment")
    __slots__ = _fields

    def __init__(self, releases: tuple[str, ...], functions: frozenset[str], methods: frozenset[str], environment: tuple[tuple[str, str], ...]):
        self.releases = releases  # as RuleDB.releases
        self.functions = functions  # the names of APIs of kind "function" and "layer"
        self.methods = methods  # the names of APIs of kind "method"
        self.environment = environment  # (var, torch range) of each check, in file order

    @classmethod
    def of(cls, db: RuleDB) -> RulesIndex:
        functions, methods = set(), set()
        for op in db.ops:
            for api in op.apis:
                (methods if api.kind == "method" else functions).add(api.name)
        return cls(db.releases, frozenset(functions), frozenset(methods), tuple((c.var, c.torch) for c in db.environment))

    def env_range(self, var: str) -> str | None:
        """The torch range of RuleDB.env_check(var), None where the rules record no check of `var`."""
        for name, torch in self.environment:
            if name == var:
                return torch
        return None


def _read_index(sources: list[tuple[str, bytes]]) -> RulesIndex | None:
    """The generated index, where it was built from these very files; None otherwise."""
    try:
        from opscan import _rules_index as generated
    except (ImportError, SyntaxError):
        return None
    try:
        if list(generated.SOURCES) != sources:
            return None
        environment = tuple((var, torch) for var, torch in generated.ENVIRONMENT)
        return RulesIndex(tuple(generated.RELEASES), frozenset(generated.FUNCTIONS), frozenset(generated.METHODS), environment)
    except (AttributeError, TypeError, ValueError):  # not what index_text writes: load the rules instead
        return None


@memoized
def index() -> RulesIndex:
    """RulesIndex.of(load()), from the generated index while it is in step with rules/*.toml."""
    found = _read_index(_read_sources(rules_dir()))
    return found if found is not None else RulesIndex.of(load())


@memoized
def load(directory: str | None = None) -> RuleDB:
    """Load every `*.toml` under the rules directory, sorted by file name."""
    base = Path(directory) if directory else rules_dir()
    sources = _read_sources(base)
    parsed = _read_snapshot(_digest(sources)) if directory is None else None
    return _database(base, sources, parsed or {}, directory is None)


def _database(base: Path, sources: list[tuple[str, bytes]], parsed: dict[str, dict], need_releases: bool) -> RuleDB:
    """The database of these files; each one's table from `parsed` where it is there, else from its TOML."""
    if need_releases and not sources:  # every command reads the releases; none at all was an IndexError deep in lint
        raise RulesMissing(
            f"opscan's rules data is missing: {base} holds no rules file (*.toml); "
            "reinstall opscan, or run it from a checkout that has its rules/ folder"
        )
    ops: list[OpRule] = []
    seen: set[str] = set()
    releases: tuple[str, ...] | None = None
    environment: list[EnvCheck] = []
    silent: list[SilentOp] = []
    for name, data in sources:
        path = base / name
        raw = parsed.get(name)
        table = raw if raw is not None else _parse_toml(path, data)
        for op in _ops_from(path, table):
            if op.id in seen:
                raise RulesError(f"{path.name}: duplicate op id {op.id!r}")
            seen.add(op.id)
            ops.append(op)
        found = _releases_from(path, table)
        if found is not None:
            if releases is not None:
                raise RulesError(f"{path.name}: [releases] is defined in two files")
            releases = found
        for check in _environment_from(path, table):
            if check.id in seen or any(c.var == check.var for c in environment):
                raise RulesError(f"{path.name}: duplicate environment check {check.id!r}")
            seen.add(check.id)
            environment.append(check)
        for entry in _silent_from(path, table):
            if entry.id in seen:
                raise RulesError(f"{path.name}: duplicate id {entry.id!r}")
            seen.add(entry.id)
            silent.append(entry)
    if releases is None and need_releases:
        raise RulesError(f"{base}: no file defines [releases] known")
    return RuleDB(tuple(ops), releases or (), tuple(environment), tuple(silent))
