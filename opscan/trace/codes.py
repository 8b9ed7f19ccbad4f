"""DET100 nondeterministic-op: An op ran that has no deterministic implementation, so strict deterministic mode raises there.

## What it does
Reported by `opscan scan`. The scan runs the model forward and backward (or a
training script up to a few optimizer steps) with
`torch.use_deterministic_algorithms(True)`, strict, not `warn_only`. Each time an
aten op raises `<caller> does not have a deterministic implementation`, the scan
records it, reruns that one op with determinism off and carries on, so one run
lists every such op in forward, backward and the optimizer step. Each finding
names the aten overload, the alert's caller string, the phase, the `nn.Module`
path and class, and the line of your code that ran it. For a backward op that
is the forward line that created its autograd node.

The cuBLAS workspace alert (`CUBLAS_WORKSPACE_CONFIG` unset on a torch that
checks it) is DET102, not this code.

## Why is this bad?
With determinism on, the run stops at this op. With determinism off, this op
sums with atomics (or otherwise depends on thread scheduling), so two runs with
the same seed drift apart from here on.

## Example
```python
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = vgg_features()
        self.pool = nn.AdaptiveAvgPool2d(7)  # on a 7x7 input; its CUDA backward raises

    def forward(self, x):
        return self.pool(self.features(x))
```

## Use instead
```python
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = vgg_features()
        self.pool = nn.Identity()  # the input is already 7x7

    def forward(self, x):
        return self.pool(self.features(x))
```

## Fix
Each finding carries a remedy from the rules data: a deterministic equivalent
where one exists (for example bilinear instead of bicubic interpolation), or the
exact code to keep that one op nondeterministic on purpose. opscan does not
rewrite code for this rule.
"""

from opscan.codes import parse_doc

OP_RULE = parse_doc(__doc__, command="scan")

CUBLAS_RULE = parse_doc(
    """DET102 cublas-workspace-unset-at-runtime: The torch that ran checks CUBLAS_WORKSPACE_CONFIG, and the run did not set it.

## What it does
The runtime twin of lint's DET002, judged on what was actually set. Reported
by `opscan scan` on a CUDA device when the installed torch refuses cuBLAS in
deterministic mode without `CUBLAS_WORKSPACE_CONFIG=:4096:8` (or `:16:8`),
and the variable was not set to one of those when the scan ran. Torch before
2.10 checks it; torch 2.10 removed the check (PR #161749), and there this is
never reported. When a cuBLAS op raised the alert during the scan, the
finding points at that op's line.

## Why is this bad?
On such a torch, `torch.use_deterministic_algorithms(True)` makes the first
matmul raise; without determinism, cuBLAS may pick a different reduction
split per run.

## Example
```python
import torch
torch.use_deterministic_algorithms(True)
```

## Use instead
```python
import os
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before torch starts cuBLAS
import torch
torch.use_deterministic_algorithms(True)
```

## Fix
Set the variable before the first CUDA call, in the script or the job's environment.
""",
    command="scan",
)

PROBE_RULE = parse_doc(
    """DET101 silent-nondeterministic-op: An op gave different bits from identical inputs without raising the determinism alert.

## What it does
Reported by `opscan scan --probe`. The probe runs the model forward and
backward (or a training script up to a few optimizer steps) and, for each aten
op, clones its inputs before it runs, runs it again on the clones and compares
the two results bit for bit: outputs, and the arguments an in-place op writes.
An op whose rerun differs is nondeterministic. Random ops are rerun from the
same generator state, so they differ only if the kernel does. Each finding
names the op, the phase, the `nn.Module`, your source line (for a backward op,
the forward line that created its autograd node), how many of its calls
differed and by how much.

With determinism off (`--probe`) this finds the kernels that accumulate with
atomics, which strict mode would replace or refuse. With `--probe --strict`
it runs in strict deterministic mode and finds the kernels that claim to be
deterministic and are not, which no alert reveals; the ops that do raise are
reported as DET100 beside them.

## Why is this bad?
Two runs with the same seed and the same data drift apart from this op on, and
nothing tells you so: `torch.use_deterministic_algorithms(True)` raises only for
the ops PyTorch knows about.

## Example
```python
# idx holds many duplicate indices: CUDA's index_add_ adds them with atomics.
hist = torch.zeros(10, 4, device="cuda").index_add_(0, idx, src)
```

## Use instead
```python
torch.use_deterministic_algorithms(True)  # index_add_ then takes a sort-based, deterministic path
hist = torch.zeros(10, 4, device="cuda").index_add_(0, idx, src)
```

## Fix
In default mode, turn on strict mode and probe again with `--strict`: ops it
makes deterministic drop out. In strict mode, replace the op (the finding
carries the rules' remedy where the rules know it), or keep it on purpose.
opscan does not rewrite code for this rule.
""",
    command="scan",
)

UNALERTED_RULE = parse_doc(
    """DET103 unalerted-nondeterministic-op: An op ran whose kernel is nondeterministic for these shapes and that torch does not alert for.

## What it does
Reported by `opscan scan`. The rules data lists kernels that add with atomics
under some shapes and never call PyTorch's determinism alert (`[[silent]]` in
`rules/*.toml`, each from the kernel's source and checked on a GPU). When one of
them runs on a device, torch release and shapes for which the entry holds, the
scan reports it with its phase, `nn.Module` and line (for a backward op, the
forward line that created its autograd node). The op runs as usual: strict
mode has nothing to refuse. `--probe --strict` shows such ops by rerunning
them (DET101); this code needs no probe, and names the shapes that do it.

## Why is this bad?
`torch.use_deterministic_algorithms(True)` does not make this op
deterministic and does not say so: two runs with the same seed drift apart
from it on, with strict mode on.

## Example
```python
pool = nn.AdaptiveMaxPool3d(8)  # on a 17x17x17 input: windows overlap, the CUDA backward uses atomics
```

## Use instead
```python
pool = nn.AdaptiveMaxPool3d(8)  # on a 16x16x16 input (resized or cropped first): no overlap, no atomics
```

## Fix
Follow the finding's remedy from the rules data (usually shapes the kernel
handles without atomics), or keep the op on purpose. opscan does not rewrite
code for this rule.
""",
    command="scan",
)

BENCHMARK_RULE = parse_doc(
    """DET105 cudnn-benchmark-at-runtime: cudnn.benchmark was True while the training script ran.

## What it does
The runtime twin of lint's DET005, judged on what was actually set. Reported
by `opscan scan --run` when `torch.backends.cudnn.benchmark` is True while the
script takes its optimizer steps, whoever set it: the script, a framework
(`Trainer(benchmark=True)`) or a helper. The finding points at the line that
set it, when the scan saw the assignment.

## Why is this bad?
The autotuner times several cuDNN algorithms on the first call of each shape
and keeps the fastest, and timing is noisy: two runs may keep different
algorithms, with different rounding. Strict deterministic mode does not turn
it off.

## Example
```python
torch.backends.cudnn.benchmark = True
```

## Use instead
```python
torch.backends.cudnn.benchmark = False
```

## Fix
Set it to False (Lightning: `Trainer(benchmark=False)`), or leave it unset: False is the default.
""",
    command="scan",
)

OP_CODE = OP_RULE.code
CUBLAS_CODE = CUBLAS_RULE.code
BENCHMARK_CODE = BENCHMARK_RULE.code
PROBE_CODE = PROBE_RULE.code
UNALERTED_CODE = UNALERTED_RULE.code
RULES = (OP_RULE, PROBE_RULE, CUBLAS_RULE, UNALERTED_RULE, BENCHMARK_RULE)

