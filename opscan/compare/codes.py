"""The codes `opscan compare` reports: one per class of root cause.

Each RuleInfo is parsed from its own docstring, as `opscan/trace/codes.py`
does; `opscan.registry` joins them with lint's and scan's for docs/rules.md,
SARIF and `--statistics`.
"""

from __future__ import annotations

from opscan.codes import parse_doc

KERNEL_RULE = parse_doc(
    """DET200 kernel-nondeterminism: An op gave different outputs from inputs whose fingerprints match in the two runs.

## What it does
Reported by `opscan compare` (and `opscan diff`) for every op whose inputs
have the same fingerprints in both records while its outputs do not, and
whose generator state (for a random op) is the same. That op is where the
runs part: every op after it that reads its output differs too, and those
are not reported. The finding gives the op, its `nn.Module`, the line of
your code that ran it (for a backward op, the forward line that made its
autograd node), the step and phase, and how far its output norms are apart.

Fingerprints do not see order, so "inputs whose fingerprints match" may be the
same values in another order. Where both runs are on the CPU, whose kernels
give the same bits for the same inputs, that is what it is taken for: DET202,
data, not this.

## Why is this bad?
The kernel reduces in an order that depends on thread scheduling (atomic
adds, split reductions, an autotuned algorithm), so the same seed gives a
different result every run, and the difference grows step by step.

## Example
```python
torch.manual_seed(0)
loss = F.embedding(ids, weight).sum()  # embedding backward sums with atomics on CUDA
loss.backward()
```

## Use instead
```python
import os
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = False
loss = F.embedding(ids, weight).sum()
loss.backward()
```

## Fix
Turn determinism on (the three settings above). Where the op has no
deterministic implementation, strict mode raises at it instead; the
finding then carries the remedy from the rules data, and `opscan scan`
lists every such op.
""",
    command="compare",
)

RANDOM_RULE = parse_doc(
    """DET201 random-stream-shift: A random op drew from a different generator state, so it drew different numbers.

## What it does
Reported by `opscan compare` for a random op (dropout, `normal_`,
`randperm`, ...) whose inputs are equal in both runs but whose generator
state (the `rng` of the record: Philox seed and offset on CUDA, a hash of
the state on the CPU) differs, so its outputs differ. A draw whose outputs
look equal (`randperm` gives the same values in another order, which the
fingerprints cannot see) is reported where an op that reads them differs
from inputs that look equal. The finding names the
recorded draws that one run made and the other did not, before that op,
and by how much the Philox offset moved; where the generators' seeds differ
(a run that is not seeded: torch seeds each process anew), no draw explains
it, and the finding says the run is not seeded. Parameters that differ before the
first step (the models were initialised from different streams) are
reported under this code too.

## Why is this bad?
One extra or missing draw, anywhere before, shifts every later random
number: every dropout mask after it is different, though the seed is the same.

## Example
```python
torch.manual_seed(0)
noise = torch.rand(1)       # a debug draw, only in one version of the code
out = F.dropout(x, p=0.1)   # draws from a shifted stream
```

## Use instead
```python
torch.manual_seed(0)
debug_gen = torch.Generator().manual_seed(1)
noise = torch.rand(1, generator=debug_gen)  # its own generator: the global stream is untouched
out = F.dropout(x, p=0.1)
```

## Fix
Make both runs draw the same numbers in the same order: remove or move the
extra draw, or give it its own `torch.Generator`. Build the model in the
same order in both versions (layers are initialised in construction order).
Where the seeds differ, seed the run at its start: `torch.manual_seed(0)`.
""",
    command="compare",
)

DATA_RULE = parse_doc(
    """DET202 data-differs: A tensor entering the model (the batch) differs between the runs.

## What it does
Reported by `opscan compare` when the first op where the runs part reads an
input that no earlier recorded op produced and that is not a parameter,
and that input differs: the batch the data loader gave, or a tensor made
outside the recorded ops. Everything that op computes from it differs, so
this is where the runs part, though no kernel is at fault.

## Why is this bad?
The two runs trained on different data: a shuffled order that was not
seeded, a worker that seeded its augmentations from the clock, a sampler
with its own generator.

## Example
```python
loader = DataLoader(dataset, shuffle=True, num_workers=4)
```

## Use instead
```python
def seed_worker(worker_id):
    seed = torch.initial_seed() % 2**32
    numpy.random.seed(seed)
    random.seed(seed)

loader = DataLoader(dataset, shuffle=True, num_workers=4,
                    generator=torch.Generator().manual_seed(0), worker_init_fn=seed_worker)
```

## Fix
Seed the data pipeline: the loader's `generator`, each worker's
`worker_init_fn`, and every augmentation library the workers use.
""",
    command="compare",
)

