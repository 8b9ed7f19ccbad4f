"""DET007 nondeterministic-op: An API with no deterministic CUDA implementation is used where determinism is enabled.

## What it does
In a script that enables `torch.use_deterministic_algorithms(True)`,
flags each call that reaches a kernel with no deterministic CUDA implementation
in the targeted torch version, for example `F.interpolate(mode="bicubic")`,
`nn.AdaptiveAvgPool2d(7)`, `nn.ReflectionPad1d`, `nn.CTCLoss`,
`nn.EmbeddingBag(mode="max")`, `torch.histc`, `x.put_(...)`. It looks at the
script's own module and at the project code that runs from it.

The data lives in `rules/*.toml`, keyed by torch version range. It points at
the call that creates the layer or runs the op. Where an argument that decides
it cannot be known statically, it stays silent; ops that raise only in
backward are not flagged where gradients are off (`torch.no_grad()`,
`torch.inference_mode()`, `torch.set_grad_enabled(False)`; not `inference_mode(False)`):
in such a `with` block, in a function they decorate, or in one a project
decorator runs with gradients off on every path (yolov5's
`@smart_inference_mode()`, which applies one of them). Elsewhere, lint cannot tell
whether a gradient flows back through such a call (a resize of the input batch
has none), so their message says the op raises where one does.

## Torch versions
The rule checks the torch releases the project targets, as every rule does:
`--torch-version` or `torch-version` (a version or a specifier such as
`">=2.4,<2.7"`), else the project's torch requirement (pyproject.toml,
requirements files, setup.cfg, setup.py, environment.yml, lock files), else
the installed torch, else every release the rules know (1.8 to the newest).
An op is flagged when it raises in some targeted release; when not in all of
them, the message names those it raises in ("in torch < 2.10", "in torch
1.13 to 2.5"). Where it raises in all of them, the message names the targeted
range, or the newest release when that is every known one.

## Why is this bad?
Under strict determinism these calls raise `RuntimeError: ... does not have a
deterministic implementation` at run time, usually hours into a job, and only
the first one is reported per run. Under `warn_only=True` they run their
nondeterministic kernel, so the run is still not reproducible.

## Example
```python
torch.use_deterministic_algorithms(True)
pool = nn.AdaptiveAvgPool2d((7, 7))
```

## Use instead
```python
torch.use_deterministic_algorithms(True)
pool = nn.Identity()  # the input is already 7x7
```
Each rule in `rules/` carries a concrete remedy. `opscan scan` confirms on a GPU.

## Fix
None automatic: the remedy depends on the model.
"""

from __future__ import annotations

from opscan.codes import parse_doc
from opscan.lint.context import Context
from opscan.lint.model import UNKNOWN, Call

TYPE_CHECKING = False
if TYPE_CHECKING:
    from opscan.versions import TorchRange

RULE = parse_doc(__doc__)


def _bind(api, args) -> dict:
    bound = {}
    for i, name in enumerate(api.args):
        if i < len(args.args):
            bound[name] = args.args[i]
    bound.update(dict(args.kwargs))
    if args.star:
        for name in api.args + api.keywords:
            bound.setdefault(name, UNKNOWN)
    return bound


def _index(ops, torch: TorchRange):
    """API name -> [(op, api, the targeted releases in which the op raises on CUDA)], for ops that raise in some."""
    by_name, by_method = {}, {}
    for op in ops:
        if "cuda" not in op.devices:
            continue
        releases = torch.subset(op.torch)
        if not releases:
            continue
        for api in op.apis:
            table = by_method if api.kind == "method" else by_name
            table.setdefault(api.name, []).append((op, api, releases))
    return by_name, by_method


_INDEXES: dict[tuple[str, ...], tuple] = {}  # targeted releases -> (rule DB, its index): built once per run, not per script


def _ops_for(torch: TorchRange):
    from opscan.rules import load

    db = load()
    cached = _INDEXES.get(torch.releases)
    if cached is None or cached[0] is not db:  # a reloaded database gets a new index
        cached = _INDEXES[torch.releases] = (db, _index(db.ops, torch))
    return cached[1]


def check(ctx: Context) -> None:
    if not ctx.enables:
        return
    # Under warn_only the op does not raise; it runs its nondeterministic kernel and warns.
    consequence = (
        ", so it will raise under use_deterministic_algorithms(True)"
        if ctx.strictly_enabled
        else ", so under warn_only it silently stays nondeterministic (strict mode would raise)"
    )
    # A backward-only kernel runs only where a gradient flows back through the call, which lint
    # cannot tell in general (a resize of the input batch has none): the message says so.
    backward_consequence = (
        ", so it will raise under use_deterministic_algorithms(True) where a gradient flows back through it"
        if ctx.strictly_enabled
        else ", so under warn_only it silently stays nondeterministic where a gradient flows back through it "
        "(strict mode would raise)"
    )
    from opscan.rules import index

    named = index()  # every op rule's API names: a call that names none cannot be a candidate
    by_name = by_method = None  # the ops are built and indexed only for a call that names one
    seen = set()
    for event in (*ctx.trace.first_calls(), *ctx.trace.reachable_calls):
        call = event.what
        if call.__class__ is not Call:
            continue
        qualname = call.qualname or ""
        if qualname not in named.functions and call.method not in named.methods:
            continue  # the same call met again is left out the same way: no need to remember it
        key = (event.path, event.loc)
        if key in seen:
            continue
        seen.add(key)
        if by_name is None:
            by_name, by_method = _ops_for(ctx.torch)
        candidates = by_name.get(qualname, [])
        if not candidates and call.method and not qualname.startswith(("numpy.", "pandas.")):
            candidates = by_method.get(call.method, [])  # a tensor method on a receiver of unknown type
        for op, api, releases in candidates:
            if call.no_grad and op.phase == "backward":
                continue
            if api.matches(_bind(api, call.args)) is not True:
                continue
            name = f"`{api.name}`" if api.kind != "method" else f"`.{api.name}()`"
            # The releases it raises in, where that is not every targeted one; else the targeted range
            # (by default every known release: the newest is named, as for a single target).
            which = ctx.torch.describe(releases) or (ctx.torch.newest if ctx.torch.is_every else str(ctx.torch))
            ctx.report(
                RULE,
                event.path,
                event.loc,
                f"{name} reaches {op.title}, which has no deterministic CUDA implementation in torch {which}"
                f"{backward_consequence if op.phase == 'backward' else consequence}. {op.remedy}",
                op=op.id,
            )
            break
