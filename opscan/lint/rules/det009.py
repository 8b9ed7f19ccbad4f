"""DET009 unseeded-global-rng: Code seeds, but draws from the global `random` or `np.random` RNG without seeding it.

## What it does
In a script that seeds something, flags calls of the global `random` module
functions (`random.shuffle`, `random.randint`, ...) when `random` is never
seeded, and of the global `np.random` functions (`np.random.rand`,
`np.random.permutation`, ...) when `np.random` is never seeded. Helpers that
seed every library (Lightning's `seed_everything`, transformers' `set_seed`)
count as seeding both.

The code a `DataLoader` built in running code runs counts: its dataset's
`__getitem__` / `__iter__` and its `collate_fn`. An object a method stores on
`self` and another calls (`self.transform = Blur()` in `__init__`,
`self.transform(img)` in `__getitem__`) runs its class's `__call__`, where that
is the module's only store to an attribute of that name (one from outside,
`dataset.transform = ...`, leaves it unknown). A class or function under another
name counts as itself (`Aug = RandomFlip`, then `Aug()`, in the module or
imported from it), where that name is bound outside any branch or loop. So does that of a project
subclass of `DataLoader` (yolov5's `InfiniteDataLoader`) that takes its
arguments: one that defines no `__init__`, or one that passes `*args, **kwargs`
straight on to DataLoader's; a subclass whose `__init__` takes parameters of its
own is not followed. A name bound to a choice of them counts where every
choice is one (yolov5's `loader = DataLoader if image_weights else
InfiniteDataLoader`, then `loader(dataset, ...)`). With a literal `num_workers`
above 0 they run in worker processes, which torch reseeds `random`, NumPy and
torch in from its own base seed (`torch/utils/data/_utils/worker.py`), so draws
there are not flagged; with `num_workers=0`, no `num_workers`, or a computed one,
they may run in the main process and are. `worker_init_fn` only ever runs in
workers, after that reseeding.

## Why is this bad?
Seeding torch does not seed Python's or NumPy's global generators. Data
augmentation or sampling that uses them differs on every run.

## Example
```python
torch.manual_seed(0)
random.shuffle(files)
```

## Use instead
```python
torch.manual_seed(0)
random.seed(0)
random.shuffle(files)
```
or use a seeded generator: `rng = random.Random(0)`, `np.random.default_rng(0)`.

## Fix
None automatic.
"""

from opscan.codes import parse_doc
from opscan.lint.apis import global_rng_library
from opscan.lint.context import Context, script_name

RULE = parse_doc(__doc__)

_SEED_CALL = {"random": "random.seed(...)", "numpy": "np.random.seed(...)"}


def check(ctx: Context) -> None:
    if not ctx.seeds:
        return
    seen = set()
    who = script_name(ctx) or "this script"
    for event in ctx.trace.first_calls(skip_workers=True):  # a DataLoader worker's: torch reseeds them
        qualname = event.what.qualname
        if not qualname:
            continue
        lib = global_rng_library(qualname)
        if lib is None or lib in ctx.seeded_libs or (event.path, event.loc) in seen:
            continue
        seen.add((event.path, event.loc))
        short = qualname.replace("numpy.", "np.")
        ctx.report(
            RULE,
            event.path,
            event.loc,
            f"`{short}` draws from the global {'NumPy' if lib == 'numpy' else 'Python'} RNG, which {who} never seeds; "
            f"call `{_SEED_CALL[lib]}` or use a seeded generator",
        )
