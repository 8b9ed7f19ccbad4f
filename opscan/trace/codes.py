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
RULES = (OP_RULE, CUBLAS_RULE, BENCHMARK_RULE)

