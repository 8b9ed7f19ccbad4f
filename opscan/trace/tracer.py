"""`Trace`: the scan as a context manager, and the findings it builds.

    with Trace(target="model.py:build") as t:
        loss = model(x).sum()
        loss.backward()
    t.findings  # one OpFinding per (op, caller, phase, source line, module)

Entering puts the process in strict deterministic mode, installs the module and
optimizer hooks of the source map and pushes the catching dispatch mode;
leaving undoes all of it in reverse order, also when the body raised.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass

import torch

from opscan.findings import Finding
from opscan.rules import Remedy, version_in_range
from opscan.trace.catch import CatchMode, parse_alert
from opscan.trace.codes import CUBLAS_CODE, OP_CODE, UNALERTED_CODE
from opscan.trace.remedy import ALLOW_HELPER, generic_remedy, load_rules
from opscan.trace.sourcemap import (
    NOWHERE,
    SourceMap,
    display_path,
    locate,
    user_frame,
)
from opscan.trace.state import StrictMode, TorchFlags


@dataclass(frozen=True)
class _Unalerted:
    """What `_add` records for an op the rules know to be nondeterministic without an alert."""

    caller: str  # the entry's title
    kind: str = "silent"


@dataclass
class Occurrence:
    """One distinct offending op at one place; `count` is how often it ran there."""

    target: str | None
    op: str
    caller: str
    kind: str
    phase: str
    filename: str | None
    lineno: int | None
    line_text: str
    module: str
    module_class: str
    shapes: list
    dtypes: list
    autograd_node: str | None = None
    count: int = 0
    mapped: bool = True  # False: a backward node whose forward the scan did not see

    @property
    def key(self):
        return (self.target, self.op, self.caller, self.phase, self.filename, self.lineno, self.module)


@dataclass(frozen=True)
class OpFinding:
    """One op with no deterministic implementation, where it ran, and what to do about it.

    The public result of a scan: `opscan.trace()` and the pytest plugin hand
    these out; `to_finding()` makes the Finding the formatters render.
    `file` and `line` are the user's line that ran the op (for a backward op,
    the forward line that created its autograd node); `module` is the
    `nn.Module` path from the scanned root ("" for the root itself).
    """

    op: str
    caller: str
    phase: str
    module: str
    module_class: str
    file: str | None
    line: int | None
    line_text: str
    shapes: tuple
    dtypes: tuple
    count: int
    remedy: Remedy
    rule: str | None = None
    target: str | None = None
    kind: str = "op"  # "op"; "cublas" for the cuBLAS workspace alert; "silent" for a rules [[silent]] op (caller: its title)
    autograd_node: str | None = None
    mapped: bool = True  # False: a backward op whose forward the scan did not see

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file else "an unknown line"

    @property
    def message(self) -> str:
        module = f" in {self.module} ({self.module_class})" if self.module else f" in {self.module_class}" if self.module_class else ""
        runs = f", {self.count} calls" if self.count > 1 else ""
        if self.kind == "silent":
            origin = f"the forward op at {self.where}" if self.mapped else "a forward op the scan did not see"
            where = f"; it runs in backward of {origin}" if self.phase == "backward" else f" ({self.phase})"
            return (
                f"{self.op} is nondeterministic here and torch raises no alert for it, so strict mode does not "
                f"catch it: {self.caller}{where}{module}{runs}"
            )
        if self.kind == "cublas":
            return (
                f"{self.op} uses cuBLAS, and CUBLAS_WORKSPACE_CONFIG is not :4096:8 or :16:8, "
                "so this torch refuses it in deterministic mode"
            )
        if self.phase == "backward":
            origin = f"the forward op at {self.where}" if self.mapped else "a forward op the scan did not see"
            return f"{self.op} ({self.caller}) has no deterministic implementation; it runs in backward of {origin}{module}{runs}"
        return f"{self.op} ({self.caller}) has no deterministic implementation ({self.phase}){module}{runs}"

    def to_finding(self) -> Finding:
        properties = {
            "target": self.target or "",
            "op": self.op,
            "caller": self.caller,
            "phase": self.phase,
            "module": self.module,
            "module_class": self.module_class,
            "file": self.file,
            "line": self.line,
            "shapes": [list(s) for s in self.shapes],
            "dtypes": list(self.dtypes),
            "count": self.count,
            "remedy_source": self.remedy.source,
        }
        if self.rule is not None:
            properties["rule"] = self.rule
        if self.autograd_node:
            properties["autograd_node"] = self.autograd_node
        return Finding(
            code=CUBLAS_CODE if self.kind == "cublas" else UNALERTED_CODE if self.kind == "silent" else OP_CODE,
            message=self.message,
            path=self.file,
            line=self.line or 1,
            line_text=self.line_text,
            source_path=self.file,
            help=self.remedy.text,
            help_code=self.remedy.code,
            properties=properties,
        )


def _tensor_summary(args, kwargs):
    shapes, dtypes = [], []

    def visit(value):
        if isinstance(value, torch.Tensor):
            shapes.append(list(value.shape))
            dtypes.append(str(value.dtype).removeprefix("torch."))
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item)

    for value in args:
        visit(value)
    for value in kwargs.values():
        visit(value)
    return shapes, dtypes


class Trace:
    """Run code in strict deterministic mode and collect every op that raises the determinism alert.

    Args:
        target: a label that each finding carries (the scanned target's name).
        roots: nn.Modules whose submodules are named by path from that root.
        rules: a `opscan.rules.RuleDB` for remedies; by default the bundled one.
        pin: ignore the traced code's own attempts to turn strict mode off.
        record_backward_sites: remember where each autograd node was created,
            so backward ops map to forward lines (a small cost per forward op).
        record_all_sites: remember it also for the nodes whose backward never
            raises the alert (the probe reports those ops too).
    """

    def __init__(
        self,
        target: str | None = None,
        *,
        roots=(),
        rules=None,
        pin: bool = True,
        record_backward_sites: bool = True,
        record_all_sites: bool = False,
    ):
        self.target = target
        self.notices: list[str] = []
        self.errors: list[str] = []  # problems that are not findings (the rules data would not load)
        self.occurrences: dict[tuple, Occurrence] = {}
        self.flags_seen: TorchFlags | None = None
        self.cublas_alerted = False
        self._rules = rules
        self._rules_loaded = rules is not None
        self._pin = pin
        self._sourcemap = SourceMap(roots, record_nodes=record_backward_sites)
        self._record_all_sites = record_all_sites
        self._lock = threading.Lock()
        self._stack: contextlib.ExitStack | None = None
        self._silent_funcs: list = []
        self._catch: CatchMode | None = None

    # ---- context manager

    def __enter__(self) -> Trace:
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(StrictMode(pin=self._pin, on_override=self._notice))
            self._sourcemap.install()
            stack.callback(self._sourcemap.remove)
            self._catch = CatchMode(self._on_alert, self._sourcemap, every_site=self._record_all_sites, silent=self._silent_ops(), on_silent=self._on_silent)
            stack.enter_context(self._catch)
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        stack, self._stack = self._stack, None
        try:
            self.flags_seen = TorchFlags.capture()
            if exc is not None:
                self._alert_outside_dispatch(exc)
        finally:
            if stack is not None:
                stack.close()

    @property
    def ops(self) -> int:
        """The op calls that ran under this trace (0: the code ran no torch op, so nothing was scanned)."""
        return self._catch.ops if self._catch is not None else 0

    @property
    def sourcemap(self) -> SourceMap:
        """Where this trace's ops came from: shared with a probe that runs beside it."""
        return self._sourcemap

    # ---- recording

    def _notice(self, message: str) -> None:
        if message not in self.notices:
            self.notices.append(message)

    def set_target(self, target: str | None) -> None:
        """Label the findings recorded from now on with another target."""
        self.target = target

    def _on_alert(self, func, args, kwargs, alert, frame) -> None:
        phase, site, node_name, mapped = self._sourcemap.where(frame)
        if alert.kind == "cublas":
            self.cublas_alerted = True
        shapes, dtypes = _tensor_summary(args, kwargs)
        self._add(str(func), alert, phase, site, shapes, dtypes, node_name, mapped)

    def _silent_ops(self) -> dict:
        """id(OpOverload) -> the rules' entry, for this torch's ops that are nondeterministic without an alert."""
        rules = self.rules
        found: dict = {}
        for entry in rules.silent if rules is not None else ():
            if not version_in_range(torch.__version__, entry.torch):
                continue
            for name in entry.aten:
                _, packet, overload = name.split(".", 2)
                func = getattr(getattr(torch.ops.aten, packet, None), overload, None)
                if func is not None:
                    found[id(func)] = entry
                    self._silent_funcs.append(func)  # held: the table is keyed by id
        return found

    def _on_silent(self, func, args, kwargs, entry, frame) -> None:
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        shapes, dtypes = _tensor_summary(args, kwargs)
        if first is None or not entry.applies(torch.__version__, first.device.type, shapes):
            return
        phase, site, node_name, mapped = self._sourcemap.where(frame)
        self._add(str(func), _Unalerted(entry.title), phase, site, shapes, dtypes, node_name, mapped)

    def _add(self, op, alert, phase, site, shapes, dtypes, node_name=None, mapped=True) -> None:
        module = self._sourcemap.name(site.module)
        occurrence = Occurrence(
            target=self.target,
            op=op,
            caller=alert.caller,
            kind=alert.kind,
            phase=phase,
            filename=site.filename,
            lineno=site.lineno,
            line_text=site.line_text,
            module=module.label if module else "",
            module_class=module.cls if module else "",
            shapes=shapes,
            dtypes=dtypes,
            autograd_node=node_name,
            mapped=mapped,
        )
        with self._lock:  # backward ops may report from an autograd thread
            known = self.occurrences.setdefault(occurrence.key, occurrence)
            known.count += 1

    def _alert_outside_dispatch(self, exc: BaseException) -> None:
        """An alert raised by Python code, not by an aten op, cannot be skipped: record where it stopped the run."""
        alert = parse_alert(exc)
        if alert is None:
            return
        tb, frame = exc.__traceback__, None
        while tb is not None:  # the innermost user frame of the traceback
            if user_frame(tb.tb_frame) is tb.tb_frame:
                frame = tb.tb_frame
            tb = tb.tb_next
        site = locate(frame) if frame is not None else NOWHERE
        self._add("(python)", alert, "forward", site, [], [])
        self._notice(f"{alert.caller} raised from Python code, outside any aten op; the run stopped there")

    # ---- results

    @property
    def rules(self):
        if not self._rules_loaded:
            self._rules_loaded = True
            self._rules = load_rules(self.errors)
        return self._rules

    @property
    def findings(self) -> list[OpFinding]:
        """Every offending op seen so far, in the order first seen."""
        return [self._op_finding(o) for o in self.occurrences.values()]

    def _op_finding(self, o: Occurrence) -> OpFinding:
        import torch

        rules = self.rules
        silent = rules.silent_for(o.op) if rules is not None and o.kind == "silent" else None
        rule = rules.for_alert(o.caller, o.op, torch_version=torch.__version__) if rules is not None and silent is None else None
        if silent is not None:
            remedy, rule = silent.remedy_for(), silent
        elif rule is not None:
            remedy = rule.remedy_for(o.shapes, op=o.op, module_label=o.module)
            if not remedy.code:  # a remedy in prose only: still give the code that keeps the op on purpose
                remedy = Remedy(remedy.text, f"{ALLOW_HELPER}\n\nwith nondeterministic_allowed():\n    {o.line_text or '...'}\n", remedy.source)
        else:
            remedy = generic_remedy(o.caller, o.phase, o.line_text)
        return OpFinding(
            op=o.op,
            caller=o.caller,
            phase=o.phase,
            module=o.module,
            module_class=o.module_class,
            file=display_path(o.filename),
            line=o.lineno,
            line_text=o.line_text,
            shapes=tuple(tuple(s) for s in o.shapes),
            dtypes=tuple(o.dtypes),
            count=o.count,
            remedy=remedy,
            rule=rule.id if rule is not None else None,
            target=o.target,
            kind=o.kind,
            autograd_node=o.autograd_node,
            mapped=o.mapped,
        )


def collect_env(device: str, flags: TorchFlags | None = None, cublas_alerted: bool = False, environ=None) -> dict:
    """The versions, device and flags a scan ran with, as flat values; `environ`: its variables (default os.environ)."""
    cuda = device.startswith("cuda")
    config = (os.environ if environ is None else environ).get("CUBLAS_WORKSPACE_CONFIG")
    env = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "device": device,
        "gpu": torch.cuda.get_device_name(torch.device(device)) if cuda else None,
        "cublas_workspace_config": config,
        "cublas_enforced": _cublas_enforced(device, config, cublas_alerted) if cuda else None,
    }
    flags = flags or TorchFlags.capture()
    env.update(
        {
            "fill_uninitialized_memory": flags.fill_uninitialized_memory,
            "cudnn_enabled": flags.cudnn_enabled,
            "cudnn_benchmark": flags.cudnn_benchmark,
            "cudnn_deterministic": flags.cudnn_deterministic,
        }
    )
    return env


def _cublas_enforced(device: str, config: str | None, alerted: bool) -> bool | None:
    """Does this stack refuse cuBLAS without a workspace config in deterministic mode?

    True if the alert fired during the scan; otherwise a small matmul in strict
    mode answers it. None when a valid config is set: the check cannot be seen then.
    """
    if alerted:
        return True
    if config in (":4096:8", ":16:8"):
        return None
    saved = TorchFlags.capture()
    torch._C._set_deterministic_algorithms(True, warn_only=False)
    try:
        a = torch.ones(8, 8, device=device)
        torch.mm(a, a)
        torch.cuda.synchronize(device)
        return False
    except RuntimeError as exc:
        alert = parse_alert(exc)
        if alert is not None and alert.kind == "cublas":
            return True
        raise
    finally:
        saved.restore()
