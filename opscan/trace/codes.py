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

The cuBLAS workspace alert (`CUBLAS_WORKSPACE_CONFIG` unset on a stack that
checks it) is reported under this code too.

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

RULE = parse_doc(__doc__, command="scan")
CODE = RULE.code
RULES = (RULE,)
