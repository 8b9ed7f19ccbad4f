"""DET007 nondeterministic-op: An API with no deterministic CUDA implementation is used where determinism is enabled.

## What it does
In a script that enables `torch.use_deterministic_algorithms(True)`,
flags each call that reaches a kernel with no deterministic CUDA implementation
in the targeted torch version, for example `F.interpolate(mode="bicubic")`,
`nn.AdaptiveAvgPool2d(7)`, `nn.ReflectionPad1d`, `nn.CTCLoss`,
`nn.EmbeddingBag(mode="max")`, `torch.histc`, `x.put_(...)`. It looks at the
script's own module and at the project code that runs from it.

The data lives in `rules/*.toml`, keyed by torch version range; the target
version comes from `torch-version` in `[tool.opscan]` (default: the newest
known). It points at the call that creates the layer or runs the op. Where an
argument that decides it cannot be known statically, it stays silent; ops that
raise only in backward are not flagged under `torch.no_grad()`.

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

from opscan.codes import parse_doc
from opscan.lint.context import Context
from opscan.lint.model import UNKNOWN, Call

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


def _index(ops):
    by_name, by_method = {}, {}
    for op in ops:
        for api in op.apis:
            table = by_method if api.kind == "method" else by_name
            table.setdefault(api.name, []).append((op, api))
    return by_name, by_method


_INDEXES: dict[str, tuple] = {}  # torch version -> (rule DB, its index): built once per run, not per script


def _ops_for(torch_version: str):
    from opscan.rules import load

    db = load()
    cached = _INDEXES.get(torch_version)
    if cached is None or cached[0] is not db:  # a reloaded database gets a new index
        cached = _INDEXES[torch_version] = (db, _index(db.for_target(torch_version, "cuda")))
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
    by_name, by_method = _ops_for(ctx.torch_version)
    seen = set()
    for event in ctx.trace.events + ctx.trace.reachable_calls:
        call = event.what
        if call.__class__ is not Call:
            continue
        key = (event.path, event.loc)
        if key in seen:
            continue
        seen.add(key)
        qualname = call.qualname or ""
        candidates = by_name.get(qualname, [])
        if not candidates and call.method and not qualname.startswith(("numpy.", "pandas.")):
            candidates = by_method.get(call.method, [])  # a tensor method on a receiver of unknown type
        for op, api in candidates:
            if call.no_grad and op.phase == "backward":
                continue
            if api.matches(_bind(api, call.args)) is not True:
                continue
            name = f"`{api.name}`" if api.kind != "method" else f"`.{api.name}()`"
            ctx.report(
                RULE,
                event.path,
                event.loc,
                f"{name} reaches {op.title}, which has no deterministic CUDA implementation in torch {ctx.torch_version}"
                f"{consequence}. {op.remedy}",
                op=op.id,
            )
            break
