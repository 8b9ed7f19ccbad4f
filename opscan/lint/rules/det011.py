"""DET011 nccl-algo-not-pinned: Code enables determinism and initialises NCCL but never pins `NCCL_ALGO`.

## What it does
Flags a script that enables deterministic algorithms (`torch.use_deterministic_algorithms`,
or a helper that does, such as Lightning's `Trainer(deterministic=True)` or
transformers' `enable_full_determinism`) and starts NCCL, while nothing that
runs from it sets the `NCCL_ALGO` environment variable (`os.environ[...] =`,
`os.environ.setdefault`, `os.environ.update`, `os.putenv`). A script that
reads the variable is taken to handle it itself.

NCCL counts as started by `torch.distributed.init_process_group("nccl")` (or
any backend string naming nccl, such as `"cpu:gloo,cuda:nccl"`; passed as a
literal, a name bound once to one, or an attribute stored just before where
nothing can change it in between, as torchvision's reference scripts do with
`args.dist_backend = "nccl"`), by
`init_process_group()` with no backend or a computed one in a script that
puts work on CUDA (torch then uses NCCL for CUDA tensors), by
`init_device_mesh("cuda", ...)`, and by Lightning's `Trainer` or `Fabric`
with a `ddp*`, `fsdp*` or `deepspeed*` strategy on an accelerator other than
the CPU.

It points at the call that starts NCCL. Lint reads the script, not the
launcher: a variable exported by the shell, a SLURM script or a container
(`NCCL_ALGO=Ring torchrun ...`) cannot be seen, so such a script is flagged
all the same. Suppress the finding there (`# noqa: DET011`), or set the
variable in the script with `os.environ.setdefault`, which keeps the
launcher's value.

## Why is this bad?
NCCL chooses the algorithm of each collective (ring, tree, CollNet, NVLS, PAT)
from a cost model of the message size, the number of ranks and the
topology. The algorithm fixes the order in which the ranks' partial sums are
added, and floating-point addition is not associative, so two choices give
all-reduced gradients that differ in their last bits. The choice can change
between runs when the bucket sizes, the topology seen, the node count or the
NCCL version change. `torch.use_deterministic_algorithms` does not reach
NCCL. Megatron-Core's deterministic mode therefore refuses to start unless
`NCCL_ALGO` is one of its all-reduce choices (Tree, Ring, CollnetDirect,
CollnetChain, ^NVLS).

Sources: NVIDIA/Megatron-LM `megatron/training/arguments.py`, `validate_args`,
the `# Deterministic mode` block (a 2025 copy, Megatron-Core with
`--deterministic-mode`): `all_reduce_choices = ["Tree", "Ring",
"CollnetDirect", "CollnetChain", "^NVLS"]` and `assert os.getenv("NCCL_ALGO",
-1) != -1 and os.getenv("NCCL_ALGO") in all_reduce_choices`, then
`torch.use_deterministic_algorithms(True)`. NVIDIA/nccl#790: `NCCL_ALGO`
lists the algorithms NCCL may choose from (default
`Tree,Ring,CollnetDirect,CollnetChain`), and its tuning picks among them per
call. NVIDIA/nccl-tests#196 (maintainer's answer): whether NCCL selects Tree or
Ring on two nodes depends on the platform and the GPUs and NICs per node.
NCCL user guide, Environment Variables, `NCCL_ALGO` (docs.nvidia.com,
deeplearning/nccl/user-guide/docs/env.html): the per-collective syntax
(`allreduce:tree`) and the `^` exclusion.

## Example
```python
import torch
import torch.distributed as dist

torch.use_deterministic_algorithms(True)
dist.init_process_group("nccl")
```

## Use instead
```python
import os
os.environ.setdefault("NCCL_ALGO", "Ring")
import torch
import torch.distributed as dist

torch.use_deterministic_algorithms(True)
dist.init_process_group("nccl")
```

## Fix
None automatic: Ring or Tree is a choice about speed (Tree is faster across
many nodes), and the launcher may already set it.
"""

from __future__ import annotations

from opscan.codes import parse_doc
from opscan.lint.apis import INIT_DEVICE_MESH, INIT_PROCESS_GROUP
from opscan.lint.context import UNKNOWN, Context, api_name, how, via_text
from opscan.lint.model import Call, CudaWork, EnvRead, EnvWrite

RULE = parse_doc(__doc__)

NCCL_ALGO = "NCCL_ALGO"

_LIGHTNING = tuple(
    f"{module}.{cls}"
    for module, cls in (
        ("lightning", "Trainer"), ("lightning.pytorch", "Trainer"), ("lightning.pytorch.trainer", "Trainer"),
        ("lightning.pytorch.trainer.trainer", "Trainer"), ("pytorch_lightning", "Trainer"),
        ("pytorch_lightning.trainer", "Trainer"), ("pytorch_lightning.trainer.trainer", "Trainer"),
        ("lightning", "Fabric"), ("lightning.fabric", "Fabric"), ("lightning.fabric.fabric", "Fabric"),
        ("lightning_fabric", "Fabric"), ("lightning_fabric.fabric", "Fabric"),
    )
)  # fmt: skip
_NCCL_STRATEGIES = ("ddp", "fsdp", "deepspeed")


def _starts_nccl(call: Call, cuda_work: bool) -> bool:
    qualname = call.qualname or ""
    if qualname in INIT_PROCESS_GROUP:
        backend = call.args.get("backend", 0, None)
        if isinstance(backend, str):
            return "nccl" in backend.lower()
        return (backend is None or backend is UNKNOWN) and cuda_work
    if qualname in INIT_DEVICE_MESH:
        device = call.args.get("device_type", 0, None)
        return isinstance(device, str) and device.startswith("cuda")
    if qualname in _LIGHTNING:
        strategy = call.args.get("strategy", None, None)
        accelerator = call.args.get("accelerator", None, "auto")
        return (
            isinstance(strategy, str)
            and strategy.lower().startswith(_NCCL_STRATEGIES)
            and not (isinstance(accelerator, str) and accelerator.lower() == "cpu")
        )
    return False


def check(ctx: Context) -> None:
    if not ctx.enables:
        return
    if any(e.what.var == NCCL_ALGO for e in ctx.of(EnvWrite)) or any(e.what.var == NCCL_ALGO for e in ctx.of(EnvRead)):
        return
    cuda_work = bool(ctx.of(CudaWork))
    start = next((e for e in ctx.trace.first_calls() if _starts_nccl(e.what, cuda_work)), None)
    if start is None:
        return
    path, loc = start.anchor
    enable = ctx.enables[0]
    if enable.what is start.what or (enable.path, enable.loc) == (start.path, start.loc):
        what = f"Starts NCCL and enables determinism {how(start)}"
    else:
        what = f"Starts NCCL {how(start)} in a script that enables determinism ({api_name(enable)}{via_text(enable)})"
    ctx.report(
        RULE,
        path,
        loc,
        f"{what}, but never pins NCCL_ALGO; NCCL picks the all-reduce algorithm by message size and topology, "
        "so set NCCL_ALGO (Ring or Tree) before the process group starts",
    )
