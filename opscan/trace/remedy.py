"""What to do about an op that raised: from the runtime shapes, the rules data, or the generic escape hatch.

Order of preference:
1. a remedy that needs the shapes seen at run time (an adaptive pool whose
   output size equals, divides or collapses its input has an exact
   deterministic equivalent);
2. the rule's own remedy from `rules/*.toml`;
3. the exact code to keep this one op nondeterministic on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass

ALLOW_HELPER = '''\
import contextlib

import torch


@contextlib.contextmanager
def nondeterministic_allowed():
    """Run the block with determinism off, then restore the caller's setting."""
    mode = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(False)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
'''


@dataclass(frozen=True)
class Remedy:
    text: str
    code: str
    source: str  # "shape", "rule:<id>" or "generic"


def _dims(shape, n):
    return tuple(shape[-n:]) if shape is not None and len(shape) >= n else None


def _fmt(dims) -> str:
    return "x".join(str(d) for d in dims)


def _size_arg(dims) -> str:
    """An output size as the layer is usually written: 7, or (7, 6)."""
    return str(dims[0]) if len(set(dims)) == 1 else str(tuple(dims))


def shape_remedy(op: str, shapes, module_label: str = "", module_class: str = "") -> Remedy | None:
    """A remedy that the runtime shapes make exact, for adaptive pooling backward ops."""
    packet = op.removeprefix("aten.").split(".")[0].lstrip("_")
    if not packet.startswith(("adaptive_avg_pool", "adaptive_max_pool")) or not packet.endswith("_backward"):
        return None
    n = 3 if "3d" in packet else 2 if "2d" in packet else 1
    if len(shapes) < 2:
        return None
    out, inp = _dims(shapes[0], n), _dims(shapes[1], n)  # (grad_output, self, ...)
    if out is None or inp is None:
        return None
    kind = "Avg" if "avg" in packet else "Max"
    layer = f"Adaptive{kind}Pool{n}d"
    where = f" ({module_label})" if module_label else ""
    if out == inp:
        return Remedy(
            f"The input is already {_fmt(inp)}, so {layer}({_size_arg(out)}){where} returns it unchanged: "
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
            f"The {_fmt(inp)} input divides evenly into {_fmt(out)}, so {layer}{where} equals "
            f"nn.{fixed}(kernel_size={kernel}), whose backward is deterministic.",
            f"nn.{fixed}(kernel_size={kernel})",
            "shape",
        )
    return None


def generic_remedy(caller: str, phase: str, line_text: str) -> Remedy:
    """Keep this op nondeterministic on purpose, with the exact code to do so."""
    if phase == "backward":
        text = (
            f"No deterministic kernel is known for {caller}. It runs in backward, so to keep it on purpose, "
            "run the backward pass with determinism off; that turns it off for every op of that backward pass."
        )
        body = "with nondeterministic_allowed():\n    loss.backward()\n"
    else:
        statement = line_text or "y = op(x)"
        text = (
            f"No deterministic kernel is known for {caller}. To keep it on purpose, run just this line with "
            "determinism off and restore it afterwards."
        )
        body = f"with nondeterministic_allowed():\n    {statement}\n"
    return Remedy(text, f"{ALLOW_HELPER}\n\n{body}", "generic")


def find_rule(db, caller: str, op: str):
    """The rules entry for an alert: by caller string first, then by aten overload."""
    if db is None:
        return None
    rule = db.by_caller(caller)
    if rule is not None:
        return rule
    wanted = _packet(op)
    for candidate in db.ops:
        if any(_packet(name) == wanted for name in candidate.aten):
            return candidate
    return None


def _packet(name: str) -> str:
    """'aten.put_.default', 'aten::put_', 'put_.default' and 'put_' all give 'put_'."""
    name = name.strip()
    for prefix in ("aten::", "aten."):
        name = name.removeprefix(prefix)
    return name.split(".")[0]


def remedy_for(db, *, op: str, caller: str, phase: str, shapes, line_text: str, module_label: str = "", module_class: str = "") -> tuple[Remedy, object]:
    """The remedy for one finding, and the matching rule (or None)."""
    rule = find_rule(db, caller, op)
    special = shape_remedy(op, shapes, module_label, module_class)
    if special is not None:
        return special, rule
    if rule is not None and rule.remedy:
        return Remedy(rule.remedy.strip(), (rule.remedy_code or "").strip(), f"rule:{rule.id}"), rule
    return generic_remedy(caller, phase, line_text), rule