STRUCTURE_RULE = parse_doc(
    """DET203 structure-differs: The two runs ran different sequences of ops.

## What it does
Reported by `opscan compare` when the op sequences of a step differ. Each
step's ops are aligned by (op, module, input shapes) with a shortest edit
script, so reordered or inserted code still lines up with the rest; an op
that only one run has, or that runs in another place, is a structural
difference. The finding names the first one and says whether the numbers
part before it, because of it, or not at all ("structure only, same
numbers": a refactor that kept the maths). An op whose inputs are equal
but whose outputs have another shape in each run (a view or reduction
called with another size or dim, as the op that reads its output records
the shape) is reported here too, not as a nondeterministic kernel.

Under `opscan diff`, which records the same code twice, a structural
difference is the same code taking another path in each run: the finding
says so and names what chooses it (the hash seed, when `PYTHONHASHSEED` is
unset, orders a set of strings anew in each process; a branch on Python's
unseeded `random`, the time, other input).

## Why is this bad?
Records of different code are not the same run. Where the numbers part
because of the change, the change is the cause, not the hardware. Where the
same code takes another path from run to run, no seed makes it reproducible.

## Example
```python
h = self.act(self.fc1(x))
h = h * self.scale          # a new op: the numbers part here
```

## Use instead
```python
h = self.act(self.fc1(x))   # compare records of the same code, or accept the change
```

## Fix
If the change was meant to keep the maths and the finding says "same
numbers", it did. Otherwise compare two records of the same code, or look
at the op it names. For one script that takes another path in each run:
iterate over `sorted(...)` rather than a set (or start Python with
`PYTHONHASHSEED=0`), and seed `random` as well as torch.
""",
    severity="warning",
    command="compare",
)

ENVIRONMENT_RULE = parse_doc(
    """DET204 environment-differs: The runs used different environments, and their numbers part from the start.

## What it does
Reported by `opscan compare` when the records' environments differ (torch,
CUDA, cuDNN, GPU, driver, the determinism, TF32 and cuDNN flags, the seed or
the device) and the runs part at an op of the first step's forward pass
that got equal inputs: a different library or flag computes the same op
differently. Records made with different seeds are reported here too,
where the first random draw, the initial parameters or the data (a batch
drawn from the generator) part, at whatever step that is. The
`env_diff` table lists every field that differs.

## Why is this bad?
Bitwise reproducibility holds only on the same software, hardware and
flags; across them a matmul may pick another kernel or TF32, and the run
differs from its first op.

## Example
```python
torch.backends.cuda.matmul.allow_tf32 = True   # in one run only
```

## Use instead
```python
torch.backends.cuda.matmul.allow_tf32 = False  # the same flags in both runs
```

## Fix
Compare runs from the same environment: make every field in `env_diff`
equal (same torch, CUDA, cuDNN and driver, the same flags) and compare again.
""",
    command="compare",
)

RANKS_RULE = parse_doc(
    """DET205 replicas-differ: Data-parallel ranks hold different parameters after an optimizer step.

## What it does
Reported by `opscan compare --ranks RECORD...` (one record per rank of a
data-parallel run, e.g. `run.rank*.jsonl`) at the first step where a
parameter's fingerprint after the optimizer step is not the same on every
rank. Replicas start equal, all-reduce their gradients and take the same
step, so they must stay bitwise equal; the rank whose value differs from the
majority is named (with two ranks, or a tie, the rank that differs from rank
0's side). At that step it compares the two ranks' ops after the last
collective (DDP's bucket all-reduce, `c10d.allreduce_`) and names the first
one whose gradients differ, at your line: an op one rank alone runs (an
`add_` of noise into `p.grad`), an op that writes other values on the two
ranks (the optimizer with another learning rate), or a collective that gave
the ranks other values.

## Why is this bad?
A rank that drifted (its own data order or random stream, a gradient changed
after the all-reduce, a collective that reduced in another order on one
rank) trains a different model from the others, silently: DDP does not check
that replicas agree, and a checkpoint saved from rank 0 is not what the
other ranks trained.

## Example
```python
loss.backward()
if dist.get_rank() == 1:
    p.grad.add_(noise)  # after the all-reduce: this rank alone steps differently
opt.step()
```

## Use instead
```python
loss.backward()        # change gradients before the all-reduce, on every rank alike
opt.step()
```

## Fix
Look at what the named rank does differently at that step: code behind
`if rank == ...`, a generator seeded by rank where it should not be, a
gradient hook that runs after the reduction.
""",
    command="compare",
)

KERNEL = KERNEL_RULE.code
RANDOM = RANDOM_RULE.code
DATA = DATA_RULE.code
STRUCTURE = STRUCTURE_RULE.code
ENVIRONMENT = ENVIRONMENT_RULE.code
RANKS = RANKS_RULE.code

RULES = (KERNEL_RULE, RANDOM_RULE, DATA_RULE, STRUCTURE_RULE, ENVIRONMENT_RULE, RANKS_RULE)

# The `cause` column of `first_divergence`, by code.
CAUSES = {
    KERNEL: "kernel nondeterminism",
    RANDOM: "random stream",
    DATA: "data",
    STRUCTURE: "structure",
    ENVIRONMENT: "environment",
}
